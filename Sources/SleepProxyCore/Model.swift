public import DNSWire
public import NetworkAddresses

/// The name of a network interface the proxy serves (`eth0`). Everything the proxy holds is keyed by interface.
public struct InterfaceName: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public static func < (lhs: InterfaceName, rhs: InterfaceName) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { rawValue }
}

/// A sleeping host as the proxy knows it: the interface its registration arrived on and its OWNER primary MAC.
/// Never the source address: another sleep proxy may hand a host's records over.
public struct OwnerKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var interface: InterfaceName
    public var primaryMAC: MACAddress

    public init(interface: InterfaceName, primaryMAC: MACAddress) {
        self.interface = interface
        self.primaryMAC = primaryMAC
    }

    public static func < (lhs: OwnerKey, rhs: OwnerKey) -> Bool {
        (lhs.interface, lhs.primaryMAC) < (rhs.interface, rhs.primaryMAC)
    }

    public var description: String { "\(primaryMAC)%\(interface)" }
}

/// One record held for a sleeping host, exactly as it registered it.
public struct HeldRecord: Hashable, Sendable {
    /// The record as received. Its `cacheFlush` bit is the client's "unique" flag.
    public var record: DNSRecord
    /// The registration sequence number that brought this record.
    public var sequence: UInt8
    public var registeredAt: UnixTime
    public var expiresAt: UnixTime

    public init(record: DNSRecord, sequence: UInt8, registeredAt: UnixTime, expiresAt: UnixTime) {
        self.record = record
        self.sequence = sequence
        self.registeredAt = registeredAt
        self.expiresAt = expiresAt
    }

    /// Unique records (cache-flush set in the registration) are the ones the client defends as its own.
    public var isUnique: Bool { record.cacheFlush }

    /// Same name (ignoring ASCII case), type, class and RDATA: the registration replaces such a record.
    public func isIdentical(to other: DNSRecord) -> Bool {
        Self.identical(record, other)
    }

    /// RDATA equality with names inside it compared ignoring case, as DNS does.
    static func sameRData(_ a: RData, _ b: RData) -> Bool {
        switch (a, b) {
        case (.ptr(let x), .ptr(let y)): x.caseInsensitiveEquals(y)
        case (.srv(let x), .srv(let y)):
            x.priority == y.priority && x.weight == y.weight && x.port == y.port
                && x.target.caseInsensitiveEquals(y.target)
        case (.nsec(let x), .nsec(let y)): x.bitmap == y.bitmap && x.nextName.caseInsensitiveEquals(y.nextName)
        default: a == b
        }
    }
}

/// Everything held for one sleeping host on one interface.
public struct Owner: Hashable, Sendable {
    public var key: OwnerKey
    /// The MAC to wake (the OWNER wake MAC, or the primary MAC when none was sent).
    public var wakeMAC: MACAddress
    /// The SecureOn password (4 or 6 bytes), if the client sent one.
    public var password: [UInt8]?
    /// The sequence number of the current registration.
    public var sequence: UInt8
    /// When the current sequence number was first registered.
    public var registeredAt: UnixTime
    /// When a datagram of this owner was last accepted.
    public var updatedAt: UnixTime
    /// The source of the last accepted datagram (the host itself, or a proxy handing it over).
    public var lastSource: Endpoint?
    public var records: HeldRecords

    public init(
        key: OwnerKey, wakeMAC: MACAddress, password: [UInt8]? = nil, sequence: UInt8, registeredAt: UnixTime,
        updatedAt: UnixTime, lastSource: Endpoint? = nil, records: some Collection<HeldRecord>
    ) {
        self.key = key
        self.wakeMAC = wakeMAC
        self.password = password
        self.sequence = sequence
        self.registeredAt = registeredAt
        self.updatedAt = updatedAt
        self.lastSource = lastSource
        self.records = records as? HeldRecords ?? HeldRecords(records)
    }

