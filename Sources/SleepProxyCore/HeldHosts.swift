import DNSWire
import NetworkAddresses

/// Every held host and every index over them, kept in step by this type alone: the hosts by owner, their names
/// and records by digest (for answers and goodbyes), the unique names and who holds each, the hosts by wake MAC,
/// the held addresses (per packet, and as the prefixes the capture watches), the solicited-node groups joined,
/// each host's lease expiry and next step, and a `generation` that changes whenever a change may alter an answer.
///
/// The rules (what to hold, when to claim, what to send) are the core's; this type only keeps the books.
struct HeldHosts: Sendable {
    private var storage: [OwnerKey: HeldHost] = [:]
    /// Hosts changed or removed since the last `refreshSteps`, whose next step is to be looked at again.
    private var changed: Set<OwnerKey> = []
    /// How many hosts each interface holds (the host limit is checked per datagram).
    private var counts: [InterfaceName: Int] = [:]
    /// Records held by all owners together.
    private(set) var recordCount = 0
    /// Changes whenever held records, a host's wake or its record probes change, and when a record probe ends:
    /// everything an answer depends on. A frame that only steps a take-over or refreshes a keepalive leaves it.
    private(set) var generation: UInt64 = 0
    /// When record probes end (a silent record answers from then on): each moves `generation` on.
    private var probeEnds = DeadlineHeap<Bool>()

    /// Unique names to the owners whose records claim them (see `HeldRecord.claimsUniqueName`) or carry the
    /// cache-flush bit, in the order they came: the first that still claims it holds it (`uniqueHolder`), and only
    /// these owners can have a record another host's answer conflicts with (`uniqueCandidates`). A shared name
    /// (`_ssh._tcp.local.`, held by every host with ssh) has none, however many hosts hold it.
    private var uniqueNames: [NameDigest: Holders] = [:]
    /// Owners by interface and wake MAC (the host's own traffic comes from it): who speaks for itself again.
    private var wakeMACs: [LinkMAC: Holders] = [:]
    /// Every held name to the owners holding records with it, for answering queries: an entry is a number and a
    /// list, not a copy of the name.
    private var names: [NameDigest: Holders] = [:]
    /// The held records of shared names (held by two owners or more) to the owners holding them (once per copy),
    /// so that a scheduled response or a goodbye finds in one lookup whether a record is still held and by whom,
    /// however many hosts share its name (`_ssh._tcp.local.` is held by every host with ssh). A record of a name
    /// one owner holds is found through `names` (that owner's records are checked); most names are one host's
    /// (its host name, its service instances, its reverse mappings), and their records are not entered here. A
    /// name that was shared and is one owner's again keeps that owner's entries until it goes. The holders' own
    /// records are checked.
    private var records: [RecordDigest: Holders] = [:]

    /// Held addresses to their owner's primary MAC (the interface is the key's), for the per-packet check.
    private var addresses: [NeighbourKey: MACAddress] = [:]
    /// The same addresses per interface as the capture watches them, kept up to date as addresses come and go
    /// (a few dictionary updates each, however many are held).
    private var watched: [InterfaceName: WatchedPrefixes] = [:]
    /// The prefixes last handed to the shell for each interface: a change of addresses that leaves them as they
    /// are (the usual case with many held) is not passed on.
    private var watchedAnnounced: [InterfaceName: [Link.Prefix]] = [:]
    /// While set (during a restore or a batch of registrations), interfaces whose address list changed, to be
    /// announced once at the end.
    private(set) var deferredListChanges: Set<InterfaceName>?
    /// Held addresses per solicited-node group: two addresses can share one, joined once.
    private var groupUsers: [GroupKey: Int] = [:]

    /// Each owner's lease expiry (its earliest record expiry), while its lease counts.
    private var expiries = KeyedDeadlines<OwnerKey>()
    /// Each host's next step on a served link (see `HeldHost.nextStep`).
    private var steps = KeyedDeadlines<OwnerKey>()

