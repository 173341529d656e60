import NetworkAddresses

/// DNS records packed into one block of bytes: a fixed-size entry per record, then each distinct name once in wire
/// form, then the RDATA bytes. A record is built when it is read, its names and TXT bytes referring into the block;
/// the block is written once and never changed.
///
/// A sleeping host's records are held for hours, tens of thousands of hosts at a time: as separate values they
/// take 48 bytes each plus the names and TXT bytes they refer to; packed, 24 bytes each plus their share of the
/// host's names (its host name is the name of its address records and the target of every SRV, and is kept once).
/// Each record also carries a 32-bit `tag` of its owner's choosing (the holder of sleeping hosts' records numbers
/// their lease times with it).
///
/// RDATA other than A, AAAA, PTR, SRV and TXT (rare in a registration: HINFO, NSEC, NULL, unknown types), and TXT
/// longer than 65,535 bytes (only built ones can be), is kept as a value beside the block.
public struct PackedRecords: @unchecked Sendable {
    /// The entries, then the names, then the RDATA bytes; nil when there are no records.
    private let storage: NameStorage?
    public let count: Int
    private let others: [RData]

    private static let entrySize = 24

    /// How a record's RDATA is kept.
    private enum Kind: UInt8 {
        /// Four bytes at the data offset (the address value, native order).
        case a = 0
        /// Sixteen bytes at the data offset (high, then low, native order).
        case aaaa = 1
        /// The target is the name at the data offset, of the data length.
        case ptr = 2
        /// Priority, weight, port (native order), then the target's offset (4 bytes) and length (1 byte).
        case srv = 3
        /// The RDATA bytes at the data offset, of the data length.
        case txt = 4
        /// `others[data offset]`.
        case other = 5
    }

    private static let cacheFlushBit: UInt8 = 0x80

    public init() {
        self.init(storage: nil, count: 0, others: [])
    }

    private init(storage: NameStorage?, count: Int, others: [RData]) {
        self.storage = storage
        self.count = count
        self.others = others
    }

    /// Packs `records`, each with the tag at the same position in `tags` (0 when `tags` is shorter).
    public init(_ records: [DNSRecord], tags: [UInt32] = []) {
        guard !records.isEmpty else {
            self.init()
            return
        }
        // Pass one: where each distinct name and each record's data go.
        var names = NamePlan()
        var nameSlots: [Int] = []
        nameSlots.reserveCapacity(records.count)
        // Where the target of each PTR and SRV goes (0 for other records): placed once, here.
        var targetSlots = [Int](repeating: 0, count: records.count)
        var dataSize = 0
        var others: [RData] = []
        // Read in place by position: a loop over the records would copy each.
        for position in records.indices {
            nameSlots.append(names.place(records[position].name))
            switch records[position].rdata {
            case .a: dataSize += 4
            case .aaaa: dataSize += 16
            case .ptr(let target): targetSlots[position] = names.place(target)
            case .srv(let srv):
                targetSlots[position] = names.place(srv.target)
                dataSize += 11
            case .txt(let txt) where txt.bytes.count <= Int(UInt16.max): dataSize += txt.bytes.count
            default: others.append(Self.detached(records[position].rdata))
            }
        }
        let namesStart = records.count * Self.entrySize
        let dataStart = namesStart + names.size
        let storage = NameStorage.make(capacity: dataStart + dataSize)
        storage.withUnsafeMutablePointerToElements { block in
            let raw = UnsafeMutableRawPointer(block)
            for (name, place) in zip(names.distinct, names.places) {
                name.withWire { wire in (block + namesStart + place).update(from: wire.baseAddress!, count: wire.count)
                }
            }
            // Pass two: the entries and the data.
            var data = dataStart
            var other = 0
            for position in records.indices {
                let kind: Kind
                var start = data
                var length = 0
                switch records[position].rdata {
                case .a(let address):
                    kind = .a
                    raw.storeBytes(of: address.value, toByteOffset: data, as: UInt32.self)
                    data += 4
                case .aaaa(let address):
                    kind = .aaaa
                    raw.storeBytes(of: address.high, toByteOffset: data, as: UInt64.self)
                    raw.storeBytes(of: address.low, toByteOffset: data + 8, as: UInt64.self)
                    data += 16
                case .ptr(let target):
                    kind = .ptr
                    start = namesStart + targetSlots[position]
                    length = target.wireLength
                case .srv(let srv):
                    kind = .srv
                    raw.storeBytes(of: srv.priority, toByteOffset: data, as: UInt16.self)
                    raw.storeBytes(of: srv.weight, toByteOffset: data + 2, as: UInt16.self)
                    raw.storeBytes(of: srv.port, toByteOffset: data + 4, as: UInt16.self)
                    let target = namesStart + targetSlots[position]
                    raw.storeBytes(of: UInt32(target), toByteOffset: data + 6, as: UInt32.self)
                    raw.storeBytes(of: UInt8(srv.target.wireLength), toByteOffset: data + 10, as: UInt8.self)
                    length = 11
                    data += 11
                case .txt(let txt) where txt.bytes.count <= Int(UInt16.max):
                    kind = .txt
                    length = txt.bytes.count
                    if length > 0 {
                        txt.bytes.withUnsafeBufferPointer { bytes in
                            (block + data).update(from: bytes.baseAddress!, count: bytes.count)
                        }
                    }
                    data += length
                default:
                    kind = .other
                    start = other
                    other += 1
                }
                let entry = position * Self.entrySize
                raw.storeBytes(of: UInt32(namesStart + nameSlots[position]), toByteOffset: entry, as: UInt32.self)
                raw.storeBytes(of: UInt32(start), toByteOffset: entry + 4, as: UInt32.self)
                raw.storeBytes(of: records[position].ttl, toByteOffset: entry + 8, as: UInt32.self)
                raw.storeBytes(of: records[position].type.rawValue, toByteOffset: entry + 12, as: UInt16.self)
                raw.storeBytes(of: records[position].recordClass.rawValue, toByteOffset: entry + 14, as: UInt16.self)
                raw.storeBytes(of: UInt16(length), toByteOffset: entry + 16, as: UInt16.self)
                let tag = position < tags.count ? tags[position] : 0
                raw.storeBytes(of: tag, toByteOffset: entry + 20, as: UInt32.self)
                raw.storeBytes(of: UInt8(records[position].name.wireLength), toByteOffset: entry + 18, as: UInt8.self)
                let flags = kind.rawValue | (records[position].cacheFlush ? Self.cacheFlushBit : 0)
                raw.storeBytes(of: flags, toByteOffset: entry + 19, as: UInt8.self)
            }
        }
        self.init(storage: storage, count: records.count, others: others)
    }