    /// The earliest record expiry: the lease of the owner as a whole ends when any of its records does.
    public var expiresAt: UnixTime? { records.earliestExpiry }

    /// The host's own names (`imac.local`): the names of its address records, then its SRV targets, each once, in
    /// the order registered.
    public var hostNames: [String] {
        var seen = Set<String>()
        var names: [String] = []
        for held in records where held.record.type == .a || held.record.type == .aaaa {
            let name = Self.text(held.record.name)
            if seen.insert(name.lowercased()).inserted { names.append(name) }
        }
        for held in records {
            guard case .srv(let srv) = held.record.rdata else { continue }
            let name = Self.text(srv.target)
            if seen.insert(name.lowercased()).inserted { names.append(name) }
        }
        return names
    }

    /// The first of `hostNames`, found without the others: how a host is named in log lines and events.
    public var firstHostName: String? {
        for index in records.indices where records.type(at: index) == .a || records.type(at: index) == .aaaa {
            return Self.text(records.name(at: index))
        }
        for index in records.indices {
            if case .srv(let srv) = records[index].record.rdata { return Self.text(srv.target) }
        }
        return nil
    }

    /// The host's service instances (`iMac._ssh._tcp.local`): the names of its SRV records, each once.
    public var serviceInstances: [String] {
        var seen = Set<String>()
        return records.compactMap { held -> String? in
            guard held.record.type == .srv else { return nil }
            let name = Self.text(held.record.name)
            return seen.insert(name.lowercased()).inserted ? name : nil
        }
    }

    /// A name in presentation form without its trailing dot, as people write host names.
    public static func text(_ name: DNSName) -> String {
        let text = name.description
        return text.count > 1 && text.hasSuffix(".") ? String(text.dropLast()) : text
    }

    /// The addresses to take over, from the reverse-mapping PTRs (never from A or AAAA records).
    /// In the order of the records, each once; only PTR records are looked at, none is copied.
    public var proxiedAddresses: [IPAddress] {
        var addresses: [IPAddress] = []
        for index in records.indices where records.type(at: index) == .ptr {
            guard let address = ReverseMapping.address(of: records.record(at: index)), !addresses.contains(address)
            else { continue }
            addresses.append(address)
        }
        return addresses
    }
}

