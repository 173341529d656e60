import DNSWire
import NetworkAddresses

/// The sleep proxy's state machine: what is held, for whom, until when.
///
/// It has no sockets, clock or threads. The shell feeds it inputs stamped with the current time and carries out
/// the actions it returns, in order.
public struct SleepProxyCore: Sendable {
    public private(set) var configuration: CoreConfiguration
    public private(set) var links: [InterfaceName: Link] = [:]
    public private(set) var owners: [OwnerKey: Owner] = [:]
    /// Records held by all owners together.
    public private(set) var recordCount = 0
    /// Unique names (see `HeldRecord.claimsUniqueName`) to the owner holding them, per interface.
    private var uniqueNames: [UniqueName: OwnerKey] = [:]
    /// Every held name (folded to lower case) to the owners holding records with it, for answering queries.
    var heldNames: [UniqueName: [OwnerKey]] = [:]
    /// Multicast responses and announcements waiting for their time (random delays, the second announcement).
    var pendingResponses: [PendingResponse] = []
    /// When each record was last multicast, per interface and family, for the once-a-second limit.
    var lastMulticast: [MulticastKey: UnixTime] = [:]
    var random: CoreRandom
    /// When another host last answered one of an owner's unique names with other data; a second conflict soon
    /// after is persistent, and a reason to wake the owner.
    var conflicts: [OwnerKey: UnixTime] = [:]
    /// The addresses being taken over or held, per owner.
    var takeovers: [OwnerKey: [IPAddress: AddressTakeover]] = [:]
    /// Every held record (interface, name in lower case, type, RDATA) with how many owners hold it, so that a
    /// scheduled response can check in one lookup that its records are still held.
    var heldRecords: [MulticastKey: Int] = [:]
    /// Held addresses to their owner, for the per-packet check.
    var heldAddresses: [NeighbourKey: OwnerKey] = [:]
    /// The earliest take-over step due.
    var takeoverNext: UnixTime?
    /// Owners being woken.
    var wakes: [OwnerKey: WakeSequence] = [:]
    /// Neighbour entries set for our own host (held address to the sleeping host's MAC).
    var neighbourEntries: Set<NeighbourKey> = []
    /// The proxy's own `_sleep-proxy._udp` service, per interface.
    var advertisements: [InterfaceName: Advertisement] = [:]
    /// Each owner's lease expiry (its earliest record expiry), and the same ordered by time.
    private var expiries: [OwnerKey: UnixTime] = [:]
    private var expiryQueue = ExpiryQueue()
    /// Refusals are logged at most `refusalLogLimit` times a minute, so that a misbehaving client cannot flood
    /// the log (Apple's proxy caps these messages too); every refusal is still recorded in the event history.
    private var refusalLog = (windowStart: UnixTime(nanoseconds: 0), logged: 0, suppressed: 0)
    static let refusalLogLimit = 100

    struct UniqueName: Hashable, Sendable {
        var interface: InterfaceName
        /// The name folded to lower case.
        var name: DNSName
    }

    /// `seed` makes the random answer delays repeatable; the shell passes a random one.
    public init(configuration: CoreConfiguration = CoreConfiguration(), seed: UInt64 = 0x5EED) {
        self.configuration = configuration
        random = CoreRandom(seed: seed)
    }

    // MARK: Links

    /// Serves `link`, or updates what is known of it (its addresses changed).
    public mutating func setLink(_ link: Link) {
        let changed = links[link.name] != link
        links[link.name] = link
        if changed, var advertisement = advertisements[link.name] {
            advertisement.buildRecords(for: link)
            advertisements[link.name] = advertisement
        }
    }

    // MARK: Restore

