import NetworkAddresses

extension DNSMessage {
    /// Decodes a message. Throws a `DNSWireError` naming the field, the offset and what was expected; never traps
    /// and never reads outside `bytes`, whatever they hold.
    public init(decoding bytes: [UInt8]) throws(DNSWireError) {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(DNSWireError) in try DNSMessage(decoding: buffer) }
        }
        self = try result.get()
    }

    /// Decodes a message from raw memory (see `init(decoding:)` for the guarantees).
    public init(decoding buffer: UnsafeRawBufferPointer) throws(DNSWireError) {
        var reader = WireReader(buffer: buffer, headerLength: 12)
        guard buffer.count >= 12 else {
            throw DNSWireError(.truncated, field: "header", offset: 0, expected: "12 bytes, found \(buffer.count)")
        }
        id = reader.u16Unchecked(at: 0)
        flags = DNSFlags(rawValue: reader.u16Unchecked(at: 2))
        let qd = Int(reader.u16Unchecked(at: 4))
        let an = Int(reader.u16Unchecked(at: 6))
        let ns = Int(reader.u16Unchecked(at: 8))
        let ar = Int(reader.u16Unchecked(at: 10))
        reader.offset = 12
        questions = []
        questions.reserveCapacity(min(qd, buffer.count / 5))
        for index in 0..<qd {
            do {
                questions.append(try reader.readQuestion())
            } catch {
                throw error.within("question[\(index)]")
            }
        }
        answers = try reader.readRecords(count: an, section: "answer")
        authorities = try reader.readRecords(count: ns, section: "authority")
        additionals = try reader.readRecords(count: ar, section: "additional")
        guard reader.offset == buffer.count else {
            throw DNSWireError(
                .trailingBytes, field: "message", offset: reader.offset,
                expected:
                    "end of message after \(qd)/\(an)/\(ns)/\(ar) entries, found \(buffer.count - reader.offset) more bytes"
            )
        }
    }
}

extension DNSRecord {
    /// Decodes one resource record that stands alone (no message around it, so no compression pointers into a
    /// header); the record must fill `bytes` exactly.
    public init(decodingStandalone bytes: [UInt8]) throws(DNSWireError) {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(DNSWireError) -> DNSRecord in
                var reader = WireReader(buffer: buffer, headerLength: 0)
                let record = try reader.readRecord()
                guard reader.offset == buffer.count else {
                    throw DNSWireError(
                        .trailingBytes, field: "record", offset: reader.offset, expected: "end of data after the record"
                    )
                }
                return record
            }
        }
        self = try result.get()
    }
}

/// A bounds-checked cursor over a message. Every read checks its length first.
struct WireReader {
    let buffer: UnsafeRawBufferPointer
    /// Compression pointers must not point below this (12 in a message: into the header).
    let headerLength: Int
    var offset = 0
    /// Decompressed names are written one after another into shared blocks, so a name costs no allocation of
    /// its own. A block is never written again where a name already refers to it.
    private var arena: NameStorage
    private var arenaBase: UnsafeMutablePointer<UInt8>
    private var arenaUsed = 0
    private var arenaCapacity: Int

    init(buffer: UnsafeRawBufferPointer, headerLength: Int) {
        self.buffer = buffer
        self.headerLength = headerLength
        arenaCapacity = Self.arenaCapacity(forMessageOf: buffer.count)
        arena = NameStorage.make(capacity: arenaCapacity)
        arenaBase = arena.withUnsafeMutablePointerToElements { $0 }
    }

    /// Names in a message take about twice its size once decompressed; a block holds at least one whole name.
    private static func arenaCapacity(forMessageOf size: Int) -> Int {
        min(max(2 * size + 256, 512), 16_384)
    }

    /// A copy of `buffer[start..<end]` in the arena (or in a block of its own when it is large).
    mutating func sharedBytes(_ start: Int, _ end: Int) -> SharedBytes {
        let count = end - start
        let source = UnsafeRawBufferPointer(rebasing: buffer[start..<end])
        if count > arenaCapacity - arenaUsed {
            guard count < 256 else { return SharedBytes(copying: source) }
            arena = NameStorage.make(capacity: arenaCapacity)
            arenaBase = arena.withUnsafeMutablePointerToElements { $0 }
            arenaUsed = 0
        }
        if count > 0 {
            UnsafeMutableRawPointer(arenaBase + arenaUsed).copyMemory(from: source.baseAddress!, byteCount: count)
        }
        let bytes = SharedBytes(storage: arena, start: arenaUsed, count: count)
        arenaUsed += count
        return bytes
    }

    private mutating func reserveArena() {
        guard arenaCapacity - arenaUsed < 255 else { return }
        arena = NameStorage.make(capacity: arenaCapacity)
        arenaBase = arena.withUnsafeMutablePointerToElements { $0 }
        arenaUsed = 0
    }