    // MARK: The hosts

    subscript(key: OwnerKey) -> HeldHost? { storage[key] }

    var keys: Dictionary<OwnerKey, HeldHost>.Keys { storage.keys }
    var values: Dictionary<OwnerKey, HeldHost>.Values { storage.values }
    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    /// The owners, as a view over the table (nothing is copied).
    var owners: HeldOwners { HeldOwners(storage) }

    /// The number of hosts held on `interface`.
    func count(on interface: InterfaceName) -> Int { counts[interface] ?? 0 }

    /// Changes a host in a way that may alter what is answered for it: its state (a wake) or its record probes.
    @discardableResult
    mutating func update<Result>(_ key: OwnerKey, _ change: (inout HeldHost) -> Result) -> Result? {
        guard let index = storage.index(forKey: key) else { return nil }
        let probes = storage.values[index].probes
        let result = change(&storage.values[index])
        let after = storage.values[index].probes
        if after != probes {
            // Each end once, among the few distinct probes (not one per record).
            let before = probes.distinctValues
            noteProbeEnds(after.distinctValues.lazy.filter { !before.contains($0) }.map(\.verifiedAt))
        }
        generation &+= 1
        changed.insert(key)
        return result
    }

    /// Changes what the proxy does for a host without changing what it answers: its take-overs, neighbour
    /// entries, keepalives, answered message IDs, log and policy memories. `generation` stays.
    @discardableResult
    mutating func updateService<Result>(_ key: OwnerKey, _ change: (inout HeldHost) -> Result) -> Result? {
        guard let index = storage.index(forKey: key) else { return nil }
        #if DEBUG
            let before = (storage.values[index].owner, storage.values[index].state, storage.values[index].probes)
        #endif
        let result = change(&storage.values[index])
        #if DEBUG
            let host = storage.values[index]
            assert(
                host.owner == before.0 && host.state == before.1 && host.probes == before.2,
                "updateService changed what is answered")
        #endif
        changed.insert(key)
        return result
    }

    /// Notes when record probes end, each time once: the probes a registration or a restore starts end together,
    /// and one entry moves `generation` on for all of them.
    private mutating func noteProbeEnds(_ ends: some Sequence<UnixTime>) {
        var noted: [UnixTime] = []
        for end in ends where !noted.contains(end) {
            noted.append(end)
            probeEnds.push(true, at: end)
        }
    }

    /// Adds a host to the table and to every index.
    mutating func insert(_ host: HeldHost) {
        let owner = host.owner
        let key = owner.key
        if storage.updateValue(host, forKey: key) == nil { counts[key.interface, default: 0] += 1 }
        changed.insert(key)
        generation &+= 1
        noteProbeEnds(host.probes.distinctValues.map(\.verifiedAt))
        recordCount += owner.records.count
        let mac = key.primaryMAC
        var digests = NameDigests(interface: key.interface)
        let held = owner.records
        for position in held.indices {
            // The name, type and flag are read in place; the whole record is built only for the index of records.
            let recordName = held.name(at: position)
            let name = digests[recordName]
            // Held before by this owner alone: not shared; by another alone: shared from now on.
            let single: MACAddress?
            let shared: Bool
            if let slot = names.index(forKey: name) {
                single = names.values[slot].only
                shared = single != mac
                names.values[slot].appendUnlessLast(mac)
            } else {
                single = nil
                shared = false
                names[name] = [mac]
            }
            if let single, single != mac {
                indexRecords(of: OwnerKey(interface: key.interface, primaryMAC: single), named: name)
            }
            if shared { records[RecordDigest(held.record(at: position), name: name), default: []].append(mac) }
            if held.isUnique(at: position)
                || HeldRecord.claimsUniqueName(type: held.type(at: position), name: recordName)
            {
                uniqueNames[name, default: []].appendUnlessLast(mac)
            }
        }
        wakeMACs[LinkMAC(interface: key.interface, mac: owner.wakeMAC), default: []].append(mac)
        expiries[key] = owner.expiresAt
    }

