import NetworkAddresses

/// What the soak expects of the daemon for each of its hosts, kept as the hosts act: the invariant checker compares
/// what the daemon lists and what goes over the wire with it. Pure; times are Unix times (`CLOCK_REALTIME`), as
/// captured frames carry them.
struct SoakModel: Sendable {
    /// One Mac-style host: it registers with OWNER, renews at 80 % of its lease (or, for some sleeps, does not and
    /// lets the lease run out), is woken by a connection to its registered port or by `sleepproxyctl wake`, and
    /// returns with an announcement carrying the next sequence number.
    struct Host: Sendable {
        enum State: Sendable, Equatable {
            /// Awake since then: not held, never to be answered for.
            case awake(since: Duration)
            /// Acknowledged at `since`, its lease ending at `leaseEnd`.
            case held(since: Duration, leaseEnd: Duration)
            /// A wake asked for at `at`, by `trigger`; held until it returns.
            case waking(at: Duration, trigger: String)
            /// Its lease ran out at `at`: the proxy wakes it and lets it go.
            case expired(at: Duration)
            /// Forgotten through `sleepproxyctl forget` at `at`.
            case forgotten(at: Duration)
        }

        let index: Int
        let name: String
        let mac: MACAddress
        let ipv4: IPv4Address
        var sequence: UInt8 = 1
        var registeredOnce = false
        var state: State = .awake(since: .zero)
        /// When the host next acts on its own: sleeps (registers), renews, or goes on after an expiry.
        var due: Duration = .zero
        /// Every third host also offers a UDP service (Apple Remote Desktop's `_net-assistant._udp`, port 3283):
        /// a datagram to it wakes the host.
        var offersUDPService: Bool { index % 3 == 0 }
        /// Whether this sleep lets the lease run out.
        var skipsRenewal = false
        /// Magic packets for it are legitimate until then (a wake asked for, a lease ending, a return in flight).
        var wakeAllowedUntil: Duration = .zero
        /// The first magic packet of the current wake, and when the host will return after it.
        var firstMagic: Duration?
        var returnAt: Duration?
        /// A stop or a crash came after the wake was asked for and before its first magic packet: whether the
        /// daemon had taken the request in (it then goes on with the wake after the start) cannot be known.
        var wakeUncertain = false
        /// A registration went unacknowledged (the disk was full): the daemon holds such a registration without
        /// saying so, and the host is judged again once one is acknowledged.
        var registrationPending = false
        /// Being woken: the lease the proxy still holds it by until it returns (the proxy wakes it when that runs
        /// out, and holds it on if a fault lost the wake).
        var leaseEndWhileWaking: Duration?
    }

    var hosts: [Host]
    /// The first violation and every later one, in order.
    var violations: [String] = []
    /// Magic packet latencies (trigger to first magic packet on the wire), with when the trigger was.
    var wakeLatencies: [(at: Duration, latency: Duration)] = []

    init(count: Int) {
        hosts = (0..<count).map { index in
            Host(
                index: index, name: "soak\(index)",
                mac: MACAddress(bytes: [0x02, 0x55, 0x00, 0x00, UInt8(index >> 8), UInt8(index & 0xFF)])!,
                ipv4: Self.address(index))
        }
    }

    /// Host `index`'s address: 10.78.(1 + index / 200).(10 + index % 200), on the second network the soak gives
    /// the link (10.78.0.0/16), so that a few hundred hosts fit.
    static func address(_ index: Int) -> IPv4Address {
        IPv4Address(bytes: [10, 78, UInt8(1 + index / 200), UInt8(10 + index % 200)])!
    }

    func host(mac: MACAddress) -> Int? { hosts.firstIndex { $0.mac == mac } }

    /// A magic packet for `mac` seen at `time`: legitimate only for a host being woken, whose lease is ending, or
    /// whose return is in flight. Returns a violation, or nil.
    mutating func magicPacket(for mac: MACAddress, at time: Duration) -> String? {
        guard let index = host(mac: mac) else { return nil }
        var host = hosts[index]
        defer { hosts[index] = host }
        if case .waking(let at, _) = host.state, host.firstMagic == nil {
            host.firstMagic = time
            wakeLatencies.append((at, time - at))
        }
        // The proxy wakes a host whose lease runs out (PROTOCOL.md: expiry wakes); its clock started the lease a
        // moment before the acknowledgement reached the host.
        if case .held(_, let leaseEnd) = host.state, time >= leaseEnd - .seconds(3) { return nil }
        // Being woken but not back yet (by another's magic packet, say): the proxy holds it still, and wakes it when
        // that lease runs out.
        if case .waking = host.state, let leaseEnd = host.leaseEndWhileWaking, time >= leaseEnd - .seconds(3) {
            return nil
        }
        guard time <= host.wakeAllowedUntil else {
            return
                "a magic packet for \(host.name) (\(host.mac)) at \(Self.text(time)), which is \(Self.describe(host.state)) and was not to be woken"
        }
        return nil
    }

