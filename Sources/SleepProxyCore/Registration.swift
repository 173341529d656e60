import DNSWire
public import NetworkAddresses

/// A registration datagram as the shell received it.
public struct RegistrationDatagram: Hashable, Sendable {
    public var interface: InterfaceName
    public var source: Endpoint
    /// The IPv6 scope (interface index) of a link-local source, 0 otherwise; the reply goes back with it.
    public var sourceScopeID: UInt32
    /// The address and port the client sent to: the reply leaves from there.
    public var destination: Endpoint
    public var bytes: [UInt8]

    public init(
        interface: InterfaceName, source: Endpoint, sourceScopeID: UInt32 = 0, destination: Endpoint, bytes: [UInt8]
    ) {
        self.interface = interface
        self.source = source
        self.sourceScopeID = sourceScopeID
        self.destination = destination
        self.bytes = bytes
    }
}

/// The parts of an UPDATE that make a registration, once it has passed every check.
struct Registration {
    var message: DNSMessage
    var owner: OwnerOption
    var lease: UpdateLease
    /// The update-section records to hold, in order, with duplicates inside the datagram removed.
    var records: [DNSRecord]
    /// Update-section records left out, with why (OPT-typed records with a name, TTL 0).
    var skipped: [String]
}

/// A refusal with its reason and the specific detail for the log.
struct Refusal: Error {
    var reason: RefusalReason
    var detail: String
    var owner: MACAddress?
}

/// What an accepted registration datagram changes, worked out from the datagram and the held hosts without changing
/// them (`SleepProxyCore.decideRegistration`); `SleepProxyCore.apply(_:of:now:)` carries it out.
struct RegistrationDecision {
    /// The link the datagram came in on.
    var link: Link
    var registration: Registration
    /// The host as it was held through its registration; nil for a new host (or one held only as declared).
    var previous: HeldHost?
    /// The owner as it is held after the datagram: the records of the same sequence held before, each identical
    /// one replaced, then this datagram's new records.
    var owner: Owner
    /// The lease granted: the one asked for, at most the maximum lease.
    var granted: UInt32
    /// This datagram's records that were not held before.
    var newRecords: [DNSRecord]
    /// How many records of an earlier sequence go.
    var replacedCount: Int
    /// The records of a later datagram that are not held, each with why.
    var dropped: [String]
    /// Whether this is a later datagram of a registration already answered (same sequence, same message ID).
    var laterDatagram: Bool

    var key: OwnerKey { owner.key }

    var sameSequence: Bool { previous?.owner.sequence == owner.sequence }

    var kind: Event.Kind { previous == nil ? .registered : (sameSequence ? .renewed : .replaced) }

    /// A datagram already answered that holds nothing new: a retransmission (the client missed our reply) or a
    /// replay from anyone on the link. It refreshes the lease as Apple's proxy does, but it calls no wake off and
    /// costs no event; only the host's next registration (a new sequence) does those.
    var isRetransmission: Bool { laterDatagram && newRecords.isEmpty && dropped.isEmpty }

    /// The wake in progress this registration calls off.
    var cancelledWake: WakeSequence? { isRetransmission ? nil : previous?.wake }

    /// A host registering afresh (a new sequence) or while it is being woken is going to sleep now: everything it
    /// holds is taken over from the start (mDNS.c `ClearIdenticalProxyRecords` re-registers such records).
    var fromTheStart: Bool { !sameSequence || cancelledWake != nil }

    /// The event's text: what the datagram held and was granted, and what was replaced, skipped or left out.
    var detail: String {
        let lease = registration.lease.lease
        var detail =
            "seq \(owner.sequence), \(registration.records.count) records in this datagram (\(newRecords.count) new), \(owner.records.count) held, lease \(granted) s"
        if granted != lease { detail += " (asked \(lease) s)" }
        if replacedCount > 0, let previous {
            detail += ", \(replacedCount) records of seq \(previous.owner.sequence) replaced"
        }
        let addresses = owner.proxiedAddresses
        if !addresses.isEmpty { detail += ", addresses \(addresses.map(\.description).joined(separator: " "))" }
        if !registration.skipped.isEmpty { detail += ", skipped: \(registration.skipped.joined(separator: "; "))" }
        if !dropped.isEmpty {
            detail +=
                ", \(dropped.count) records of this later datagram not held (the client counts them registered): \(dropped.joined(separator: "; "))"
        }
        return detail
    }
}

