import DNSWire
import NetworkAddresses

/// The mDNS records a declared host sends about itself while it is awake, from its own MAC: the answers and
/// announcements of its responder, kept as sent (TTL and cache-flush bit included) so that the proxy answers them
/// while the host sleeps, as it would the records the host would have registered had it a sleep proxy client.
///
/// Bounded: at most the limit it is given, the records already kept staying when it is reached. A record is kept
/// once, however often it is sent (`RecordIdentity`); a unique record sent again with the cache-flush bit flushes
/// the other records of its name and type sent more than a second before (RFC 6762 section 10.2): the host's
/// address changed, or its service moved to another port.
///
/// A goodbye (TTL 0) does not remove a record at once: it is withdrawn, pending, until the host is either found
/// asleep (the goodbye was its sleep burst: the record stays, `keepWithdrawn`) or heard from again a while later
/// (the goodbye stands: `confirmGoodbyes`). See `DeclaredWatch.goodbyeGrace`.
///
/// The lease store keeps a copy (`StoreChange.saveLearned`), so that a host asleep when the proxy restarts is held
/// with them; `version` says when that copy is behind. A record not sent for `forgetAfter` is forgotten.
struct LearnedRecords: Hashable, Sendable {
    /// How long a record the host no longer sends is kept: a week.
    static let forgetAfter: Duration = .seconds(7 * 24 * 3_600)

    /// Counts of the changes made, for the lease store's copy (`DeclaredWatch.saved`): `records` counts a record
    /// kept, removed, or sent with other data than it was kept with (TTL, cache-flush bit, the case of its name);
    /// `heard` counts every record sent, and a clock step (which moves when each was sent).
    struct Version: Hashable, Sendable {
        var records: UInt64 = 0
        var heard: UInt64 = 0
    }

    struct Entry: Hashable, Sendable {
        /// As the host last sent it.
        var record: DNSRecord
        /// When it was first kept: the order in which the records are held.
        var order: UInt64
        /// When the host last sent it.
        var heard: UnixTime
        /// When the host said goodbye to it, if it has not sent it again since.
        var goodbye: UnixTime?
    }

    private var entries: [RecordIdentity: Entry] = [:]
    /// How many kept unique records have each name, lower case: the names the host claims as its own.
    private var uniqueNames: [DNSName: Int] = [:]
    private var nextOrder: UInt64 = 0
    private(set) var version = Version()

    init() {}

    /// The records the lease store kept (`stored`), at most `limit`, without those sent before `cutoff`. What is
    /// left out counts as a change, so that the store follows.
    init(restoring saved: [LearnedRecord], forgettingBefore cutoff: UnixTime, limit: Int) {
        for learned in saved {
            let identity = RecordIdentity(learned.record)
            guard learned.heard >= cutoff, learned.record.ttl > 0, entries.count < limit, entries[identity] == nil
            else {
                version.records += 1
                continue
            }
            entries[identity] = Entry(record: learned.record, order: nextOrder, heard: learned.heard)
            nextOrder += 1
            if learned.record.cacheFlush { count(learned.record.name, by: 1) }
        }
    }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// The records, in the order they were first kept.
    var records: [DNSRecord] {
        entries.values.sorted { $0.order < $1.order }.map(\.record)
    }

    /// The records with when each was last sent, in the order they were first kept: what the lease store keeps.
    var stored: [LearnedRecord] {
        entries.values.sorted { $0.order < $1.order }.map { LearnedRecord(record: $0.record, heard: $0.heard) }
    }

    /// The records the host said goodbye to and has not sent again.
    var withdrawn: [DNSRecord] {
        entries.values.filter { $0.goodbye != nil }.sorted { $0.order < $1.order }.map(\.record)
    }

    /// Whether a kept unique record has `name` (in any case).
    func claims(_ name: DNSName) -> Bool {
        uniqueNames[name.lowercased()] != nil
    }