    /// An address record for host `index` with `address` heard from the proxy at `time`: a violation when the
    /// address is not the host's, or when the host came back or was forgotten more than 3 s before.
    func answered(_ index: Int, address: IPv4Address, at time: Duration) -> String? {
        let host = hosts[index]
        guard address == host.ipv4 else {
            return "\(host.name) answered for with \(address) at \(Self.text(time)), not its \(host.ipv4)"
        }
        // An unacknowledged registration may be held all the same.
        guard !host.registrationPending else { return nil }
        switch host.state {
        case .awake(let since) where host.registeredOnce && time - since > .seconds(3),
            .forgotten(let since) where time - since > .seconds(3):
            return "\(host.name) answered for at \(Self.text(time)), yet it is \(Self.describe(host.state))"
        default:
            return nil
        }
    }

    /// What the daemon must list (by owner MAC) and must not, at `now`; hosts in between (just registered, just
    /// returned, a lease ending, a restart's catching up) are not judged.
    func expectations(at now: Duration) -> (listed: [Int], notListed: [Int]) {
        var listed: [Int] = []
        var notListed: [Int] = []
        for host in hosts where !host.registrationPending {
            switch host.state {
            case .held(let since, let leaseEnd):
                if now - since > .seconds(1), leaseEnd - now > .seconds(3) { listed.append(host.index) }
            case .waking(let at, _):
                if now - at > .seconds(1), host.firstMagic == nil { listed.append(host.index) }
            case .awake(let since):
                if host.registeredOnce, now - since > .seconds(6) { notListed.append(host.index) }
            case .forgotten(let at):
                if now - at > .seconds(6) { notListed.append(host.index) }
            case .expired(let at):
                // The wake at the end of a lease goes on for about 36 s before the records go.
                if now - at > .seconds(60) { notListed.append(host.index) }
            }
        }
        return (listed, notListed)
    }

    static func describe(_ state: Host.State) -> String {
        switch state {
        case .awake(let since): "awake since \(text(since))"
        case .held(let since, let leaseEnd): "held since \(text(since)) until \(text(leaseEnd))"
        case .waking(let at, let trigger): "being woken since \(text(at)) (\(trigger))"
        case .expired(let at): "past its lease since \(text(at))"
        case .forgotten(let at): "forgotten at \(text(at))"
        }
    }

    /// A Unix time as seconds with milliseconds.
    static func text(_ time: Duration) -> String {
        let milliseconds = time.components.seconds * 1000 + time.components.attoseconds / 1_000_000_000_000_000
        return "\(milliseconds / 1000).\(threeDigits(Int(milliseconds % 1000)))"
    }
}

/// `value` with leading zeros to three digits.
private func threeDigits(_ value: Int) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
}

/// Least-squares slope of `values` against `times`, per hour; nil with fewer than 3 points or no spread in time.
func slopePerHour(_ points: [(time: Double, value: Double)]) -> Double? {
    guard points.count >= 3 else { return nil }
    let n = Double(points.count)
    let meanTime = points.map(\.time).reduce(0, +) / n
    let meanValue = points.map(\.value).reduce(0, +) / n
    var numerator = 0.0
    var denominator = 0.0
    for point in points {
        numerator += (point.time - meanTime) * (point.value - meanValue)
        denominator += (point.time - meanTime) * (point.time - meanTime)
    }
    guard denominator > 0 else { return nil }
    return numerator / denominator * 3600
}

/// The `fraction` percentile of `values` (nearest rank), nil when empty.
func percentile(_ values: [Double], _ fraction: Double) -> Double? {
    guard !values.isEmpty else { return nil }
    let sorted = values.sorted()
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank - 1, 0), sorted.count - 1)]
}