    /// Enters the records of `key` named by `name` in `records`: the name, one owner's until now, is shared.
    private mutating func indexRecords(of key: OwnerKey, named name: NameDigest) {
        guard let index = storage.index(forKey: key) else { return }
        let held = storage.values[index].owner.records
        var digests = NameDigests(interface: key.interface)
        for position in held.indices where digests[held.name(at: position)] == name {
            let digest = RecordDigest(held.record(at: position), name: name)
            // Entered already while the name was shared before.
            if records[digest]?.contains(key.primaryMAC) == true { continue }
            records[digest, default: []].append(key.primaryMAC)
        }
    }

    /// Takes a host out of the table and every index but the addresses: its take-overs are the caller's to stop
    /// first.
    @discardableResult
    mutating func remove(_ key: OwnerKey) -> HeldHost? {
        guard let host = storage.removeValue(forKey: key) else { return nil }
        let count = (counts[key.interface] ?? 1) - 1
        counts[key.interface] = count == 0 ? nil : count
        changed.insert(key)
        generation &+= 1
        let owner = host.owner
        let mac = key.primaryMAC
        recordCount -= owner.records.count
        var heldNames = Set<NameDigest>()
        var claimed = Set<NameDigest>()
        var digests = NameDigests(interface: key.interface)
        let held = owner.records
        for position in held.indices {
            let recordName = held.name(at: position)
            let name = digests[recordName]
            heldNames.insert(name)
            if held.isUnique(at: position)
                || HeldRecord.claimsUniqueName(type: held.type(at: position), name: recordName)
            {
                claimed.insert(name)
            }
            // Only records of names shared at some time are in the index of records.
            guard !records.isEmpty else { continue }
            let digest = RecordDigest(held.record(at: position), name: name)
            guard var holders = records.removeValue(forKey: digest) else { continue }
            holders.removeFirst(mac)
            if !holders.isEmpty { records[digest] = holders }
        }
        for name in heldNames {
            names[name]?.removeAll(mac)
            if names[name]?.isEmpty == true { names[name] = nil }
        }
        for name in claimed {
            uniqueNames[name]?.removeAll(mac)
            if uniqueNames[name]?.isEmpty == true { uniqueNames[name] = nil }
        }
        let waking = LinkMAC(interface: key.interface, mac: owner.wakeMAC)
        wakeMACs[waking]?.removeFirst(mac)
        if wakeMACs[waking]?.isEmpty == true { wakeMACs[waking] = nil }
        expiries[key] = nil
        return host
    }

    /// Replaces a held host's records, keeping what the proxy does for it (take-overs, probes of records it still
    /// holds, wake).
    mutating func replaceRecords(of key: OwnerKey, with owner: Owner) {
        guard var host = remove(key) else { return }
        host.probes = host.probes.moved(from: host.owner.records, to: owner.records)
        host.owner = owner
        insert(host)
    }

    /// Reserves room in the indexes for `incoming` more records, so that they grow once rather than by doubling
    /// (each doubling rehashes every entry).
    mutating func reserveCapacity(records incoming: Int, hosts incomingHosts: Int) {
        names.reserveCapacity(names.count + incoming / 2)
        uniqueNames.reserveCapacity(uniqueNames.count + incoming / 4)
        storage.reserveCapacity(storage.count + incomingHosts)
        changed.reserveCapacity(changed.count + incomingHosts)
        wakeMACs.reserveCapacity(wakeMACs.count + incomingHosts)
        // A host has an address or two of each family: their entries grow once too.
        addresses.reserveCapacity(addresses.count + 2 * incomingHosts)
    }

    // MARK: Who holds what

