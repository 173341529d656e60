import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// The core's counts for the daemon's metrics: each changes as its event happens, and only then.
@Suite("Statistics")
struct StatisticsTests {
    static let interface = Harness.interface

    @Test func registrationsCountByOutcome() {
        var (harness, _) = TakeoverTests.registering()
        #expect(harness.core.statistics.registrationsAccepted == 1)
        #expect(harness.core.statistics.registrationsRefused.isEmpty)
        harness.register([0x01, 0x02, 0x03])
        harness.register(
            Update.bytes(
                records: Update.host("nobody", ipv4: IPv4Address(10, 77, 0, 40)), opts: [Update.opt(owner: nil)]))
        #expect(harness.core.statistics.registrationsAccepted == 1)
        #expect(harness.core.statistics.registrationsRefused == [.malformed: 1, .noOwner: 1])
    }

    @Test func everyRateLimitedRefusalCountsThoughFewAreRecorded() {
        var harness = Harness()
        _ = harness.core.reconfigure(
            {
                var configuration = harness.core.configuration
                configuration.registrationRate = Rate(perSecond: 1, burst: 1)
                return configuration
            }(), now: harness.now)
        for _ in 0..<20 { harness.register([0x01]) }
        let refused = harness.core.statistics.registrationsRefused
        #expect(refused[.malformed] == 1 && refused[.rateLimited] == 19, "\(refused)")
        // The history holds far fewer: one event a minute for the rate-limited ones.
        #expect(harness.log.events.filter { $0.reason == .rateLimited }.count == 1)
    }

    @Test func aWakeCountsOnceUnderItsTriggerWithItsMagicPackets() throws {
        var harness = TakeoverTests.taken()
        #expect(harness.core.statistics.wakes.isEmpty && harness.core.statistics.magicPackets == 0)
        let actions = harness.frame(WakeTests.segment(22, .syn))
        #expect(harness.core.statistics.wakes == [.tcpSYN: 1])
        let frames = actions.injectedFrames.filter { (try? EthernetFrame(parsing: $0))?.isMagicPacket == true }
        #expect(frames.count == 2 && harness.core.statistics.magicPackets == 2)
        // The marker follows the first round's magic packets, once.
        let marker = try #require(actions.firstIndex(of: .wakeStarted(Self.interface, .tcpSYN)))
        #expect(actions.filter { if case .wakeStarted = $0 { true } else { false } }.count == 1)
        #expect(Array(actions[..<marker]).injectedFrames.count >= 2)
        // Another SYN while it wakes: no second wake, no marker.
        let again = harness.frame(WakeTests.segment(22, .syn))
        #expect(!again.contains { if case .wakeStarted = $0 { true } else { false } })
        #expect(harness.core.statistics.wakes == [.tcpSYN: 1])
        // Later rounds add their magic packets.
        harness.run(until: harness.now + .seconds(5))
        #expect(harness.core.statistics.magicPackets > 2)
        #expect(harness.core.statistics.wakes == [.tcpSYN: 1])
    }

    @Test func otherTriggers() {
        var harness = TakeoverTests.taken()
        harness.frame(WakeTests.datagram(9, MagicPacket(target: TakeoverTests.sleeperMAC).bytes))
        #expect(harness.core.statistics.wakes == [.magicPacket: 1])

        var manual = TakeoverTests.taken()
        let key = OwnerKey(interface: Self.interface, primaryMAC: TakeoverTests.sleeperMAC)
        let actions = manual.core.requestWake(key, now: manual.now, reason: "asked")
        #expect(actions.contains(.wakeStarted(Self.interface, .manual)))
        #expect(manual.core.statistics.wakes == [.manual: 1])

        // The wakes that are one round and no sequence: an interface no longer served, the proxy stopping.
        var removed = TakeoverTests.taken()
        let packetsBefore = removed.core.statistics.magicPackets
        _ = removed.core.removeLink(Self.interface, now: removed.now, reason: "removed from the configuration")
        #expect(removed.core.statistics.wakes == [.unserved: 1])
        #expect(removed.core.statistics.magicPackets > packetsBefore)
        var stopping = TakeoverTests.taken()
        _ = stopping.core.wakeEveryone(now: stopping.now, reason: "the proxy is stopping")
        #expect(stopping.core.statistics.wakes == [.shutdown: 1])
    }

