import DNSWire
import NetworkAddresses

/// Why a held host (or some of its records) leaves, and how: silently when the host is back, and after a wake it
/// never answered (its goodbyes went out already); with goodbyes when the administrator forgets it, when its
/// interface is no longer served and it is not woken there, when its lease ends and the wake policy keeps it from
/// being woken (`expiredUnwoken`, `Wake.swift`), and when a declared host is no longer declared or another machine
/// uses its address (`Declared.swift`); silently again when a declared host registers itself, since its
/// registration holds the same records or better ones from then on (`yieldDeclared`).
struct DropReason: Sendable {
    var kind: Event.Kind
    /// What the release counter calls it.
    var release: ReleaseReason
    var detail: String
    /// Multicast goodbyes (TTL 0) for the records, so that caches drop them at once.
    var goodbyes: Bool
    var level: LogLevel
    /// Who asked, for the event: the administrator's client, when the request came over the network.
    var source: Endpoint? = nil

    /// The host is back and answers for itself: no goodbyes, no wake.
    static func released(_ detail: String) -> DropReason {
        DropReason(kind: .released, release: .returned, detail: detail, goodbyes: false, level: .info)
    }

    /// The administrator asked (from `source`, when over the network).
    static func forgotten(_ detail: String, source: Endpoint? = nil) -> DropReason {
        DropReason(
            kind: .released, release: .forgotten, detail: "forgotten: \(detail)", goodbyes: true, level: .notice,
            source: source)
    }

    /// The interface it is held on is no longer served, and it is not woken there: a declared host (it has no
    /// other proxy to find), any host in a dry run, or every host of an interface that cannot be served at all. A
    /// registered host is otherwise woken, to find another proxy, and leaves as a woken host does.
    static func unserved(_ detail: String) -> DropReason {
        DropReason(kind: .released, release: .unserved, detail: detail, goodbyes: true, level: .notice)
    }

    /// A wake went unanswered; its goodbyes went out already.
    static func unanswered(_ detail: String) -> DropReason {
        DropReason(kind: .expired, release: .unanswered, detail: detail, goodbyes: false, level: .warning)
    }
}

/// When the proxy lets go of a host. The rules of a registered host that is back, and of a lease that ends, are
/// here; the others live with what they end: the administrator's `forget` (`SleepProxyCore.swift`), an interface
/// no longer served (`Links.swift`, `retire`), a wake that went unanswered (`Wake.swift`, `advanceWake`), and a
/// declared host that is back, no longer declared, whose address another machine uses, or whose own registration
/// arrives (`Declared.swift`). Each of them lets go through `drop(_:reason:now:)` or
/// `dropRecords(_:of:reason:now:)`, here: there is no other way out.
///
/// - A packet with the host's OWNER releases the whole host when its sequence differs, and otherwise those of its
///   records registered more than 60 s before it (mDNS.c `ClearProxyRecords`, applied per record: a record
///   refreshed by a later datagram is younger); the host goes with the last of them. The same sequence within
///   60 s is the host going to sleep. An OWNER captured from another MAC than the host's is logged, not obeyed.
/// - A host that never sends OWNER is back when it probes for one of its held names from its wake MAC (a host
///   going to sleep never probes), or when it announces or answers one (TTL > 0) more than 60 s after it
///   registered. Goodbyes it sends as it goes down are answered by re-announcing (`Conflicts.swift`). This rule is
///   ours: Apple's proxy lets go only on OWNER. A host seen sending its OWNER in mDNS (a Mac adds it to all its
///   mDNS for 60 s after it wakes or starts) is released by its mDNS under the OWNER rule alone, as with Apple's
///   proxy; until it is seen doing so (and after a restart of the proxy, which does not store it) it counts as one
///   that never does.
/// - ARP or Neighbour Discovery from the host for a held address restarts probing and never releases by itself;
///   a host still using its address after probing was restarted the maximum number of times is awake.
extension SleepProxyCore {
    // MARK: OWNER

