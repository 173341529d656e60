import NetworkAddresses

/// Which names an encoder may compress (RFC 1035 section 4.1.4).
public struct NameCompression: Hashable, Sendable {
    private enum Mode: Hashable, Sendable {
        case none
        case all
        case exceptSRVTargets
    }
    private let mode: Mode

    /// Every name is written in full.
    public static let none = NameCompression(mode: .none)
    /// Owner names, question names and the names inside PTR, SRV and NSEC RDATA are compressed (mDNS).
    public static let all = NameCompression(mode: .all)
    /// As `all`, but SRV targets are written in full, as Apple's clients write DNS UPDATE registrations.
    public static let exceptSRVTargets = NameCompression(mode: .exceptSRVTargets)

    var enabled: Bool { mode != .none }
    var compressesSRVTargets: Bool { mode == .all }
}

extension DNSMessage {
    /// The wire form of the message. Names keep their case; compression points only at names with identical
    /// bytes. Throws when a section holds more than 65,535 entries or the message would exceed 65,535 bytes.
    public func encoded(compression: NameCompression = .all) throws(DNSWireError) -> [UInt8] {
        var writer = WireWriter(compression: compression)
        writer.bytes.reserveCapacity(512)
        try write(to: &writer)
        return try Self.checkedSize(writer.bytes)
    }

    /// The wire form of the message with as many of `extra` after its own additionals as keep it within `limit`
    /// bytes: each in turn is written if it fits and left out if it does not, and the next is tried (RFC 6762
    /// section 6: additional records are optional, and a responder includes what fits). One pass: the message is
    /// written once and each record that does not fit is taken back, compression entries included. The message
    /// itself is written whole even when it alone exceeds `limit`, and then `extra` is not asked for. A record
    /// that cannot be written at all (RDATA over 65,535 bytes) is left out as one that does not fit.
    public func encoded(
        within limit: Int, addingAdditionals extra: () -> [DNSRecord], compression: NameCompression = .all
    ) throws(DNSWireError) -> [UInt8] {
        var writer = WireWriter(compression: compression)
        writer.bytes.reserveCapacity(512)
        try write(to: &writer)
        guard writer.bytes.count <= limit else { return try Self.checkedSize(writer.bytes) }
        var count = additionals.count
        for record in extra() where count < 0xFFFF {
            let mark = writer.mark()
            do {
                try writer.record(record, field: "additional")
            } catch {
                writer.rollBack(to: mark)
                continue
            }
            if writer.bytes.count <= limit {
                count += 1
            } else {
                writer.rollBack(to: mark)
            }
        }
        writer.bytes[10] = UInt8(count >> 8)
        writer.bytes[11] = UInt8(truncatingIfNeeded: count)
        return try Self.checkedSize(writer.bytes)
    }

    private func write(to writer: inout WireWriter) throws(DNSWireError) {
        writer.u16(id)
        writer.u16(flags.rawValue)
        try writer.count(questions.count, section: "questions")
        try writer.count(answers.count, section: "answers")
        try writer.count(authorities.count, section: "authorities")
        try writer.count(additionals.count, section: "additionals")
        for question in questions {
            writer.name(question.name, compress: true)
            writer.u16(question.type.rawValue)
            writer.u16(question.questionClass.rawValue & 0x7FFF | (question.unicastResponse ? 0x8000 : 0))
        }
        for (index, record) in answers.enumerated() {
            try writer.record(record, field: "answer[\(index)]")
        }
        for (index, record) in authorities.enumerated() {
            try writer.record(record, field: "authority[\(index)]")
        }
        for (index, record) in additionals.enumerated() {
            try writer.record(record, field: "additional[\(index)]")
        }
    }

    private static func checkedSize(_ bytes: [UInt8]) throws(DNSWireError) -> [UInt8] {
        guard bytes.count <= 0xFFFF else {
            throw DNSWireError(
                .messageTooLarge, field: "message", offset: -1, expected: "at most 65535 bytes, not \(bytes.count)")
        }
        return bytes
    }
}

extension DNSRecord {
    /// The wire form of this record alone, without compression.
    public func encodedStandalone() throws(DNSWireError) -> [UInt8] {
        var writer = WireWriter(compression: .none)
        try writer.record(self, field: "record")
        return writer.bytes
    }

    /// The RDATA in wire form, names uncompressed: the canonical bytes to compare records by.
    public func encodedRData() throws(DNSWireError) -> [UInt8] {
        var writer = WireWriter(compression: .none)
        try writer.rdata(rdata, field: "rdata")
        return writer.bytes
    }
}

/// Appends wire data and remembers where names were written, for compression.
struct WireWriter {
    var bytes: [UInt8] = []
    let compression: NameCompression
    /// Where each name suffix was first written, keyed by a hash of its bytes.
    private var suffixes = SuffixTable()

