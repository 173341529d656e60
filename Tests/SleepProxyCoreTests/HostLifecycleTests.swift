import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// A held host's way through the proxy, as a story: it registers and keeps talking, sleeps, is woken, registers
/// again, comes back. Each test is one rule of when the proxy holds on and when it lets go.
@Suite("Held host lifecycle")
struct HostLifecycleTests {
    static let mac = TakeoverTests.sleeperMAC
    static var key: OwnerKey { OwnerKey(interface: Harness.interface, primaryMAC: mac) }

    static func announcement(sequence: UInt8?, records: [DNSRecord]) -> [UInt8] {
        try! DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records,
            additionals: sequence.map { [Update.opt(owner: OwnerOption(sequence: $0, primaryMAC: mac), lease: nil)] }
                ?? []
        ).encoded()
    }

    static let address: DNSRecord = Update.host("sleepy", ipv4: TakeoverTests.ipv4)[0]

    /// A Mac re-announces (up to four times, 1, 2 and 4 s apart) and answers queries with the sequence it just
    /// registered with: all of it is the host going to sleep.
    @Test func aMacReannouncingWithItsSequenceIsHeld() {
        var (harness, _) = TakeoverTests.registering()
        for gap in [0, 1, 2, 4] {
            harness.run(until: harness.now + .seconds(Int64(gap)))
            let actions = harness.mdns(
                Self.announcement(sequence: 1, records: [Self.address]), from: Harness.sleeper, mac: Self.mac)
            #expect(actions.events.isEmpty)
        }
        #expect(harness.core.owners.count == 1)
    }

    /// Apple applies the 60 s age per record: records refreshed by a later datagram are younger and stay.
    @Test func theOwnerAgeRuleAppliesPerRecord() throws {
        var harness = Harness()
        let records = Update.host("sleepy", ipv4: TakeoverTests.ipv4)
        let owner = OwnerOption(sequence: 1, primaryMAC: Self.mac)
        harness.register(Update.bytes(id: 1, records: records, owner: owner))
        harness.advance(.seconds(50))
        // The same sequence refreshes two of the records (a retransmission of part of the registration).
        harness.register(Update.bytes(id: 2, records: Array(records.suffix(2)), owner: owner))
        harness.advance(.seconds(20))
        let actions = harness.mdns(Self.announcement(sequence: 1, records: [records[0]]), mac: Self.mac)
        #expect(actions.events.map(\.kind) == [.released])
        #expect(actions.events.first?.detail.contains("3 of its records") == true)
        let held = try #require(harness.owner(Self.mac))
        #expect(held.records.map(\.record) == Array(records.suffix(2)))
        #expect(actions.transmissions.isEmpty, "silent")
        #expect(harness.core.proxiedAddresses(on: "eth0").isEmpty, "its reverse mapping went, and the address with it")
    }

    /// A registration arriving while its host is woken calls the wake off (mDNS.c `ClearIdenticalProxyRecords`):
    /// no more magic packets, no goodbyes, and everything is taken over from the start.
    @Test func aRegistrationWhileWakingCancelsTheWake() throws {
        var harness = TakeoverTests.taken()
        harness.frame(WakeTests.segment(22, .syn))
        harness.run(until: harness.now + .seconds(5))
        #expect(harness.core.state(of: Self.key) == .waking(reason: harness.log.events.last!.detail, rounds: 3))
        let records = Update.host("sleepy", ipv4: TakeoverTests.ipv4)
        let actions = harness.register(
            Update.bytes(id: 9, records: records, owner: OwnerOption(sequence: 2, primaryMAC: Self.mac)))
        #expect(actions.events.map(\.kind) == [.replaced, .wakeCancelled])
        #expect(actions.replies.count == 1)
        #expect(harness.core.state(of: Self.key) == .takingOver)
        let start = harness.now
        var arp: [(Duration, ARPPacket)] = []
        var magic = 0
        while let deadline = harness.core.nextDeadline, deadline <= start + .seconds(60) {
            harness.now = deadline
            let sent = harness.tick()
            #expect(sent.sentMessages.allSatisfy { $0.answers.allSatisfy { $0.ttl > 0 } }, "no goodbye")
            for frame in try sent.injectedFrames.map({ try EthernetFrame(parsing: $0) }) {
                if frame.header.etherType == .wakeOnLAN || frame.udp?.destinationPort == 9 { magic += 1 }
                if let packet = frame.arp { arp.append((harness.now - start, packet)) }
            }
        }
        #expect(magic == 0)
        #expect(arp.map(\.0) == [1, 2, 3, 4, 5, 7, 11].map { Duration.seconds($0) }, "probed and claimed afresh")
        #expect(harness.core.owners.count == 1)
    }

    /// A later datagram of a registration already answered (same ID): the client counts its records
    /// registered, so what can be held is held and the rest is logged, rather than refusing it whole.
    @Test func aLaterDatagramThatCannotBeHeldWholeIsKeptInPart() throws {
        var harness = Harness()
        let other = MACAddress(0x02, 0, 0, 0, 0, 0x99)
        harness.register(
            Update.bytes(
                id: 1, records: Update.host("taken", ipv4: IPv4Address(10, 77, 0, 9)),
                owner: OwnerOption(sequence: 1, primaryMAC: other)))
        let owner = OwnerOption(sequence: 4, primaryMAC: Self.mac)
        harness.register(Update.bytes(id: 0x77, records: Update.host("sleepy", ipv4: TakeoverTests.ipv4), owner: owner))
        // The second datagram carries a name another host holds, and a new record.
        let hijack = DNSRecord(name: "taken.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 9)))
        let extra = DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .aaaa(TakeoverTests.ipv6))
        let later = harness.register(Update.bytes(id: 0x77, records: [hijack, extra], owner: owner))
        #expect(later.replies.count == 1)
        let event = try #require(later.events.first)
        #expect(event.kind == .renewed)
        #expect(event.detail.contains("taken.local. A is held for 02:00:00:00:00:99"), "\(event.detail)")
        #expect(later.logLines.contains { $0.0 == .warning })
        #expect(harness.owner(Self.mac)?.records.contains { $0.record == extra } == true)
        #expect(harness.owner(Self.mac)?.records.contains { $0.record == hijack } == false)
        #expect(harness.owner(other)?.records.count == 5)
        // A datagram with a new ID is a registration of its own: refused whole.
        let fresh = harness.register(Update.bytes(id: 0x78, records: [hijack], owner: owner))
        #expect(fresh.events.map(\.reason) == [.nameHijack])
        #expect(fresh.replies.isEmpty)
    }

    @Test func aLaterDatagramOverTheRecordLimitKeepsWhatFits() throws {
        var harness = Harness(configuration: CoreConfiguration(maximumRecordsPerOwner: 6))
        let owner = OwnerOption(sequence: 4, primaryMAC: Self.mac)
        harness.register(Update.bytes(id: 5, records: Update.host("sleepy", ipv4: TakeoverTests.ipv4), owner: owner))
        let more = Update.host("more", ipv4: IPv4Address(10, 77, 0, 8))
        let later = harness.register(Update.bytes(id: 5, records: more, owner: owner))
        #expect(later.replies.count == 1)
        #expect(harness.owner(Self.mac)?.records.count == 6)
        #expect(later.events.first?.detail.contains("owner-record-limit") == true)
    }

    /// A goodbye the host sends as it goes down must not take its names off the network: the proxy announces
    /// them again at once (mDNS.c re-announces a record of its own seen with less than half its TTL).
    @Test func goodbyesFromTheHostAreAnsweredByAnnouncingAgain() throws {
        var harness = TakeoverTests.taken()
        var goodbye = Self.address
        goodbye.ttl = 0
        let actions = harness.mdns(Self.announcement(sequence: nil, records: [goodbye]), mac: Self.mac)
        #expect(actions.events.isEmpty)
        #expect(harness.core.owners.count == 1)
        let again = actions.sentMessages.flatMap(\.answers)
        #expect(again.contains { $0.rdata == Self.address.rdata && $0.ttl == 120 })
    }

    /// Duplicate-answer suppression (RFC 6762 section 7.4): another responder's identical answer, with at least
    /// half our TTL, cancels our scheduled one.
    @Test func anIdenticalAnswerSeenOnTheWireCancelsOurs() throws {
        var harness = TakeoverTests.taken()
        harness.mdns(Query.bytes("_ssh._tcp.local.", .ptr))
        let ptr = Update.host("sleepy", ipv4: TakeoverTests.ipv4)[4]
        harness.mdns(Self.announcement(sequence: nil, records: [ptr]), mac: MACAddress(0x02, 0, 0, 0, 0, 0x55))
        let sent = harness.run(until: harness.now + .seconds(1))
        #expect(!sent.sentMessages.contains { $0.answers.contains(ptr) })
        // Without it, our answer goes out.
        var control = TakeoverTests.taken()
        control.mdns(Query.bytes("_ssh._tcp.local.", .ptr))
        #expect(control.run(until: control.now + .seconds(1)).sentMessages.contains { $0.answers.contains(ptr) })
    }

    /// Another host's copy of a shared record with its RDATA name in another case is the same record to every
    /// cache (RFC 4343): the first host going says no goodbye for it.
    @Test func aSharedRecordHeldInAnotherCaseGetsNoGoodbye() throws {
        var harness = Harness()
        let keys = (0..<2).map {
            OwnerKey(interface: Harness.interface, primaryMAC: MACAddress(0x02, 0, 0, 0, 0, 0x54 + $0))
        }
        for (index, key) in keys.enumerated() {
            let target: DNSName = index == 0 ? "_ssh._tcp.local." : "_SSH._tcp.local."
            harness.register(
                Update.bytes(
                    id: UInt16(index + 1),
                    records: Update.host("host\(index)", ipv4: IPv4Address(10, 77, 0, UInt8(4 + index))) + [
                        DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr(target))
                    ],
                    owner: OwnerOption(sequence: 1, primaryMAC: key.primaryMAC)))
        }
        harness.run(until: harness.now + .seconds(5))
        let goodbyes = harness.core.forget(keys[0], now: harness.now, reason: "test").sentMessages.flatMap(\.answers)
        #expect(goodbyes.contains { $0.name == "_ssh._tcp.local." && $0.ttl == 0 }, "its own instance's PTR goes")
        #expect(!goodbyes.contains { $0.name == "_services._dns-sd._udp.local." }, "the other host still holds it")
    }

    /// A goodbye for a shared record goes out only when nobody else holds it: here `_services._dns-sd._udp`
    /// PTR `_ssh._tcp`, which three hosts registered. They go in an order that takes the holders of the record
    /// from the middle, then the front: the record stays answered until the last one goes.
    @Test func sharedRecordsAnotherHostHoldsGetNoGoodbye() throws {
        var harness = Harness()
        let enumeration = DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr("_ssh._tcp.local."))
        let keys = (0..<3).map {
            OwnerKey(interface: Harness.interface, primaryMAC: MACAddress(0x02, 0, 0, 0, 0, 0x44 + $0))
        }
        for (index, key) in keys.enumerated() {
            harness.register(
                Update.bytes(
                    id: UInt16(index + 1),
                    records: Update.host("host\(index)", ipv4: IPv4Address(10, 77, 0, UInt8(4 + index))) + [
                        enumeration
                    ],
                    owner: OwnerOption(sequence: 1, primaryMAC: key.primaryMAC)))
        }
        harness.run(until: harness.now + .seconds(5))
        for key in [keys[1], keys[0]] {
            let forgotten = harness.core.forget(key, now: harness.now, reason: "test")
            let goodbyes = forgotten.sentMessages.flatMap(\.answers)
            #expect(!goodbyes.isEmpty && goodbyes.allSatisfy { $0.ttl == 0 })
            #expect(!goodbyes.contains { $0.name == enumeration.name }, "another host still holds it")
            #expect(goodbyes.contains { $0.name == "_ssh._tcp.local." }, "its own instance's PTR goes")
        }
        harness.mdns(Query.bytes(enumeration.name, .ptr))
        let answers = harness.run(until: harness.now + .seconds(1)).sentMessages.flatMap(\.answers)
        #expect(answers.contains { $0 == enumeration }, "the last holder answers it")
        let last = harness.core.forget(keys[2], now: harness.now, reason: "test")
        #expect(last.sentMessages.flatMap(\.answers).contains { $0.name == enumeration.name && $0.ttl == 0 })
    }

    /// Restarts after the host showed itself: a second while still probing, ten once the address was claimed, and
    /// ten again while such a wait is running (mDNS.c `RestartARPProbing`).
    @Test func probingRestartsAfterOneSecondWhileProbingAndTenOnceClaimed() throws {
        var (harness, _) = TakeoverTests.registering()
        let ownRequest = TakeoverTests.arpRequest(
            from: Self.mac, sender: TakeoverTests.ipv4, target: TakeoverTests.ipv4)
        func nextProbe() throws -> Duration {
            let start = harness.now
            while let deadline = harness.core.nextDeadline {
                harness.now = deadline
                let frames = try harness.tick().injectedFrames.compactMap { try EthernetFrame(parsing: $0).arp }
                if frames.contains(where: {
                    $0.senderProtocolAddress.isUnspecified && $0.targetProtocolAddress == TakeoverTests.ipv4
                }) {
                    return harness.now - start
                }
            }
            return .zero
        }
        harness.run(until: harness.now + .milliseconds(1500))  // the first probe went out
        harness.frame(ownRequest)
        #expect(try nextProbe() == .seconds(1))
        harness.run(until: harness.now + .seconds(6))  // claimed by now
        harness.frame(ownRequest)
        #expect(try nextProbe() == .seconds(10))
        // Probing again after the wait: a second.
        harness.frame(ownRequest)
        #expect(try nextProbe() == .seconds(1))
        harness.run(until: harness.now + .seconds(6))  // claimed again
        harness.frame(ownRequest)
        harness.advance(.seconds(3))
        harness.frame(ownRequest)
        #expect(try nextProbe() == .seconds(10), "backing off: ten seconds again")
    }

    /// After a restart of the proxy, a restored lease may belong to a host that woke while it was down: its
    /// addresses are probed before they are claimed, and a host that keeps answering is let go, never claimed.
    @Test func aRestoredHostThatWokeMeanwhileIsReleasedNotClaimed() throws {
        var harness = Harness()
        let records = Update.host("sleepy", ipv4: TakeoverTests.ipv4)
        let saved = Owner(
            key: Self.key, wakeMAC: Self.mac, sequence: 1, registeredAt: harness.now, updatedAt: harness.now,
            records: records.map {
                HeldRecord(record: $0, sequence: 1, registeredAt: harness.now, expiresAt: harness.now + .seconds(7200))
            })
        harness.advance(.seconds(600))
        harness.log += harness.core.restore([saved], now: harness.now)
        let reply = TakeoverTests.probeAnswer
        var claimed = false
        for _ in 0..<400 where !harness.core.owners.isEmpty {
            guard let deadline = harness.core.nextDeadline else { break }
            harness.now = deadline
            let sent = harness.tick().injectedFrames.compactMap { try? EthernetFrame(parsing: $0).arp }
            claimed = claimed || sent.contains { $0.senderProtocolAddress == TakeoverTests.ipv4 }
            if sent.contains(where: { $0.senderProtocolAddress.isUnspecified }) { harness.frame(reply) }
        }
        #expect(!claimed)
        #expect(harness.core.owners.isEmpty)
        #expect(harness.log.events.last?.kind == .released)
        #expect(harness.log.events.last?.detail.contains("it is awake") == true)
    }
}
