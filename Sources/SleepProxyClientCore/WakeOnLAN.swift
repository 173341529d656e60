/// How the client treats Wake-on-LAN before it registers (`wake_on_lan` in client.toml).
public struct WakeOnLANHandling: Sendable, Hashable, CustomStringConvertible {
    private enum Backing: String, Sendable, Hashable {
        case check
        case enable
        case skip
    }

    private let backing: Backing

    private init(backing: Backing) { self.backing = backing }

    /// Refuse to register on an interface that does not wake on a magic packet.
    public static let check = WakeOnLANHandling(backing: .check)
    /// Turn magic-packet wake on where it is off (as `ethtool -s IF wol g`), then register.
    public static let enable = WakeOnLANHandling(backing: .enable)
    /// Do not look (virtual machines whose host wakes them, tests); the log says so.
    public static let skip = WakeOnLANHandling(backing: .skip)

    public init?(_ text: String) {
        guard let backing = Backing(rawValue: text) else { return nil }
        self.backing = backing
    }

    public var description: String { backing.rawValue }
}

/// An interface's Wake-on-LAN modes as the ethtool ioctl gives them (`struct ethtool_wolinfo`): the WAKE_* bits
/// its driver supports and those turned on.
public struct WakeOnLANState: Sendable, Hashable, CustomStringConvertible {
    /// `WAKE_MAGIC`, ethtool's `g`.
    public static let magic: UInt32 = 1 << 5
    /// `WAKE_MAGICSECURE`, ethtool's `s`: a magic packet wakes only if a SecureOn password follows it.
    public static let secureOn: UInt32 = 1 << 6
    /// ethtool's letters for the WAKE_* bits, in bit order (`s` is WAKE_MAGICSECURE, the SecureOn password).
    static let letters = Array("pumbagsf")

    public var supported: UInt32
    public var enabled: UInt32

    public init(supported: UInt32, enabled: UInt32) {
        self.supported = supported
        self.enabled = enabled
    }

    /// Whether a proxy's magic packet wakes it: `g` on, and no SecureOn password asked for (this client gives
    /// the proxy none, as Macs give none, so its magic packet carries none).
    public var wakesOnMagicPacket: Bool { enabled & Self.magic != 0 && !asksForPassword }
    public var asksForPassword: Bool { enabled & Self.secureOn != 0 }
    public var canWakeOnMagicPacket: Bool { supported & Self.magic != 0 }

    /// ethtool's letters (`pumbg`), or `d` for none.
    public static func text(_ bits: UInt32) -> String {
        let text = String(letters.enumerated().filter { bits & (1 << UInt32($0.offset)) != 0 }.map(\.element))
        return text.isEmpty ? "d" : text
    }

    public var description: String { "supports \(Self.text(supported)), on: \(Self.text(enabled))" }
}

/// Whether the client may register on an interface, given its Wake-on-LAN and the configured handling. A proxy
/// wakes a host only with a magic packet, so a registration from an interface that does not wake on one would be
/// held, answered for and never woken: worse than none, as the host's services would seem present.
public enum WakeOnLANDecision: Sendable, Hashable {
    /// It wakes on a magic packet: register.
    case wakes
    /// Set these modes (those on now, and `g`), then register.
    case enable(modes: UInt32)
    /// Do not register, for this reason (a sentence naming what to do).
    case refuse(String)

    /// What to do on `interface` in `state` with `handling` (`skip` never reads the state).
    public static func decide(
        _ handling: WakeOnLANHandling, interface: String, state: WakeOnLANState, configPath: String
    ) -> WakeOnLANDecision {
        if state.wakesOnMagicPacket || handling == .skip { return .wakes }
        // Not turned off under `enable` either: the administrator set a password to keep strangers from waking it.
        guard !state.asksForPassword else {
            let modes = state.enabled & ~WakeOnLANState.secureOn | WakeOnLANState.magic
            return .refuse(
                "Wake-on-LAN asks for a SecureOn password (\(state)), and this client gives the proxy none (as Macs give none), so a proxy's magic packet would not wake it; turn the password off with `ethtool -s \(interface) wol \(WakeOnLANState.text(modes))`"
            )
        }
        guard state.canWakeOnMagicPacket else {
            return .refuse(
                "it cannot wake on a magic packet (Wake-on-LAN \(state)); a proxy could never wake this host through it"
            )
        }
        guard handling == .enable else {
            return .refuse(
                "Wake-on-LAN is off (\(state)); turn it on with `ethtool -s \(interface) wol g` (and in the firmware settings), or set wake_on_lan = \"enable\" in \(configPath)"
            )
        }
        // The modes on now stay on (unicast or ARP wake, say).
        return .enable(modes: state.enabled | WakeOnLANState.magic)
    }
}