    /// What sending one record did.
    enum Hearing: Hashable, Sendable {
        /// A new record, kept.
        case learned
        /// A record kept already, sent again: its TTL and class as now sent, any goodbye to it taken back.
        case refreshed
        /// A goodbye to a kept record: withdrawn, pending.
        case withdrawn
        /// A goodbye to a record that is not kept.
        case unknownGoodbye
        /// A new record over `limit`: not kept.
        case overLimit
    }

    /// The host sent `record` at `now`; at most `limit` records are kept.
    mutating func hear(_ record: DNSRecord, at now: UnixTime, limit: Int) -> Hearing {
        let identity = RecordIdentity(record)
        if record.ttl == 0 {
            guard var entry = entries[identity] else { return .unknownGoodbye }
            if entry.goodbye == nil { entry.goodbye = now }
            entries[identity] = entry
            return .withdrawn
        }
        if record.cacheFlush { flush(namesakesOf: record, before: now - .seconds(1)) }
        version.heard += 1
        if var entry = entries[identity] {
            let wasUnique = entry.record.cacheFlush
            if entry.record != record { version.records += 1 }
            entry.record = record
            entry.heard = now
            entry.goodbye = nil
            entries[identity] = entry
            if wasUnique != record.cacheFlush {
                count(record.name, by: record.cacheFlush ? 1 : -1)
            }
            return .refreshed
        }
        guard entries.count < limit else { return .overLimit }
        entries[identity] = Entry(record: record, order: nextOrder, heard: now)
        nextOrder += 1
        version.records += 1
        if record.cacheFlush { count(record.name, by: 1) }
        return .learned
    }

    /// The host is heard from at `now`: the goodbyes it said by `cutoff` stand, and their records go. Returns them.
    mutating func confirmGoodbyes(by cutoff: UnixTime) -> [DNSRecord] {
        let gone = entries.filter { $0.value.goodbye.map { $0 <= cutoff } ?? false }
        for (identity, entry) in gone.sorted(by: { $0.value.order < $1.value.order }) {
            remove(identity, entry)
        }
        return gone.values.sorted { $0.order < $1.order }.map(\.record)
    }

    /// Forgets the records last sent before `cutoff` (`forgetAfter` ago); returns how many.
    mutating func forget(sentBefore cutoff: UnixTime) -> Int {
        let stale = entries.filter { $0.value.heard < cutoff }
        for (identity, entry) in stale { remove(identity, entry) }
        return stale.count
    }

    /// The host was found asleep: the goodbyes it said were its sleep burst, and their records stay.
    mutating func keepWithdrawn() {
        for (identity, entry) in entries where entry.goodbye != nil {
            entries[identity]?.goodbye = nil
        }
    }

    /// The clock stepped by `step`: when each record was sent and said goodbye to moves with it, so that a step
    /// neither makes a goodbye stand nor a record older than it is.
    mutating func moveTimes(by step: Duration) {
        guard !entries.isEmpty else { return }
        version.heard += 1
        entries = entries.mapValues { entry in
            var moved = entry
            moved.heard = entry.heard + step
            moved.goodbye = entry.goodbye.map { $0 + step }
            return moved
        }
    }

    /// Removes the records of the name, type and class of `record`, other than it, sent before `cutoff`.
    private mutating func flush(namesakesOf record: DNSRecord, before cutoff: UnixTime) {
        let identity = RecordIdentity(record)
        let stale = entries.filter { key, entry in
            entry.heard < cutoff && key != identity && entry.record.type == record.type
                && entry.record.recordClass == record.recordClass
                && entry.record.name.caseInsensitiveEquals(record.name)
        }
        for (key, entry) in stale { remove(key, entry) }
    }

    private mutating func remove(_ identity: RecordIdentity, _ entry: Entry) {
        entries[identity] = nil
        version.records += 1
        if entry.record.cacheFlush { count(entry.record.name, by: -1) }
    }

    private mutating func count(_ name: DNSName, by change: Int) {
        let key = name.lowercased()
        let total = (uniqueNames[key] ?? 0) + change
        uniqueNames[key] = total > 0 ? total : nil
    }
}

