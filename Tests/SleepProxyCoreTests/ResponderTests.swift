import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// Answering for held records, RFC 6762 style, with the clock injected.
@Suite("mDNS responder")
struct ResponderTests {
    static let ipv4 = IPv4Address(10, 77, 0, 2)
    static let records = Update.host("Fanboy", ipv4: ipv4)
    static let host: DNSName = "Fanboy.local."
    static let instance: DNSName = "Fanboy._ssh._tcp.local."

    /// A harness holding one host, with its take-over announcements already sent.
    static func holding() -> Harness {
        var harness = Harness()
        harness.register(Update.bytes(records: records))
        harness.run(until: harness.now + .seconds(5))
        return harness
    }

    @Test func takeOverIsAnnouncedTwiceWithoutReverseMappings() throws {
        var harness = Harness()
        let start = harness.now
        let immediate = harness.register(Update.bytes(records: Self.records))
        #expect(immediate.transmissions.isEmpty)
        var sends: [(Duration, MDNSTransmission)] = []
        while let deadline = harness.core.nextDeadline, deadline < start + .seconds(10) {
            harness.now = deadline
            for transmission in harness.tick().transmissions { sends.append((harness.now - start, transmission)) }
        }
        // Two rounds, about a second apart, to the IPv4 and the IPv6 group.
        #expect(sends.map(\.0) == [.milliseconds(750), .milliseconds(750), .milliseconds(1750), .milliseconds(1750)])
        #expect(Set(sends.map(\.1.destination)) == [MulticastDNS.ipv4Group, MulticastDNS.ipv6Group])
        let message = try DNSMessage(decoding: sends[0].1.bytes)
        #expect(message.id == 0 && message.flags.rawValue == 0x8400)
        // Everything but the reverse-mapping PTR, byte for byte as registered (case, TTL, cache-flush).
        #expect(message.answers == Self.records.filter { ReverseMapping.address(of: $0) == nil })
    }

    @Test func uniqueAnswerIsImmediateWithNSECForMissingTypes() throws {
        var harness = Self.holding()
        let actions = harness.mdns(Query.bytes("fanboy.local.", .a))
        let reply = try #require(actions.sentMessages.first)
        #expect(actions.transmissions.first?.destination == MulticastDNS.ipv4Group)
        #expect(reply.flags.rawValue == 0x8400)
        #expect(reply.questions.isEmpty)
        #expect(reply.answers == [Self.records[0]])
        // The host has an A but no AAAA: the NSEC says so.
        let nsec = try #require(reply.additionals.first { $0.type == .nsec })
        #expect(nsec.name == Self.host && nsec.cacheFlush)
        let data = try #require(Self.nsecData(nsec))
        #expect(data.types == [.a])
    }

    @Test func missingTypeOfAUniqueNameGetsANegativeAnswer() throws {
        var harness = Self.holding()
        let reply = try #require(harness.mdns(Query.bytes(Self.host, .aaaa)).sentMessages.first)
        #expect(reply.answers.count == 1)
        #expect(reply.answers.first?.type == .nsec)
        // Nothing at all for names nobody holds.
        #expect(harness.mdns(Query.bytes("nobody.local.", .a)).transmissions.isEmpty)
    }

    @Test func browseAnswerIsDelayedAndCarriesTheAdditionalsClientsNeed() throws {
        var harness = Self.holding()
        let start = harness.now
        #expect(harness.mdns(Query.bytes("_ssh._tcp.local.", .ptr)).transmissions.isEmpty)
        let deadline = try #require(harness.core.nextDeadline)
        #expect(deadline - start >= .milliseconds(20) && deadline - start <= .milliseconds(120))
        let reply = try #require(harness.run(until: start + .milliseconds(200)).sentMessages.first)
        #expect(reply.answers == [Self.records[4]])
        #expect(Set(reply.additionals.map(\.type)) == [.srv, .txt, .a, .nsec])
        #expect(reply.additionals.contains(Self.records[2]))
        #expect(reply.additionals.contains(Self.records[3]))
        #expect(reply.additionals.contains(Self.records[0]))
    }

    @Test func legacyUnicastGetsAConventionalReply() throws {
        var harness = Self.holding()
        let querier = Endpoint(address: .v4(IPv4Address(10, 77, 0, 3)), port: 40_000)
        let actions = harness.mdns(
            Query.bytes(id: 0xBEEF, "FANBOY.local.", .a), from: querier, to: Harness.proxyIPv4)
        let transmission = try #require(actions.transmissions.first)
        #expect(transmission.destination == querier)
        // From the address the querier asked: a connected socket drops anything else.
        #expect(transmission.source == Harness.proxyIPv4)
        let reply = try DNSMessage(decoding: transmission.bytes)
        #expect(reply.id == 0xBEEF)
        #expect(reply.flags.rawValue == 0x8400)
        #expect(reply.questions == [DNSQuestion(name: "FANBOY.local.", type: .a)])
        #expect(reply.answers.count == 1)
        #expect(reply.answers.first?.ttl == 10)
        #expect(reply.answers.first?.cacheFlush == false)
        #expect(reply.answers.first?.name.description == "Fanboy.local.")
        #expect(reply.additionals.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush })
    }