    /// Takes over the owners the lease store kept, at start-up. Owners whose lease ended while the proxy was down
    /// are dropped (and reported); expiries further away than the maximum lease are brought in to it.
    public mutating func restore(_ saved: [Owner], now: UnixTime) -> [Action] {
        var actions: [Action] = []
        let latest = now + .seconds(Int64(configuration.maximumLease))
        for var owner in saved.sorted(by: { $0.key < $1.key }) {
            guard let expiry = owner.expiresAt, expiry > now else {
                let event = Event(
                    time: now, kind: .expired, interface: owner.key.interface, owner: owner.key.primaryMAC,
                    detail: "lease ended while the proxy was not running (\(owner.records.count) records dropped)")
                actions += [
                    .store(.removeOwner(owner.key)), .store(.appendEvent(event)),
                    .log(.notice, "restore: \(owner.key): \(event.detail)"),
                ]
                continue
            }
            var clamped = 0
            for index in owner.records.indices where owner.records[index].expiresAt > latest {
                owner.records[index].expiresAt = latest
                clamped += 1
            }
            if clamped > 0 {
                actions += [
                    .store(.saveOwner(owner)),
                    .log(
                        .notice,
                        "restore: \(owner.key): \(clamped) record expiries beyond the maximum lease of \(configuration.maximumLease) s brought in"
                    ),
                ]
            }
            insert(owner)
            actions += updateTakeovers(for: owner, now: now)
        }
        actions.append(.log(.info, "restore: holding \(owners.count) owners with \(recordCount) records"))
        return actions
    }

    // MARK: Registration

    /// Handles one registration datagram: accepts it (store changes, then the reply) or refuses it silently on
    /// the wire (a log line and a stored event only).
    public mutating func handleRegistration(_ datagram: RegistrationDatagram, now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        switch accept(datagram, now: now) {
        case .success(let accepted):
            actions += accepted
        case .failure(let refusal):
            let event = Event(
                time: now, kind: .refused, interface: datagram.interface, owner: refusal.owner,
                source: datagram.source, reason: refusal.reason, detail: refusal.detail)
            actions.append(.store(.appendEvent(event)))
            if now - refusalLog.windowStart >= .seconds(60) {
                if refusalLog.suppressed > 0 {
                    actions.append(
                        .log(.warning, "\(refusalLog.suppressed) more refusals in the last minute were not logged"))
                }
                refusalLog = (now, 0, 0)
            }
            if refusalLog.logged < Self.refusalLogLimit {
                refusalLog.logged += 1
                actions.append(
                    .log(
                        .warning,
                        "refused registration from \(datagram.source) on \(datagram.interface): \(refusal.reason): \(refusal.detail)"
                    ))
            } else {
                refusalLog.suppressed += 1
            }
        }
        return actions
    }