    /// RDATA kept beside the block, with its own copy of any name or bytes it refers to: a decoded record's refer
    /// to the block its whole message was decompressed into, which would stay alive as long as the record is held.
    private static func detached(_ rdata: RData) -> RData {
        switch rdata {
        case .nsec(let nsec):
            let nextName = nsec.nextName.withWire { DNSName(uncheckedWire: $0) }
            return .nsec(NSECData(nextName: nextName, bitmap: nsec.bitmap))
        case .txt(let txt):
            return .txt(TXTData(validatedRData: txt.bytes.withUnsafeBufferPointer { SharedBytes(copying: $0) }))
        default:
            return rdata
        }
    }

    /// Reads the entry of the record at `position`.
    @inline(__always)
    private func entry<R>(_ position: Int, _ body: (UnsafeRawPointer) -> R) -> R {
        precondition(position >= 0 && position < count, "record \(position) of \(count)")
        return storage!.withUnsafeMutablePointerToElements { block in
            body(UnsafeRawPointer(block + position * Self.entrySize))
        }
    }

    /// The type of the record at `position`.
    public func type(at position: Int) -> DNSType {
        DNSType(entry(position) { $0.loadUnaligned(fromByteOffset: 12, as: UInt16.self) })
    }

    /// The owner name of the record at `position`.
    public func name(at position: Int) -> DNSName {
        let (start, length) = entry(position) {
            (Int($0.loadUnaligned(as: UInt32.self)), Int($0.load(fromByteOffset: 18, as: UInt8.self)))
        }
        return DNSName(storage: storage!, start: start, length: length)
    }

    /// Whether the owner name of the record at `position` is `name`, ignoring ASCII case, read in place.
    public func nameEquals(at position: Int, ignoringCase name: DNSName) -> Bool {
        let (start, length) = entry(position) {
            (Int($0.loadUnaligned(as: UInt32.self)), Int($0.load(fromByteOffset: 18, as: UInt8.self)))
        }
        guard length == name.wireLength else { return false }
        return storage!.withUnsafeMutablePointerToElements { block in
            name.withWire { other in
                for index in 0..<length where asciiLower(block[start + index]) != asciiLower(other[index]) {
                    return false
                }
                return true
            }
        }
    }