    init(compression: NameCompression) {
        self.compression = compression
    }

    /// Where the message stands now, for `rollBack(to:)`.
    struct Mark {
        let byteCount: Int
        let suffixCount: Int
    }

    func mark() -> Mark { Mark(byteCount: bytes.count, suffixCount: suffixes.insertions) }

    /// Takes back everything written since `mark`: the bytes, and the names that compression could point at.
    mutating func rollBack(to mark: Mark) {
        bytes.removeLast(bytes.count - mark.byteCount)
        suffixes.undo(to: mark.suffixCount)
    }

    @inline(__always)
    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    @inline(__always)
    mutating func u32(_ value: UInt32) {
        bytes.append(UInt8(value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    mutating func count(_ count: Int, section: StaticString) throws(DNSWireError) {
        guard count <= 0xFFFF else {
            throw DNSWireError(.countTooLarge, field: "\(section)", offset: -1, expected: "at most 65535, not \(count)")
        }
        u16(UInt16(count))
    }

    mutating func record(_ record: DNSRecord, field: @autoclosure () -> String) throws(DNSWireError) {
        name(record.name, compress: true)
        u16(record.type.rawValue)
        if record.type == .opt {
            u16(record.recordClass.rawValue)
        } else {
            u16(record.recordClass.rawValue & 0x7FFF | (record.cacheFlush ? 0x8000 : 0))
        }
        u32(record.ttl)
        let lengthAt = bytes.count
        u16(0)
        try rdata(record.rdata, field: field())
        let length = bytes.count - lengthAt - 2
        guard length <= 0xFFFF else {
            throw DNSWireError(
                .messageTooLarge, field: "\(field()).rdata", offset: -1, expected: "at most 65535 bytes, not \(length)")
        }
        bytes[lengthAt] = UInt8(length >> 8)
        bytes[lengthAt + 1] = UInt8(truncatingIfNeeded: length)
    }

    mutating func rdata(_ rdata: RData, field: @autoclosure () -> String) throws(DNSWireError) {
        switch rdata {
        case .a(let address):
            u32(address.value)
        case .aaaa(let address):
            u32(UInt32(truncatingIfNeeded: address.high >> 32))
            u32(UInt32(truncatingIfNeeded: address.high))
            u32(UInt32(truncatingIfNeeded: address.low >> 32))
            u32(UInt32(truncatingIfNeeded: address.low))
        case .ptr(let target):
            name(target, compress: true)
        case .srv(let srv):
            u16(srv.priority)
            u16(srv.weight)
            u16(srv.port)
            name(srv.target, compress: compression.compressesSRVTargets)
        case .txt(let txt):
            txt.bytes.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        case .hinfo(let hinfo):
            try characterString(hinfo.cpu, field: "\(field()).rdata(HINFO).cpu")
            try characterString(hinfo.os, field: "\(field()).rdata(HINFO).os")
        case .nsec(let nsec):
            name(nsec.nextName, compress: true)
            bytes += nsec.bitmap
        case .null(let data), .opaque(let data):
            bytes += data
        case .opt(let opt):
            for (index, option) in opt.options.enumerated() {
                try self.option(option, field: "\(field()).rdata(OPT).option[\(index)]")
            }
        }
    }

    mutating func characterString(_ string: [UInt8], field: @autoclosure () -> String) throws(DNSWireError) {
        guard string.count <= 255 else {
            throw DNSWireError(
                .badRDataLength, field: field(), offset: -1, expected: "at most 255 bytes, not \(string.count)")
        }
        bytes.append(UInt8(string.count))
        bytes += string
    }

    mutating func option(_ option: EDNSOption, field: @autoclosure () -> String) throws(DNSWireError) {
        u16(option.code)
        switch option {
        case .updateLease(let lease):
            if let keyLease = lease.keyLease {
                u16(8)
                u32(lease.lease)
                u32(keyLease)
            } else {
                u16(4)
                u32(lease.lease)
            }
        case .owner(let owner):
            if let password = owner.password {
                guard owner.wakeMAC != nil, password.count == 4 || password.count == 6 else {
                    throw DNSWireError(
                        .badOptionLength, field: field(), offset: -1,
                        expected: "a 4- or 6-byte password after a wake MAC, not \(password.count) bytes")
                }
            }
            u16(UInt16(owner.encodedLength))
            bytes.append(owner.version)
            bytes.append(owner.sequence)
            bytes += owner.primaryMAC.array
            if let wake = owner.wakeMAC { bytes += wake.array }
            if let password = owner.password { bytes += password }
        case .other(_, let data):
            guard data.count <= 0xFFFF else {
                throw DNSWireError(
                    .badOptionLength, field: field(), offset: -1, expected: "at most 65535 bytes, not \(data.count)")
            }
            u16(UInt16(data.count))
            bytes += data
        }
    }

    /// Writes a name, pointing at the longest suffix already written with identical bytes when `compress` is set
    /// and compression is enabled. Every label written in full becomes a pointer target for later names.
    mutating func name(_ name: DNSName, compress: Bool) {
        name.withWire { wire in
            guard compression.enabled else {
                bytes.append(contentsOf: wire)
                return
            }
            // A name has at most 127 labels. Record where each starts, then hash every suffix from the end:
            // the hash of the suffix at label i covers label i and the hash of the suffix after it.
            withUnsafeTemporaryAllocation(of: (start: Int, hash: UInt64).self, capacity: 128) { labels in
                var count = 0
                var i = 0
                while wire[i] != 0 {
                    labels[count] = (i, 0)
                    count += 1
                    i += Int(wire[i]) + 1
                }
                var hash: UInt64 = 0xCBF2_9CE4_8422_2325
                for index in stride(from: count - 1, through: 0, by: -1) {
                    let start = labels[index].start
                    for byte in wire[start...(start + Int(wire[start]))] {
                        hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
                    }
                    labels[index].hash = hash
                }
                var pointer = -1
                var fullLabels = count
                if compress {
                    for index in 0..<count {
                        if let at = suffixes.offset(for: labels[index].hash),
                            matches(at: at, wire: wire, from: labels[index].start)
                        {
                            pointer = at
                            fullLabels = index
                            break
                        }
                    }
                }
                for index in 0..<fullLabels {
                    let position = bytes.count
                    if position < 0x4000 {
                        suffixes.insertIfAbsent(labels[index].hash, offset: position)
                    }
                    let start = labels[index].start
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: wire[start...(start + Int(wire[start]))]))
                }
                if pointer >= 0 {
                    u16(0xC000 | UInt16(pointer))
                } else {
                    bytes.append(0)
                }
            }
        }
    }

    /// True when the name written at `at` (following pointers) has exactly the bytes of `wire[from...]`.
    private func matches(at: Int, wire: UnsafeBufferPointer<UInt8>, from: Int) -> Bool {
        var position = at
        var i = from
        while true {
            let length = Int(bytes[position])
            if length >= 0xC0 {
                position = (length & 0x3F) << 8 | Int(bytes[position + 1])
                continue
            }
            guard wire[i] == bytes[position] else { return false }
            if length == 0 { return true }
            for k in 1...length where wire[i + k] != bytes[position + k] {
                return false
            }
            i += length + 1
            position += length + 1
        }
    }
}

/// An open-addressing table from suffix hashes to message offsets: cheaper than a `Dictionary` for the few dozen
/// names of a message. A hash collision only costs a missed compression, because matches are checked byte by byte.
struct SuffixTable {
    private var hashes: [UInt64] = []
    private var offsets: [Int] = []
    private var count = 0
    /// The hashes inserted, in order, for `undo(to:)`.
    private var inserted: [UInt64] = []

