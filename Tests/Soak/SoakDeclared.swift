import NetworkAddresses
import TestLab

/// What the soak expects of the daemon for the machines that never register and are declared in its configuration
/// (`[hosts.NAME]`): each a host of its own on the bridge, awake (its kernel answers the proxy's probes) or asleep
/// (its addresses gone). Pure but for the lab host each names; times are Unix times, as for ``SoakModel``.
struct SoakDeclaredModel: Sendable {
    struct Host: Sendable {
        enum State: Sendable, Equatable {
            case awake(since: Duration)
            case asleep(since: Duration)
        }

        let index: Int
        /// The table name and the host name it is answered by: `declN`.
        let name: String
        let lab: ExtraHost
        let mac: MACAddress
        let ipv4: IPv4Address
        var state: State
        /// When it next falls asleep (awake) or wakes by itself, as a user opening its lid (asleep).
        var due: Duration
        /// A wake asked for by a connection to its declared port, and the first magic packet of it.
        var wake: (at: Duration, trigger: String)?
        var firstMagic: Duration?
        /// A fault came after the wake was asked for and before its first magic packet.
        var wakeUncertain = false
        /// When it comes back after a magic packet.
        var returnAt: Duration?
    }

    var hosts: [Host]
    /// Whether each host is declared in the configuration now, and since when (a start counts as a new since);
    /// when one was last taken out of it.
    var declaredSince: [Duration?]
    var undeclaredAt: [Duration?]
    /// Hosts that traffic must not wake under the configuration now (`wake.never_wake`).
    var neverWake: Set<Int> = []
    var wakeLatencies: [(at: Duration, latency: Duration)] = []

    init(hosts: [Host]) {
        self.hosts = hosts
        declaredSince = hosts.map { _ in nil }
        undeclaredAt = hosts.map { _ in nil }
    }

    func index(mac: MACAddress) -> Int? { hosts.firstIndex { $0.mac == mac } }
    func index(name: String) -> Int? { hosts.firstIndex { $0.name == name.lowercased() } }

    /// Whether the proxy must have taken host `index` over by `now`: declared and asleep, and the daemon (or the
    /// configuration that declares it) up, for 45 s (10 s of silence, three probes over 7 s, the take-over's own
    /// probes and slack).
    func takenOver(_ index: Int, at now: Duration, daemonUp: Duration?) -> Bool {
        guard let declared = declaredSince[index], let daemonUp, case .asleep(let since) = hosts[index].state,
            hosts[index].wake == nil
        else { return false }
        return now - max(since, declared, daemonUp) > .seconds(45)
    }

    /// Whether the proxy must not answer for host `index` at `time`: awake for 5 s, or asleep and no longer
    /// declared (the daemon itself knows it only from the configuration).
    func mustNotBeAnswered(_ index: Int, at time: Duration) -> Bool {
        switch hosts[index].state {
        case .awake(let since): time - since > .seconds(5)
        case .asleep: declaredSince[index] == nil && (undeclaredAt[index].map { time - $0 > .seconds(5) } ?? true)
        }
    }

    /// The configuration (0 or 1) is now in force, from `at`: every host but the last is declared in both, the
    /// last only in the first; the second host is in `never_wake` in the second.
    mutating func configure(_ configuration: Int, at time: Duration) {
        for index in hosts.indices {
            let declared = configuration == 0 || index < hosts.count - 1
            if declared, declaredSince[index] == nil { declaredSince[index] = time }
            if !declared, declaredSince[index] != nil {
                declaredSince[index] = nil
                undeclaredAt[index] = time
            }
        }
        neverWake = configuration == 1 && hosts.count > 1 ? [1] : []
    }

    /// The daemon started at `time`: what it knew of the declared hosts is learned anew.
    mutating func started(at time: Duration) {
        for index in hosts.indices where declaredSince[index] != nil { declaredSince[index] = time }
    }

    /// A magic packet from the proxy for `mac` at `time`, seen at the host's own NIC: legitimate only for a wake
    /// that a connection to its port asked for. Returns a violation, or nil.
    mutating func magicPacket(for mac: MACAddress, at time: Duration) -> String? {
        guard let index = index(mac: mac) else { return nil }
        if let wake = hosts[index].wake, case .asleep = hosts[index].state {
            if hosts[index].firstMagic == nil {
                hosts[index].firstMagic = time
                wakeLatencies.append((wake.at, time - wake.at))
            }
            return nil
        }
        // A round already sent when the host came back is no fault of the proxy's.
        if case .awake(let since) = hosts[index].state, time - since < .seconds(3) { return nil }
        return
            "a magic packet for the declared host \(hosts[index].name) (\(mac)) at \(SoakModel.text(time)), which is \(Self.describe(hosts[index].state)) and was not to be woken"
    }

    static func describe(_ state: Host.State) -> String {
        switch state {
        case .awake(let since): "awake since \(SoakModel.text(since))"
        case .asleep(let since): "asleep since \(SoakModel.text(since))"
        }
    }

    /// The two configurations' tables for the declared hosts (see ``configure(_:at:)``), and the hosts in the
    /// second's `never_wake`: each host answered as `NAME.local` with an ssh service, woken by a connection to port
    /// 22.
    static func configurations(_ hosts: [Host]) -> (tables: [String], neverWake: [String]) {
        ([tables(hosts), tables(Array(hosts.dropLast()))], hosts.count > 1 ? [hosts[1].name] : [])
    }

    private static func tables(_ hosts: [Host]) -> String {
        hosts.map { host in
            """

            [hosts.\(host.name)]
            mac = "\(host.mac)"
            addresses = ["\(host.ipv4)"]
            wake_ports = ["tcp/22"]
            host_name = "\(host.name)"
            services = [{ name = "\(host.name)", type = "_ssh._tcp", port = 22 }]
            records = "declared"

            """
        }.joined()
    }
}
