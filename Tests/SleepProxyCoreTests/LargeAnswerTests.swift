import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// Answers to a browse of a service type that many held hosts offer: more than a packet holds.
@Suite("Answers larger than a packet")
struct LargeAnswerTests {
    static let type: DNSName = "_ssh._tcp.local."

    /// `count` hosts held, each with an ssh service, past their probes.
    static func held(_ count: Int) -> Harness {
        var harness = Harness()
        for index in 0..<count {
            harness.register(
                Update.bytes(
                    records: Update.host("mac\(index + 100)", ipv4: IPv4Address(10, 77, 1, UInt8(index + 10))),
                    owner: Update.owner(mac: MACAddress(0x02, 0x78, 0, 0, 0, UInt8(index + 10)))))
        }
        harness.run(until: harness.now + .seconds(20))
        return harness
    }

    /// The instance of host `index`: names of the same length (`mac100` to `mac219`), so that any one of them left
    /// out of a reply would take the same room.
    static func instance(_ index: Int) -> DNSName {
        try! DNSName(labels: ["mac\(index + 100)", "_ssh", "_tcp", "local"])
    }

    @Test func aLegacyBrowseIsCutWithTCAtTheMostAnswersThatFit() throws {
        var harness = Self.held(120)
        let actions = harness.mdns(
            Query.bytes(id: 9, [DNSQuestion(name: Self.type, type: .ptr)]),
            from: Endpoint(address: Harness.waker.address, port: 40_000))
        let replies = actions.transmissions.filter { $0.destination.port == 40_000 }
        try #require(replies.count == 1)
        let bytes = replies[0].bytes
        #expect(bytes.count <= 1_440)
        let reply = try DNSMessage(decoding: bytes)
        #expect(reply.id == 9 && reply.flags.truncated)
        #expect(reply.additionals.isEmpty)
        let listed = reply.answers.compactMap { if case .ptr(let name) = $0.rdata { name } else { nil } }
        #expect(listed.count == reply.answers.count && Set(listed).count == listed.count)
        #expect(listed.count > 1 && listed.count < 120)
        // One more instance would not fit.
        let unlisted = try #require((0..<120).map(Self.instance).first { !listed.contains($0) })
        var more = reply
        more.answers.append(DNSRecord(name: Self.type, ttl: 10, rdata: .ptr(unlisted)))
        #expect(try more.encoded().count > 1_440)
    }

    @Test func aUnicastBrowseIsSplitOverMessagesThatEachFit() throws {
        var harness = Self.held(120)
        let actions = harness.mdns(Query.bytes(Self.type, .ptr, unicast: true))
        let replies = actions.transmissions.filter { $0.destination == Harness.waker }
        #expect(replies.count > 1)
        #expect(replies.allSatisfy { $0.bytes.count <= 1_440 })
        let listed = try replies.flatMap { try DNSMessage(decoding: $0.bytes).answers }.compactMap {
            if case .ptr(let name) = $0.rdata { name } else { nil }
        }
        #expect(Set(listed) == Set((0..<120).map(Self.instance)))
    }

    @Test func anAnswerThatFitsCarriesTheAdditionalsThatFitAfterIt() throws {
        var harness = Self.held(120)
        // All but 20 instances known: those 20 PTRs fit in one packet with some of their SRVs, TXTs and
        // addresses, never past it.
        let known = (20..<120).map {
            DNSRecord(name: Self.type, ttl: 4500, rdata: .ptr(Self.instance($0)))
        }
        let actions = harness.mdns(
            Query.bytes([DNSQuestion(name: Self.type, type: .ptr, unicastResponse: true)], knownAnswers: known))
        let replies = actions.transmissions.filter { $0.destination == Harness.waker }
        try #require(replies.count == 1)
        #expect(replies[0].bytes.count <= 1_440)
        let reply = try DNSMessage(decoding: replies[0].bytes)
        #expect(reply.answers.count == 20)
        #expect(!reply.additionals.isEmpty)
        // Every additional belongs to an instance answered, or to its host (`macN` either way).
        func firstLabel(_ name: DNSName) -> Substring { name.description.split(separator: ".").first ?? "" }
        let answered = Set(
            reply.answers.compactMap { if case .ptr(let name) = $0.rdata { firstLabel(name) } else { nil } })
        for record in reply.additionals {
            #expect(answered.contains(firstLabel(record.name)), "\(record.name) \(record.type)")
        }
    }
}