    private mutating func accept(_ datagram: RegistrationDatagram, now: UnixTime) -> Result<[Action], Refusal> {
        guard let link = links[datagram.interface] else {
            return .failure(Refusal(reason: .unknownInterface, detail: "interface \(datagram.interface) is not served"))
        }
        let registration: Registration
        switch Registration.parse(datagram.bytes) {
        case .success(let parsed): registration = parsed
        case .failure(let refusal): return .failure(refusal)
        }
        let mac = registration.owner.primaryMAC
        guard link.isOnLink(datagram.source.address) else {
            return .failure(
                Refusal(
                    reason: .sourceOffLink,
                    detail:
                        "source \(datagram.source.address) is not on \(link.name) (\(link.prefixes.map(\.description).joined(separator: ", ")))",
                    owner: mac))
        }

        let key = OwnerKey(interface: datagram.interface, primaryMAC: mac)
        let existing = owners[key]
        let sequence = registration.owner.sequence
        let granted = min(registration.lease.lease, configuration.maximumLease)
        let expiry = now + .seconds(Int64(granted))

        // Same sequence number: add to the owner's records, replacing identical ones. A new sequence number: the
        // host woke and slept again, so its records of other sequence numbers go.
        var records = (existing?.records ?? []).filter { $0.sequence == sequence }
        let replacedCount = (existing?.records.count ?? 0) - records.count
        var added = 0
        var newRecords: [DNSRecord] = []
        for record in registration.records {
            if let index = records.firstIndex(where: { $0.isIdentical(to: record) }) {
                records.remove(at: index)
            } else {
                added += 1
                newRecords.append(record)
            }
            records.append(HeldRecord(record: record, sequence: sequence, registeredAt: now, expiresAt: expiry))
        }

        guard records.count <= configuration.maximumRecordsPerOwner else {
            return .failure(
                Refusal(
                    reason: .ownerRecordLimit,
                    detail:
                        "owner would hold \(records.count) records, limit \(configuration.maximumRecordsPerOwner)",
                    owner: mac))
        }
        let total = recordCount - (existing?.records.count ?? 0) + records.count
        guard total <= configuration.maximumRecordsTotal else {
            return .failure(
                Refusal(
                    reason: .totalRecordLimit,
                    detail: "proxy would hold \(total) records, limit \(configuration.maximumRecordsTotal)",
                    owner: mac))
        }
        for held in records where HeldRecord.claimsUniqueName(held.record) {
            let name = UniqueName(interface: key.interface, name: held.record.name.lowercased())
            if let holder = uniqueNames[name], holder != key {
                return .failure(
                    Refusal(
                        reason: .nameHijack,
                        detail: "\(held.record.name) \(held.record.type) is held for \(holder.primaryMAC)",
                        owner: mac))
            }
        }

        let owner = Owner(
            key: key, wakeMAC: registration.owner.effectiveWakeMAC, password: registration.owner.password,
            sequence: sequence,
            registeredAt: existing?.sequence == sequence ? existing!.registeredAt : now, updatedAt: now,
            lastSource: datagram.source, records: records)
        if existing != nil { remove(key) }
        insert(owner)
        // Take-over: announce what is new, twice about a second apart (PROTOCOL.md section 3.1). A retransmission
        // announces nothing again.
        scheduleAnnouncement(
            of: existing?.sequence == sequence ? newRecords : records.map(\.record), on: link, now: now)

        let kind: Event.Kind = existing == nil ? .registered : (existing!.sequence == sequence ? .renewed : .replaced)
        var detail =
            "seq \(sequence), \(registration.records.count) records in this datagram (\(added) new), \(records.count) held, lease \(granted) s"
        if granted != registration.lease.lease { detail += " (asked \(registration.lease.lease) s)" }
        if replacedCount > 0 { detail += ", \(replacedCount) records of seq \(existing!.sequence) replaced" }
        let addresses = owner.proxiedAddresses
        if !addresses.isEmpty { detail += ", addresses \(addresses.map(\.description).joined(separator: " "))" }
        if !registration.skipped.isEmpty { detail += ", skipped: \(registration.skipped.joined(separator: "; "))" }
        let event = Event(
            time: now, kind: kind, interface: key.interface, owner: mac, source: datagram.source, detail: detail)

        let reply = RegistrationReply(
            interface: datagram.interface,
            bytes: Self.reply(to: registration.message, granted: granted, keyLease: registration.lease.keyLease),
            destination: datagram.source, destinationScopeID: datagram.sourceScopeID, source: datagram.destination)
        return .success(
            [
                .store(.saveOwner(owner)), .store(.appendEvent(event)),
                .log(.info, "\(kind) \(key) from \(datagram.source): \(detail)"), .reply(reply),
            ] + updateTakeovers(for: owner, now: now))
    }

    /// The reply Apple's proxy sends: same ID, flags 0xA800 (QR, UPDATE, RCODE 0), no records, and one OPT with
    /// only the granted lease, in the form it was asked for (PROTOCOL.md section 2.8).
    static func reply(to request: DNSMessage, granted: UInt32, keyLease: UInt32?) -> [UInt8] {
        let lease = UpdateLease(lease: granted, keyLease: keyLease.map { min($0, granted) })
        let message = DNSMessage(
            id: request.id, flags: DNSFlags(response: true, opcode: .update),
            additionals: [.opt(EDNSHeader(udpPayloadSize: 1440, flags: 0x1194), options: [.updateLease(lease)])])
        // An OPT with one option always encodes.
        return try! message.encoded()
    }

    // MARK: Expiry

