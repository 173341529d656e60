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
        writer.u16(id)
        writer.u16(flags.rawValue)
        for (count, section) in [
            (questions.count, "questions"), (answers.count, "answers"), (authorities.count, "authorities"),
            (additionals.count, "additionals"),
        ] {
            guard count <= 0xFFFF else {
                throw DNSWireError(.countTooLarge, field: section, offset: -1, expected: "at most 65535, not \(count)")
            }
            writer.u16(UInt16(count))
        }
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
        guard writer.bytes.count <= 0xFFFF else {
            throw DNSWireError(
                .messageTooLarge, field: "message", offset: -1,
                expected: "at most 65535 bytes, not \(writer.bytes.count)")
        }
        return writer.bytes
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
    /// Hash of a name suffix's wire bytes to the offset where that suffix was first written.
    private var suffixes: [UInt64: Int] = [:]

    init(compression: NameCompression) {
        self.compression = compression
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

    mutating func record(_ record: DNSRecord, field: String) throws(DNSWireError) {
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
        try rdata(record.rdata, field: field)
        let length = bytes.count - lengthAt - 2
        guard length <= 0xFFFF else {
            throw DNSWireError(
                .messageTooLarge, field: "\(field).rdata", offset: -1, expected: "at most 65535 bytes, not \(length)")
        }
        bytes[lengthAt] = UInt8(length >> 8)
        bytes[lengthAt + 1] = UInt8(truncatingIfNeeded: length)
    }

    mutating func rdata(_ rdata: RData, field: String) throws(DNSWireError) {
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
            try characterString(hinfo.cpu, field: "\(field).rdata(HINFO).cpu")
            try characterString(hinfo.os, field: "\(field).rdata(HINFO).os")
        case .nsec(let nsec):
            name(nsec.nextName, compress: true)
            bytes += nsec.bitmap
        case .null(let data), .opaque(let data):
            bytes += data
        case .opt(let opt):
            for (index, option) in opt.options.enumerated() {
                try self.option(option, field: "\(field).rdata(OPT).option[\(index)]")
            }
        }
    }

    mutating func characterString(_ string: [UInt8], field: String) throws(DNSWireError) {
        guard string.count <= 255 else {
            throw DNSWireError(
                .badRDataLength, field: field, offset: -1, expected: "at most 255 bytes, not \(string.count)")
        }
        bytes.append(UInt8(string.count))
        bytes += string
    }

    mutating func option(_ option: EDNSOption, field: String) throws(DNSWireError) {
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
                        .badOptionLength, field: field, offset: -1,
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
                    .badOptionLength, field: field, offset: -1, expected: "at most 65535 bytes, not \(data.count)")
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
            // Label start positions and the hash of the suffix starting at each.
            var starts: [Int] = []
            var hashes: [UInt64] = []
            var i = 0
            while wire[i] != 0 {
                starts.append(i)
                hashes.append(Self.hash(wire, from: i))
                i += Int(wire[i]) + 1
            }
            var pointer = -1
            var fullLabels = starts.count
            if compress {
                for (index, start) in starts.enumerated() {
                    if let at = suffixes[hashes[index]], matches(at: at, wire: wire, from: start) {
                        pointer = at
                        fullLabels = index
                        break
                    }
                }
            }
            for index in 0..<fullLabels {
                let position = bytes.count
                if position < 0x4000, suffixes[hashes[index]] == nil {
                    suffixes[hashes[index]] = position
                }
                let start = starts[index]
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: wire[start...(start + Int(wire[start]))]))
            }
            if pointer >= 0 {
                u16(0xC000 | UInt16(pointer))
            } else {
                bytes.append(0)
            }
        }
    }

    /// FNV-1a over a name suffix in wire form.
    private static func hash(_ wire: UnsafeBufferPointer<UInt8>, from start: Int) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in wire[start...] {
            h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        return h
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