/// The records a registration leaves held, as they are worked out: the owner's, those of this datagram that are
/// new, and those of a later datagram that are left out, with why.
struct RecordMerge {
    var records: [HeldRecord]
    var newRecords: [DNSRecord] = []
    var dropped: [String] = []

    /// Holds `held` last, in place of an identical record held before.
    mutating func hold(_ held: HeldRecord) {
        if let index = records.firstIndex(where: { $0.isIdentical(to: held.record) }) {
            records.remove(at: index)
        } else {
            newRecords.append(held.record)
        }
        records.append(held)
    }

    /// Leaves out new records, the last first, until at most `allowed` are held; whether that was enough (records
    /// held before stay).
    mutating func trim(to allowed: Int, reason: RefusalReason) -> Bool {
        let fresh = Set(newRecords.map(RecordIdentity.init))
        var excess = records.count - max(allowed, 0)
        for index in records.indices.reversed()
        where excess > 0 && fresh.contains(RecordIdentity(records[index].record)) {
            dropped.append("\(records[index].record.name) \(records[index].record.type): \(reason)")
            newRecords.removeAll { HeldRecord.identical($0, records[index].record) }
            records.remove(at: index)
            excess -= 1
        }
        return excess == 0
    }
}

extension Registration {
    /// Reads a registration out of a datagram, or says precisely why it is not one we accept.
    ///
    /// Accepted as real clients send them (PROTOCOL.md section 2): zone count 0 (Macs) or 1 (`. SOA`, third-party
    /// clients, ignored); records in the update section; compressed names anywhere; several OPT records, of which
    /// the first holding both Lease and OWNER counts; OWNER of 8, 14, 18 or 20 bytes; Lease of 4 or 8 bytes;
    /// any EDNS flag bits.
    static func parse(_ bytes: [UInt8]) -> Result<Registration, Refusal> {
        let message: DNSMessage
        do {
            message = try DNSMessage(decoding: bytes)
        } catch {
            return .failure(Refusal(reason: .malformed, detail: error.description))
        }
        guard message.flags.opcode == .update, !message.flags.isResponse else {
            return .failure(
                Refusal(
                    reason: .notAnUpdate,
                    detail:
                        "opcode \(message.flags.opcode.rawValue), \(message.flags.isResponse ? "response" : "query"): expected an UPDATE request"
                ))
        }
        let opts = message.optRecords.compactMap(\.optData)
        let chosen = opts.lazy.compactMap { opt in opt.owner.flatMap { owner in opt.updateLease.map { (owner, $0) } } }
        guard let (owner, lease) = chosen.first else {
            if let withOwner = opts.first(where: { $0.owner != nil }) {
                return .failure(
                    Refusal(
                        reason: .noLease, detail: "OWNER without an Update Lease option in \(opts.count) OPT record(s)",
                        owner: withOwner.owner?.primaryMAC))
            }
            return .failure(Refusal(reason: .noOwner, detail: "no OWNER option in \(opts.count) OPT record(s)"))
        }
        guard owner.version == 0 else {
            return .failure(
                Refusal(
                    reason: .ownerVersion, detail: "OWNER version \(owner.version), expected 0",
                    owner: owner.primaryMAC))
        }
        guard !owner.primaryMAC.isZero else {
            return .failure(Refusal(reason: .zeroPrimaryMAC, detail: "OWNER primary MAC is 00:00:00:00:00:00"))
        }
        guard lease.lease > 0 else {
            return .failure(
                Refusal(
                    reason: .zeroLease, detail: "Update Lease 0 (there is no deregistration; leases end by expiry)",
                    owner: owner.primaryMAC))
        }
        var records: [DNSRecord] = []
        var skipped: [String] = []
        for record in message.updates {
            if record.type == .opt {
                skipped.append("OPT-typed record \(record.name)")
                continue
            }
            if record.ttl == 0 {
                skipped.append("\(record.name) \(record.type) with TTL 0")
                continue
            }
            // A record repeated inside one datagram counts once; the later copy wins.
            if let index = records.firstIndex(where: { HeldRecord.identical($0, record) }) {
                records.remove(at: index)
            }
            records.append(record)
        }
        return .success(Registration(message: message, owner: owner, lease: lease, records: records, skipped: skipped))
    }
}