    mutating func releaseOnOwner(_ message: DNSMessage, _ packet: MDNSPacket, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for opt in message.optRecords {
            guard let option = opt.optData?.owner, option.version == 0, !option.primaryMAC.isZero else { continue }
            let key = OwnerKey(interface: packet.interface, primaryMAC: option.primaryMAC)
            guard let host = hosts[key] else { continue }
            let kind = message.flags.isResponse ? "response" : "query"
            // Only the host speaks for itself: an OWNER from another MAC (someone else's packet, or another proxy
            // answering for the host) never releases it. Apple's proxy does not check; we do, so that nobody on
            // the LAN can make a sleeping host vanish.
            if let mac = packet.sourceMAC, mac != host.owner.wakeMAC, mac != key.primaryMAC {
                actions += noteForgedOwner(of: key, from: mac, packet: packet, now: now)
                continue
            }
            if !host.sendsOwner { hosts.updateService(key) { $0.sendsOwner = true } }
            if option.sequence != host.owner.sequence {
                actions += drop(
                    key,
                    reason: .released(
                        "OWNER seq \(option.sequence) (held \(host.owner.sequence)) in an mDNS \(kind) from \(packet.source)"
                    ), now: now)
                continue
            }
            let stale = host.owner.records.filter { now - $0.registeredAt > MulticastDNS.ownerReleaseAge }
            guard !stale.isEmpty else { continue }
            let oldest = stale.map(\.registeredAt).min().map { (now - $0).components.seconds } ?? 0
            let why =
                "OWNER seq \(option.sequence) in an mDNS \(kind) from \(packet.source), \(stale.count) records registered more than \(MulticastDNS.ownerReleaseAge.components.seconds) s before (oldest \(oldest) s)"
            if stale.count == host.owner.records.count {
                actions += drop(key, reason: .released(why), now: now)
            } else {
                actions += dropRecords(
                    Set(stale.map { RecordIdentity($0.record) }), of: key, reason: .released(why), now: now)
            }
        }
        return actions
    }

    /// At most one log line a minute per host for OWNER options it did not send.
    mutating func noteForgedOwner(of key: OwnerKey, from mac: MACAddress, packet: MDNSPacket, now: UnixTime)
        -> [Action]
    {
        if let last = hosts[key]?.lastForgedOwnerLog, now - last < .seconds(60) { return [] }
        hosts.updateService(key) { $0.lastForgedOwnerLog = now }
        return [
            .log(
                .warning,
                "\(key): ignored its OWNER in mDNS from \(packet.source) sent by \(mac), not by the host (\(hosts[key]?.owner.wakeMAC.description ?? "?")); not released (at most one such line a minute)"
            )
        ]
    }

    // MARK: Hosts that never send OWNER

    mutating func releaseOnOwnTraffic(_ message: DNSMessage, _ packet: MDNSPacket, now: UnixTime) -> [Action] {
        // Only the hosts whose wake MAC sent it are looked at (usually none), not every host holding a name.
        guard let mac = packet.sourceMAC else { return [] }
        let senders = hosts.owners(wakingAt: mac, on: packet.interface)
        guard !senders.isEmpty else { return [] }
        // A packet with OWNER speaks for its sender; the OWNER rules decide.
        guard !message.optRecords.contains(where: { $0.optData?.owner != nil }) else { return [] }
        let isProbe = !message.flags.isResponse && !message.questions.isEmpty && !message.authorities.isEmpty
        let claimed: [DNSRecord]
        if isProbe {
            claimed = message.authorities
        } else if message.flags.isResponse {
            claimed = (message.answers + message.additionals).filter { $0.ttl > 0 && $0.type != .opt }
        } else {
            return []
        }
        var actions: [Action] = []
        for key in senders {
            guard let host = hosts[key], host.owner.wakeMAC == mac, !host.sendsOwner,
                let record = claimed.first(where: { record in
                    host.owner.records.indices.contains {
                        host.owner.records.nameEquals(at: $0, ignoringCase: record.name)
                    }
                })
            else { continue }
            if isProbe {
                actions += drop(
                    key, reason: .released("probed for its name \(record.name) from its own MAC \(mac)"), now: now)
            } else if now - host.owner.registeredAt > MulticastDNS.ownerReleaseAge {
                actions += drop(
                    key,
                    reason: .released(
                        "announced its name \(record.name) from its own MAC \(mac), \((now - host.owner.registeredAt).components.seconds) s after it registered"
                    ), now: now)
            }
            // Earlier, it is a host still answering for itself as it goes to sleep: keep everything.
        }
        return actions
    }

    // MARK: Addresses

    /// The host (its wake MAC) used a held address: probe again. Once probing has been restarted the maximum
    /// number of times and the host still answers, it is awake: let go rather than claim a live host's address.
    mutating func ownerUsesAddress(_ address: IPAddress, of key: OwnerKey, now: UnixTime, what: String) -> [Action] {
        guard let takeover = hosts[key]?.takeovers[address] else { return [] }
        guard takeover.restarts < TakeoverTiming.maximumRestarts else {
            return drop(
                key,
                reason: .released(
                    "\(what) for \(address) from its own MAC after \(TakeoverTiming.maximumRestarts) probe restarts: it is awake"
                ), now: now)
        }
        restartProbing(key, address, now: now)
        return []
    }

    // MARK: The way out