    /// Announcements that fall due together go out earliest first, and those due at the same moment in the order
    /// they were scheduled (the waiting responses are kept in a heap, not a list scanned at every tick).
    @Test func responsesGoOutInTheOrderTheyFallDue() throws {
        var harness = Harness(configuration: CoreConfiguration(maximumRecordsTotal: 10_000))
        // Hosts registered in pairs, 50 ms apart: each pair's announcements are due at the same moments.
        for pair in 0..<4 {
            for member in 0..<2 {
                let index = pair * 2 + member
                harness.register(
                    Update.bytes(
                        records: Update.host("h\(index)", ipv4: IPv4Address(10, 77, 1, UInt8(10 + index))),
                        owner: OwnerOption(sequence: 1, primaryMAC: MACAddress(0x02, 0x20, 0, 0, 0, UInt8(index)))))
            }
            harness.advance(.milliseconds(50))
        }
        harness.advance(.seconds(3))
        let sent = harness.tick().transmissions.compactMap { transmission -> String? in
            guard let message = try? DNSMessage(decoding: transmission.bytes),
                let host = message.answers.first(where: { $0.type == .a })?.name.description.split(separator: ".").first
            else { return nil }
            let family = if case .v6 = transmission.destination.address { "v6" } else { "v4" }
            return "\(host) \(family)"
        }
        let round = (0..<8).flatMap { ["h\($0) v4", "h\($0) v6"] }
        #expect(sent == round + round)
        #expect(harness.core.nextDeadline.map { $0 > harness.now } ?? true)
    }