    @inline(__always)
    func u16Unchecked(at index: Int) -> UInt16 {
        UInt16(buffer[index]) << 8 | UInt16(buffer[index + 1])
    }

    @inline(__always)
    func u32Unchecked(at index: Int) -> UInt32 {
        UInt32(buffer[index]) << 24 | UInt32(buffer[index + 1]) << 16 | UInt32(buffer[index + 2]) << 8
            | UInt32(buffer[index + 3])
    }

    @inline(__always)
    func need(_ count: Int, at index: Int, field: @autoclosure () -> String, limit: Int? = nil) throws(DNSWireError) {
        let end = limit ?? buffer.count
        guard count <= end - index else {
            throw DNSWireError(
                .truncated, field: field(), offset: index, expected: "\(count) bytes, found \(max(0, end - index))")
        }
    }

    mutating func readQuestion() throws(DNSWireError) -> DNSQuestion {
        let name = try readName(field: "name")
        try need(4, at: offset, field: "type and class")
        let type = DNSType(u16Unchecked(at: offset))
        let rawClass = u16Unchecked(at: offset + 2)
        offset += 4
        return DNSQuestion(
            name: name, type: type, questionClass: DNSClass(rawClass & 0x7FFF), unicastResponse: rawClass & 0x8000 != 0)
    }

    mutating func readRecords(count: Int, section: String) throws(DNSWireError) -> [DNSRecord] {
        var records: [DNSRecord] = []
        // A record is at least 11 bytes; never reserve more than the data could hold.
        records.reserveCapacity(min(count, (buffer.count - offset) / 11 + 1))
        for index in 0..<count {
            do {
                records.append(try readRecord())
            } catch {
                throw error.within("\(section)[\(index)]")
            }
        }
        return records
    }

    mutating func readRecord() throws(DNSWireError) -> DNSRecord {
        let name = try readName(field: "name")
        try need(10, at: offset, field: "type, class, TTL and RDLENGTH")
        let type = DNSType(u16Unchecked(at: offset))
        let rawClass = u16Unchecked(at: offset + 2)
        let ttl = u32Unchecked(at: offset + 4)
        let rdLength = Int(u16Unchecked(at: offset + 8))
        offset += 10
        let rdStart = offset
        guard rdLength <= buffer.count - rdStart else {
            throw DNSWireError(
                .badRDataLength, field: "rdata(\(type))", offset: rdStart - 2,
                expected: "RDLENGTH \(rdLength) within the \(buffer.count - rdStart) bytes left")
        }
        let rdEnd = rdStart + rdLength
        let recordClass: DNSClass
        let cacheFlush: Bool
        if type == .opt {
            recordClass = DNSClass(rawClass)
            cacheFlush = false
        } else {
            recordClass = DNSClass(rawClass & 0x7FFF)
            cacheFlush = rawClass & 0x8000 != 0
        }
        let rdata: RData
        do {
            rdata = try readRData(type: type, recordClass: recordClass, start: rdStart, end: rdEnd)
        } catch {
            throw error.within("rdata(\(type))")
        }
        offset = rdEnd
        return DNSRecord(
            name: name, type: type, recordClass: recordClass, cacheFlush: cacheFlush, ttl: ttl, rdata: rdata)
    }