extension HeldRecord {
    /// Same name (ignoring ASCII case), type, class and RDATA.
    static func identical(_ a: DNSRecord, _ b: DNSRecord) -> Bool {
        a.type == b.type && a.recordClass == b.recordClass && a.name.caseInsensitiveEquals(b.name)
            && sameRData(a.rdata, b.rdata)
    }

    /// Whether this record claims a name that only one host may hold: addresses, services and reverse mappings.
    /// These are unique by their nature in DNS-SD, whether or not a client sets the cache-flush bit on them.
    static func claimsUniqueName(_ record: DNSRecord) -> Bool {
        claimsUniqueName(type: record.type, name: record.name)
    }

    /// The same, from the record's type and name.
    static func claimsUniqueName(type: DNSType, name: DNSName) -> Bool {
        switch type {
        case .a, .aaaa, .srv: true
        case .ptr: ReverseMapping.address(of: name) != nil
        default: false
        }
    }
}

extension SleepProxyCore {
    // MARK: Registration

    /// Handles one registration datagram: accepts it (store changes, then the reply) or refuses it silently on
    /// the wire (a log line and a stored event only).
    mutating func register(_ datagram: RegistrationDatagram, now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        let result: Result<[Action], Refusal>
        if let refusal = admit(datagram, now: now) {
            result = .failure(refusal)
        } else {
            result = accept(datagram, now: now)
        }
        switch result {
        case .success(let accepted):
            statistics.registrationsAccepted += 1
            actions += accepted
        case .failure(let refusal):
            statistics.registrationsRefused[refusal.reason, default: 0] += 1
            let event = Event(
                time: now, kind: .refused, interface: datagram.interface, owner: refusal.owner,
                source: datagram.source, reason: refusal.reason, detail: refusal.detail)
            // A flood from one source costs one event a minute, not one per datagram; every refusal is a store
            // write, so one source gets `Allowances.refusalEventsPerSource` of them a minute, and a count of the
            // rest when the minute is over; the log gets `refusalLogLimit` lines a minute from all sources.
            let source = datagram.source
            let notice = allowances.noteRefusal(
                from: source.address, rateLimited: refusal.reason == .rateLimited, now: now)
            if notice.unrecordedBefore > 0 {
                actions.append(
                    .store(
                        .appendEvent(
                            Event(
                                time: now, kind: .refused, interface: datagram.interface, owner: nil, source: source,
                                reason: refusal.reason,
                                detail:
                                    "\(notice.unrecordedBefore) more refusals from \(source.address) in the last minute were not recorded"
                            ))))
            }
            if notice.record { actions.append(.store(.appendEvent(event))) }
            if notice.unloggedBefore > 0 {
                actions.append(
                    .log(.warning, "\(notice.unloggedBefore) more refusals in the last minute were not logged"))
            }
            if notice.log {
                actions.append(
                    .log(
                        .warning,
                        "refused registration from \(source) on \(datagram.interface): \(refusal.reason): \(refusal.detail)"
                    ))
            }
        }
        refreshHostDeadline()
        return actions
    }

