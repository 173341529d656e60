import DNSWire
import Frames
import NetworkAddresses

/// A wake in progress for one owner (PROTOCOL.md section 3.6).
struct WakeSequence: Hashable, Sendable {
    /// Magic-packet rounds sent so far.
    var rounds = 0
    /// Goodbyes sent after the last round went unanswered.
    var goodbyes = 0
    var next: UnixTime
    var reason: String
    var scope: WakeScope
}

/// A wake in progress as the lease store keeps it. A restart of the daemon (a package upgrade restarts it) must
/// not end a wake half way: the host would show as held and get no more magic packets, although it has not woken.
/// The store keeps this after each round, and a restored host goes on from where it was.
public struct StoredWake: Hashable, Sendable {
    /// Magic-packet rounds sent so far.
    public var rounds: Int
    /// Goodbyes sent after the last round.
    public var goodbyes: Int
    /// When the next round (or goodbye) is due.
    public var next: UnixTime
    /// Why the host is being woken, as the events and `sleepproxyctl hosts` say it.
    public var reason: String
    /// What the wake withdraws: nil for the whole host, else the positions in the owner's `records` of the
    /// records another host keeps claiming.
    public var withdrawn: [Int]?

    public init(rounds: Int, goodbyes: Int, next: UnixTime, reason: String, withdrawn: [Int]?) {
        self.rounds = rounds
        self.goodbyes = goodbyes
        self.next = next
        self.reason = reason
        self.withdrawn = withdrawn
    }

    init(_ wake: WakeSequence, of owner: Owner) {
        let withdrawn: [Int]? =
            switch wake.scope {
            case .host: nil
            case .records(let identities):
                owner.records.indices.filter { identities.contains(RecordIdentity(owner.records[$0].record)) }
            }
        self.init(
            rounds: wake.rounds, goodbyes: wake.goodbyes, next: wake.next, reason: wake.reason, withdrawn: withdrawn)
    }

    /// The wake for `owner`, or why this one cannot be continued (counts out of range, records it does not
    /// hold).
    func sequence(for owner: Owner) -> Result<WakeSequence, WakeRestoreError> {
        guard (0...WakeTiming.rounds).contains(rounds), (0...WakeTiming.goodbyes).contains(goodbyes) else {
            return .failure(WakeRestoreError(reason: "\(rounds) rounds and \(goodbyes) goodbyes are out of range"))
        }
        let scope: WakeScope
        if let withdrawn {
            guard !withdrawn.isEmpty, withdrawn.allSatisfy({ owner.records.indices.contains($0) }) else {
                return .failure(
                    WakeRestoreError(
                        reason: "withdrawn records \(withdrawn) are not among its \(owner.records.count) records"))
            }
            scope = .records(Set(withdrawn.map { RecordIdentity(owner.records[$0].record) }))
        } else {
            scope = .host
        }
        return .success(WakeSequence(rounds: rounds, goodbyes: goodbyes, next: next, reason: reason, scope: scope))
    }
}

/// Why a stored wake was not continued.
struct WakeRestoreError: Error {
    var reason: String
}

/// What a wake withdraws while it runs: the whole host (a connection, an address conflict, the lease's end, the
/// administrator), or only records another host keeps claiming (a name conflict: mDNS.c deregisters just that
/// record down the wake path, and the host's other records stay answered).
enum WakeScope: Hashable, Sendable {
    case host
    case records(Set<RecordIdentity>)

    func merged(with other: WakeScope) -> WakeScope {
        switch (self, other) {
        case (.records(let a), .records(let b)): .records(a.union(b))
        default: .host
        }
    }
}

extension DropReason {
    /// The lease ended and the wake policy kept the host from being woken (`wake.never_wake`, `wake.dry_run`):
    /// the records go at once, with goodbyes, as they would after the unanswered wake.
    static func expiredUnwoken(_ detail: String) -> DropReason {
        DropReason(kind: .expired, release: .expired, detail: detail, goodbyes: true, level: .notice)
    }
}

enum WakeTiming {
    static let interval: Duration = .seconds(2)
    /// Apple's proxy sends up to 15 rounds (`WakeupCount` 18 less 3 goodbyes), about 30 s.
    static let rounds = 15
    /// The first rounds are unicast only: Wi-Fi stations may miss broadcasts after a group-key rotation.
    static let unicastOnlyRounds = 2
    static let goodbyes = 3
}