    func bytes(_ start: Int, _ end: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: end - start)
        if end > start {
            out.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[start..<end])) }
        }
        return out
    }

    @inline(__always)
    mutating func readRData(type: DNSType, recordClass: DNSClass, start: Int, end: Int) throws(DNSWireError) -> RData {
        let length = end - start
        // RFC 2136 deletions carry class NONE or ANY and may have empty RDATA of any type.
        if length == 0, recordClass == .none || recordClass == .any {
            return .opaque([])
        }
        switch type {
        case .a:
            guard length == 4 else {
                throw DNSWireError(.badRDataLength, field: "", offset: start, expected: "4 bytes, found \(length)")
            }
            return .a(IPv4Address(value: u32Unchecked(at: start)))
        case .aaaa:
            guard length == 16 else {
                throw DNSWireError(.badRDataLength, field: "", offset: start, expected: "16 bytes, found \(length)")
            }
            let high = UInt64(u32Unchecked(at: start)) << 32 | UInt64(u32Unchecked(at: start + 4))
            let low = UInt64(u32Unchecked(at: start + 8)) << 32 | UInt64(u32Unchecked(at: start + 12))
            return .aaaa(IPv6Address(high: high, low: low))
        case .ptr:
            offset = start
            let target = try readName(field: "target", limit: end)
            try expectEnd(end, field: "target")
            return .ptr(target)
        case .srv:
            try need(6, at: start, field: "priority, weight and port", limit: end)
            offset = start + 6
            let target = try readName(field: "target", limit: end)
            try expectEnd(end, field: "target")
            return .srv(
                SRVData(
                    priority: u16Unchecked(at: start), weight: u16Unchecked(at: start + 2),
                    port: u16Unchecked(at: start + 4), target: target))
        case .txt:
            var i = start
            var index = 0
            while i < end {
                let count = Int(buffer[i])
                try need(count, at: i + 1, field: "string[\(index)]", limit: end)
                i += 1 + count
                index += 1
            }
            return .txt(TXTData(validatedRData: sharedBytes(start, end)))
        case .hinfo:
            try need(1, at: start, field: "cpu", limit: end)
            let cpuLength = Int(buffer[start])
            try need(cpuLength + 1, at: start + 1, field: "cpu", limit: end)
            let osAt = start + 1 + cpuLength
            let osLength = Int(buffer[osAt])
            try need(osLength, at: osAt + 1, field: "os", limit: end)
            guard osAt + 1 + osLength == end else {
                throw DNSWireError(.badRDataLength, field: "os", offset: osAt + 1 + osLength, expected: "end of RDATA")
            }
            return .hinfo(HINFOData(cpu: bytes(start + 1, osAt), os: bytes(osAt + 1, end)))
        case .nsec:
            offset = start
            let next = try readName(field: "next name", limit: end)
            var i = offset
            var lastWindow = -1
            while i < end {
                try need(2, at: i, field: "type bitmap window", limit: end)
                let window = Int(buffer[i])
                let blockLength = Int(buffer[i + 1])
                guard window > lastWindow else {
                    throw DNSWireError(
                        .badRData, field: "type bitmap", offset: i,
                        expected: "window above \(lastWindow), found \(window)")
                }
                guard (1...32).contains(blockLength) else {
                    throw DNSWireError(
                        .badRData, field: "type bitmap", offset: i + 1,
                        expected: "a block length of 1 to 32, found \(blockLength)")
                }
                try need(blockLength, at: i + 2, field: "type bitmap block", limit: end)
                lastWindow = window
                i += 2 + blockLength
            }
            return .nsec(NSECData(nextName: next, bitmap: bytes(offset, end)))
        case .null:
            return .null(bytes(start, end))
        case .opt:
            return .opt(try readOptions(start: start, end: end))
        default:
            return .opaque(bytes(start, end))
        }
    }

    func expectEnd(_ end: Int, field: String) throws(DNSWireError) {
        guard offset == end else {
            throw DNSWireError(
                .badRDataLength, field: field, offset: offset,
                expected: "the RDATA to end here, \(end - offset) bytes left")
        }
    }

    func readOptions(start: Int, end: Int) throws(DNSWireError) -> OPTData {
        var options: [EDNSOption] = []
        var i = start
        while i < end {
            try need(4, at: i, field: "option[\(options.count)] header", limit: end)
            let code = u16Unchecked(at: i)
            let length = Int(u16Unchecked(at: i + 2))
            let dataAt = i + 4
            try need(length, at: dataAt, field: "option[\(options.count)] data (code \(code))", limit: end)
            switch code {
            case UpdateLease.optionCode:
                switch length {
                case 4: options.append(.updateLease(UpdateLease(lease: u32Unchecked(at: dataAt))))
                case 8:
                    options.append(
                        .updateLease(
                            UpdateLease(lease: u32Unchecked(at: dataAt), keyLease: u32Unchecked(at: dataAt + 4))))
                default:
                    throw DNSWireError(
                        .badOptionLength, field: "option[\(options.count)](Update Lease)", offset: i + 2,
                        expected: "length 4 or 8, found \(length)")
                }
            case OwnerOption.optionCode:
                guard [8, 14, 18, 20].contains(length) else {
                    throw DNSWireError(
                        .badOptionLength, field: "option[\(options.count)](OWNER)", offset: i + 2,
                        expected: "length 8, 14, 18 or 20, found \(length)")
                }
                let primary = mac(at: dataAt + 2)
                let wake = length >= 14 ? mac(at: dataAt + 8) : nil
                let password = length > 14 ? bytes(dataAt + 14, dataAt + length) : nil
                options.append(
                    .owner(
                        OwnerOption(
                            version: buffer[dataAt], sequence: buffer[dataAt + 1], primaryMAC: primary, wakeMAC: wake,
                            password: password)))
            default:
                options.append(.other(code: code, data: bytes(dataAt, dataAt + length)))
            }
            i = dataAt + length
        }
        return OPTData(options: options)
    }

    func mac(at i: Int) -> MACAddress {
        MACAddress(buffer[i], buffer[i + 1], buffer[i + 2], buffer[i + 3], buffer[i + 4], buffer[i + 5])
    }

    /// Reads a possibly compressed name at `offset` and moves past it. `limit` bounds the in-place part of the
    /// name (the RDATA end for names inside RDATA); pointers may reach anywhere before themselves.
    mutating func readName(field: String, limit: Int? = nil) throws(DNSWireError) -> DNSName {
        reserveArena()
        if let name = readNameFast(limit: limit ?? buffer.count) { return name }
        return try readNameCarefully(field: field, limit: limit)
    }

    /// The common case: a valid name. Returns nil at the first sign of trouble, leaving the diagnosis to
    /// `readNameCarefully`, which reads the same name again and throws the precise error.
    @inline(__always)
    private mutating func readNameFast(limit: Int) -> DNSName? {
        let out = arenaBase + arenaUsed
        let source = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var length = 0
        var position = offset
        var resume = -1
        var lowestTarget = Int.max
        var boundary = limit
        while true {
            // A run of plain labels, copied in one go.
            let runStart = position
            var labelLength = 0
            while position < boundary {
                labelLength = Int(source[position])
                if UInt(bitPattern: labelLength &- 1) >= 63 { break }  // 0 (the end), or 64 and above (pointer or bad)
                position &+= labelLength &+ 1
            }
            guard position < boundary else { return nil }
            let run = position &- runStart
            guard length &+ run < 255 else { return nil }
            (out + length).update(from: source + runStart, count: run)
            length &+= run
            if labelLength == 0 {
                out[length] = 0
                length &+= 1
                if resume < 0 { resume = position &+ 1 }
                break
            }
            guard labelLength >= 0xC0, position &+ 1 < boundary else { return nil }
            let target = (labelLength & 0x3F) << 8 | Int(source[position &+ 1])
            guard target >= headerLength, target < position, target < lowestTarget else { return nil }
            if resume < 0 { resume = position &+ 2 }
            lowestTarget = target
            position = target
            boundary = buffer.count
        }
        let name = DNSName(storage: arena, start: arenaUsed, length: length)
        arenaUsed &+= length
        offset = resume
        return name
    }

    /// Reads a name checking each step, so that a bad name fails with the precise field, offset and reason.
    private mutating func readNameCarefully(field: String, limit: Int?) throws(DNSWireError) -> DNSName {
        let out = arenaBase + arenaUsed
        let source = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let end = limit ?? buffer.count
        var length = 0
        var position = offset
        var resume = -1
        // Each pointer must target strictly before the previous target, which rules out loops.
        var lowestTarget = Int.max
        var boundary = end
        // Labels between pointers lie next to each other; they are validated one by one and copied as one run.
        var runStart = position
        while true {
            guard position < boundary else {
                throw DNSWireError(.truncated, field: field, offset: position, expected: "a label length byte")
            }
            let labelLength = Int(source[position])
            if labelLength < 64 {
                if labelLength == 0 {
                    let run = position + 1 - runStart
                    (out + length).update(from: source + runStart, count: run)
                    length += run
                    if resume < 0 { resume = position + 1 }
                    break
                }
                guard labelLength < boundary - position else {
                    throw DNSWireError(
                        .truncated, field: field, offset: position,
                        expected: "a label of \(labelLength) bytes, found \(boundary - position - 1)")
                }
                position += 1 + labelLength
                guard length + position - runStart < 255 else {
                    throw DNSWireError(
                        .nameTooLong, field: field, offset: position - 1 - labelLength,
                        expected: "at most 255 bytes in wire form")
                }
            } else if labelLength >= 0xC0 {
                guard position + 1 < boundary else {
                    throw DNSWireError(.truncated, field: field, offset: position, expected: "a 2-byte pointer")
                }
                let target = (labelLength & 0x3F) << 8 | Int(source[position + 1])
                if resume < 0 { resume = position + 2 }
                guard target >= headerLength else {
                    throw DNSWireError(
                        .pointerIntoHeader, field: field, offset: position,
                        expected: "a pointer to offset \(headerLength) or later, found \(target)")
                }
                guard target < position else {
                    throw DNSWireError(
                        .forwardPointer, field: field, offset: position,
                        expected: "a pointer before offset \(position), found \(target)")
                }
                guard target < lowestTarget else {
                    throw DNSWireError(
                        .pointerLoop, field: field, offset: position,
                        expected: "a pointer before offset \(lowestTarget), found \(target)")
                }
                let run = position - runStart
                (out + length).update(from: source + runStart, count: run)
                length += run
                lowestTarget = target
                position = target
                runStart = target
                // Once a pointer is followed, labels may run up to the pointer that led there.
                boundary = buffer.count
            } else {
                throw DNSWireError(
                    .badLabelType, field: field, offset: position,
                    expected: "a label length below 64 or a pointer, found 0x\(String(labelLength, radix: 16))")
            }
        }
        let name = DNSName(storage: arena, start: arenaUsed, length: length)
        arenaUsed += length
        offset = resume
        return name
    }
}
