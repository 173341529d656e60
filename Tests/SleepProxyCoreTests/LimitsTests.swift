import DNSWire
import NetworkAddresses
import SleepProxyCore
import Testing

/// Limits on what an outsider controls: datagram sizes, hosts per interface, and each source's rate.
@Suite("Limits")
struct LimitsTests {
    static func registration(_ index: Int, padding: Int = 0, sequence: UInt8 = 1) -> [UInt8] {
        var records = Update.host("host\(index)", ipv4: IPv4Address(10, 77, 0, UInt8(10 + index % 200)))
        if padding > 0 {
            // TXT strings of at most 255 bytes each, as many as needed.
            var strings: [String] = []
            var left = padding
            while left > 0 {
                strings.append(String(repeating: "x", count: min(left, 255)))
                left -= 256
            }
            records.append(
                DNSRecord(
                    name: try! DNSName(labels: ["host\(index) pad", "_http", "_tcp", "local"]), ttl: 4500,
                    rdata: .txt(try! TXTData(strings))))
        }
        let mac = MACAddress(0x02, 0x10, 0, 0, UInt8(index / 256), UInt8(index % 256))
        return Update.bytes(records: records, owner: OwnerOption(sequence: sequence, primaryMAC: mac))
    }

    @Test func datagramsUpToTheLimitAreTakenLargerOnesRefused() throws {
        var harness = Harness()
        var fits = Self.registration(1, padding: 8_500)
        #expect(fits.count <= 9_000 && fits.count > 8_500, "\(fits.count)")
        #expect(harness.register(fits).replies.count == 1)

        fits = Self.registration(2, padding: 9_000)
        #expect(fits.count > 9_000)
        let refused = harness.register(fits)
        #expect(refused.replies.isEmpty)
        let event = try #require(refused.events.first)
        #expect(event.reason == .tooLarge && event.detail == "\(fits.count) bytes, limit 9000", "\(event)")
        // Not decoded at all: garbage of that size is refused the same way.
        let garbage = harness.register([UInt8](repeating: 0xFF, count: 9_001))
        #expect(garbage.events.first?.reason == .tooLarge)
    }

    @Test func anInterfaceHoldsAtMostSoManyHosts() throws {
        var configuration = CoreConfiguration()
        configuration.maximumHostsPerInterface = 2
        var harness = Harness(configuration: configuration)
        #expect(harness.register(Self.registration(1)).replies.count == 1)
        #expect(harness.register(Self.registration(2)).replies.count == 1)
        let third = harness.register(Self.registration(3))
        #expect(third.events.first?.reason == .hostLimit, "\(third.events)")
        #expect(third.events.first?.detail == "eth0 holds 2 hosts, limit 2")
        // Hosts already held still renew and re-register.
        #expect(harness.register(Self.registration(1)).replies.count == 1)
        #expect(harness.register(Self.registration(2, sequence: 2)).replies.count == 1)
        #expect(harness.core.owners.count == 2)
        // A host whose lease ends is woken, then let go, and makes room: the count follows hosts as they go.
        harness.register(
            Update.bytes(
                records: Update.host("host1", ipv4: IPv4Address(10, 77, 0, 11)),
                owner: OwnerOption(sequence: 3, primaryMAC: MACAddress(0x02, 0x10, 0, 0, 0, 1)),
                lease: UpdateLease(lease: 60)))
        #expect(harness.register(Self.registration(3)).events.first?.reason == .hostLimit)
        harness.run(until: harness.now + .seconds(600))
        #expect(harness.core.owners.count == 1)
        #expect(harness.register(Self.registration(3)).replies.count == 1)
        #expect(harness.register(Self.registration(4)).events.first?.detail == "eth0 holds 2 hosts, limit 2")
    }