/// What the wake policy last recorded for one held host, so that a source that keeps knocking (a monitoring box
/// polling every 10 s) cannot flood the event history: at most one `wake-ignored` event a minute per source
/// address, and one `would-wake` event a minute for what traffic and conflicts decide (the next one recorded says
/// how many were folded meanwhile). It is bounded (a few dozen
/// addresses per host; the rest share one allowance) and goes with the host.
struct WakePolicyMemory: Hashable, Sendable {
    static let interval: Duration = .seconds(60)
    /// Source addresses remembered one by one; beyond them, the others share one allowance.
    static let sourceLimit = 32

    private var ignoredAt: [IPAddress: UnixTime] = [:]
    private var othersIgnoredAt: UnixTime?
    private var wouldWakeAt: UnixTime?
    /// `would-wake` triggers folded since the last one recorded.
    private var foldedWouldWakes = 0

    /// Whether a minute has passed since `last` (or the clock went back past it).
    private static func isDue(_ last: UnixTime?, now: UnixTime) -> Bool {
        guard let last else { return true }
        return now < last || now - last >= interval
    }

    /// Whether a `wake-ignored` event for traffic from `address` is to be recorded now; if so, it counts.
    mutating func recordIgnored(from address: IPAddress, now: UnixTime) -> Bool {
        if let last = ignoredAt[address] {
            guard Self.isDue(last, now: now) else { return false }
            ignoredAt[address] = now
            return true
        }
        if ignoredAt.count >= Self.sourceLimit {
            ignoredAt = ignoredAt.filter { !Self.isDue($0.value, now: now) }
        }
        if ignoredAt.count < Self.sourceLimit {
            ignoredAt[address] = now
            return true
        }
        guard Self.isDue(othersIgnoredAt, now: now) else { return false }
        othersIgnoredAt = now
        return true
    }

    /// Whether a `would-wake` event is to be recorded now: nil if not (it is folded, and counted); if so, how many
    /// were folded since the last one recorded, which the event says. One that is not `limited` (the
    /// administrator's request, the lease's end) is always recorded.
    mutating func recordWouldWake(now: UnixTime, limited: Bool) -> Int? {
        guard !limited || Self.isDue(wouldWakeAt, now: now) else {
            foldedWouldWakes += 1
            return nil
        }
        wouldWakeAt = now
        defer { foldedWouldWakes = 0 }
        return foldedWouldWakes
    }
}

/// A packet's verdict under the protocol's rules (and the policy's extra ports): what would wake its host, or why
/// nothing would.
private enum TriggerVerdict {
    case wake(reason: String, trigger: WakeTrigger, source: Endpoint)
    case none([Action])
}

extension WakePolicy {
    /// The first ignored prefix `address` is in, if any.
    func ignoredPrefix(containing address: IPAddress) -> Link.Prefix? {
        ignoredSources.first { address.sharesPrefix(with: $0.address, length: $0.length) }
    }

    /// Whether `owner` (declared as `declaredName`, if so) is never to be woken by traffic or by the end of its
    /// lease.
    func neverWakes(_ owner: Owner, declaredName: String?) -> Bool {
        neverWake.contains { $0.matches(owner, declaredName: declaredName) }
    }

    /// Whether `port` is one of the extra wake ports the policy gives `owner` (declared as `declaredName`).
    func hasExtraPort(_ port: Port, for owner: Owner, declaredName: String?) -> Bool {
        extraPorts.contains { $0.ports.contains(port) && $0.host.matches(owner, declaredName: declaredName) }
    }
}

extension SleepProxyCore {
    // MARK: Triggers