    /// How many entries were inserted so far.
    var insertions: Int { inserted.count }

    /// Removes the entries inserted after the first `insertions`, newest first. Linear probing allows it in that
    /// order: no entry older than the one removed ever probed past its slot, since that slot was empty then.
    mutating func undo(to insertions: Int) {
        while inserted.count > insertions {
            let hash = inserted.removeLast()
            let mask = hashes.count - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            while offsets[slot] >= 0 {
                if hashes[slot] == hash {
                    offsets[slot] = -1
                    count -= 1
                    break
                }
                slot = (slot + 1) & mask
            }
        }
    }

    func offset(for hash: UInt64) -> Int? {
        guard !hashes.isEmpty else { return nil }
        let mask = hashes.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while offsets[slot] >= 0 {
            if hashes[slot] == hash { return offsets[slot] }
            slot = (slot + 1) & mask
        }
        return nil
    }

    mutating func insertIfAbsent(_ hash: UInt64, offset: Int) {
        if (count + 1) * 2 > hashes.count { grow() }
        let mask = hashes.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while offsets[slot] >= 0 {
            if hashes[slot] == hash { return }
            slot = (slot + 1) & mask
        }
        hashes[slot] = hash
        offsets[slot] = offset
        count += 1
        inserted.append(hash)
    }

    /// Doubles the table, inserting again in the order of first insertion, so that `undo(to:)` stays sound.
    private mutating func grow() {
        let old = self
        let capacity = max(64, hashes.count * 2)
        hashes = [UInt64](repeating: 0, count: capacity)
        offsets = [Int](repeating: -1, count: capacity)
        count = 0
        inserted = []
        inserted.reserveCapacity(old.inserted.count + 1)
        for hash in old.inserted {
            if let offset = old.offset(for: hash) { insertIfAbsent(hash, offset: offset) }
        }
    }
}