/// What the proxy asked the link about a declared host's services (`SleepProxyCore.askForServices`).
struct ServiceQuestions: Hashable, Sendable {
    /// The most service types asked after for one host.
    static let typeLimit = 16
    /// How long before the enumeration is asked again, while the host has not answered it.
    static let askAgainAfter: Duration = .seconds(60)

    /// When the service-type enumeration was last asked.
    var askedAt: UnixTime?
    /// Whether the host answered it.
    var answered = false
    /// The types asked after, lower case.
    var types: Set<DNSName> = []
}

extension DeclaredWatch {
    /// How long after a goodbye the host may still be heard without the goodbye standing. A Mac that sleeps with
    /// no proxy to register with says goodbye to its shared records (its PTRs) just before it falls silent
    /// (mDNSCore/mDNS.c `SendSleepGoodbyes`, which marks every `kDNSRecordTypeShared` record with
    /// `RequireGoodbye` and sends them at once); the last frames of its way down may follow for a moment. A host
    /// that is heard later than this is awake, and its goodbye a withdrawal (it is asked after 10 s of silence,
    /// `Liveness.Timing.quiet`, so an awake host that falls silent after a goodbye is heard later than this).
    static let goodbyeGrace: Duration = .seconds(5)

    /// The records held for it while it sleeps with `addresses` taken over, at most `limit`: its declared records
    /// (`DeclaredHost.records`), then the records it sent while awake that are about those addresses (address
    /// records and reverse mappings of other addresses are not answered: the proxy does not hold them) and that no
    /// declared record overrides. A declared unique record overrides the learned records of its name and type (a
    /// declared service of the instance name the host announces is the one answered); a declared shared record
    /// overrides only its identical learned copy, so that the host's other services are still browsed.
    ///
    /// Learned records named after, or pointing at, a host name another machine on the link announces as its own
    /// (`othersNames`, lower case, with that machine's MAC: `SeenMachines.hostNames`) are left out, and said in
    /// `leftOut`: whoever sent them from the host's MAC, the proxy never answers for a name another machine answers
    /// for, and the host's reverse mappings do not point at it.
    func heldRecords(addresses: [IPAddress], limit: Int, othersNames: [DNSName: MACAddress] = [:]) -> (
        records: [DNSRecord], learned: Int, leftOut: [String]
    ) {
        var leftOut: [String] = []
        let learned =
            host.learnsRecords
            ? records.records.filter { record in
                if let address = record.ownAddress, !addresses.contains(address) { return false }
                guard let (name, other) = Self.othersName(in: record, othersNames) else { return true }
                let what = "\(record.name) \(record.type)"
                leftOut.append(
                    name == record.name
                        ? "\(what) is the host name \(other) announces"
                        : "\(what) points at \(name), the host name \(other) announces")
                return false
            } : []
        let hostName = learned.first { $0.type == .a || $0.type == .aaaa }?.name
        let declared = host.records(addresses: addresses, learnedHostName: hostName)
        var held = declared
        var added = 0
        for record in learned where held.count < limit {
            let overridden = declared.contains { ours in
                ours.type == record.type && ours.name.caseInsensitiveEquals(record.name)
                    && (ours.cacheFlush || HeldRecord.identical(ours, record))
            }
            guard !overridden else { continue }
            held.append(record)
            added += 1
        }
        return (held, added, leftOut)
    }

    /// The name of `record`, or the host name its SRV points at, if another machine announces it as its host name
    /// (`othersNames`), with that machine's MAC.
    private static func othersName(
        in record: DNSRecord, _ othersNames: [DNSName: MACAddress]
    ) -> (DNSName, MACAddress)? {
        guard !othersNames.isEmpty else { return nil }
        var names = [record.name]
        if case .srv(let srv) = record.rdata { names.append(srv.target) }
        for name in names {
            if let other = othersNames[name.lowercased()] { return (name, other) }
        }
        return nil
    }
}