    /// TCP or UDP to a held address that should wake its owner: a SYN (without RST) to a port of one of its `_tcp`
    /// services, anything but RST or a lone FIN to ssh when it offers ssh, UDP to a port of one of its `_udp`
    /// services, and the IPsec and Apple Remote Desktop special cases. Never ICMP, never a port it did not
    /// register (PROTOCOL.md section 3.5), with one exception Apple's proxy does not make: a Wake-on-LAN magic packet
    /// for the host itself sent to its held address on UDP port 7 or 9, as phone apps send it when they cannot
    /// broadcast (it would otherwise reach no one, the host's address being ours). The packet is only observed.
    ///
    /// The administrator's wake policy comes after those rules, in this order: a port in `extraPorts` counts as a
    /// registered service of the hosts it names; traffic from `ignoredSources` and to `neverWake` hosts wakes no
    /// one (a `wake-ignored` event says why); in a dry run, what would wake is only recorded (`startWake`).
    mutating func checkWakeTrigger(_ frame: EthernetFrame, link: Link, now: UnixTime) -> [Action] {
        let destination: IPAddress
        let source: IPAddress
        let transport: IPPayload
        if let ipv4 = frame.ipv4 {
            // Whole packets and first fragments (offset 0, more to come), which carry the transport header.
            if ipv4.header.isFirstFragment, let first = ipv4.firstFragmentTransport {
                transport = first
            } else if !ipv4.header.isFragment {
                transport = ipv4.payload
            } else {
                return []
            }
            destination = .v4(ipv4.header.destination)
            source = .v4(ipv4.header.source)
        } else if let ipv6 = frame.ipv6 {
            guard !ipv6.header.hasExtensionHeader else { return [] }
            transport = ipv6.payload
            destination = .v6(ipv6.header.destination)
            source = .v6(ipv6.header.source)
        } else {
            return []
        }
        guard let key = hosts.holder(of: destination, on: link.name), let host = hosts[key], !host.isWakingWhole else {
            return []
        }
        // A segment of a connection kept alive for the host follows the keepalive rules only.
        if case .tcp(let tcp) = transport,
            let actions = keepaliveSegment(tcp, from: source, to: destination, of: key, now: now)
        {
            return actions
        }
        switch verdict(on: transport, from: source, to: destination, of: host.owner) {
        case .none(let actions):
            return actions
        case .wake(let reason, let trigger, let from):
            return trafficWake(key, reason: reason, trigger: trigger, source: from, now: now)
        }
    }

    /// The protocol's rules for one packet to a held address of `owner`.
    private func verdict(
        on transport: IPPayload, from source: IPAddress, to destination: IPAddress, of owner: Owner
    ) -> TriggerVerdict {
        let key = owner.key
        switch transport {
        case .tcp(let tcp):
            let from = Endpoint(address: source, port: tcp.sourcePort)
            let flags = tcp.flags
            guard !flags.contains(.rst) else { return .none([]) }
            let service = wakeService(of: owner, port: tcp.destinationPort, transport: .tcp)
            if flags.contains(.syn), let service {
                return .wake(
                    reason: "TCP SYN from \(from) to \(destination) port \(tcp.destinationPort) (\(service))",
                    trigger: .tcpSYN, source: from)
            }
            // ssh: any segment that is not a lone FIN (a reconnecting client's data or ACK).
            if tcp.destinationPort == 22, !(flags.contains(.fin) && !flags.contains(.syn)), let service {
                return .wake(
                    reason: "TCP to ssh from \(from) to \(destination) port 22 (\(service))", trigger: .ssh,
                    source: from)
            }
            if flags.contains(.syn) {
                return .none([
                    .log(.debug, "\(key): SYN from \(from) to port \(tcp.destinationPort): no service there, no wake")
                ])
            }
            return .none([])
        case .udp(let udp):
            let from = Endpoint(address: source, port: udp.sourcePort)
            let service = wakeService(of: owner, port: udp.destinationPort, transport: .udp)
            // Apple Remote Desktop: consoles poll UDP 3283 all the time; only ARD's own wake datagram wakes, and
            // only a host that offers ARD (mDNS.c `mDNSCoreReceiveRawTransportPacket`).
            if udp.destinationPort == Self.remoteDesktopPort {
                guard Self.isRemoteDesktopWake(udp.payload), let service else {
                    return .none([
                        .log(.debug, "\(key): UDP from \(from) to port 3283 is not a Remote Desktop wake; no wake")
                    ])
                }
                return .wake(
                    reason: "Apple Remote Desktop wake from \(from) (\(service))", trigger: .udp, source: from)
            }
            if Self.wakeOnLANPorts.contains(udp.destinationPort), let magic = udp.magicPacket {
                guard magic.target == key.primaryMAC || magic.target == owner.wakeMAC else {
                    return .none([
                        .log(
                            .debug,
                            "\(key): a magic packet from \(from) to \(destination) port \(udp.destinationPort) names "
                                + "\(magic.target), not this host; no wake")
                    ])
                }
                return .wake(
                    reason: "magic packet from \(from) to \(destination) port \(udp.destinationPort)",
                    trigger: .magicPacket, source: from)
            }
            if let service {
                return .wake(
                    reason: "UDP from \(from) to \(destination) port \(udp.destinationPort) (\(service))",
                    trigger: .udp, source: from)
            }
            if udp.destinationPort == 4500, Self.isIPsecWake(udp.payload) {
                return .wake(reason: "IPsec (UDP 4500) from \(from)", trigger: .udp, source: from)
            }
            return .none([])
        default:
            return .none([])
        }
    }