    /// The one way out, for a host of either origin: its take-overs stop, a wake in progress ends, its records go
    /// (with goodbyes when the reason asks for them, except for shared records another host or the proxy itself
    /// still holds), the release is counted under its reason, the store lets go of it if it mirrored it
    /// (`storeChange`), and the event history and the log say why. A host whose MAC is declared is watched
    /// afresh if still counted asleep (`rewatchDeclared`), and an interface being retired closes with its last
    /// host.
    mutating func drop(_ key: OwnerKey, reason: DropReason, now: UnixTime) -> [Action] {
        guard hosts[key] != nil else { return [] }
        var actions = stopTakeovers(of: key, now: now)
        guard let host = hosts.remove(key) else { return actions }
        statistics.releases[reason.release, default: 0] += 1
        if reason.goodbyes {
            actions = goodbyes(for: host.owner.records.map(\.record), interface: key.interface) + actions
        }
        refreshHostDeadline()
        let event = Event(
            time: now, kind: reason.kind, interface: key.interface, owner: key.primaryMAC, source: reason.source,
            detail: reason.detail)
        let verb = reason.kind == .released ? "released" : "dropped"
        return actions + storeChange(.removeOwner(key), of: host) + [
            .store(.appendEvent(event)), .log(reason.level, "\(verb) \(key): \(reason.detail)"),
        ] + rewatchDeclared(key, after: reason, now: now) + closeIfDrained(key.interface)
    }

    /// Drops some of a host's records; the host goes when none are left.
    mutating func dropRecords(
        _ identities: Set<RecordIdentity>, of key: OwnerKey, reason: DropReason, now: UnixTime
    ) -> [Action] {
        guard var owner = hosts[key]?.owner else { return [] }
        let gone = owner.records.filter { identities.contains(RecordIdentity($0.record)) }
        owner.records.removeAll { identities.contains(RecordIdentity($0.record)) }
        guard !owner.records.isEmpty else { return drop(key, reason: reason, now: now) }
        guard !gone.isEmpty else { return [] }
        hosts.replaceRecords(of: key, with: owner)
        var actions: [Action] = []
        if reason.goodbyes {
            actions += goodbyes(for: gone.map(\.record), interface: key.interface)
        }
        actions += updateTakeovers(of: key, now: now)
        refreshHostDeadline()
        let names = gone.map { "\($0.record.name) \($0.record.type)" }.joined(separator: ", ")
        let detail = "\(gone.count) of its records (\(names)): \(reason.detail)"
        let event = Event(time: now, kind: reason.kind, interface: key.interface, owner: key.primaryMAC, detail: detail)
        actions += storedOwnerChange(of: key) + [.store(.appendEvent(event)), .log(reason.level, "\(key): \(detail)")]
        // A wake of some records keeps their positions in the store: they move with the records that are left.
        if hosts[key]?.wake != nil { actions += storedWakeChange(of: key) }
        return actions
    }

    /// Ends the leases due by `now`. Apple's proxy wakes a host whose lease ends (PROTOCOL.md section 3.7); the
    /// wake policy may keep it from that: a `neverWake` host, or any host in a dry run (after a `would-wake`
    /// event), is dropped at once as expired, with goodbyes, since nothing is held past its lease. A host already
    /// being woken as a whole keeps its wake.
    mutating func expire(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        // A host being woken stays, but its lease no longer counts: it is taken out of the expiries.
        let expired = hosts.popExpired(by: now)
        let policy = configuration.wakePolicy
        for key in expired.sorted() {
            guard let host = hosts[key] else { continue }
            statistics.leaseExpiries += 1
            let count = host.owner.records.count
            if !host.isWakingWhole, policy.neverWakes(host.owner, declaredName: declaration(of: key)?.name) {
                let name = Self.displayName(of: host.owner)
                actions += drop(
                    key,
                    reason: .expiredUnwoken(
                        "lease ended; \(name) is in wake.never_wake, so it is not woken: \(count) records dropped"),
                    now: now)
                continue
            }
            if !host.isWakingWhole, policy.dryRun {
                actions += wouldWake(key, now: now, reason: "lease expired", limited: false)
                actions += drop(
                    key,
                    reason: .expiredUnwoken(
                        "lease ended; wake.dry_run is on, so it is not woken: \(count) records dropped"),
                    now: now)
                continue
            }
            let event = Event(
                time: now, kind: .expired, interface: key.interface, owner: key.primaryMAC,
                detail: "lease ended; waking the host so that it registers again")
            actions += [.store(.appendEvent(event)), .log(.notice, "expired \(key): \(event.detail)")]
            actions += startWake(key, now: now, reason: "lease expired", trigger: .leaseEnd, limited: false)
        }
        return actions
    }
}