extension DNSRecord {
    /// The address an address record gives, or a reverse mapping stands for.
    var ownAddress: IPAddress? {
        switch rdata {
        case .a(let v4): .v4(v4)
        case .aaaa(let v6): .v6(v6)
        default: ReverseMapping.address(of: self)
        }
    }
}

/// What a declared host sends while it is awake, learned (`LearnedRecords`).
extension SleepProxyCore {
    /// What the proxy does with one record a declared host sent about itself.
    enum Learning: Hashable, Sendable {
        /// Its own: kept.
        case learn
        /// Not what a host registers (NSEC, HINFO, another class, a name that is no service's): passed over quietly.
        case ignore
        /// Not its own, or outside its link: refused, and said in the host's log line.
        case refuse(String)
    }

    static let localDomain: DNSName = "local."

    /// An mDNS response from `mac` on `interface`: if `mac` is a declared host's that learns its records, the
    /// records of its answer and additional sections that are its own are kept (`LearnedRecords`), and its goodbyes
    /// withdraw them, pending. Never the records of a query (its known answers are what the asker has cached), nor
    /// of a reply to a legacy querier, the one response that repeats the question (RFC 6762 section 6.7), whose
    /// TTLs are capped at 10 s. Refused records are said in one log line a minute per host at most.
    mutating func learnDeclared(_ message: DNSMessage, from mac: MACAddress, on interface: InterfaceName, now: UnixTime)
        -> [Action]
    {
        let key = OwnerKey(interface: interface, primaryMAC: mac)
        guard message.flags.isResponse, message.flags.opcode == .query, message.questions.isEmpty,
            var watch = declared[key],
            watch.host.learnsRecords, let link = links[interface]
        else { return [] }
        let limit = configuration.maximumRecordsPerOwner
        var refused: [String] = []
        for record in message.answers + message.additionals where record.type != .opt {
            if record.ttl > 0 {
                switch learning(record, of: key, link: link) {
                case .learn: break
                case .ignore: continue
                case .refuse(let why):
                    refused.append(why)
                    continue
                }
            }
            switch watch.records.hear(record, at: now, limit: limit) {
            case .learned, .refreshed:
                // Its address records say which addresses it uses, as its frames do.
                if watch.host.learnsAddresses, record.type == .a || record.type == .aaaa,
                    let address = record.ownAddress
                {
                    watch.learn(address)
                }
            case .overLimit:
                refused.append("\(record.name) \(record.type): it has \(limit) records already, the limit")
            case .withdrawn, .unknownGoodbye:
                break
            }
        }
        var actions: [Action] = []
        if let first = refused.first, watch.refusalLogged.map({ now - $0 >= .seconds(60) }) ?? true {
            watch.refusalLogged = now
            actions.append(
                .log(
                    .notice,
                    "declared host \(watch.host.name) (\(key)) sent \(refused.count) records that are not kept: \(first) (logged at most once a minute per host)"
                ))
        }
        declared[key] = watch
        return actions + saveLearned(of: key, heardToo: false) + askForServiceTypes(in: message, of: key, link: link)
    }

    /// Asks the link which service types it has (a PTR query for `_services._dns-sd._udp.local.`, RFC 6763 section
    /// 9), so that a declared host that learns its records says what it offers now rather than at its next
    /// announcement: a machine declared while it is awake may otherwise go to sleep before it announces anything,
    /// and the goodbyes it then sends are for records the proxy never had. Its answer is asked after type by type
    /// (`askForServiceTypes`), and the responses are learned as any other. Asked when the host is first watched,
    /// and again when it is heard until it answers, at most once a minute; one query, to one group, as a browser
    /// asks.
    mutating func askForServices(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard var watch = declared[key], watch.host.learnsRecords, !watch.questions.answered,
            watch.questions.askedAt.map({ now - $0 >= ServiceQuestions.askAgainAfter }) ?? true,
            let link = links[key.interface]
        else { return [] }
        watch.questions.askedAt = now
        declared[key] = watch
        return query([DNSQuestion(name: ServiceRecords.serviceEnumeration, type: .ptr)], on: link)
    }