    /// The UDP ports Wake-on-LAN tools send magic packets to: echo (7) and discard (9).
    static let wakeOnLANPorts: Set<UInt16> = [7, 9]

    /// What makes `port` a wake port of `owner`: the instance name of its service there, or `wake.extra_ports`
    /// when the policy adds the port for it. Nil when neither.
    func wakeService(of owner: Owner, port: UInt16, transport: WakePolicy.Port.Transport) -> String? {
        if let name = serviceName(of: owner, port: port, transport: "_\(transport.rawValue)") {
            return name.description
        }
        if let watch = declared[owner.key], watch.host.wakePorts.contains(WakePolicy.Port(transport, port)) {
            return "hosts.\(watch.host.name).wake_ports"
        }
        let policy = configuration.wakePolicy
        guard !policy.extraPorts.isEmpty,
            policy.hasExtraPort(
                WakePolicy.Port(transport, port), for: owner, declaredName: declaration(of: owner.key)?.name)
        else {
            return nil
        }
        return "wake.extra_ports"
    }

    /// Traffic that would wake a host under the protocol's rules: the policy may still keep it from waking
    /// (ignored sources, then never-wake hosts), and a dry run only records it.
    mutating func trafficWake(
        _ key: OwnerKey, reason: String, trigger: WakeTrigger, source: Endpoint, now: UnixTime
    ) -> [Action] {
        guard let owner = hosts[key]?.owner else { return [] }
        let policy = configuration.wakePolicy
        if let prefix = policy.ignoredPrefix(containing: source.address) {
            return ignoreWake(
                key, detail: "\(reason): source \(prefix) is in wake.ignore_sources", source: source, now: now)
        }
        if policy.neverWakes(owner, declaredName: declaration(of: key)?.name) {
            return ignoreWake(
                key, detail: "\(reason): \(Self.displayName(of: owner)) is in wake.never_wake", source: source,
                now: now)
        }
        return startWake(key, now: now, reason: reason, trigger: trigger, source: source)
    }

    /// Records that the policy kept `source` from waking a host, at most once a minute per host and source address.
    mutating func ignoreWake(_ key: OwnerKey, detail: String, source: Endpoint, now: UnixTime) -> [Action] {
        guard hosts.updateService(key, { $0.policyMemory.recordIgnored(from: source.address, now: now) }) == true else {
            return [.log(.debug, "not waking \(key): \(detail) (recorded less than a minute ago)")]
        }
        let event = Event(
            time: now, kind: .wakeIgnored, interface: key.interface, owner: key.primaryMAC, source: source,
            detail: detail)
        return [.store(.appendEvent(event)), .log(.info, "not waking \(key): \(detail)")]
    }

    /// How events name a host: its first host name (`imac.local`), or its key when it registered none.
    static func displayName(of owner: Owner) -> String {
        owner.firstHostName ?? owner.key.description
    }

    static let remoteDesktopPort: UInt16 = 3283

    /// ARD's manual wake datagram: at least 110 bytes, starting 13 88.
    static func isRemoteDesktopWake(_ payload: [UInt8]) -> Bool {
        payload.count >= 110 && payload.starts(with: [0x13, 0x88])
    }

    /// The instance name of an SRV record of `owner` on `port` whose third label is `transport`, if any.
    func serviceName(of owner: Owner, port: UInt16, transport: String) -> DNSName? {
        for held in owner.records {
            guard case .srv(let srv) = held.record.rdata, srv.port == port,
                let label = held.record.name.label(at: 2),
                String(decoding: label, as: UTF8.self).lowercased() == transport
            else { continue }
            return held.record.name
        }
        return nil
    }

    /// UDP 4500 wakes, except NAT keep-alives (one 0xFF byte) and IKE SA_INIT or INFORMATIONAL exchanges.
    static func isIPsecWake(_ payload: [UInt8]) -> Bool {
        if payload == [0xFF] { return false }
        // IKE over UDP 4500 starts with the four-byte non-ESP marker; the exchange type is byte 18 of IKE.
        if payload.count >= 4 + 28, payload.prefix(4).allSatisfy({ $0 == 0 }) {
            let exchange = payload[4 + 18]
            return exchange != 34 && exchange != 37
        }
        return true
    }

    // MARK: The wake sequence