    /// The checks before a datagram is even decoded: its size, and its source's rate.
    mutating func admit(_ datagram: RegistrationDatagram, now: UnixTime) -> Refusal? {
        let limit = configuration.maximumRegistrationBytes
        guard datagram.bytes.count <= limit else {
            return Refusal(reason: .tooLarge, detail: "\(datagram.bytes.count) bytes, limit \(limit)")
        }
        let source = datagram.source.address
        let rate = configuration.registrationRate
        guard allowances.admitRegistration(from: source, rate: rate, now: now) else {
            return Refusal(
                reason: .rateLimited,
                detail:
                    "more than \(Int(rate.perSecond)) registration datagrams a second (bursts of \(Int(rate.burst))) from \(source)"
            )
        }
        return nil
    }

    /// The address an address record or a reverse-mapping PTR stands for.
    static func claimedAddress(_ record: DNSRecord) -> IPAddress? {
        switch record.rdata {
        case .a(let v4): return .v4(v4)
        case .aaaa(let v6): return .v6(v6)
        default: return record.type == .ptr ? ReverseMapping.address(of: record) : nil
        }
    }

    /// Accepts a datagram whole, or refuses it whole, except for a later datagram of a registration already
    /// answered (same sequence, same message ID): the client counts its records registered whatever we do, so
    /// what can be held is held and the rest is logged.
    private mutating func accept(_ datagram: RegistrationDatagram, now: UnixTime) -> Result<[Action], Refusal> {
        switch decideRegistration(datagram, now: now) {
        case .success(let decision): .success(apply(decision, of: datagram, now: now))
        case .failure(let refusal): .failure(refusal)
        }
    }

    /// What a registration datagram would change, worked out from it and the held hosts without changing anything:
    /// refused with why, or the owner it leaves held. In order: the interface is served, the datagram is a
    /// registration, its source is on the link, a new host fits the host limit; then each record, unless its
    /// unique name or its address is held for another owner, replaces an identical record of the same sequence or
    /// is added; then the record limits hold; and something is left to hold. A later datagram of a registration
    /// already answered is not refused for its hijacks or for new records over a limit: those are left out.
    func decideRegistration(_ datagram: RegistrationDatagram, now: UnixTime) -> Result<RegistrationDecision, Refusal> {
        let link: Link
        let registration: Registration
        switch readRegistration(datagram) {
        case .success(let read): (link, registration) = read
        case .failure(let refusal): return .failure(refusal)
        }
        let mac = registration.owner.primaryMAC
        let key = OwnerKey(interface: datagram.interface, primaryMAC: mac)
        // A declared host the proxy holds is not this registration's: the registration wins (`yieldDeclared`).
        let previous = hosts[key].flatMap { $0.registration == nil ? nil : $0 }
        if previous == nil {
            // A declared hold of this host is replaced, not added to.
            let held = hosts.count(on: datagram.interface) - (hosts[key] == nil ? 0 : 1)
            let limit = configuration.maximumHostsPerInterface
            guard held < limit else {
                return .failure(
                    Refusal(
                        reason: .hostLimit, detail: "\(datagram.interface) holds \(held) hosts, limit \(limit)",
                        owner: mac))
            }
        }
        let sequence = registration.owner.sequence
        let sameSequence = previous?.owner.sequence == sequence
        let laterDatagram =
            sameSequence && previous?.registration?.answeredIDs.contains(registration.message.id) == true
        let granted = min(registration.lease.lease, configuration.maximumLease)
        let expiry = now + .seconds(Int64(granted))

        // Same sequence number: add to the owner's records, replacing identical ones. A new sequence number: the
        // host woke and slept again, so its records of other sequence numbers go.
        var merge = RecordMerge(records: sameSequence ? Array(previous?.owner.records ?? []) : [])
        let replacedCount = (previous?.owner.records.count ?? 0) - merge.records.count
        // Held for hours, the records are packed with their own names, each once (`HeldRecords`), not the
        // datagram's whole block.
        for record in registration.records {
            if let hijack = hijack(by: record, for: key) {
                guard laterDatagram else {
                    return .failure(Refusal(reason: hijack.reason, detail: hijack.detail, owner: mac))
                }
                merge.dropped.append(hijack.detail)
                continue
            }
            merge.hold(HeldRecord(record: record, sequence: sequence, registeredAt: now, expiresAt: expiry))
        }
        for limit in recordLimits(of: key) where merge.records.count > limit.allowed {
            // A later datagram keeps what was held before and as many of the new records as fit.
            guard laterDatagram, merge.trim(to: limit.allowed, reason: limit.reason) else {
                return .failure(Refusal(reason: limit.reason, detail: limit.detail(merge.records.count), owner: mac))
            }
        }
        guard !merge.records.isEmpty else {
            return .failure(
                Refusal(
                    reason: .nameHijack, detail: "nothing left to hold: \(merge.dropped.joined(separator: "; "))",
                    owner: mac))
        }
        let registeredAt = (sameSequence ? previous?.owner.registeredAt : nil) ?? now
        let owner = Owner(
            key: key, wakeMAC: registration.owner.effectiveWakeMAC, password: registration.owner.password,
            sequence: sequence, registeredAt: registeredAt, updatedAt: now, lastSource: datagram.source,
            records: merge.records)
        return .success(
            RegistrationDecision(
                link: link, registration: registration, previous: previous, owner: owner, granted: granted,
                newRecords: merge.newRecords, replacedCount: replacedCount, dropped: merge.dropped,
                laterDatagram: laterDatagram))
    }