    @Test func aLeaseEndCountsAnExpiryAndAWakeAndAnUnansweredWakeARelease() {
        var harness = TakeoverTests.taken()
        let actions = harness.run(until: harness.now + .seconds(7200))
        #expect(harness.core.statistics.leaseExpiries == 1)
        #expect(harness.core.statistics.wakes == [.leaseEnd: 1])
        #expect(actions.contains(.wakeStarted(Self.interface, .leaseEnd)))
        #expect(harness.core.statistics.releases.isEmpty)
        harness.run(until: harness.now + .seconds(60))
        #expect(harness.core.owners.isEmpty)
        #expect(harness.core.statistics.releases == [.unanswered: 1])
    }

    @Test func aDryRunCountsNoWake() {
        var harness = TakeoverTests.taken()
        var configuration = harness.core.configuration
        configuration.wakePolicy.dryRun = true
        _ = harness.core.reconfigure(configuration, now: harness.now)
        let actions = harness.frame(WakeTests.segment(22, .syn))
        #expect(actions.events.contains { $0.kind == .wouldWake })
        #expect(harness.core.statistics.wakes.isEmpty && harness.core.statistics.magicPackets == 0)
        #expect(!actions.contains { if case .wakeStarted = $0 { true } else { false } })
    }

    @Test func releasesCountByReason() {
        var harness = TakeoverTests.taken()
        // The host announces itself with a new sequence: it is back.
        let back = HostLifecycleTests.announcement(sequence: 2, records: [HostLifecycleTests.address])
        harness.mdns(back, from: Harness.sleeper, mac: TakeoverTests.sleeperMAC)
        #expect(harness.core.owners.isEmpty)
        #expect(harness.core.statistics.releases == [.returned: 1])

        var forgotten = TakeoverTests.taken()
        let key = OwnerKey(interface: Self.interface, primaryMAC: TakeoverTests.sleeperMAC)
        _ = forgotten.core.forget(key, now: forgotten.now, reason: "asked")
        #expect(forgotten.core.statistics.releases == [.forgotten: 1])
    }

    @Test func queriesAndAnswersCountByDestination() {
        var harness = TakeoverTests.taken()
        harness.mdns(Query.bytes("sleepy.local.", .a))
        harness.run(until: harness.now + .seconds(1))
        #expect(harness.core.statistics.queriesReceived == 1)
        #expect(harness.core.statistics.answersMulticast == 1 && harness.core.statistics.answersUnicast == 0)
        // A legacy query (source port not 5353) is answered by unicast.
        harness.mdns(
            Query.bytes(id: 7, "sleepy.local.", .a), from: Endpoint(address: Harness.waker.address, port: 40_000))
        #expect(harness.core.statistics.queriesReceived == 2 && harness.core.statistics.answersUnicast == 1)
        // The first question was worked out, the same one again came from the cache; another type is worked out.
        #expect(harness.core.statistics.answerCacheMisses == 1 && harness.core.statistics.answerCacheHits == 1)
        harness.mdns(Query.bytes("sleepy.local.", .aaaa))
        #expect(harness.core.statistics.answerCacheMisses == 2)
        // A response is not a query.
        harness.mdns(HostLifecycleTests.announcement(sequence: nil, records: []), from: Harness.otherProxy)
        #expect(harness.core.statistics.queriesReceived == 3)
    }

    @Test func queriesOverTheRateAreCountedUnanswered() {
        var harness = TakeoverTests.taken()
        var configuration = harness.core.configuration
        configuration.queryRate = Rate(perSecond: 1, burst: 2)
        _ = harness.core.reconfigure(configuration, now: harness.now)
        for _ in 0..<5 {
            harness.mdns(
                Query.bytes(id: 7, "sleepy.local.", .a), from: Endpoint(address: Harness.waker.address, port: 40_000))
        }
        #expect(harness.core.statistics.queriesReceived == 5)
        #expect(harness.core.statistics.queriesRateLimited == 3)
        #expect(harness.core.statistics.answersUnicast == 2)
    }

    @Test func heldCountsFollowTheTakeOver() {
        var (harness, _) = TakeoverTests.registering()
        let registered = harness.core.heldCounts[Self.interface]
        #expect(registered?.hosts == 1 && registered?.records == harness.core.recordCount)
        // Still probing: nothing claimed yet.
        #expect(registered?.addresses == 0)
        harness.run(until: harness.now + .seconds(12))
        #expect(harness.core.heldCounts[Self.interface]?.addresses == 2)
        harness.frame(WakeTests.segment(22, .syn))
        // Being woken as a whole: its addresses are no longer answered for.
        #expect(harness.core.heldCounts[Self.interface] == HeldCounts(hosts: 1, records: harness.core.recordCount))
        #expect(Harness().core.heldCounts == [Self.interface: HeldCounts()])
    }
}

extension EthernetFrame {
    fileprivate var isMagicPacket: Bool {
        header.etherType == .wakeOnLAN || udp?.magicPacket != nil
    }
}