    /// Asks to wake an owner (an administrator's request goes through here too). One sequence per owner at a
    /// time, however many triggers arrive. An explicit request wakes a `neverWake` host too; in a dry run
    /// (`WakePolicy.dryRun`, which holds for every wake, asked for or not) it only records a `would-wake` event.
    mutating func administratorWake(_ key: OwnerKey, now: UnixTime, reason: String, source: Endpoint? = nil)
        -> [Action]
    {
        guard hosts[key] != nil else { return [.log(.warning, "wake \(key): not held")] }
        return startWake(key, now: now, reason: reason, trigger: .manual, source: source, limited: false)
    }

    /// Starts a wake, or widens one in progress: a wake for some records becomes one for the whole host when a
    /// connection or the lease's end asks for it. In a dry run, records a `would-wake` event instead, and the host
    /// stays held and answered; when `limited` (traffic and conflicts), at most one such event a minute per host.
    /// A wake that starts is counted under `trigger`, and its first round is followed by `.wakeStarted` (the shell
    /// measures from the trigger to the magic packets); one widened is not counted again.
    mutating func startWake(
        _ key: OwnerKey, now: UnixTime, reason: String, trigger: WakeTrigger, source: Endpoint? = nil,
        scope: WakeScope = .host, limited: Bool = true
    ) -> [Action] {
        guard let host = hosts[key] else { return [] }
        if let wake = host.wake, wake.scope.merged(with: scope) == wake.scope {
            return [.log(.debug, "\(key): already waking; \(reason)")]
        }
        if configuration.wakePolicy.dryRun {
            return wouldWake(key, now: now, reason: reason, source: source, limited: limited)
        }
        var actions: [Action] = []
        if let wake = host.wake {
            var updated = wake
            updated.scope = wake.scope.merged(with: scope)
            updated.reason = reason
            hosts.update(key) { $0.state = .waking(updated) }
            if updated.scope == .host {
                // From now on the host's addresses are no longer claimed: the link is sent back to it.
                actions += handBack(host.claimedAddresses, to: host.owner.wakeMAC, on: key.interface)
            }
        } else {
            hosts.update(key) { $0.state = .waking(WakeSequence(next: now, reason: reason, scope: scope)) }
            statistics.wakes[trigger, default: 0] += 1
        }
        let started = host.wake == nil
        let event = Event(
            time: now, kind: .wake, interface: key.interface, owner: key.primaryMAC, source: source, detail: reason)
        // The magic packets first: the shell carries actions out in order, and the log line and the event (written
        // after every action that does not wait for the disk) need not hold them up. A round sent saves the wake's
        // progress; otherwise (a wake widened between rounds) it is saved here.
        let round = advanceWake(of: key, now: now)
        actions =
            round + (started ? [.wakeStarted(key.interface, trigger)] : []) + actions
            + (round.isEmpty ? storedWakeChange(of: key) : [])
        // One info line per wake: the host, then the trigger with its source and port.
        let name = host.owner.firstHostName.map { "\($0) " } ?? ""
        actions += [.store(.appendEvent(event)), .log(.info, "waking \(name)(\(key)): \(reason)")]
        refreshHostDeadline()
        return actions
    }

    /// Records, in a dry run, that a host would have been woken: the detail is what the `wake` event would say.
    mutating func wouldWake(
        _ key: OwnerKey, now: UnixTime, reason: String, source: Endpoint? = nil, limited: Bool
    ) -> [Action] {
        guard
            let folded = hosts.updateService(key, { $0.policyMemory.recordWouldWake(now: now, limited: limited) })
                ?? nil
        else {
            return [
                .log(
                    .debug,
                    "would wake \(key) (wake.dry_run): \(reason); folded into the next would-wake event (one a minute)")
            ]
        }
        let detail =
            folded == 0
            ? reason : "\(reason) (and \(folded) more since the last would-wake event, folded into this one)"
        let event = Event(
            time: now, kind: .wouldWake, interface: key.interface, owner: key.primaryMAC, source: source,
            detail: detail)
        return [
            .store(.appendEvent(event)),
            .log(
                .info,
                "would wake \(hosts[key]?.owner.firstHostName.map { "\($0) " } ?? "")(\(key)) (wake.dry_run, no magic packet sent): \(detail)"
            ),
        ]
    }