    /// The served link a datagram came in on and the registration it holds, or why it is not one: the interface is
    /// not served (or is retiring), the datagram is no registration, or its source is not on the link.
    func readRegistration(_ datagram: RegistrationDatagram) -> Result<(Link, Registration), Refusal> {
        guard let link = links[datagram.interface] else {
            return .failure(Refusal(reason: .unknownInterface, detail: "interface \(datagram.interface) is not served"))
        }
        guard !retiring.contains(datagram.interface) else {
            return .failure(
                Refusal(
                    reason: .unknownInterface,
                    detail:
                        "interface \(datagram.interface) was removed from the configuration and serves only the wakes of its hosts"
                ))
        }
        let registration: Registration
        switch Registration.parse(datagram.bytes) {
        case .success(let parsed): registration = parsed
        case .failure(let refusal): return .failure(refusal)
        }
        guard link.isOnLink(datagram.source.address) else {
            return .failure(
                Refusal(
                    reason: .sourceOffLink,
                    detail:
                        "source \(datagram.source.address) is not on \(link.name) (\(link.prefixes.map(\.description).joined(separator: ", ")))",
                    owner: registration.owner.primaryMAC))
        }
        return .success((link, registration))
    }

    /// Why `key` may not hold `record`, if it may not: the record claims a unique name held for another owner, or
    /// an address held for another owner under any name (that would answer for, and through a reverse mapping take
    /// over, a host that is not the registrant's).
    func hijack(by record: DNSRecord, for key: OwnerKey) -> (reason: RefusalReason, detail: String)? {
        if HeldRecord.claimsUniqueName(record), let holder = hosts.uniqueHolder(of: record.name, on: key.interface),
            holder != key
        {
            return (.nameHijack, "\(record.name) \(record.type) is held for \(holder.primaryMAC)")
        }
        if let address = Self.claimedAddress(record), let holder = hosts.holder(of: address, on: key.interface),
            holder != key
        {
            return (.addressHijack, "\(record.name) \(record.type) claims \(address), held for \(holder.primaryMAC)")
        }
        return nil
    }

    /// The record limits `key`'s records must keep, in the order they are checked: how many records it may hold
    /// under each, and the refusal's detail for a count over it.
    func recordLimits(of key: OwnerKey) -> [(allowed: Int, reason: RefusalReason, detail: (Int) -> String)] {
        let othersHold = hosts.recordCount - (hosts[key]?.owner.records.count ?? 0)
        let perOwner = configuration.maximumRecordsPerOwner
        let total = configuration.maximumRecordsTotal
        return [
            (perOwner, .ownerRecordLimit, { "owner would hold \($0) records, limit \(perOwner)" }),
            (total - othersHold, .totalRecordLimit, { "proxy would hold \(othersHold + $0) records, limit \(total)" }),
        ]
    }