    /// The owner's tag of the record at `position`.
    public func tag(at position: Int) -> UInt32 {
        entry(position) { $0.loadUnaligned(fromByteOffset: 20, as: UInt32.self) }
    }

    /// Whether the record at `position` has the cache-flush bit.
    public func cacheFlush(at position: Int) -> Bool {
        entry(position) { $0.load(fromByteOffset: 19, as: UInt8.self) & Self.cacheFlushBit != 0 }
    }

    /// The record at `position`, built from the block.
    public subscript(position: Int) -> DNSRecord {
        let storage = storage!
        return entry(position) { entry in
            let nameStart = Int(entry.loadUnaligned(as: UInt32.self))
            let data = Int(entry.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
            let ttl = entry.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
            let type = entry.loadUnaligned(fromByteOffset: 12, as: UInt16.self)
            let recordClass = entry.loadUnaligned(fromByteOffset: 14, as: UInt16.self)
            let length = Int(entry.loadUnaligned(fromByteOffset: 16, as: UInt16.self))
            let nameLength = Int(entry.load(fromByteOffset: 18, as: UInt8.self))
            let flags = entry.load(fromByteOffset: 19, as: UInt8.self)
            let rdata: RData = storage.withUnsafeMutablePointerToElements { block in
                let raw = UnsafeRawPointer(block)
                switch Kind(rawValue: flags & ~Self.cacheFlushBit)! {
                case .a:
                    return .a(IPv4Address(value: raw.loadUnaligned(fromByteOffset: data, as: UInt32.self)))
                case .aaaa:
                    return .aaaa(
                        IPv6Address(
                            high: raw.loadUnaligned(fromByteOffset: data, as: UInt64.self),
                            low: raw.loadUnaligned(fromByteOffset: data + 8, as: UInt64.self)))
                case .ptr:
                    return .ptr(DNSName(storage: storage, start: data, length: length))
                case .srv:
                    let target = DNSName(
                        storage: storage, start: Int(raw.loadUnaligned(fromByteOffset: data + 6, as: UInt32.self)),
                        length: Int(raw.load(fromByteOffset: data + 10, as: UInt8.self)))
                    return .srv(
                        SRVData(
                            priority: raw.loadUnaligned(fromByteOffset: data, as: UInt16.self),
                            weight: raw.loadUnaligned(fromByteOffset: data + 2, as: UInt16.self),
                            port: raw.loadUnaligned(fromByteOffset: data + 4, as: UInt16.self), target: target))
                case .txt:
                    return .txt(TXTData(validatedRData: SharedBytes(storage: storage, start: data, count: length)))
                case .other:
                    return others[data]
                }
            }
            return DNSRecord(
                name: DNSName(storage: storage, start: nameStart, length: nameLength), type: DNSType(type),
                recordClass: DNSClass(recordClass), cacheFlush: flags & Self.cacheFlushBit != 0, ttl: ttl,
                rdata: rdata)
        }
    }

    /// The size of the block (the entries, the names and the RDATA bytes), as the allocator rounded it.
    public var byteCount: Int { storage?.capacity ?? 0 }

    /// The records, in order.
    public var records: [DNSRecord] { (0..<count).map { self[$0] } }
}

extension PackedRecords: Hashable {
    public static func == (lhs: PackedRecords, rhs: PackedRecords) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.storage === rhs.storage { return true }
        return (0..<lhs.count).allSatisfy { lhs[$0] == rhs[$0] && lhs.tag(at: $0) == rhs.tag(at: $0) }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for position in 0..<count {
            hasher.combine(self[position])
            hasher.combine(tag(at: position))
        }
    }
}

/// Where each distinct name goes in a block: names are looked for among those placed one by one (lengths first)
/// while there are a few dozen, by hash past that (a registration of hundreds of records stays linear).
private struct NamePlan {
    var distinct: [DNSName] = []
    var places: [Int] = []
    var index: [DNSName: Int]?
    var size = 0

    /// The offset of `name` among the names, placing it if it is new.
    mutating func place(_ name: DNSName) -> Int {
        let length = name.wireLength
        if let index {
            if let place = index[name] { return place }
        } else {
            for position in distinct.indices where distinct[position].wireLength == length && distinct[position] == name
            {
                return places[position]
            }
        }
        let place = size
        distinct.append(name)
        places.append(place)
        index?[name] = place
        if index == nil, distinct.count > 32 {
            index = Dictionary(uniqueKeysWithValues: zip(distinct, places))
        }
        size += length
        return place
    }
}