    /// Calls `body` with each record of the host of `key` named `name` (ignoring case) and of `type` (nil: any),
    /// whether the host answers it at `now`, and whether the host is being woken whole; `body` returns false to
    /// stop. Reads the host in place: the lookups made for every question copy neither the host nor its records.
    func forEachRecord(
        of key: OwnerKey, named name: DNSName, type: DNSType?, at now: UnixTime,
        _ body: (DNSRecord, _ answered: Bool, _ wakingWhole: Bool) -> Bool
    ) {
        guard let index = storage.index(forKey: key) else { return }
        let records = storage.values[index].owner.records
        let wakingWhole = storage.values[index].isWakingWhole
        for position in records.indices {
            if let type, records.type(at: position) != type { continue }
            guard records.nameEquals(at: position, ignoringCase: name) else { continue }
            let answered = storage.values[index].answers(recordAt: position, at: now)
            guard body(records.record(at: position), answered, wakingWhole) else { return }
        }
    }

    /// Whether the host of `key` holds `record` (exactly as received) and answers it at `now`. Looks at the host
    /// in place: a lookup made for every record of every multicast response copies nothing.
    func holds(_ record: DNSRecord, key: OwnerKey, answeringAt now: UnixTime) -> Bool {
        guard let index = storage.index(forKey: key) else { return false }
        let held = storage.values[index].owner.records
        for position in held.indices where held.type(at: position) == record.type && held.record(at: position) == record
        {
            return storage.values[index].answers(recordAt: position, at: now)
        }
        return false
    }

    /// Whether the host of `key` holds a record claiming the unique `name` (see `HeldRecord.claimsUniqueName`).
    func claims(_ name: DNSName, key: OwnerKey) -> Bool {
        guard let index = storage.index(forKey: key) else { return false }
        let held = storage.values[index].owner.records
        return held.indices.contains { position in
            held.nameEquals(at: position, ignoringCase: name)
                && HeldRecord.claimsUniqueName(type: held.type(at: position), name: name)
        }
    }

    /// The owners on `interface` that may hold a unique record named `name` (one claiming the name, or with the
    /// cache-flush bit): those another host's record of that name can conflict with. Their records are to be
    /// checked; owners holding only shared records of the name are never among them.
    func uniqueCandidates(of name: DNSName, on interface: InterfaceName) -> LazyMapSequence<Holders, OwnerKey> {
        (uniqueNames[NameDigest(name, interface: interface)] ?? []).keys(on: interface)
    }

    /// The owners on `interface` whose wake MAC is `mac`: the hosts whose own traffic a frame from `mac` is.
    func owners(wakingAt mac: MACAddress, on interface: InterfaceName) -> [OwnerKey] {
        Array((wakeMACs[LinkMAC(interface: interface, mac: mac)] ?? []).keys(on: interface))
    }

    /// The owner holding the unique `name` on `interface`, if any.
    func uniqueHolder(of name: DNSName, on interface: InterfaceName) -> OwnerKey? {
        guard let claimants = uniqueNames[NameDigest(name, interface: interface)] else { return nil }
        return claimants.keys(on: interface).first { claims(name, key: $0) }
    }

    /// The owners holding records named `name` (in any case) on `interface`; some may hold only names with the
    /// same digest, so each holder's records are to be checked for the name.
    func holders(of name: DNSName, on interface: InterfaceName) -> LazyMapSequence<Holders, OwnerKey> {
        (names[NameDigest(name, interface: interface)] ?? []).keys(on: interface)
    }

    /// The owners that may hold `record` on `interface`: the one owner of its name, or for a shared name those
    /// holding a record of its digest (once per copy). Each holder's records are to be checked for the record.
    func holders(of record: DNSRecord, on interface: InterfaceName) -> LazyMapSequence<Holders, OwnerKey> {
        let name = NameDigest(record.name, interface: interface)
        return holders(of: record, name: name, digest: RecordDigest(record, name: name), on: interface)
    }