    /// The host's answer to the enumeration: the types it names that were not asked after yet are, in one query
    /// (at most `ServiceQuestions.typeLimit` types in all).
    mutating func askForServiceTypes(in message: DNSMessage, of key: OwnerKey, link: Link) -> [Action] {
        guard var watch = declared[key], watch.host.learnsRecords else { return [] }
        var questions: [DNSQuestion] = []
        for record in message.answers + message.additionals
        where record.ttl > 0 && record.name.caseInsensitiveEquals(ServiceRecords.serviceEnumeration) {
            guard case .ptr(let type) = record.rdata, Self.isServiceType(type) else { continue }
            watch.questions.answered = true
            guard watch.questions.types.count < ServiceQuestions.typeLimit,
                watch.questions.types.insert(type.lowercased()).inserted
            else { continue }
            questions.append(DNSQuestion(name: type, type: .ptr))
        }
        declared[key] = watch
        return questions.isEmpty ? [] : query(questions, on: link)
    }

    /// A multicast query (QM: the answers go to the whole link) to the first group of `link`.
    private func query(_ questions: [DNSQuestion], on link: Link) -> [Action] {
        guard let group = Self.groups(of: link).first,
            let bytes = try? DNSMessage(id: 0, flags: DNSFlags(response: false, opcode: .query), questions: questions)
                .encoded()
        else { return [] }
        return [.sendMDNS(MDNSTransmission(interface: link.name, bytes: bytes, destination: group))]
    }

    /// The lease store's copy of the records learned from the declared host of `key`, if it is behind: at once when
    /// a record was kept, removed or sent with other data, and when only the times they were sent changed, if
    /// `heardToo` (on the hourly check, `checkLearned`, and when the host is found asleep). So a host that repeats
    /// its records costs a write an hour at most, not one per announcement.
    mutating func saveLearned(of key: OwnerKey, heardToo: Bool) -> [Action] {
        guard var watch = declared[key], watch.host.learnsRecords else { return [] }
        let version = watch.records.version
        guard version.records != watch.saved.records || (heardToo && version.heard != watch.saved.heard) else {
            return []
        }
        watch.saved = version
        declared[key] = watch
        return [.store(.saveLearned(key, watch.records.stored))]
    }

    /// The hourly look over the records learned from the declared host of `key`, when it is due: those it has not
    /// sent for a week (`LearnedRecords.forgetAfter`) are forgotten (a host held already keeps the records it was
    /// taken over with), and the store follows, with the times the others were last sent.
    mutating func checkLearned(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard var watch = declared[key], let due = watch.checkAt, due <= now else { return [] }
        watch.checkAt = now + DeclaredWatch.checkInterval
        let forgotten = watch.records.forget(sentBefore: now - LearnedRecords.forgetAfter)
        declared[key] = watch
        let saved = saveLearned(of: key, heardToo: true)
        guard forgotten > 0 else { return saved }
        return saved + [
            .log(
                .info,
                "declared host \(watch.host.name) (\(key)): forgot \(forgotten) learned records it has not sent for a week"
            )
        ]
    }

    /// What the lease store should hold of the records learned from each declared host, for a store that fell
    /// behind: those of every host that learns and has some.
    public var storedLearned: [OwnerKey: [LearnedRecord]] {
        var stored: [OwnerKey: [LearnedRecord]] = [:]
        for (key, watch) in declared where watch.host.learnsRecords && !watch.records.isEmpty {
            stored[key] = watch.records.stored
        }
        return stored
    }

