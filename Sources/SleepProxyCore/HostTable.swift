import DNSWire
import NetworkAddresses

/// The held hosts by owner, as a dictionary that remembers which hosts changed since `takeChanged()`, so that
/// the earliest step of all hosts (`SleepProxyCore.hostDeadline`) is brought up to date from those hosts alone,
/// not from every host after every packet.
struct HostTable: Sendable {
    private(set) var storage: [OwnerKey: HeldHost] = [:]
    private var changed: Set<OwnerKey> = []
    /// How many hosts each interface holds, kept as hosts come and go (the host limit is checked per datagram).
    private var counts: [InterfaceName: Int] = [:]

    subscript(key: OwnerKey) -> HeldHost? {
        get { storage[key] }
        set {
            let had = storage[key] != nil
            storage[key] = newValue
            changed.insert(key)
            count(key, had: had, has: newValue != nil)
        }
        _modify {
            changed.insert(key)
            let had = storage[key] != nil
            defer { count(key, had: had, has: storage[key] != nil) }
            yield &storage[key]
        }
    }

    @discardableResult
    mutating func removeValue(forKey key: OwnerKey) -> HeldHost? {
        changed.insert(key)
        let removed = storage.removeValue(forKey: key)
        count(key, had: removed != nil, has: false)
        return removed
    }

    /// Whether the host of `key` holds `record` (exactly as received) and answers it at `now`. Looks at the host
    /// in place: a lookup made for every record of every multicast response copies nothing.
    func holds(_ record: DNSRecord, key: OwnerKey, answeringAt now: UnixTime) -> Bool {
        guard let index = storage.index(forKey: key) else { return false }
        let records = storage.values[index].owner.records
        for position in records.indices where records[position].record == record {
            return storage.values[index].answers(record, at: now)
        }
        return false
    }

    /// Whether the host of `key` holds a record claiming the unique `name` (see `HeldRecord.claimsUniqueName`).
    func claims(_ name: DNSName, key: OwnerKey) -> Bool {
        guard let index = storage.index(forKey: key) else { return false }
        let records = storage.values[index].owner.records
        return records.indices.contains { position in
            HeldRecord.claimsUniqueName(records[position].record)
                && records[position].record.name.caseInsensitiveEquals(name)
        }
    }

    /// The number of hosts held on `interface`.
    func count(on interface: InterfaceName) -> Int { counts[interface] ?? 0 }

    private mutating func count(_ key: OwnerKey, had: Bool, has: Bool) {
        guard had != has else { return }
        let count = (counts[key.interface] ?? 0) + (has ? 1 : -1)
        counts[key.interface] = count == 0 ? nil : count
    }

    var keys: Dictionary<OwnerKey, HeldHost>.Keys { storage.keys }
    var values: Dictionary<OwnerKey, HeldHost>.Values { storage.values }
    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    func mapValues<T>(_ transform: (HeldHost) throws -> T) rethrows -> [OwnerKey: T] {
        try storage.mapValues(transform)
    }

    /// The hosts changed (or removed) since the last call.
    mutating func takeChanged() -> Set<OwnerKey> {
        defer { changed.removeAll(keepingCapacity: true) }
        return changed
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
            for takeover in takeovers.values { consider(takeover.next) }
            for kept in keepalives.values { consider(kept.nextSend) }
        }
        for probe in probes.values { consider(probe.settledAt) }
        consider(wake?.next)
        return earliest
    }
}

/// The owners holding a record or a name on one interface (`SleepProxyCore.heldRecords`, `heldNames`,
/// `uniqueNames`), by primary MAC, in the order they came: the interface is the index key's, known to whoever
/// looks. The first is kept inline: most records and names have one holder, and a list of its own for each of a
/// quarter of a million records would be as many allocations.
struct Holders: Sequence, ExpressibleByArrayLiteral, Sendable {
    private var first: MACAddress?
    private var rest: [MACAddress] = []

    init(arrayLiteral macs: MACAddress...) {
        for mac in macs { append(mac) }
    }

    var isEmpty: Bool { first == nil }
    var last: MACAddress? { rest.last ?? first }

    mutating func append(_ mac: MACAddress) {
        if first == nil { first = mac } else { rest.append(mac) }
    }

    /// Appends `mac` unless it is the last already: an owner's records are indexed one after another, so a name
    /// or record it holds already has it last.
    mutating func appendUnlessLast(_ mac: MACAddress) {
        if last != mac { append(mac) }
    }

    /// Removes the first occurrence of `mac`, if any.
    mutating func removeFirst(_ mac: MACAddress) {
        if first == mac {
            first = rest.isEmpty ? nil : rest.removeFirst()
        } else if let index = rest.firstIndex(of: mac) {
            rest.remove(at: index)
        }
    }

    /// Removes every occurrence of `mac`.
    mutating func removeAll(_ mac: MACAddress) {
        rest.removeAll { $0 == mac }
        if first == mac { first = rest.isEmpty ? nil : rest.removeFirst() }
    }

    /// The holders as owners on `interface`.
    func keys(on interface: InterfaceName) -> LazyMapSequence<Holders, OwnerKey> {
        lazy.map { OwnerKey(interface: interface, primaryMAC: $0) }
    }

    func makeIterator() -> Iterator { Iterator(holders: self) }

    struct Iterator: IteratorProtocol {
        let holders: Holders
        var position = -1

        mutating func next() -> MACAddress? {
            defer { position += 1 }
            return position < 0 ? holders.first : position < holders.rest.count ? holders.rest[position] : nil
        }
    }
}