    /// One source sending too fast is refused beyond its burst, with one event a minute, while others go on;
    /// its allowance comes back at the sustained rate.
    @Test func eachSourceHasItsRate() throws {
        var configuration = CoreConfiguration()
        configuration.registrationRate = Rate(perSecond: 10, burst: 20)
        var harness = Harness(configuration: configuration)
        var answered = 0
        var refusedEvents: [Event] = []
        for index in 0..<50 {
            let actions = harness.register(Self.registration(index))
            answered += actions.replies.count
            refusedEvents += actions.events.filter { $0.reason == .rateLimited }
        }
        #expect(answered == 20, "the burst")
        #expect(refusedEvents.count == 1, "one event a minute per source, not one per datagram")
        #expect(refusedEvents.first?.source == Harness.sleeper)
        #expect(refusedEvents.first?.detail.contains("more than 10 registration datagrams a second") == true)

        // Another host on the link is not affected.
        let other = Endpoint(address: .v4(IPv4Address(10, 77, 0, 99)), port: 5353)
        #expect(harness.register(Self.registration(60), from: other).replies.count == 1)

        // Half a second later, five more are allowed.
        harness.advance(.milliseconds(500))
        var later = 0
        for index in 70..<80 { later += harness.register(Self.registration(index)).replies.count }
        #expect(later == 5)
        // A minute on, a refusal is recorded again.
        harness.advance(.seconds(61))
        for index in 100..<125 {
            refusedEvents += harness.register(Self.registration(index)).events.filter { $0.reason == .rateLimited }
        }
        #expect(refusedEvents.count == 2)
    }

    /// A query asking more questions than the limit gets the first ones answered; one line a minute says so.
    @Test func questionsBeyondTheLimitAreIgnored() throws {
        var configuration = CoreConfiguration()
        configuration.maximumQuestionsPerQuery = 8
        var harness = Harness(configuration: configuration)
        harness.register(Self.registration(1))
        harness.run(until: harness.now + .seconds(5))
        let fillers = (0..<10).map { DNSQuestion(name: try! DNSName(labels: ["nobody\($0)", "local"]), type: .a) }
        let held = DNSQuestion(name: "host1.local.", type: .a, unicastResponse: true)
        let late = harness.mdns(Query.bytes(fillers + [held]))
        #expect(late.transmissions.isEmpty, "the ninth question and after are not answered")
        #expect(late.logLines.contains { $0.0 == .warning && $0.1.contains("limit maximum_questions_per_query") })
        let early = harness.mdns(Query.bytes([held] + fillers))
        #expect(!early.transmissions.isEmpty, "the first question is")
        #expect(!early.logLines.contains { $0.1.contains("limit maximum_questions_per_query") }, "once a minute")
    }

    /// Multicast answers waiting for their delay are bounded; beyond, answers are dropped with one line a minute.
    @Test func pendingResponsesAreBounded() throws {
        var configuration = CoreConfiguration()
        configuration.maximumPendingResponses = 16
        var harness = Harness(configuration: configuration)
        harness.register(Self.registration(1))
        harness.run(until: harness.now + .seconds(5))
        var logged = 0
        for index in 0..<40 {
            // The shared browsing PTR waits 20-120 ms before it is multicast.
            let querier = Endpoint(address: .v4(IPv4Address(10, 77, 0, UInt8(100 + index))), port: 5353)
            let actions = harness.mdns(Query.bytes("_ssh._tcp.local.", .ptr), from: querier)
            logged += actions.logLines.filter { $0.1.contains("limit maximum_pending_responses") }.count
        }
        #expect(logged == 1)
        let sent = harness.run(until: harness.now + .seconds(1))
        #expect(sent.transmissions.count <= 16, "\(sent.transmissions.count)")
        #expect(!sent.transmissions.isEmpty)
    }

    /// One host held and announced, queries limited to `queryRate`.
    static func holdingOneHost(queryRate: Rate) -> Harness {
        var configuration = CoreConfiguration()
        configuration.queryRate = queryRate
        var harness = Harness(configuration: configuration)
        harness.register(Self.registration(1))
        harness.run(until: harness.now + .seconds(5))
        return harness
    }