    /// Answers are cached per question and never outlive what they were made of: asked again after a
    /// re-registration with another address, after a wake began, and after the host was let go, the proxy answers
    /// from what it holds now.
    @Test func cachedAnswersFollowEveryChange() throws {
        var harness = TakeoverTests.taken()
        let querier = Endpoint(address: .v4(IPv4Address(10, 77, 0, 3)), port: 40_000)
        func ask(_ name: DNSName, _ type: DNSType) throws -> DNSMessage? {
            let actions = harness.mdns(Query.bytes(id: 7, name, type), from: querier, to: Harness.proxyIPv4)
            return try actions.transmissions.first.map { try DNSMessage(decoding: $0.bytes) }
        }
        let first = try #require(try ask("sleepy.local.", .a))
        let again = try #require(try ask("SLEEPY.local.", .a))
        #expect(first.answers == again.answers)
        #expect(first.answers.first?.rdata == .a(TakeoverTests.ipv4))
        let service = try #require(try ask("sleepy._ssh._tcp.local.", .srv))
        #expect(service.additionals.contains { $0.rdata == .a(TakeoverTests.ipv4) })

        // The same owner registers again (a new sequence) with another address for its name.
        let moved = IPv4Address(10, 77, 0, 22)
        let registered = harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: moved),
                owner: OwnerOption(sequence: 2, primaryMAC: TakeoverTests.sleeperMAC)))
        #expect(registered.contains { if case .reply = $0 { true } else { false } })
        harness.run(until: harness.now + .seconds(12))
        let now = try #require(try ask("sleepy.local.", .a))
        #expect(now.answers.map(\.rdata) == [.a(moved)])
        let serviceNow = try #require(try ask("sleepy._ssh._tcp.local.", .srv))
        #expect(serviceNow.additionals.contains { $0.rdata == .a(moved) })
        #expect(!serviceNow.additionals.contains { $0.rdata == .a(TakeoverTests.ipv4) })

        // A wake silences the whole host at once.
        let syn = EthernetFrame.tcp(
            TCPSegment(sourcePort: 50_000, destinationPort: 22, sequenceNumber: 1, flags: .syn),
            sourceAddress: TakeoverTests.waker, destinationAddress: moved, source: TakeoverTests.wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
        #expect(!WakeTests.wakes(harness.frame(syn)).isEmpty)
        #expect(try ask("sleepy.local.", .a) == nil)
        #expect(try ask("sleepy._ssh._tcp.local.", .srv) == nil)
    }

    /// A resolver asking the same question again gets the same reply with its own ID, made once; the question is
    /// echoed as asked, and a change of what is held changes the reply.
    @Test func aRepeatedLegacyQueryGetsTheSameReplyWithItsOwnID() throws {
        var harness = TakeoverTests.taken()
        let querier = Endpoint(address: .v4(IPv4Address(10, 77, 0, 3)), port: 40_000)
        func ask(_ id: UInt16, _ name: DNSName) throws -> [UInt8] {
            let actions = harness.mdns(Query.bytes(id: id, name, .a), from: querier, to: Harness.proxyIPv4)
            return try #require(actions.transmissions.first).bytes
        }
        let first = try ask(7, "sleepy.local.")
        let second = try ask(8, "sleepy.local.")
        #expect(Array(second.prefix(2)) == [0, 8])
        #expect(second.dropFirst(2) == first.dropFirst(2))
        let decoded = try DNSMessage(decoding: second)
        #expect(decoded.id == 8 && decoded.questions.map(\.name) == ["sleepy.local."])
        #expect(decoded.answers.map(\.rdata) == [.a(TakeoverTests.ipv4)])
        let shouted = try DNSMessage(decoding: try ask(9, "SLEEPY.local."))
        #expect(shouted.questions.map(\.name.description) == ["SLEEPY.local."])
        #expect(shouted.answers == decoded.answers)

        let moved = IPv4Address(10, 77, 0, 22)
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: moved),
                owner: OwnerOption(sequence: 2, primaryMAC: TakeoverTests.sleeperMAC)))
        harness.run(until: harness.now + .seconds(12))
        let after = try DNSMessage(decoding: try ask(10, "sleepy.local."))
        #expect(after.id == 10 && after.answers.map(\.rdata) == [.a(moved)])
    }

    @Test func unicastResponseBitIsAnsweredByUnicast() throws {
        var harness = Self.holding()
        let actions = harness.mdns(Query.bytes(Self.instance, .srv, unicast: true))
        let transmission = try #require(actions.transmissions.first)
        #expect(transmission.destination == Harness.waker)
        let reply = try DNSMessage(decoding: transmission.bytes)
        #expect(reply.id == 0)
        #expect(reply.answers == [Self.records[2]])
        #expect(reply.additionals.contains(Self.records[0]))
    }

    @Test func knownAnswersSuppressOnlyWithEnoughTTL() throws {
        var harness = Self.holding()
        var known = Self.records[0]
        known.ttl = 60  // half of 120: still suppresses
        #expect(
            harness.mdns(Query.bytes([DNSQuestion(name: Self.host, type: .a)], knownAnswers: [known])).transmissions
                .isEmpty)
        known.ttl = 59
        harness.advance(.seconds(2))
        let actions = harness.mdns(Query.bytes([DNSQuestion(name: Self.host, type: .a)], knownAnswers: [known]))
        #expect(actions.sentMessages.first?.answers == [Self.records[0]])
    }

    /// A truncated query's known answers may continue in the next packets; the response waits for them.
    @Test func knownAnswersSpreadOverSeveralPackets() throws {
        var harness = Self.holding()
        let start = harness.now
        let question = DNSQuestion(name: "_ssh._tcp.local.", type: .ptr)
        harness.mdns(Query.bytes([question], truncated: true))
        let deadline = try #require(harness.core.nextDeadline)
        #expect(deadline - start >= .milliseconds(400) && deadline - start <= .milliseconds(500))
        harness.advance(.milliseconds(100))
        harness.mdns(Query.bytes([], knownAnswers: [Self.records[4]]))
        #expect(harness.run(until: start + .seconds(1)).transmissions.isEmpty)
    }

    @Test func aRecordIsMulticastAtMostOnceASecond() throws {
        var harness = Self.holding()
        #expect(harness.mdns(Query.bytes(Self.host, .a)).sentMessages.count == 1)
        harness.advance(.milliseconds(500))
        #expect(harness.mdns(Query.bytes(Self.host, .a)).transmissions.isEmpty)
        harness.advance(.milliseconds(500))
        #expect(harness.mdns(Query.bytes(Self.host, .a)).sentMessages.count == 1)
    }

    @Test func reverseMappingsAreAnsweredWhenAsked() throws {
        var harness = Self.holding()
        let reverse = ReverseMapping.name(of: .v4(Self.ipv4))
        let reply = try #require(harness.mdns(Query.bytes(reverse, .ptr)).sentMessages.first)
        #expect(reply.answers == [Self.records[1]])
    }

    @Test func anyQueryGetsEveryTypeOfTheName() throws {
        var harness = Self.holding()
        let reply = try #require(harness.mdns(Query.bytes(Self.instance, .any)).sentMessages.first)
        #expect(Set(reply.answers) == [Self.records[2], Self.records[3]])
    }

    @Test func ipv6QueriesAreAnsweredOnTheIPv6Group() throws {
        var harness = Self.holding()
        let querier = Endpoint(address: .v6(IPv6Address("fe80::77:ff:fe00:3")!), port: 5353)
        let actions = harness.mdns(Query.bytes(Self.host, .a), from: querier, to: .v6(.mdnsGroup))
        #expect(actions.transmissions.first?.destination == MulticastDNS.ipv6Group)
    }

    @Test func malformedPacketsAreIgnoredWithALogLine() {
        var harness = Self.holding()
        let actions = harness.mdns([0, 0, 0, 0, 0, 1])
        #expect(actions.transmissions.isEmpty)
        #expect(actions.logLines.contains { $0.0 == .debug && $0.1.contains("ignored") })
    }

    /// RFC 6762 section 5.4: a QU question is answered by multicast when the record has not been multicast on
    /// the link within a quarter of its TTL (other caches want it too); by unicast when it has.
    @Test func aQUQuestionIsMulticastWhenTheRecordWasNotMulticastForAQuarterOfItsTTL() throws {
        var harness = Self.holding()  // announced 3 s ago
        let fresh = harness.mdns(Query.bytes(Self.instance, .srv, unicast: true))
        #expect(fresh.transmissions.map(\.destination) == [Harness.waker])
        harness.advance(.seconds(31))  // a quarter of 120 s since the last announcement
        let stale = harness.mdns(Query.bytes(Self.instance, .srv, unicast: true))
        #expect(stale.transmissions.map(\.destination) == [MulticastDNS.ipv4Group])
        // Now multicast again: the next QU question is answered by unicast.
        harness.advance(.seconds(1))
        #expect(
            harness.mdns(Query.bytes(Self.instance, .srv, unicast: true)).transmissions.first?.destination
                == Harness.waker)
    }

    /// No message over 1,440 bytes of DNS payload: a big answer is split over several messages.
    @Test func answersAreSplitAt1440Bytes() throws {
        var harness = Harness()
        let instances = (0..<40).map {
            try! DNSName(labels: ["Service number \($0) with a long name", "_http", "_tcp", "local"])
        }
        let records = instances.map { DNSRecord(name: "_http._tcp.local.", ttl: 4500, rdata: .ptr($0)) }
        harness.register(Update.bytes(records: records))
        harness.run(until: harness.now + .seconds(5))
        harness.mdns(Query.bytes("_http._tcp.local.", .ptr))
        let sent = harness.run(until: harness.now + .seconds(1)).transmissions.filter {
            $0.destination == MulticastDNS.ipv4Group
        }
        #expect(sent.count >= 2)
        #expect(sent.allSatisfy { $0.bytes.count <= 1440 }, "\(sent.map(\.bytes.count))")
        let answered = try sent.flatMap { try DNSMessage(decoding: $0.bytes).answers }
        #expect(Set(answered.map(\.rdata)) == Set(records.map(\.rdata)))
    }

    /// A query sent straight to a held address (the capture sees it) is answered from our own address, never
    /// from the sleeping host's.
    @Test func nothingIsSentFromAHeldAddress() throws {
        var harness = Self.holding()
        harness.run(until: harness.now + .seconds(10))
        let direct = harness.mdns(
            Query.bytes(Self.host, .a), from: Endpoint(address: .v4(IPv4Address(10, 77, 0, 3)), port: 40_000),
            to: .v4(Self.ipv4))
        let reply = try #require(direct.transmissions.first)
        #expect(reply.source == nil)
        let toUs = harness.mdns(
            Query.bytes(Self.host, .a), from: Endpoint(address: .v4(IPv4Address(10, 77, 0, 3)), port: 40_000),
            to: Harness.proxyIPv4)
        #expect(toUs.transmissions.first?.source == Harness.proxyIPv4)
    }

    /// An NSEC lists every type held for the name, also a record silent for a moment (probed again after a
    /// conflict): it must never deny a type the host has.
    @Test func nsecListsEveryHeldTypeEvenWhileOneIsProbedAgain() throws {
        var harness = Harness()
        var records = Self.records
        records.append(DNSRecord(name: Self.host, ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fd77::2")!)))
        harness.register(Update.bytes(records: records))
        harness.run(until: harness.now + .seconds(5))
        let conflict = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query),
            answers: [DNSRecord(name: Self.host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 66)))]
        ).encoded()
        harness.mdns(conflict, mac: MACAddress(0x02, 0, 0, 0, 0, 0x66))
        let reply = try #require(harness.mdns(Query.bytes(Self.host, .aaaa, unicast: true)).sentMessages.first)
        #expect(reply.answers.map(\.type) == [.aaaa])
        let nsec = try #require(reply.additionals.first { $0.type == .nsec })
        let data = try #require(Self.nsecData(nsec))
        #expect(data.types == [.a, .aaaa])
    }

    /// The NSEC RDATA of `record`, nil for any other type.
    static func nsecData(_ record: DNSRecord) -> NSECData? {
        guard case .nsec(let data) = record.rdata else { return nil }
        return data
    }
}