    /// The same, for a record whose digests the caller has.
    func holders(of record: DNSRecord, name: NameDigest, digest: RecordDigest, on interface: InterfaceName)
        -> LazyMapSequence<Holders, OwnerKey>
    {
        guard let named = names[name] else { return Holders().keys(on: interface) }
        if named.only != nil { return named.keys(on: interface) }
        return (records[digest] ?? []).keys(on: interface)
    }

    /// What is wrong with the indexes of names and records, for tests: each held record's name lists its owner,
    /// and `holders(of:)` finds every owner holding a record, once.
    func indexProblems() -> [String] {
        var problems: [String] = []
        for (key, host) in storage {
            for held in host.owner.records {
                let record = held.record
                let name = NameDigest(record.name, interface: key.interface)
                if names[name]?.contains(key.primaryMAC) != true {
                    problems.append("\(key): \(record.name) is not among the names held")
                }
                let found = Array(holders(of: record, on: key.interface))
                if !found.contains(key) { problems.append("\(key): \(record.name) \(record.type) is not found held") }
                if Set(found).count != found.count {
                    problems.append("\(key): \(record.name) \(record.type) has a holder listed twice: \(found)")
                }
            }
        }
        return problems
    }

    // MARK: Addresses

    /// The owner holding `address` on `interface`, if any: one lookup, for every captured packet.
    func holder(of address: IPAddress, on interface: InterfaceName) -> OwnerKey? {
        addresses[NeighbourKey(interface: interface, address: address)].map {
            OwnerKey(interface: interface, primaryMAC: $0)
        }
    }

    /// Claims `address` for `key`: false when another owner holds it already (it stays with that owner).
    mutating func claim(_ address: IPAddress, for key: OwnerKey) -> Bool {
        let held = NeighbourKey(interface: key.interface, address: address)
        if let other = addresses[held] { return other == key.primaryMAC }
        addresses[held] = key.primaryMAC
        watched[key.interface, default: WatchedPrefixes()].add(address)
        return true
    }

    /// Lets go of `address` if `key` holds it.
    mutating func release(_ address: IPAddress, of key: OwnerKey) {
        let held = NeighbourKey(interface: key.interface, address: address)
        guard addresses[held] == key.primaryMAC else { return }
        addresses[held] = nil
        watched[key.interface]?.remove(address)
        if watched[key.interface]?.isEmpty == true { watched[key.interface] = nil }
    }

    /// The addresses held on `interface`, sorted (goes through every held address).
    func addressList(on interface: InterfaceName) -> [IPAddress] {
        addresses.keys.filter { $0.interface == interface }.map(\.address).sorted()
    }

    /// The prefixes the capture on `interface` is to watch (at most `limit`), if they differ from those handed
    /// over last; noted as handed over.
    mutating func newWatchedPrefixes(on interface: InterfaceName, limit: Int) -> [Link.Prefix]? {
        let prefixes = watched[interface]?.prefixes(limit: limit) ?? []
        guard watchedAnnounced[interface] != prefixes else { return nil }
        watchedAnnounced[interface] = prefixes
        return prefixes
    }

    /// The shell of `interface` is gone: the next one is handed its prefixes whatever they are.
    mutating func forgetWatchedPrefixes(on interface: InterfaceName) {
        watchedAnnounced[interface] = nil
    }

    /// One more held address in `group`: true for the first, whose join is to go out.
    mutating func joinGroup(_ group: IPv6Address, on interface: InterfaceName) -> Bool {
        let key = GroupKey(interface: interface, group: group)
        groupUsers[key, default: 0] += 1
        return groupUsers[key] == 1
    }

    /// One held address fewer in `group`: true for the last, whose leave is to go out.
    mutating func leaveGroup(_ group: IPv6Address, on interface: InterfaceName) -> Bool {
        let key = GroupKey(interface: interface, group: group)
        guard let users = groupUsers[key] else { return false }
        groupUsers[key] = users > 1 ? users - 1 : nil
        return users == 1
    }

    /// From now on, address lists that change are noted (`noteListChange`) rather than announced one by one.
    mutating func deferListChanges() {
        if deferredListChanges == nil { deferredListChanges = [] }
    }

