import DNSWire
import SleepProxyCore

/// How an owner's records are kept in its row.
///
/// `records` holds the DNS records as one DNS message (ID 0, flags 0, the records as answers, names compressed).
/// Decoding a whole message at once puts every name of the owner in one shared storage block, which keeps a
/// restored lease table small, and the wire form keeps every bit: case, class, cache-flush, TTL and RDATA.
///
/// `record_times` holds what the wire form cannot: per record, in the same order, the sequence number and the two
/// instants. Layout (format 1): one format byte `0x01`, then per record the sequence byte and two zigzag varints
/// of nanoseconds: the registration time relative to the previous record's (the owner's `registered_at` for the
/// first record), and the expiry relative to the previous record's expiry (the record's own registration time
/// for the first record). Records of one registration share their times, so after the first one a record
/// costs 3 bytes here.
enum RecordCoding {
    static let timesFormat: UInt8 = 1

    static func encodeRecords(_ records: some Collection<HeldRecord>) throws(DNSWireError) -> [UInt8] {
        let message = DNSMessage(id: 0, flags: DNSFlags(rawValue: 0), answers: records.map(\.record))
        return try message.encoded(compression: .all)
    }

    static func encodeTimes(_ records: some Collection<HeldRecord>, ownerRegisteredAt: UnixTime) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1 + records.count * 8)
        out.append(timesFormat)
        var previousRegisteredAt = ownerRegisteredAt.nanoseconds
        var previousExpiresAt: Int64?
        for record in records {
            out.append(record.sequence)
            appendVarint(&out, zigzag(record.registeredAt.nanoseconds &- previousRegisteredAt))
            let expiryBase = previousExpiresAt ?? record.registeredAt.nanoseconds
            appendVarint(&out, zigzag(record.expiresAt.nanoseconds &- expiryBase))
            previousRegisteredAt = record.registeredAt.nanoseconds
            previousExpiresAt = record.expiresAt.nanoseconds
        }
        return out
    }

    /// Why a stored records or times blob was rejected.
    struct Failure: Error {
        let reason: String
    }

    /// The held records of a row, or a failure naming the blob and what was wrong with it.
    static func decode(
        records: UnsafeRawBufferPointer, times: UnsafeRawBufferPointer, ownerRegisteredAt: UnixTime
    ) throws(Failure) -> HeldRecords {
        let message = try decodeMessage(records)
        var reader = TimesReader(bytes: times)
        guard let format = reader.byte(), format == timesFormat else {
            throw Failure(reason: "record_times blob does not start with format byte \(timesFormat)")
        }
        var times: [(sequence: UInt8, registeredAt: UnixTime, expiresAt: UnixTime)] = []
        times.reserveCapacity(message.answers.count)
        var registeredAt = ownerRegisteredAt.nanoseconds
        var previousExpiresAt: Int64?
        // Packed (`HeldRecords`), the records keep only their own names, each once, not the block the whole blob
        // was decompressed into.
        for index in message.answers.indices {
            guard let sequence = reader.byte(), let registeredDelta = reader.varint(),
                let expiryDelta = reader.varint()
            else {
                throw Failure(
                    reason: "record_times blob ends at record \(index), expected times for \(message.answers.count)")
            }
            registeredAt = registeredAt &+ unzigzag(registeredDelta)
            let expiresAt = (previousExpiresAt ?? registeredAt) &+ unzigzag(expiryDelta)
            previousExpiresAt = expiresAt
            times.append((sequence, UnixTime(nanoseconds: registeredAt), UnixTime(nanoseconds: expiresAt)))
        }
        guard reader.atEnd else {
            throw Failure(
                reason: "record_times blob has \(reader.remaining) bytes after the times of "
                    + "\(message.answers.count) records")
        }
        return HeldRecords(message.answers, times: times)
    }

    /// The message a records blob holds: answers only.
    static func decodeMessage(_ records: UnsafeRawBufferPointer) throws(Failure) -> DNSMessage {
        let message: DNSMessage
        do {
            message = try DNSMessage(decoding: records)
        } catch {
            throw Failure(reason: "records blob does not decode: \(error)")
        }
        guard message.questions.isEmpty, message.authorities.isEmpty, message.additionals.isEmpty else {
            throw Failure(
                reason: "records blob holds \(message.questions.count)/\(message.authorities.count)/"
                    + "\(message.additionals.count) questions/authorities/additionals, expected only answers")
        }
        return message
    }

    @inline(__always)
    static func zigzag(_ value: Int64) -> UInt64 {
        UInt64(bitPattern: value << 1) ^ UInt64(bitPattern: value >> 63)
    }

    @inline(__always)
    static func unzigzag(_ value: UInt64) -> Int64 {
        Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
    }

    static func appendVarint(_ out: inout [UInt8], _ value: UInt64) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }
}

/// A bounds-checked cursor over a `record_times` blob.
private struct TimesReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    var atEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// A LEB128 varint of at most 10 bytes whose value fits 64 bits.
    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while let byte = byte() {
            let payload = UInt64(byte & 0x7F)
            guard shift < 63 || (shift == 63 && payload <= 1) else { return nil }
            value |= payload << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }
}

/// How a declared host's learned records are kept in its row of `learned`.
///
/// `records` holds them as an owner's are (one DNS message, the records as answers); `heard` holds, per record in
/// the same order, when the host last sent it. Layout (format 1): one format byte `0x01`, then per record a zigzag
/// varint of nanoseconds relative to the previous record's time (to 0 for the first).
extension RecordCoding {
    static let heardFormat: UInt8 = 1

    static func encode(_ learned: [LearnedRecord]) throws(DNSWireError) -> (records: [UInt8], heard: [UInt8]) {
        let message = DNSMessage(id: 0, flags: DNSFlags(rawValue: 0), answers: learned.map(\.record))
        var heard: [UInt8] = [heardFormat]
        heard.reserveCapacity(1 + learned.count * 9)
        var previous: Int64 = 0
        for record in learned {
            appendVarint(&heard, zigzag(record.heard.nanoseconds &- previous))
            previous = record.heard.nanoseconds
        }
        return (try message.encoded(compression: .all), heard)
    }

    /// The learned records of a row, or a failure naming the blob and what was wrong with it.
    static func decodeLearned(
        records: UnsafeRawBufferPointer, heard: UnsafeRawBufferPointer
    ) throws(Failure) -> [LearnedRecord] {
        let message = try decodeMessage(records)
        var reader = TimesReader(bytes: heard)
        guard let format = reader.byte(), format == heardFormat else {
            throw Failure(reason: "heard blob does not start with format byte \(heardFormat)")
        }
        var learned: [LearnedRecord] = []
        learned.reserveCapacity(message.answers.count)
        var time: Int64 = 0
        for (index, record) in message.answers.enumerated() {
            guard let delta = reader.varint() else {
                throw Failure(reason: "heard blob ends at record \(index), expected times for \(message.answers.count)")
            }
            time = time &+ unzigzag(delta)
            learned.append(LearnedRecord(record: record, heard: UnixTime(nanoseconds: time)))
        }
        guard reader.atEnd else {
            throw Failure(
                reason: "heard blob has \(reader.remaining) bytes after the times of \(message.answers.count) records")
        }
        return learned
    }
}