    /// Carries out an accepted registration: the host held (in place of a declared hold of it), its new unique
    /// records probed, a wake in progress called off, the take-over restarted or updated, what is new announced,
    /// the event and the reply.
    private mutating func apply(_ decision: RegistrationDecision, of datagram: RegistrationDatagram, now: UnixTime)
        -> [Action]
    {
        let key = decision.key
        let owner = decision.owner
        // A declared hold of the host is dropped first: the event history says so before it says registered.
        let yielded = yieldDeclared(key, now: now)
        let source = datagram.source.address
        seen.registered(key, from: source, onLink: links[key.interface]?.isOnLink(source) ?? false, now: now)
        var actions: [Action] = []
        let id = decision.registration.message.id
        var registered = decision.previous?.registration ?? RegistrationState()
        if decision.sameSequence {
            registered.answeredIDs.insert(id)
        } else {
            registered.answeredIDs = [id]
        }
        if decision.previous == nil {
            // A new host (none held, or one held as declared until now): all its unique records are probed.
            hold(owner, as: .registered(registered), now: now)
        } else {
            hosts.replaceRecords(of: key, with: owner)
            let fresh = decision.fromTheStart ? nil : Set(decision.newRecords.map(RecordIdentity.init))
            let probes = Self.initialProbes(for: owner.records, now: now) {
                fresh?.contains(RecordIdentity($0)) ?? true
            }
            let count = owner.records.count
            hosts.update(key) { host in
                host.origin = .registered(registered)
                for position in 0..<count {
                    if let probe = probes[position] { host.probes.set(probe, at: position, of: count) }
                }
                if decision.cancelledWake != nil { host.state = .proxying }
            }
        }
        if let wake = decision.cancelledWake {
            let detail = "registered again while being woken (\(wake.reason)): wake cancelled"
            let event = Event(
                time: now, kind: .wakeCancelled, interface: key.interface, owner: key.primaryMAC,
                source: datagram.source, detail: detail)
            actions += storedWakeChange(of: key) + [.store(.appendEvent(event)), .log(.notice, "\(key): \(detail)")]
        }
        if decision.fromTheStart, decision.previous != nil {
            restartTakeovers(of: key, now: now)
        }
        // Take-over: announce what is new, twice about a second apart (PROTOCOL.md section 3.1). A retransmission
        // announces nothing again.
        let announced = decision.fromTheStart ? owner.records.map(\.record) : decision.newRecords
        scheduleAnnouncement(of: announced, on: decision.link, now: now)

        let detail = decision.detail
        let record: [Action] =
            if decision.isRetransmission {
                [.log(.debug, "\(key): datagram \(id) again from \(datagram.source): \(detail)")]
            } else {
                [
                    .store(
                        .appendEvent(
                            Event(
                                time: now, kind: decision.kind, interface: key.interface, owner: key.primaryMAC,
                                source: datagram.source, detail: detail))),
                    .log(
                        decision.dropped.isEmpty ? .info : .warning,
                        "\(decision.kind) \(key) from \(datagram.source): \(detail)"),
                ]
            }
        let registration = decision.registration
        let reply = RegistrationReply(
            interface: datagram.interface,
            bytes: Self.reply(
                to: registration.message, granted: decision.granted, keyLease: registration.lease.keyLease),
            destination: datagram.source, destinationScopeID: datagram.sourceScopeID, source: datagram.destination)
        return yielded + storedOwnerChange(of: key) + record + actions + [.reply(reply)]
            + updateTakeovers(of: key, now: now)
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

    /// Unique records (other than reverse mappings, whose probing is the address take-over) are probed silently
    /// before they are answered: the host may still be answering for them (PROTOCOL.md section 3.1).
    /// Those of `records` that `included` accepts (all by default) are probed.
    static func initialProbes(
        for records: HeldRecords, now: UnixTime, including included: (DNSRecord) -> Bool = { _ in true }
    ) -> RecordProbes {
        var probes = RecordProbes()
        for position in records.indices where records.isUnique(at: position) {
            let record = records.record(at: position)
            guard ReverseMapping.address(of: record) == nil, included(record) else { continue }
            probes.set(
                RecordProbe(started: now, announcements: 2, afterConflict: false), at: position, of: records.count)
        }
        return probes
    }

    // MARK: Restore

    /// Takes over the owners the lease store kept, at start-up. Owners whose lease ended while the proxy was down
    /// are dropped (and reported); expiries further away than the maximum lease are brought in to it. The hosts
    /// are probed before their addresses are claimed: some may have woken while the proxy was down.
    ///
    /// A host whose wake was in progress (`wakes`) goes on being woken from the round it had reached (the next one
    /// at once if it is overdue): it is not claimed again, and what the wake withdrew stays unanswered.
    mutating func restoreOwners(_ saved: [Owner], wakes: [OwnerKey: StoredWake] = [:], now: UnixTime) -> [Action] {
        var actions: [Action] = []
        // One list of held addresses per interface at the end, not one per host (each as long as all of them).
        hosts.deferListChanges()
        // The indexes grow once to their size, not by doubling (each doubling rehashes every name and RDATA).
        hosts.reserveCapacity(records: saved.reduce(0) { $0 + $1.records.count }, hosts: saved.count)
        let latest = now + .seconds(Int64(configuration.maximumLease))
        // In key order, as the store lists them (then nothing is sorted or copied).
        let inOrder = zip(saved, saved.dropFirst()).allSatisfy { $0.key < $1.key }
        for var owner in inOrder ? saved : saved.sorted(by: { $0.key < $1.key }) {
            guard let expiry = owner.expiresAt, expiry > now else {
                let event = Event(
                    time: now, kind: .expired, interface: owner.key.interface, owner: owner.key.primaryMAC,
                    detail: "lease ended while the proxy was not running (\(owner.records.count) records dropped)")
                // Never held again: the store lets go of its own copy.
                actions += [
                    .store(.removeOwner(owner.key)), .store(.appendEvent(event)),
                    .log(.notice, "restore: \(owner.key): \(event.detail)"),
                ]
                continue
            }
            var clamped = 0
            if owner.records.indices.contains(where: { owner.records.expiresAt(at: $0) > latest }) {
                owner.records.updateEach { held in
                    guard held.expiresAt > latest else { return }
                    held.expiresAt = latest
                    clamped += 1
                }
            }
            let wake = wakes[owner.key].map { $0.sequence(for: owner) }
            var state = HeldHost.State.proxying
            if case .success(let continued) = wake { state = .waking(continued) }
            hold(owner, as: .registered(RegistrationState()), state: state, now: now)
            if clamped > 0 {
                actions += storedOwnerChange(of: owner.key)
                actions.append(
                    .log(
                        .notice,
                        "restore: \(owner.key): \(clamped) record expiries beyond the maximum lease of \(configuration.maximumLease) s brought in"
                    ))
            }
            switch wake {
            case .success(let continued):
                actions.append(
                    .log(
                        .notice,
                        "restore: \(owner.key): the wake continues (\(continued.reason)): \(continued.rounds) of \(WakeTiming.rounds) rounds sent"
                    ))
            case .failure(let error):
                // Held instead: the store's copy of the wake is cleared.
                actions += storedWakeChange(of: owner.key)
                actions.append(
                    .log(.error, "restore: \(owner.key): its stored wake cannot go on (\(error.reason)); held instead"))
            case nil:
                break
            }
            actions += updateTakeovers(of: owner.key, now: now)
        }
        refreshHostDeadline()
        actions += endDeferredAddressChanges()
        actions.append(.log(.info, "restore: holding \(hosts.count) owners with \(hosts.recordCount) records"))
        return actions
    }
}