    /// Notes that the list of `interface` changed: true when it is to be announced now (nothing is deferred).
    mutating func noteListChange(on interface: InterfaceName) -> Bool {
        guard deferredListChanges != nil else { return true }
        deferredListChanges?.insert(interface)
        return false
    }

    /// Ends deferring: the interfaces whose held addresses changed meanwhile.
    mutating func endDeferringListChanges() -> Set<InterfaceName> {
        let changed = deferredListChanges ?? []
        deferredListChanges = nil
        return changed
    }

    // MARK: Deadlines

    /// The earliest lease expiry of the owners whose lease counts.
    var nextLeaseExpiry: UnixTime? { expiries.first?.time }

    /// Takes out the owners whose lease ended by `now`: their lease no longer counts (a host being woken stays).
    mutating func popExpired(by now: UnixTime) -> [OwnerKey] { expiries.popDue(by: now) }

    /// The earliest step of any host on a served link.
    var nextStep: UnixTime? { steps.first?.time }

    /// Takes out the hosts with a step due by `now`, in key order. They are looked at again at the next
    /// `refreshSteps`, whether or not they change meanwhile.
    mutating func popDueSteps(by now: UnixTime) -> [OwnerKey] {
        let due = steps.popDue(by: now)
        changed.formUnion(due)
        // In a steady order when several are due at once; one alone (most ticks) is not sorted.
        return due.count > 1 ? due.sorted() : due
    }

    /// Brings the next step of the hosts changed since the last call up to date (only those: not every host after
    /// every packet). A host on an interface no longer served has none.
    mutating func refreshSteps(isServed: (InterfaceName) -> Bool) {
        guard !changed.isEmpty else { return }
        for key in changed {
            steps[key] = storage[key].flatMap { isServed(key.interface) ? $0.nextStep : nil }
        }
        changed.removeAll(keepingCapacity: true)
    }

    /// The same for every host, after a change that concerns them all (a link served or not, a clock step).
    mutating func refreshAllSteps(isServed: (InterfaceName) -> Bool) {
        changed.removeAll(keepingCapacity: true)
        var all: [OwnerKey: UnixTime] = [:]
        for host in storage.values where isServed(host.key.interface) {
            if let step = host.nextStep { all[host.key] = step }
        }
        steps.replaceAll(with: all)
    }

    /// Moves `generation` on if a record probe ended by `now`: answers cached before that may lack its record.
    mutating func noteProbeEnds(by now: UnixTime) {
        guard let first = probeEnds.first, first.time <= now else { return }
        _ = probeEnds.popDue(by: now)
        generation &+= 1
    }

    /// Moves every probe end by `step` (the clock stepped).
    mutating func moveProbeEnds(by step: Duration) {
        probeEnds.update { time, _ in time + step }
    }
}

extension HeldHost {
    /// The earliest moment something is due for this host: a take-over step or keepalive (not while the whole
    /// host is being woken: they wait), the end of a record probe, a wake round.
    var nextStep: UnixTime? {
        var earliest: UnixTime?
        func consider(_ time: UnixTime?) {
            if let time, earliest.map({ time < $0 }) ?? true { earliest = time }
        }
        if !isWakingWhole {
            for entry in takeovers { consider(entry.takeover.next) }
            for kept in keepalives.values { consider(kept.nextSend) }
        }
        for probe in probes.values { consider(probe.settledAt) }
        consider(wake?.next)
        return earliest
    }
}

/// The held owners, as a view over the table of held hosts: looking one up, counting or listing them copies
/// nothing (`SleepProxyCore.owners`).
public struct HeldOwners: Collection, Equatable, Sendable {
    public struct Index: Comparable, Sendable {
        let base: Dictionary<OwnerKey, HeldHost>.Index

        public static func < (lhs: Index, rhs: Index) -> Bool { lhs.base < rhs.base }
    }
    public typealias Element = (key: OwnerKey, value: Owner)

