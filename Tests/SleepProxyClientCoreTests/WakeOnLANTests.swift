import SleepProxyClientCore
import Testing

/// Whether the client registers on an interface, from the Wake-on-LAN modes the ethtool ioctl reports (no virtual
/// interface of the lab has Wake-on-LAN, so the lab only sees the "none at all" case).
@Suite struct WakeOnLANTests {
    // ethtool's bits: p 0, u 1, m 2, b 3, a 4, g 5, s 6, f 7.
    static let pumbg: UInt32 = 0b10_1111
    static let g: UInt32 = 1 << 5
    static let s: UInt32 = 1 << 6
    static let u: UInt32 = 1 << 1

    static func decide(_ handling: WakeOnLANHandling, _ state: WakeOnLANState) -> WakeOnLANDecision {
        WakeOnLANDecision.decide(handling, interface: "enp3s0", state: state, configPath: "/etc/sleepproxy/client.toml")
    }

    @Test func anInterfaceThatWakesOnAMagicPacketRegisters() {
        for handling in [WakeOnLANHandling.check, .enable, .skip] {
            #expect(Self.decide(handling, WakeOnLANState(supported: Self.pumbg, enabled: Self.g)) == .wakes)
            #expect(Self.decide(handling, WakeOnLANState(supported: Self.pumbg, enabled: Self.g | Self.u)) == .wakes)
        }
    }

    @Test func offIsRefusedWithTheCommandThatTurnsItOn() throws {
        let state = WakeOnLANState(supported: Self.pumbg, enabled: 0)
        #expect(state.description == "supports pumbg, on: d")
        let reason = try #require(Self.decide(.check, state).refusal, "registered with Wake-on-LAN off")
        #expect(
            reason
                == "Wake-on-LAN is off (supports pumbg, on: d); turn it on with `ethtool -s enp3s0 wol g` (and in the firmware settings), or set wake_on_lan = \"enable\" in /etc/sleepproxy/client.toml"
        )
    }

    @Test func enableTurnsMagicPacketWakeOnKeepingTheOtherModes() {
        #expect(Self.decide(.enable, WakeOnLANState(supported: Self.pumbg, enabled: 0)) == .enable(modes: Self.g))
        // A unicast mode the administrator set stays on.
        let unicast = WakeOnLANState(supported: Self.pumbg, enabled: Self.u)
        #expect(Self.decide(.enable, unicast) == .enable(modes: Self.u | Self.g))
        #expect(WakeOnLANState.text(Self.u | Self.g) == "ug")
    }

    @Test func aSecureOnPasswordIsRefusedAndKept() throws {
        // With `s` on, the card wakes only on a magic packet followed by its password, which the proxy is not
        // given. The command offered keeps the other modes.
        for (enabled, command) in [
            (Self.g | Self.s, "wol g`"), (Self.s, "wol g`"), (Self.u | Self.g | Self.s, "wol ug`"),
        ] {
            let state = WakeOnLANState(supported: Self.pumbg | Self.s, enabled: enabled)
            #expect(!state.wakesOnMagicPacket)
            for handling in [WakeOnLANHandling.check, .enable] {
                let reason = try #require(
                    Self.decide(handling, state).refusal, "\(handling), \(state): registered behind a password")
                #expect(
                    reason.hasPrefix("Wake-on-LAN asks for a SecureOn password") && reason.hasSuffix(command),
                    "\(reason)")
            }
        }
    }

    @Test func anInterfaceWithoutMagicPacketWakeIsRefusedEvenWhenAskedToEnable() throws {
        // This card wakes on link and unicast only: a proxy's magic packet would never wake it.
        let state = WakeOnLANState(supported: 0b11, enabled: 0b10)
        for handling in [WakeOnLANHandling.check, .enable] {
            let reason = try #require(
                Self.decide(handling, state).refusal, "\(handling): registered without magic-packet wake")
            #expect(reason.hasPrefix("it cannot wake on a magic packet (Wake-on-LAN supports pu, on: u)"), "\(reason)")
        }
    }

    @Test func skipRegistersWhateverTheState() {
        #expect(Self.decide(.skip, WakeOnLANState(supported: 0, enabled: 0)) == .wakes)
    }

    @Test func handlingIsReadFromItsWord() {
        #expect(WakeOnLANHandling("check") == .check && WakeOnLANHandling("enable") == .enable)
        #expect(WakeOnLANHandling("skip") == .skip && WakeOnLANHandling("on") == nil)
        #expect(WakeOnLANHandling.enable.description == "enable")
    }
}

extension WakeOnLANDecision {
    /// The reason, when it refuses.
    fileprivate var refusal: String? {
        if case .refuse(let reason) = self { reason } else { nil }
    }
}