/// A held host's records, packed (`PackedRecords`): a record and its lease times are built when read. The lease
/// times (sequence, registration, expiry) are few per host, each kept once and numbered by the records' tags.
///
/// A change builds the whole host's records again: they change with a registration, a clock step or a release,
/// never per packet. Read `record(at:)`, `type(at:)` and `name(at:)` where the times or the whole record are not
/// needed.
public struct HeldRecords: RandomAccessCollection, RangeReplaceableCollection, ExpressibleByArrayLiteral, Hashable,
    Sendable
{
    private var packed: PackedRecords
    private var times: [Times]

    /// The lease times of some of a host's records.
    private struct Times: Hashable, Sendable {
        var sequence: UInt8
        var registeredAt: UnixTime
        var expiresAt: UnixTime
    }

    public init() {
        packed = PackedRecords()
        times = []
    }

    public init(_ records: some Sequence<HeldRecord>) {
        var dnsRecords: [DNSRecord] = []
        var times: [(sequence: UInt8, registeredAt: UnixTime, expiresAt: UnixTime)] = []
        dnsRecords.reserveCapacity(records.underestimatedCount)
        times.reserveCapacity(records.underestimatedCount)
        for held in records {
            dnsRecords.append(held.record)
            times.append((held.sequence, held.registeredAt, held.expiresAt))
        }
        self.init(dnsRecords, times: times)
    }

    /// `records`, each with the times at the same position in `times`.
    public init(_ records: [DNSRecord], times: [(sequence: UInt8, registeredAt: UnixTime, expiresAt: UnixTime)]) {
        precondition(records.count == times.count, "\(records.count) records with \(times.count) times")
        var distinct: [Times] = []
        // Records of one datagram share their times, so the last times usually serve again; a host has a few
        // distinct ones, looked for one by one, and past a dozen (one per datagram, from a host sending one
        // record at a time) by hash.
        var index: [Times: UInt32]?
        var tags: [UInt32] = []
        tags.reserveCapacity(records.count)
        for time in times {
            let these = Times(sequence: time.sequence, registeredAt: time.registeredAt, expiresAt: time.expiresAt)
            if let last = tags.last, distinct[Int(last)] == these {
                tags.append(last)
            } else if let known = index.map({ $0[these] }) ?? distinct.firstIndex(of: these).map(UInt32.init) {
                tags.append(known)
            } else {
                tags.append(UInt32(distinct.count))
                index?[these] = UInt32(distinct.count)
                distinct.append(these)
                if index == nil, distinct.count > 12 {
                    index = Dictionary(uniqueKeysWithValues: distinct.enumerated().map { ($1, UInt32($0)) })
                }
            }
        }
        packed = PackedRecords(records, tags: tags)
        self.times = distinct
    }

    public init(arrayLiteral records: HeldRecord...) {
        self.init(records)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { packed.count }

    public subscript(position: Int) -> HeldRecord {
        let times = times[Int(packed.tag(at: position))]
        return HeldRecord(
            record: packed[position], sequence: times.sequence, registeredAt: times.registeredAt,
            expiresAt: times.expiresAt)
    }

    public mutating func replaceSubrange(_ range: Range<Int>, with new: some Collection<HeldRecord>) {
        var records = Array(self)
        records.replaceSubrange(range, with: new)
        self = HeldRecords(records)
    }

    // The collection's defaults would pack the host again for each record kept or added: these pack once.

    public func filter(_ isIncluded: (HeldRecord) throws -> Bool) rethrows -> HeldRecords {
        HeldRecords(try Array(self).filter(isIncluded))
    }

    public mutating func removeAll(where shouldBeRemoved: (HeldRecord) throws -> Bool) rethrows {
        self = HeldRecords(try Array(self).filter { try !shouldBeRemoved($0) })
    }

    public mutating func append(contentsOf new: some Sequence<HeldRecord>) {
        self = HeldRecords(Array(self) + Array(new))
    }

    /// Changes every record (their times, usually) and packs them once.
    public mutating func updateEach(_ change: (inout HeldRecord) -> Void) {
        var records = Array(self)
        for index in records.indices { change(&records[index]) }
        self = HeldRecords(records)
    }

    /// The record at `position`, without its times.
    public func record(at position: Int) -> DNSRecord { packed[position] }

    /// The type of the record at `position`, read in place.
    public func type(at position: Int) -> DNSType { packed.type(at: position) }

    /// The owner name of the record at `position`.
    public func name(at position: Int) -> DNSName { packed.name(at: position) }

    /// Whether the record at `position` is named `name`, ignoring case, read in place.
    public func nameEquals(at position: Int, ignoringCase name: DNSName) -> Bool {
        packed.nameEquals(at: position, ignoringCase: name)
    }

    /// Where the record identical to `record` is (`HeldRecord.identical`: name in any case, type, class, RDATA).
    public func position(of record: DNSRecord) -> Int? {
        indices.first { type(at: $0) == record.type && HeldRecord.identical(self.record(at: $0), record) }
    }

    /// Whether the record at `position` has the cache-flush bit (the client's "unique").
    public func isUnique(at position: Int) -> Bool { packed.cacheFlush(at: position) }

    /// The expiry of the record at `position`.
    public func expiresAt(at position: Int) -> UnixTime { times[Int(packed.tag(at: position))].expiresAt }

    /// The earliest expiry of any record.
    public var earliestExpiry: UnixTime? { times.lazy.map(\.expiresAt).min() }

    public static func == (lhs: HeldRecords, rhs: HeldRecords) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for record in self { hasher.combine(record) }
    }
}