    private let hosts: [OwnerKey: HeldHost]

    init(_ hosts: [OwnerKey: HeldHost]) { self.hosts = hosts }

    public var startIndex: Index { Index(base: hosts.startIndex) }
    public var endIndex: Index { Index(base: hosts.endIndex) }
    public func index(after index: Index) -> Index { Index(base: hosts.index(after: index.base)) }
    public subscript(position: Index) -> Element {
        let entry = hosts[position.base]
        return (entry.key, entry.value.owner)
    }
    public var count: Int { hosts.count }
    public var isEmpty: Bool { hosts.isEmpty }

    /// The owner of `key`, if it is held.
    public subscript(key: OwnerKey) -> Owner? { hosts[key]?.owner }

    public var keys: LazyMapCollection<HeldOwners, OwnerKey> { lazy.map(\.key) }
    public var values: LazyMapCollection<HeldOwners, Owner> { lazy.map(\.value) }

    public static func == (lhs: HeldOwners, rhs: HeldOwners) -> Bool {
        lhs.count == rhs.count && lhs.hosts.allSatisfy { rhs.hosts[$0.key]?.owner == $0.value.owner }
    }
}

/// The owners holding a record or a name on one interface (the indexes of `HeldHosts`), by primary MAC, in the
/// order they came: the interface is the index key's, known to whoever looks. The first is kept inline: most
/// records and names have one holder, and a list of its own for each of a quarter of a million records would be
/// as many allocations.
struct Holders: Sequence, ExpressibleByArrayLiteral, Sendable {
    /// One holder inline, more in an array: eight bytes in all, for each of the hundreds of thousands of entries in
    /// the indexes (most names and records have one holder).
    private enum Storage: Sendable {
        case none
        case one(MACAddress)
        /// Two or more.
        case many([MACAddress])
    }

    private var storage = Storage.none

    init(arrayLiteral macs: MACAddress...) {
        for mac in macs { append(mac) }
    }

    var isEmpty: Bool {
        if case .none = storage { true } else { false }
    }

    /// The holder, when there is exactly one.
    var only: MACAddress? {
        if case .one(let mac) = storage { mac } else { nil }
    }

    var last: MACAddress? {
        switch storage {
        case .none: nil
        case .one(let mac): mac
        case .many(let macs): macs.last
        }
    }

    mutating func append(_ mac: MACAddress) {
        switch storage {
        case .none:
            storage = .one(mac)
        case .one(let first):
            storage = .many([first, mac])
        case .many(var macs):
            storage = .none  // the array is uniquely referenced again while it grows
            macs.append(mac)
            storage = .many(macs)
        }
    }

    /// Appends `mac` unless it is the last already: an owner's records are indexed one after another, so a name
    /// or record it holds already has it last.
    mutating func appendUnlessLast(_ mac: MACAddress) {
        if last != mac { append(mac) }
    }

    /// Removes the first occurrence of `mac`, if any.
    mutating func removeFirst(_ mac: MACAddress) {
        remove(mac) { macs in
            if let index = macs.firstIndex(of: mac) { macs.remove(at: index) }
        }
    }

    /// Removes every occurrence of `mac`.
    mutating func removeAll(_ mac: MACAddress) {
        remove(mac) { macs in macs.removeAll { $0 == mac } }
    }

    /// Takes `mac` out: the one holder if it is `mac`, or from the list as `edit` does.
    private mutating func remove(_ mac: MACAddress, from edit: (inout [MACAddress]) -> Void) {
        switch storage {
        case .none:
            break
        case .one(let only):
            if only == mac { storage = .none }
        case .many(var macs):
            storage = .none  // the list is uniquely referenced while it is edited
            edit(&macs)
            storage = Self.storage(of: macs)
        }
    }

    private static func storage(of macs: [MACAddress]) -> Storage {
        switch macs.count {
        case 0: .none
        case 1: .one(macs[0])
        default: .many(macs)
        }
    }