    /// When the proxy stops for good and is set to wake every held host (as Apple's proxy does when its service is
    /// switched off), one round of magic packets for each, now: the shell exits right after. In a dry run, a
    /// `would-wake` event for each instead.
    mutating func wakeAll(now: UnixTime, reason: String) -> [Action] {
        var actions: [Action] = []
        let dryRun = configuration.wakePolicy.dryRun
        for key in hosts.keys.sorted() {
            guard let host = hosts[key], let link = links[key.interface] else { continue }
            let event = Event(
                time: now, kind: dryRun ? .wouldWake : .wake, interface: key.interface, owner: key.primaryMAC,
                detail: reason)
            actions.append(.store(.appendEvent(event)))
            guard !dryRun else { continue }
            statistics.wakes[.shutdown, default: 0] += 1
            actions += wakeRound(0, owner: host.owner, link: link)
        }
        if !actions.isEmpty {
            let verb = dryRun ? "would have woken (wake.dry_run, no magic packet sent)" : "woke"
            actions.append(.log(.notice, "\(verb) \(hosts.count) held hosts: \(reason)"))
        }
        return actions
    }

    /// Sends a host's round if it is due; after the last round, the goodbyes for what the wake withdrew; after
    /// those, what it withdrew goes (the whole host, or the conflicting records).
    mutating func advanceWake(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard let host = hosts[key], var wake = host.wake, wake.next <= now, let link = links[key.interface] else {
            return []
        }
        var actions: [Action] = []
        let withdrawn: [DNSRecord]
        switch wake.scope {
        case .host: withdrawn = host.owner.records.map(\.record)
        case .records(let identities):
            withdrawn = host.owner.records.map(\.record).filter { identities.contains(RecordIdentity($0)) }
        }
        if wake.rounds < WakeTiming.rounds {
            actions += wakeRound(wake.rounds, owner: host.owner, link: link, releasingAddresses: wake.scope == .host)
            wake.rounds += 1
        } else if wake.goodbyes < WakeTiming.goodbyes {
            // The host still holds these records itself; a goodbye leaves out what another host also holds.
            actions += goodbyes(for: withdrawn, interface: key.interface, holderCount: 1)
            wake.goodbyes += 1
        } else {
            let detail = "no sign after \(WakeTiming.rounds) wake rounds (\(wake.reason)); records dropped"
            switch wake.scope {
            case .host:
                return drop(key, reason: .unanswered(detail), now: now)
            case .records(let identities):
                hosts.update(key) { $0.state = .proxying }
                // The store's copy of the wake is cleared, unless dropping every record dropped the host with it.
                return dropRecords(identities, of: key, reason: .unanswered(detail), now: now)
                    + storedWakeChange(of: key)
            }
        }
        wake.next = now + WakeTiming.interval
        hosts.update(key) { $0.state = .waking(wake) }
        return actions + storedWakeChange(of: key)
    }

    /// One round: the 0x0842 magic frame and a UDP port 9 copy, unicast to the wake MAC; from the third round
    /// also broadcast. The first round also hands the claimed addresses back (`handBack`).
    mutating func wakeRound(_ round: Int, owner: Owner, link: Link, releasingAddresses: Bool = true) -> [Action] {
        let magic = MagicPacket(target: owner.wakeMAC, password: owner.password.flatMap { SecureOnPassword($0) })
        var destinations = [owner.wakeMAC]
        if round >= WakeTiming.unicastOnlyRounds { destinations.append(.broadcast) }
        var frames: [[UInt8]] = []
        let ipv4 = link.prefixes.compactMap { prefix -> (IPv4Address, Int)? in
            if case .v4(let v4) = prefix.address { (v4, prefix.length) } else { nil }
        }.first
        for destination in destinations {
            if let frame = try? EthernetFrame.wakeOnLAN(magic, source: link.macAddress, destination: destination) {
                frames.append(frame.serialized())
            }
            if let (address, length) = ipv4 {
                let broadcast = IPv4Address(value: address.value | (length >= 32 ? 0 : UInt32.max >> UInt32(length)))
                if let frame = try? EthernetFrame.wakeOnLANDatagram(
                    magic, sourceAddress: address, destinationAddress: broadcast, source: link.macAddress,
                    destination: destination)
                {
                    frames.append(frame.serialized())
                }
            }
        }
        statistics.magicPackets += frames.count
        var actions = frames.map { Action.injectFrame(owner.key.interface, $0) }
        if round == 0, releasingAddresses, let host = hosts[owner.key] {
            actions += handBack(host.claimedAddresses, to: owner.wakeMAC, on: owner.key.interface)
        }
        return actions
    }
}