    /// Whether `record`, sent by the declared host of `key` from its own MAC, is its own to keep: its host name's
    /// address records for addresses on the link, its reverse mappings, its services' PTR, SRV and TXT records and
    /// their type's entry in the service-type enumeration. Its SRV records may name another host name than the one
    /// it announces addresses under. A record whose name another held host holds as unique, or another declared
    /// host claims (`DeclaredWatch.claims`), is refused, as is an address held for another host: learned data
    /// never answers for another machine.
    func learning(_ record: DNSRecord, of key: OwnerKey, link: Link) -> Learning {
        guard record.recordClass == .internet else { return .ignore }
        let what = "\(record.name) \(record.type)"
        switch record.rdata {
        case .a, .aaaa:
            guard let address = record.ownAddress else { return .ignore }
            guard record.name.hasSuffix(Self.localDomain) else { return .refuse("\(what) is not a .local name") }
            if let refusal = refusal(of: address, what: what, key: key, link: link) { return .refuse(refusal) }
            return claimant(of: record.name, other: key).map { .refuse("\(what) is \($0)") } ?? .learn
        case .ptr(let target):
            if let address = ReverseMapping.address(of: record.name) {
                if let refusal = refusal(of: address, what: what, key: key, link: link) { return .refuse(refusal) }
                return .learn
            }
            guard
                record.name.caseInsensitiveEquals(ServiceRecords.serviceEnumeration) || Self.isServiceType(record.name)
            else { return .ignore }
            return claimant(of: target, other: key).map { .refuse("\(what) \(target) is \($0)") } ?? .learn
        case .srv(let srv):
            guard Self.isServiceInstance(record.name) else { return .ignore }
            if let other = claimant(of: record.name, other: key) { return .refuse("\(what) is \(other)") }
            return claimant(of: srv.target, other: key).map { .refuse("\(what) points at \(srv.target), \($0)") }
                ?? .learn
        case .txt:
            guard Self.isServiceInstance(record.name) else { return .ignore }
            return claimant(of: record.name, other: key).map { .refuse("\(what) is \($0)") } ?? .learn
        default:
            return .ignore
        }
    }

    /// Why `address`, in a record a declared host sent, is not its own to answer for: off the link, not a host's
    /// address, or held for another host.
    private func refusal(of address: IPAddress, what: String, key: OwnerKey, link: Link) -> String? {
        guard link.isOnLink(address), !address.isUnspecifiedOrMulticast else {
            return "\(what): \(address) is not on \(link.name)"
        }
        if let holder = hosts.holder(of: address, on: key.interface), holder != key {
            return "\(what): \(address) is held for \(holder.primaryMAC)"
        }
        return nil
    }

    /// Who other than the host of `key` has `name` as its own on its link: a held host with a unique record of
    /// the name, or a declared host that claims it.
    private func claimant(of name: DNSName, other key: OwnerKey) -> String? {
        if let holder = hosts.uniqueHolder(of: name, on: key.interface), holder != key {
            return "held for \(holder.primaryMAC)"
        }
        for (other, watch) in declared where other != key && other.interface == key.interface && watch.claims(name) {
            return "declared host \(watch.host.name)'s"
        }
        return nil
    }

    /// `_type._tcp.local.` or `_type._udp.local.`, or a subtype of one (`_printer._sub._http._tcp.local.`).
    static func isServiceType(_ name: DNSName) -> Bool {
        let count = name.labelCount
        guard count == 3 || (count == 5 && name.label(at: 1).map(Self.lowercased) == "_sub") else { return false }
        return isTypeSuffix(name.droppingFirstLabels(count - 3))
    }

    /// `Instance Name._type._tcp.local.` (or `_udp`): one instance label of any bytes, then the type.
    static func isServiceInstance(_ name: DNSName) -> Bool {
        name.labelCount == 4 && isTypeSuffix(name.droppingFirstLabels(1))
    }

    /// `_type._tcp.local.` or `_type._udp.local.`
    private static func isTypeSuffix(_ type: DNSName) -> Bool {
        guard type.labelCount == 3, type.hasSuffix(localDomain), let service = type.label(at: 0),
            service.first == UInt8(ascii: "_"), let transport = type.label(at: 1).map(Self.lowercased)
        else { return false }
        return transport == "_tcp" || transport == "_udp"
    }

    private static func lowercased(_ label: [UInt8]) -> String {
        String(decoding: label, as: UTF8.self).lowercased()
    }
}
