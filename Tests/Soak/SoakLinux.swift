import NetworkAddresses
import TestLab

/// What the soak expects of the daemon for the Linux machines that register before they sleep, each a host of its
/// own with avahi-daemon publishing its ssh service: one runs `sleepproxy-client` (`register` before it sleeps,
/// `return` when it wakes, whose announcement carries OWNER with the next sequence number); the other registers
/// as awein's SleepProxyClient does, with OWNER in the registration and none in its avahi's traffic, so that the
/// proxy learns of its return only from avahi probing its names again (PROTOCOL.md section 6, item 18). Both keep
/// talking for a moment after the registration, before they sleep. Pure but for the lab host each names.
struct SoakLinuxModel: Sendable {
    struct Host: Sendable {
        enum Kind: String, Sendable {
            /// `sleepproxy-client`.
            case client
            /// A registration with OWNER, and avahi alone afterwards.
            case avahiOnly
        }

        enum State: Sendable, Equatable {
            case awake(since: Duration)
            /// Its registration acknowledged at `since`, then suspended.
            case asleep(since: Duration)
        }

        let index: Int
        /// Its avahi host name, `client0` or `linux0`.
        let name: String
        let kind: Kind
        let lab: ExtraHost
        let mac: MACAddress
        let ipv4: IPv4Address
        var state: State
        /// When it next goes to sleep (awake) or wakes by itself (asleep).
        var due: Duration = .zero
        /// Going to sleep or coming back right now: the schedule leaves it alone.
        var busy = false
        var registeredOnce = false
        /// A registration went unacknowledged: the daemon may hold it all the same; not judged until the next
        /// acknowledged one.
        var pending = false
        /// The OWNER sequence number of its next registration (the avahi-only kind's; the client keeps its own).
        var sequence: UInt8 = 1
        var wake: (at: Duration, trigger: String)?
        var firstMagic: Duration?
        var wakeUncertain = false
    }

    var hosts: [Host]
    var wakeLatencies: [(at: Duration, latency: Duration)] = []

    func index(mac: MACAddress) -> Int? { hosts.firstIndex { $0.mac == mac } }
    func index(name: String) -> Int? { hosts.firstIndex { $0.name == name.lowercased() } }

    /// Asleep and held for 20 s (its addresses taken over), no wake under way.
    func held(_ index: Int, at now: Duration) -> Bool {
        let host = hosts[index]
        guard !host.pending, !host.busy, host.wake == nil, case .asleep(let since) = host.state else { return false }
        return now - since > .seconds(20)
    }

    /// Back for 15 s: avahi has probed its names again (or the client announced) long since.
    func mustNotBeAnswered(_ index: Int, at time: Duration) -> Bool {
        let host = hosts[index]
        guard host.registeredOnce, !host.pending, !host.busy, case .awake(let since) = host.state else {
            return false
        }
        return time - since > .seconds(15)
    }

    /// A magic packet from the proxy for `mac` at `time`, seen at the host's own NIC: legitimate only for a wake
    /// that a connection asked for, or while a registration is unacknowledged. Returns a violation, or nil.
    mutating func magicPacket(for mac: MACAddress, at time: Duration) -> String? {
        guard let index = index(mac: mac) else { return nil }
        let host = hosts[index]
        if host.pending { return nil }
        if let wake = host.wake {
            if host.firstMagic == nil {
                hosts[index].firstMagic = time
                wakeLatencies.append((wake.at, time - wake.at))
            }
            return nil
        }
        if case .awake(let since) = host.state, time - since < .seconds(3) { return nil }
        return
            "a magic packet for the Linux host \(host.name) (\(mac)) at \(SoakModel.text(time)), which is \(Self.describe(host.state)) and was not to be woken"
    }

    static func describe(_ state: Host.State) -> String {
        switch state {
        case .awake(let since): "awake since \(SoakModel.text(since))"
        case .asleep(let since): "asleep since \(SoakModel.text(since))"
        }
    }
}