@Suite("Known answers")
struct KnownAnswersTests {
    /// `KnownAnswers` finds by record what checking every known answer with `suppresses` finds: names and the
    /// names in RDATA in any case, the same type and class, at least half our TTL.
    @Test func theSameAsCheckingEachKnownAnswer() throws {
        var random = SeededGenerator(seed: 6762)
        let names: [DNSName] = [
            "imac.local.", "IMac.local.", "nas.local.", "imac._ssh._tcp.local.", "_ssh._tcp.local.",
        ]
        func record() -> DNSRecord {
            let name = names.randomElement(using: &random)!
            let ttl = [0, 59, 60, 61, 119, 120, 4500].randomElement(using: &random)! as UInt32
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return DNSRecord(name: name, ttl: ttl, rdata: .ptr(names.randomElement(using: &random)!))
            case 1:
                return DNSRecord(
                    name: name, ttl: ttl, cacheFlush: Bool.random(using: &random),
                    rdata: .srv(
                        SRVData(
                            port: [22, 445].randomElement(using: &random)!, target: names.randomElement(using: &random)!
                        )))
            case 2:
                return DNSRecord(
                    name: name, ttl: ttl, rdata: .a(IPv4Address(10, 0, 0, UInt8.random(in: 1...2, using: &random))))
            default:
                var record = DNSRecord(name: name, ttl: ttl, rdata: .a(IPv4Address(10, 0, 0, 1)))
                record.recordClass = DNSClass(3)
                return record
            }
        }
        for _ in 0..<200 {
            let known = (0..<Int.random(in: 0...12, using: &random)).map { _ in record() }
            let answers = KnownAnswers(known)
            for _ in 0..<30 {
                let ours = record()
                #expect(
                    answers.suppress(ours) == known.contains { SleepProxyCore.suppresses($0, ours) },
                    "\(ours) against \(known)")
            }
        }
    }
}

@Suite("Cutting a legacy reply to one packet")
struct LegacyTruncationTests {
    /// How a reply was cut before: the last answer dropped, and the message written again, until it fits.
    static func droppingOneAtATime(_ message: DNSMessage) -> [[UInt8]] {
        if let bytes = try? message.encoded(), bytes.count <= SleepProxyCore.maximumMessage { return [bytes] }
        var truncated = message
        while truncated.answers.count > 1,
            (try? truncated.encoded()).map({ $0.count > SleepProxyCore.maximumMessage }) ?? true
        {
            truncated.answers.removeLast()
            truncated.flags.truncated = true
        }
        return (try? truncated.encoded()).map { [$0] } ?? []
    }

    @Test func theSameCutAsDroppingOneAnswerAtATime() throws {
        var random = SeededGenerator(seed: 1035)
        func answer() throws -> DNSRecord {
            let label = String(repeating: "x", count: Int.random(in: 1...60, using: &random))
            return DNSRecord(
                name: "_ssh._tcp.local.", ttl: 10, rdata: .ptr(try DNSName(labels: [label, "_ssh", "_tcp", "local"])))
        }
        for count in [0, 1, 2, 3, 4, 10, 20, 21, 22, 40, 100] {
            for authority in [nil, 100, 1_300, 2_000] as [Int?] {
                var message = DNSMessage(
                    id: 7, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
                    questions: [DNSQuestion(name: "_ssh._tcp.local.", type: .ptr)],
                    answers: try (0..<count).map { _ in try answer() })
                if let authority {
                    message.authorities = [
                        DNSRecord(name: "local.", ttl: 10, rdata: .null([UInt8](repeating: 1, count: authority)))
                    ]
                }
                let cut = SleepProxyCore.encode(message, truncateIfTooLarge: true)
                #expect(cut == Self.droppingOneAtATime(message), "\(count) answers, authority \(authority ?? 0)")
            }
        }
    }
}
