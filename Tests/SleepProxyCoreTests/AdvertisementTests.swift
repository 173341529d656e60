import DNSWire
import NetworkAddresses
import SleepProxyCore
import Testing

@Suite("The proxy's own advertisement")
struct AdvertisementTests {
    static let configuration = AdvertisementConfiguration(name: "Home Server", hostName: "homeserver")

    static func advertising() -> (Harness, [Action]) {
        var harness = Harness()
        let first = harness.core.startAdvertising(
            on: Harness.interface, configuration: configuration, port: Harness.registrationPort, now: harness.now)
        harness.log += first
        return (harness, first)
    }

    @Test func instanceLabelFollowsTheMetricEncoding() throws {
        #expect(Self.configuration.instanceLabel() == Array("20-30-50-73 Home Server".utf8))
        var withFeature = Self.configuration
        withFeature.features = 1
        #expect(withFeature.instanceLabel() == Array("20-30-50-73.1 Home Server".utf8))
        var long = Self.configuration
        long.name = String(repeating: "x", count: 100)
        #expect(long.instanceLabel().count == 63)
        try Self.configuration.validate()
    }

    @Test(arguments: [
        (9, 30, 50, 73, Int?.none, "intent 9"), (20, 100, 50, 73, nil, "portability 100"),
        (20, 99, 99, 99, nil, "99-99-99"), (20, 30, 50, 73, 2, "feature digit 2"),
    ])
    func invalidNumbersAreRefused(
        intent: Int, portability: Int, marginal: Int, total: Int, features: Int?, text: String
    ) {
        let configuration = AdvertisementConfiguration(
            intent: intent, portability: portability, marginalPower: marginal, totalPower: total, features: features,
            name: "x", hostName: "x")
        let error = #expect(throws: AdvertisementError.self) { try configuration.validate() }
        #expect(error?.description.contains(text) == true)
    }

    @Test func probesThreeTimesThenAnnouncesTwice() throws {
        var (harness, first) = Self.advertising()
        let start = harness.now
        var sends: [(Duration, DNSMessage)] = first.transmissions.filter { $0.destination == MulticastDNS.ipv4Group }
            .map { (.zero, try! DNSMessage(decoding: $0.bytes)) }
        while let deadline = harness.core.nextDeadline, deadline < start + .seconds(5) {
            harness.now = deadline
            for transmission in harness.tick().transmissions where transmission.destination == MulticastDNS.ipv4Group {
                sends.append((harness.now - start, try DNSMessage(decoding: transmission.bytes)))
            }
        }
        #expect(
            sends.map(\.0) == [.zero, .milliseconds(250), .milliseconds(500), .milliseconds(750), .milliseconds(1750)])
        let probe = sends[0].1
        #expect(!probe.flags.isResponse)
        #expect(probe.questions.allSatisfy { $0.type == .any && $0.unicastResponse })
        #expect(
            Set(probe.questions.map(\.name.description)) == [
                "20-30-50-73 Home Server._sleep-proxy._udp.local.", "homeserver.local.",
            ])
        #expect(Set(probe.authorities.map(\.type)) == [.srv, .txt, .a, .aaaa])

        let announcement = sends[3].1
        #expect(announcement.flags.rawValue == 0x8400)
        let srv = try #require(announcement.answers.first { $0.type == .srv })
        #expect(srv.rdata == .srv(SRVData(port: Harness.registrationPort, target: "homeserver.local.")))
        #expect(srv.name.label(at: 0) == Array("20-30-50-73 Home Server".utf8))
        #expect(announcement.answers.contains { $0.rdata == .txt(try! TXTData([""])) && $0.cacheFlush })
        #expect(
            announcement.answers.contains { $0.name == "_sleep-proxy._udp.local." && $0.type == .ptr && !$0.cacheFlush }
        )
        #expect(
            announcement.answers.contains {
                $0.name == "_services._dns-sd._udp.local." && $0.rdata == .ptr("_sleep-proxy._udp.local.")
            })
        #expect(announcement.answers.contains { $0.rdata == .a(IPv4Address(10, 77, 0, 1)) })
    }

    @Test func answersForItselfOnceAnnounced() throws {
        var (harness, _) = Self.advertising()
        // Not while probing.
        #expect(harness.mdns(Query.bytes("_sleep-proxy._udp.local.", .ptr)).transmissions.isEmpty)
        harness.run(until: harness.now + .seconds(3))
        let start = harness.now
        harness.mdns(Query.bytes("_sleep-proxy._udp.local.", .ptr))
        let reply = try #require(harness.run(until: start + .milliseconds(200)).sentMessages.first)
        #expect(reply.answers.first?.type == .ptr)
        #expect(Set(reply.additionals.map(\.type)).isSuperset(of: [.srv, .txt, .a]))
        // A resolve of the SRV target.
        let host = try #require(harness.mdns(Query.bytes("homeserver.local.", .a)).sentMessages.first)
        #expect(host.answers.map(\.rdata) == [.a(IPv4Address(10, 77, 0, 1))])
    }

    @Test func aConflictingResponseRenamesAndProbesAgain() throws {
        var (harness, _) = Self.advertising()
        harness.run(until: harness.now + .seconds(3))
        let instance = try #require(harness.core.advertisedInstance(on: Harness.interface))
        let rival = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [
                DNSRecord(
                    name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 9, target: "rival.local.")))
            ]
        ).encoded()
        let actions = harness.mdns(rival, mac: MACAddress(0x02, 0, 0, 0, 0, 0x99))
        #expect(actions.logLines.contains { $0.0 == .warning && $0.1.contains("renaming") })
        let renamed = try #require(harness.core.advertisedInstance(on: Harness.interface))
        #expect(renamed.label(at: 0) == Array("20-30-50-73 Home Server (2)".utf8))
        // It probes again before answering under the new name.
        let next = harness.run(until: harness.now + .seconds(2)).sentMessages
        #expect(next.first.map { !$0.flags.isResponse } == true)
    }

    @Test func identicalDataIsNoConflict() throws {
        var (harness, _) = Self.advertising()
        harness.run(until: harness.now + .seconds(3))
        let instance = try #require(harness.core.advertisedInstance(on: Harness.interface))
        let same = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query),
            answers: [
                DNSRecord(
                    name: instance, ttl: 120, cacheFlush: true,
                    rdata: .srv(SRVData(port: Harness.registrationPort, target: "homeserver.local.")))
            ]
        ).encoded()
        #expect(harness.mdns(same).logLines.allSatisfy { !$0.1.contains("renaming") })
        #expect(harness.core.advertisedInstance(on: Harness.interface) == instance)
    }

    @Test func simultaneousProbeTieBreak() {
        let ours = [DNSRecord(name: "h.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 1)))]
        let higher = [DNSRecord(name: "h.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 2)))]
        #expect(SleepProxyCore.winsTieBreak(theirs: higher, ours: ours))
        #expect(!SleepProxyCore.winsTieBreak(theirs: ours, ours: higher))
    }

    @Test func stoppingSaysGoodbye() throws {
        var (harness, _) = Self.advertising()
        harness.run(until: harness.now + .seconds(3))
        let goodbyes = harness.core.stopAdvertising(now: harness.now).sentMessages
        #expect(!goodbyes.isEmpty)
        #expect(goodbyes.allSatisfy { $0.answers.allSatisfy { $0.ttl == 0 } })
        #expect(harness.core.advertisedInstance(on: Harness.interface) == nil)
    }
}