    /// The earliest lease expiry of all owners, if any.
    public var nextLeaseExpiry: UnixTime? {
        expiryQueue.first?.time
    }

    /// The next time `tick` has work to do, if any. (Stale queue entries are dropped after every change, so the
    /// first entry is always a live owner's expiry.)
    public var nextDeadline: UnixTime? {
        [
            expiryQueue.first?.time, pendingResponses.map(\.due).min(), advertisementDeadline, takeoverDeadline,
            wakeDeadline,
        ].compactMap { $0 }.min()
    }

    /// Ends the leases that have run out by `now`.
    public mutating func tick(now: UnixTime) -> [Action] {
        var actions =
            expire(now: now) + sendDueResponses(now: now) + advanceTakeovers(now: now) + advanceWakes(now: now)
        for interface in advertisements.keys.sorted() {
            actions += advance(interface, now: now)
        }
        return actions
    }

    mutating func expire(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        var expired: [Owner] = []
        while true {
            expiryQueue.dropStale { expiries[$0] }
            guard let first = expiryQueue.first, first.time <= now, let owner = owners[first.key] else { break }
            expiryQueue.popFirst()
            // The owner stays while it is woken: its lease no longer counts.
            expiries[first.key] = nil
            expired.append(owner)
        }
        for owner in expired.sorted(by: { $0.key < $1.key }) {
            let event = Event(
                time: now, kind: .expired, interface: owner.key.interface, owner: owner.key.primaryMAC,
                detail: "lease ended; waking the host so that it registers again")
            actions += [
                .store(.appendEvent(event)), .log(.notice, "expired \(owner.key): \(event.detail)"),
            ]
            // Apple's proxy always wakes a host whose lease ends (PROTOCOL.md section 3.7).
            actions += startWake(owner.key, now: now, reason: "lease expired")
        }
        return actions
    }

    // MARK: Bookkeeping

    mutating func insert(_ owner: Owner) {
        owners[owner.key] = owner
        recordCount += owner.records.count
        var names = Set<UniqueName>()
        for held in owner.records {
            let name = held.record.name.lowercased()
            names.insert(UniqueName(interface: owner.key.interface, name: name))
            heldRecords[
                Self.recordKey(held.record, lowercasedName: name, interface: owner.key.interface), default: 0] += 1
        }
        for name in names {
            heldNames[name, default: []].append(owner.key)
        }
        if let expiry = owner.expiresAt {
            expiries[owner.key] = expiry
            expiryQueue.push(owner.key, at: expiry)
            if expiryQueue.count > 4 * expiries.count + 64 { expiryQueue.compact(current: expiries) }
        }
        expiryQueue.dropStale { expiries[$0] }
        for held in owner.records where HeldRecord.claimsUniqueName(held.record) {
            let name = UniqueName(interface: owner.key.interface, name: held.record.name.lowercased())
            if uniqueNames[name] == nil { uniqueNames[name] = owner.key }
        }
    }

    mutating func remove(_ key: OwnerKey) {
        guard let owner = owners.removeValue(forKey: key) else { return }
        recordCount -= owner.records.count
        var names = Set<UniqueName>()
        for held in owner.records {
            let name = held.record.name.lowercased()
            names.insert(UniqueName(interface: key.interface, name: name))
            let recordKey = Self.recordKey(held.record, lowercasedName: name, interface: key.interface)
            if let count = heldRecords[recordKey], count > 1 {
                heldRecords[recordKey] = count - 1
            } else {
                heldRecords[recordKey] = nil
            }
        }
        for name in names {
            heldNames[name]?.removeAll { $0 == key }
            if heldNames[name]?.isEmpty == true { heldNames[name] = nil }
        }
        expiries[key] = nil
        expiryQueue.dropStale { expiries[$0] }
        for held in owner.records where HeldRecord.claimsUniqueName(held.record) {
            let name = UniqueName(interface: key.interface, name: held.record.name.lowercased())
            if uniqueNames[name] == key { uniqueNames[name] = nil }
        }
    }
}