    /// A querier asking too fast goes unanswered beyond its burst, others are answered; one line a minute.
    @Test func eachQuerierHasItsRate() throws {
        var harness = Self.holdingOneHost(queryRate: Rate(perSecond: 10, burst: 5))
        let query = Query.bytes("host1.local.", .a, unicast: true)
        let flooder = Endpoint(address: .v4(IPv4Address(10, 77, 0, 66)), port: 5353)
        var answered = 0
        var logged = 0
        for _ in 0..<20 {
            let actions = harness.mdns(query, from: flooder)
            answered += actions.transmissions.isEmpty ? 0 : 1
            logged += actions.logLines.filter { $0.1.contains("limit queries_per_second") }.count
        }
        #expect(answered == 5 && logged == 1, "answered \(answered), logged \(logged)")
        #expect(!harness.mdns(query, from: Harness.waker).transmissions.isEmpty, "another querier is answered")
        harness.advance(.milliseconds(200))
        #expect(!harness.mdns(query, from: flooder).transmissions.isEmpty, "two more after 200 ms at 10 a second")
    }

    /// A host inventing source addresses: each address has its own allowance, but its MAC has four times one
    /// for all of them together. Programs on the proxy's own host (its MAC) are not counted together.
    @Test func oneMACHasOneAllowanceForAllItsAddresses() throws {
        var harness = Self.holdingOneHost(queryRate: Rate(perSecond: 10, burst: 5))
        let query = Query.bytes("host1.local.", .a, unicast: true)
        let forger = MACAddress(0x02, 0x77, 0, 0, 0, 0x66)
        var answered = 0
        for index in 0..<100 {
            let source = Endpoint(address: .v4(IPv4Address(10, 77, 1, UInt8(index))), port: 5353)
            answered += harness.mdns(query, from: source, mac: forger).transmissions.isEmpty ? 0 : 1
        }
        #expect(answered == 20, "four bursts of 5 for one MAC, answered \(answered)")
        let honest = MACAddress(0x02, 0x77, 0, 0, 0, 0x67)
        let other = Endpoint(address: .v4(IPv4Address(10, 77, 0, 67)), port: 5353)
        #expect(!harness.mdns(query, from: other, mac: honest).transmissions.isEmpty, "another host is answered")

        let own = Harness.proxyMAC
        var local = 0
        for index in 0..<100 {
            let source = Endpoint(address: .v4(IPv4Address(10, 77, 2, UInt8(index))), port: 5353)
            local += harness.mdns(query, from: source, mac: own).transmissions.isEmpty ? 0 : 1
        }
        #expect(local == 100, "the proxy's own host is limited per address only, answered \(local)")
    }

    /// Someone saying goodbye for a held record over and over: announced again at most once a second, logged
    /// once a minute.
    @Test func goodbyesFromAnyoneCostLittle() throws {
        var harness = Harness()
        harness.register(Self.registration(1))
        harness.run(until: harness.now + .seconds(12))
        let record = DNSRecord(name: "host1.local.", ttl: 0, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 11)))
        let goodbye = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: [record]
        ).encoded()
        let intruder = Endpoint(address: .v4(IPv4Address(10, 77, 0, 66)), port: 5353)
        var announced = 0
        var logged = 0
        for _ in 0..<40 {
            let actions = harness.mdns(goodbye, from: intruder) + harness.run(until: harness.now + .milliseconds(100))
            announced +=
                actions.sentMessages.filter { $0.answers.contains { $0.name == record.name && $0.ttl > 0 } }
                .count
            logged += actions.logLines.filter { $0.1.contains("said goodbye") }.count
        }
        // 4 s of goodbyes every 100 ms: about one announcement a second on each group, not forty.
        #expect(announced <= 10 && announced >= 4, "\(announced)")
        #expect(logged == 1)
        #expect(harness.core.owners.count == 1, "still held")
    }
}
