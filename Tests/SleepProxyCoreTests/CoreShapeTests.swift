import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// What the core's state keeps in step: the answer cache follows only changes that alter an answer, every table
/// of allowances stays bounded whatever senders do, and the held owners are a view, not a copy.
@Suite("The core's state: answer cache, allowances, owners")
struct CoreShapeTests {
    static let records = Update.host("imac", ipv4: IPv4Address(10, 77, 0, 2))

    /// A host registered and settled (probes over, addresses claimed), with one question answered and cached.
    static func settledHost() -> Harness {
        var harness = Harness()
        harness.register(Update.bytes(records: records))
        harness.run(until: harness.now + .seconds(20))
        harness.mdns(Query.bytes("imac.local.", .a))
        return harness
    }

    /// "Who has `address`? Tell 10.77.0.3", broadcast from `mac`.
    static func arpRequest(for address: IPv4Address, from mac: MACAddress) -> [UInt8] {
        let packet = ARPPacket(
            operation: .request, senderHardwareAddress: mac, senderProtocolAddress: IPv4Address(10, 77, 0, 3),
            targetHardwareAddress: .zero, targetProtocolAddress: address)
        return EthernetFrame.arp(packet, source: mac, destination: .broadcast).serialized()
    }

    @Test func anARPFrameLeavesTheAnswerCacheInPlace() {
        var harness = Self.settledHost()
        #expect(harness.core.cachedAnswerCount == 1)
        // Someone on the LAN asks for an address that is not held, and for the held one (answered with our MAC).
        let asker = MACAddress(0x02, 0x77, 0, 0, 0, 3)
        let unrelated = Self.arpRequest(for: IPv4Address(10, 77, 0, 50), from: asker)
        harness.frame(unrelated)
        #expect(harness.core.cachedAnswerCount == 1)
        let forHeld = Self.arpRequest(for: IPv4Address(10, 77, 0, 2), from: asker)
        let answered = harness.frame(forHeld)
        #expect(answered.injectedFrames.count == 1)
        #expect(harness.core.cachedAnswerCount == 1)
        // A change to what is held does empty it: the next answer is worked out again.
        var more = Self.records
        more.append(
            DNSRecord(name: "imac.local.", ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fd77::2")!)))
        harness.register(Update.bytes(records: more))
        harness.mdns(Query.bytes("imac.local.", .a))
        #expect(harness.core.cachedAnswerCount == 1)
        harness.mdns(Query.bytes("imac.local.", .aaaa))
        #expect(harness.core.cachedAnswerCount == 2)
    }

    /// The proxy advertises itself (the default): ticks, and the delayed multicast answers they send, leave cached
    /// answers in place; only a change to what the advertisement answers moves the cache on.
    @Test func cachedAnswersSurviveTicksWhileTheProxyAdvertises() throws {
        var harness = Self.settledHost()
        harness.log += harness.core.startAdvertising(
            on: Harness.interface, configuration: AdvertisementTests.configuration, port: Harness.registrationPort,
            now: harness.now)
        // While it probes, the proxy's own name is not answered, and that silence is cached like any answer.
        let probing = harness.mdns(Query.bytes("homeserver.local.", .a, unicast: true), to: .v4(.mdnsGroup))
        #expect(!probing.sentMessages.contains { $0.answers.contains { $0.name == "homeserver.local." } })
        harness.run(until: harness.now + .seconds(3))
        // Announced: the cache is emptied once, and the proxy's name is answered.
        let announced = harness.mdns(Query.bytes("homeserver.local.", .a, unicast: true), to: .v4(.mdnsGroup))
        #expect(announced.sentMessages.contains { $0.answers.contains { $0.name == "homeserver.local." } })
        harness.mdns(Query.bytes("imac.local.", .a))
        #expect(harness.core.cachedAnswerCount == 2)
        // A question for a shared record (the proxy's service type): its answer waits 20 to 120 ms, and the tick
        // that sends it, and those after it, keep every answer.
        for round in 0..<5 {
            let asked = harness.mdns(Query.bytes("_sleep-proxy._udp.local.", .ptr))
            #expect(asked.sentMessages.isEmpty)
            #expect(harness.core.cachedAnswerCount == 3, "round \(round)")
            let sent = harness.run(until: harness.now + .seconds(2))
            #expect(sent.sentMessages.contains { $0.answers.contains { $0.type == .ptr } }, "round \(round)")
            #expect(harness.core.cachedAnswerCount == 3, "round \(round)")
        }
        for _ in 0..<10 {
            harness.advance(.milliseconds(100))
            #expect(harness.core.cachedAnswerCount == 3)
        }
        // The advertisement renamed after a conflict answers other records: the cache starts over.
        let instance = try #require(harness.core.advertisedInstance(on: Harness.interface))
        let rival = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [
                DNSRecord(
                    name: instance, ttl: 120, cacheFlush: true,
                    rdata: .srv(SRVData(port: 1, target: "elsewhere.local.")))
            ]
        ).encoded()
        harness.mdns(rival, from: Endpoint(address: .v4(IPv4Address(10, 77, 0, 9)), port: 5353))
        #expect(harness.core.advertisedInstance(on: Harness.interface) != instance)
        // Probing its new name, the proxy answers nothing of its own: the question is worked out again, not
        // answered from the cache.
        let misses = harness.core.statistics.answerCacheMisses
        harness.mdns(Query.bytes("_sleep-proxy._udp.local.", .ptr))
        let whileProbing = harness.run(until: harness.now + .milliseconds(500))
        #expect(!whileProbing.sentMessages.contains { $0.answers.contains { $0.type == .ptr } })
        #expect(harness.core.statistics.answerCacheMisses == misses + 1)
        #expect(harness.core.cachedAnswerCount == 1)
    }

    /// A multicast answer, and a unicast one to a QU question without known answers, is encoded once with its
    /// cached answer: the same bytes each time while nothing held changes, and worked out again when something
    /// does, also between a question and its delayed answer.
    @Test func encodedResponsesAreKeptWithTheirAnswerAndFollowHeldChanges() {
        var harness = Self.settledHost()
        harness.advance(.seconds(2))
        let first = harness.mdns(Query.bytes("imac.local.", .a)).transmissions
        #expect(first.count == 1)
        #expect(first.first?.destination.address == .v4(.mdnsGroup))
        harness.advance(.milliseconds(1_100))
        let again = harness.mdns(Query.bytes("imac.local.", .a)).transmissions
        #expect(again.map(\.bytes) == first.map(\.bytes))
        // Multicast a moment ago: a QU question is answered by unicast, with the same response.
        let unicast = harness.mdns(Query.bytes("imac.local.", .a, unicast: true)).transmissions
        #expect(unicast.count == 1)
        #expect(unicast.first?.destination.address != .v4(.mdnsGroup))
        #expect(unicast.map(\.bytes) == first.map(\.bytes))

    }

    /// A delayed multicast answer is sent from its cached response only if nothing held changed since the
    /// question: here an additional record (the SRV target's address, held for another host) ends meanwhile.
    @Test func aDelayedAnswerLeavesOutWhatEndedWhileItWaited() throws {
        var harness = Harness()
        let instance: DNSName = "files._ssh._tcp.local."
        let service = [
            DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(instance)),
            DNSRecord(name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: "nas.local."))),
            DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData([""]))),
        ]
        let target = [DNSRecord(name: "nas.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 5)))]
        let registered = harness.now
        harness.register(Update.bytes(records: service))
        harness.register(
            Update.bytes(
                records: target, owner: Update.owner(mac: MACAddress(0x02, 0x77, 0, 0, 0, 5)),
                lease: UpdateLease(lease: 30)))
        harness.run(until: harness.now + .seconds(20))
        let asked = Query.bytes([DNSQuestion(name: "_ssh._tcp.local.", type: .ptr)], truncated: true)
        harness.mdns(asked)
        let first = harness.run(until: harness.now + .seconds(1)).sentMessages
        #expect(first.contains { $0.additionals.contains(target[0]) })
        // Asked again just before the address's lease ends: the answer waits 400 to 500 ms, past the end.
        harness.run(until: registered + .milliseconds(29_700))
        harness.mdns(asked)
        let second = harness.run(until: registered + .seconds(31)).sentMessages
        let answer = second.first { $0.answers.contains(service[0]) }
        #expect(answer?.additionals.contains { $0.type == .srv } == true)
        #expect(answer?.additionals.contains(target[0]) == false)
    }

    @Test func aRecordAnswersOnceItsProbeEndsThoughItsSilenceWasCached() {
        var harness = Self.settledHost()
        // A new unique record is probed silently for 750 ms: asked meanwhile, the proxy does not answer it (and
        // remembers that answer); asked after, it does, with no other change in between.
        var more = Self.records
        let aaaa = DNSRecord(name: "imac.local.", ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fd77::2")!))
        more.append(aaaa)
        harness.register(Update.bytes(records: more))
        let during = harness.mdns(Query.bytes("imac.local.", .aaaa, unicast: true), to: .v4(.mdnsGroup))
        #expect(!during.sentMessages.contains { $0.answers.contains(aaaa) })
        harness.advance(.milliseconds(800))
        let after = harness.mdns(
            Query.bytes(id: 7, "imac.local.", .aaaa), from: Endpoint(address: Harness.waker.address, port: 40_000))
        #expect(after.sentMessages.contains { $0.answers.contains { $0.rdata == aaaa.rdata } })
    }

    @Test func goodbyesFromAHundredThousandSpoofedSendersLeaveTheAllowancesBounded() {
        var harness = Self.settledHost()
        let goodbye = DNSRecord(name: "imac.local.", ttl: 0, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
        let bytes = try! DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: [goodbye]
        ).encoded()
        var lines = 0
        var reannounced = 0
        // A goodbye a second, each from another invented sender: each is answered by announcing the record again
        // (at most once a second), and each new sender is worth a log line; what is remembered of them is not
        // kept past its minute. The host renews its lease meanwhile, as a sleeping Mac does.
        for index in 0..<100_000 {
            harness.advance(.seconds(1))
            if index % 3_600 == 0 { harness.register(Update.bytes(records: Self.records)) }
            let source = Endpoint(
                address: .v4(IPv4Address(10, UInt8(100 + index >> 16), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF))),
                port: 5353)
            let actions = harness.core.handleMDNS(
                MDNSPacket(
                    interface: Harness.interface, source: source, destination: .v4(.mdnsGroup),
                    sourceMAC: MACAddress(
                        0x02, 0x66, 0, UInt8(index >> 16), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF)),
                    bytes: bytes),
                now: harness.now)
            lines += actions.logLines.filter { $0.1.contains("said goodbye") }.count
            reannounced += actions.sentMessages.filter { $0.answers.contains { $0.type == .a && $0.ttl > 0 } }.count
        }
        #expect(reannounced >= 100_000)
        #expect(lines == 100_000)
        // Every table of allowances is bounded (seven of at most 4,096 senders and one shared entry each); here
        // the goodbye senders' table is pruned of senders older than a minute each time it fills.
        #expect(harness.core.allowanceEntryCount <= 7 * 4_097)
        #expect(harness.core.allowanceEntryCount <= 4_096 + 16)
        #expect(harness.core.owners.count == 1)
    }

    @Test func heldOwnersAreAViewWithLookups() {
        var harness = Harness(extraPrefixes: [Link.Prefix(address: .v4(IPv4Address(10, 78, 0, 1)), length: 16)])
        for index in 0..<1_000 {
            let mac = MACAddress(0x02, 0x55, 0, 0, UInt8(index >> 8), UInt8(index & 0xFF))
            let ipv4 = IPv4Address(10, 78, UInt8(1 + index / 250), UInt8(1 + index % 250))
            let name = "host\(index)"
            harness.register(
                Update.bytes(records: Update.host(name, ipv4: ipv4), owner: Update.owner(mac: mac)),
                from: Endpoint(address: .v4(ipv4), port: 5353))
        }
        let owners = harness.core.owners
        #expect(owners.count == 1_000)
        // Every lookup is one, and the view sees the table as it was taken.
        for key in owners.keys.sorted() {
            #expect(owners[key]?.key == key)
            #expect(harness.core.state(of: key) != nil)
        }
        _ = harness.core.forget(owners.keys.sorted()[0], now: harness.now, reason: "test")
        #expect(owners.count == 1_000)
        #expect(harness.core.owners.count == 999)
        #expect(owners != harness.core.owners)
    }
}
