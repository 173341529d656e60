import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// Builds random but valid messages: names with any bytes in labels (dots, spaces, zeros, mixed case) and
/// shared suffixes so that compression has work to do, every typed RDATA, opaque types and OPT records.
struct MessageGenerator {
    var rng: SeededGenerator

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func bool() -> Bool { Bool.random(using: &rng) }
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) } }

    static let suffixes: [[String]] = [["local"], ["_tcp", "local"], ["_udp", "local"], ["ip6", "arpa"], []]

    mutating func label() -> [UInt8] {
        switch int(0...5) {
        case 0: return bytes(int(1...63))
        case 1: return Array("70-35-60-63.1 Apple TV".utf8)
        case 2: return Array(["Fanboy", "fanboy", "FANBOY", "_ssh", "_SSH"][int(0...4)].utf8)
        default: return Array("l\(int(0...9))".utf8)
        }
    }

    mutating func name() -> DNSName {
        var labels: [[UInt8]] = (0..<int(0...3)).map { _ in label() }
        labels += Self.suffixes[int(0...4)].map { Array($0.utf8) }
        // Stay within 255 bytes in wire form.
        while labels.reduce(1, { $0 + $1.count + 1 }) > 255 { labels.removeFirst() }
        return try! DNSName(labels: labels)
    }

    mutating func characterStrings() -> [[UInt8]] { (0..<int(0...3)).map { _ in bytes(int(0...20)) } }

    mutating func option() -> EDNSOption {
        switch int(0...4) {
        case 0: return .updateLease(UpdateLease(lease: UInt32.random(in: 0...UInt32.max, using: &rng)))
        case 1:
            return .updateLease(
                UpdateLease(
                    lease: UInt32.random(in: 0...100_000, using: &rng),
                    keyLease: UInt32.random(in: 0...100_000, using: &rng)))
        case 2, 3:
            let wake: MACAddress? = bool() ? MACAddress(bytes: bytes(6)) : nil
            let password: [UInt8]? = wake != nil && bool() ? bytes(bool() ? 4 : 6) : nil
            return .owner(
                OwnerOption(
                    version: UInt8(int(0...1)), sequence: UInt8(int(0...255)), primaryMAC: MACAddress(bytes: bytes(6))!,
                    wakeMAC: wake, password: password))
        default:
            return .other(code: UInt16(int(5...65535)), data: bytes(int(0...12)))
        }
    }

    mutating func record() -> DNSRecord {
        let owner = name()
        let ttl = UInt32.random(in: 0...UInt32.max, using: &rng)
        let flush = bool()
        switch int(0...10) {
        case 0:
            return DNSRecord(
                name: owner, ttl: ttl, cacheFlush: flush,
                rdata: .a(IPv4Address(value: UInt32(int(0...Int(UInt32.max))))))
        case 1:
            return DNSRecord(
                name: owner, ttl: ttl, cacheFlush: flush,
                rdata: .aaaa(IPv6Address(high: rng.next(), low: rng.next())))
        case 2: return DNSRecord(name: owner, ttl: ttl, cacheFlush: flush, rdata: .ptr(name()))
        case 3:
            return DNSRecord(
                name: owner, ttl: ttl, cacheFlush: flush,
                rdata: .srv(
                    SRVData(
                        priority: UInt16(int(0...65535)), weight: UInt16(int(0...65535)), port: UInt16(int(0...65535)),
                        target: name())))
        case 4:
            return DNSRecord(
                name: owner, ttl: ttl, cacheFlush: flush, rdata: .txt(try! TXTData(strings: characterStrings())))
        case 5:
            return DNSRecord(
                name: owner, ttl: ttl, cacheFlush: flush,
                rdata: .hinfo(HINFOData(cpu: bytes(int(0...9)), os: bytes(int(0...9)))))
        case 6:
            let types = (0..<int(1...5)).map { _ in DNSType(UInt16(int(0...300))) }
            return DNSRecord(
                name: owner, ttl: ttl, cacheFlush: flush,
                rdata: .nsec(NSECData(nextName: bool() ? owner : name(), types: types)))
        case 7: return DNSRecord(name: owner, ttl: ttl, cacheFlush: flush, rdata: .null(bytes(int(0...40))))
        case 8:
            return DNSRecord(
                name: owner, type: DNSType(UInt16([99, 257, 65280, 65535][int(0...3)])),
                recordClass: DNSClass(UInt16(int(0...0x7FFF))),
                cacheFlush: flush, ttl: ttl, rdata: .opaque(bytes(int(0...30))))
        case 9:
            // An OPT-typed record with a real owner name (newer macOS "TSR" records).
            return DNSRecord(
                name: owner, type: .opt, recordClass: DNSClass(UInt16(int(0...65535))), cacheFlush: false, ttl: ttl,
                rdata: .opt(OPTData(options: (0..<int(0...3)).map { _ in option() })))
        default:
            return DNSRecord.opt(
                EDNSHeader(
                    udpPayloadSize: UInt16(int(0...65535)), extendedResponseCode: UInt8(int(0...255)),
                    version: UInt8(int(0...255)), flags: UInt16(int(0...65535))),
                options: (0..<int(0...3)).map { _ in option() })
        }
    }

    mutating func message() -> DNSMessage {
        let questions = (0..<int(0...3)).map { _ in
            DNSQuestion(
                name: name(), type: DNSType(UInt16(int(0...65535))), questionClass: DNSClass(UInt16(int(0...0x7FFF))),
                unicastResponse: bool())
        }
        return DNSMessage(
            id: UInt16(int(0...65535)), flags: DNSFlags(rawValue: UInt16(int(0...65535))), questions: questions,
            answers: (0..<int(0...6)).map { _ in record() }, authorities: (0..<int(0...6)).map { _ in record() },
            additionals: (0..<int(0...4)).map { _ in record() })
    }
}