    /// The holders as owners on `interface`.
    func keys(on interface: InterfaceName) -> LazyMapSequence<Holders, OwnerKey> {
        lazy.map { OwnerKey(interface: interface, primaryMAC: $0) }
    }

    func makeIterator() -> Iterator { Iterator(holders: self) }

    struct Iterator: IteratorProtocol {
        let holders: Holders
        var position = 0

        mutating func next() -> MACAddress? {
            defer { position += 1 }
            switch holders.storage {
            case .none: return nil
            case .one(let mac): return position == 0 ? mac : nil
            case .many(let macs): return position < macs.count ? macs[position] : nil
            }
        }
    }
}

/// A held name as the indexes of names see it: a digest of the interface and the name folded to lower case.
/// Names that differ only in case have the same digest; the rare different names with the same digest share a
/// list of holders, and whoever looks a name up checks the holders' own records for it.
struct NameDigest: Hashable, Sendable {
    let value: Int

    init(_ name: DNSName, interface: InterfaceName) {
        var hasher = Hasher()
        hasher.combine(interface)
        name.hashIgnoringCase(into: &hasher)
        value = hasher.finalize()
    }
}

/// The digests of one owner's names, each worked out once: a host's records repeat a dozen names (its host name
/// is the name of its address records and the target of every SRV), and folding and hashing a name costs more than
/// finding it again among a dozen.
struct NameDigests {
    let interface: InterfaceName
    private var known: [(name: DNSName, digest: NameDigest)] = []

    init(interface: InterfaceName) {
        self.interface = interface
    }

    subscript(name: DNSName) -> NameDigest {
        mutating get {
            let length = name.wireLength
            for entry in known where entry.name.wireLength == length && entry.name == name { return entry.digest }
            let digest = NameDigest(name, interface: interface)
            // Past a few dozen names (a registration of hundreds of records) a longer search would cost more.
            if known.count < 32 { known.append((name, digest)) }
            return digest
        }
    }
}

/// A held record as the index of holders sees it: a digest of the interface, the name folded to lower case, the
/// type and the RDATA with the names inside it folded too. Records that are the same (`sameRecord`: names in any
/// case, as DNS compares them, and as `HeldRecord.identical` does) have the same digest; the rare different records
/// with the same digest share a list of holders, and whoever looks a record up checks the holders' own records, so
/// a shared digest never makes a record count as held.
struct RecordDigest: Hashable, Sendable {
    let value: Int

    init(_ record: DNSRecord, interface: InterfaceName) {
        self.init(record, name: NameDigest(record.name, interface: interface))
    }

    /// The digest of `record`, whose name's digest (`NameDigest`, which covers the interface) is `name`.
    init(_ record: DNSRecord, name: NameDigest) {
        var hasher = Hasher()
        hasher.combine(name.value)
        hasher.combine(record.type)
        record.rdata.hashIgnoringCase(into: &hasher)
        value = hasher.finalize()
    }

    /// The same record as far as holding goes: same type, the name and the names inside the RDATA in any case
    /// (RFC 4343), the rest of the RDATA byte for byte. A cache holds `PTR Foo._ssh…` and `PTR foo._ssh…` as one
    /// record: one host's goodbye for it would take another's from every cache.
    static func sameRecord(_ a: DNSRecord, _ b: DNSRecord) -> Bool {
        a.type == b.type && a.name.caseInsensitiveEquals(b.name) && HeldRecord.sameRData(a.rdata, b.rdata)
    }
}

/// A solicited-node group joined on one interface.
struct GroupKey: Hashable, Sendable {
    var interface: InterfaceName
    var group: IPv6Address
}

/// A MAC address on one interface.
struct LinkMAC: Hashable, Sendable {
    var interface: InterfaceName
    var mac: MACAddress
}

/// An address on one interface.
struct NeighbourKey: Hashable, Sendable {
    var interface: InterfaceName
    var address: IPAddress
}