@Suite("Round trips")
struct RoundTripTests {
    @Test(arguments: 0..<50)
    func generatedMessagesRoundTrip(seed: Int) throws {
        var generator = MessageGenerator(rng: SeededGenerator(seed: UInt64(seed)))
        for _ in 0..<20 {
            let message = generator.message()
            for compression in [NameCompression.all, .none, .exceptSRVTargets] {
                let bytes = try message.encoded(compression: compression)
                let decoded = try DNSMessage(decoding: bytes)
                #expect(decoded == message, "seed \(seed), compression \(compression)")
                // A decoded message encodes back to the same bytes under the same policy.
                #expect(try decoded.encoded(compression: compression) == bytes)
            }
        }
    }

    @Test func compressionNeverFoldsCase() throws {
        let message = DNSMessage(
            id: 1, flags: DNSFlags(response: true, opcode: .query),
            answers: [
                DNSRecord(name: "Fanboy.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 1))),
                DNSRecord(name: "fanboy.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 2))),
                DNSRecord(name: "x.FANBOY.local.", ttl: 120, rdata: .ptr("fanboy.LOCAL.")),
            ])
        let bytes = try message.encoded()
        let decoded = try DNSMessage(decoding: bytes)
        #expect(decoded.answers.map(\.name.description) == ["Fanboy.local.", "fanboy.local.", "x.FANBOY.local."])
        #expect(decoded == message)
        // The second name (at 12 + 28) is `fanboy` and a pointer to the first `local` (at 19).
        #expect(bytes[40..<49] == [6, 0x66, 0x61, 0x6E, 0x62, 0x6F, 0x79, 0xC0, 19])
    }

    @Test(arguments: 100..<110)
    func uncompressedSizeIsTheSumOfTheParts(seed: Int) throws {
        var generator = MessageGenerator(rng: SeededGenerator(seed: UInt64(seed)))
        let message = generator.message()
        var expected = 12 + message.questions.reduce(0) { $0 + $1.name.wire.count + 4 }
        for record in message.answers + message.authorities + message.additionals {
            expected += record.name.wire.count + 10 + (try record.encodedRData().count)
        }
        let full = try message.encoded(compression: .none)
        #expect(full.count == expected)
        #expect(try message.encoded(compression: .all).count <= full.count)
    }

    @Test func largestMessage() throws {
        // One NULL record of 65,535 - 12 - 11 bytes: exactly 65,535 bytes in all.
        let payload = [UInt8](repeating: 0xAB, count: 65_535 - 12 - 11)
        let message = DNSMessage(
            id: 7, flags: DNSFlags(rawValue: 0), answers: [DNSRecord(name: .root, ttl: 1, rdata: .null(payload))])
        let bytes = try message.encoded()
        #expect(bytes.count == 65_535)
        #expect(try DNSMessage(decoding: bytes) == message)
        var tooBig = message
        tooBig.answers.append(DNSRecord(name: .root, ttl: 1, rdata: .null([1])))
        #expect(throws: DNSWireError.self) { try tooBig.encoded() }
    }
}

@Suite("Additionals that fit")
struct AdditionalsWithinTests {
    /// What `encoded(within:addingAdditionals:)` must equal: each extra record tried in turn by writing the whole
    /// message again, kept when the message still fits.
    static func tryingEach(_ message: DNSMessage, _ extra: [DNSRecord], within limit: Int) throws -> [UInt8] {
        var fitted = message
        for record in extra {
            var trial = fitted
            trial.additionals.append(record)
            if try trial.encoded().count <= limit { fitted = trial }
        }
        return try fitted.encoded()
    }

    @Test(arguments: 0..<40)
    func sameBytesAsWritingEachTrialWhole(seed: Int) throws {
        var generator = MessageGenerator(rng: SeededGenerator(seed: UInt64(seed)))
        for _ in 0..<10 {
            let message = generator.message()
            // Many records with names that share suffixes: some are taken back after they added compression
            // targets, and the table of those targets grows past its first size on the way.
            let extra = (0..<generator.int(0...60)).map { _ in generator.record() }
            let base = try message.encoded().count
            let limit = base + generator.int(0...1_500)
            let bytes = try message.encoded(within: limit, addingAdditionals: { extra })
            #expect(bytes == (try Self.tryingEach(message, extra, within: limit)), "seed \(seed)")
            #expect(bytes.count <= limit)
            let decoded = try DNSMessage(decoding: bytes)
            #expect(decoded.answers == message.answers && decoded.authorities == message.authorities)
            #expect(Array(decoded.additionals.prefix(message.additionals.count)) == message.additionals)
        }
    }

    @Test func aRecordTakenBackLeavesNoNameToPointAt() throws {
        let message = DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("imac._ssh._tcp.local."))])
        let base = try message.encoded().count
        // Too big to fit, and the first to write the name `studio.example.local.`.
        let big = DNSRecord(
            name: "studio.example.local.", ttl: 4500,
            rdata: .txt(try TXTData(strings: [Array(repeating: 0x61, count: 200)])))
        // Fits, with the same name: it must be written in full, not as a pointer to where `big` was.
        let small = DNSRecord(name: "studio.example.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 9)))
        let bytes = try message.encoded(within: base + 60, addingAdditionals: { [big, small] })
        let decoded = try DNSMessage(decoding: bytes)
        #expect(decoded.additionals == [small])
        #expect(
            bytes
                == (try DNSMessage(
                    id: 0, flags: message.flags, answers: message.answers, additionals: [small]
                ).encoded()))
    }

    @Test func theMessageAloneMayExceedTheLimit() throws {
        let message = DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query),
            answers: [DNSRecord(name: "imac.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 1)))])
        let extra = DNSRecord(name: "imac.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 2)))
        var asked = false
        let bytes = try message.encoded(
            within: 10,
            addingAdditionals: {
                asked = true
                return [extra]
            })
        #expect(bytes == (try message.encoded()))
        #expect(!asked)
    }
}
