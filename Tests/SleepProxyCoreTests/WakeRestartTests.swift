import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// A restart of the daemon (a package upgrade restarts it) in the middle of a wake: the store keeps the wake's
/// progress, and the restored host goes on being woken from the round it had reached.
@Suite("Wakes across a restart")
struct WakeRestartTests {
    static let key = OwnerKey(interface: Harness.interface, primaryMAC: TakeoverTests.sleeperMAC)

    /// What the lease store would hold after the store changes so far, as its SQL has it: saving an owner keeps
    /// its wake, removing it removes the wake, and a wake of an owner that is not stored is not kept.
    struct StoreMirror {
        var owners: [OwnerKey: Owner] = [:]
        var wakes: [OwnerKey: StoredWake] = [:]

        mutating func apply(_ actions: [Action]) {
            for change in actions.storeChanges {
                switch change {
                case .saveOwner(let owner): owners[owner.key] = owner
                case .removeOwner(let key):
                    owners[key] = nil
                    wakes[key] = nil
                case .appendEvent, .saveLearned: break
                case .saveWake(let key, let wake): if owners[key] != nil { wakes[key] = wake }
                }
            }
        }
    }

    /// A new core, restored at `now` from what `mirror` holds.
    static func restarted(from mirror: StoreMirror, at now: UnixTime) -> Harness {
        var harness = Harness()
        harness.now = now
        harness.log += harness.core.restore(Array(mirror.owners.values), wakes: mirror.wakes, now: now)
        return harness
    }

    /// The rounds in `actions` (each the magic frames injected at one moment), with when they went out.
    static func rounds(_ harness: inout Harness, until end: UnixTime) throws -> [(UnixTime, [EthernetFrame])] {
        var rounds: [(UnixTime, [EthernetFrame])] = []
        while let deadline = harness.core.nextDeadline, deadline <= end {
            harness.now = max(harness.now, deadline)
            let magic = try harness.tick().injectedFrames.map { try EthernetFrame(parsing: $0) }.filter {
                $0.header.etherType == .wakeOnLAN
            }
            if !magic.isEmpty { rounds.append((harness.now, magic)) }
        }
        harness.now = end
        return rounds
    }

    /// A held host woken by a SYN at `start`, its wake run until `start + elapsed`, and what the store then holds.
    static func wokenAndStored(for elapsed: Duration) throws -> (start: UnixTime, mirror: StoreMirror) {
        var harness = TakeoverTests.taken()
        let start = harness.now
        harness.frame(WakeTests.segment(22, .syn))
        _ = try rounds(&harness, until: start + elapsed)
        var mirror = StoreMirror()
        mirror.apply(harness.log)
        return (start, mirror)
    }

    @Test func aRestartedProxySendsTheRoundsThatWereLeft() throws {
        let (start, mirror) = try Self.wokenAndStored(for: .seconds(5))
        let stored = try #require(mirror.wakes[Self.key])
        #expect(stored.rounds == 3 && stored.goodbyes == 0 && stored.withdrawn == nil, "\(stored)")
        #expect(stored.next == start + .seconds(6) && stored.reason.contains("TCP SYN"), "\(stored)")

        // The daemon stops at 5 s and is back at once.
        var restarted = Self.restarted(from: mirror, at: start + .seconds(5))
        #expect(restarted.core.state(of: Self.key) == .waking(reason: stored.reason, rounds: 3))
        #expect(restarted.log.logLines.contains { $0.1.contains("the wake continues") && $0.1.contains("3 of 15") })
        let rounds = try Self.rounds(&restarted, until: start + .seconds(60))
        // Rounds 4 to 15, on the same 2 s beat, unicast and broadcast (the unicast-only rounds are over).
        #expect(rounds.map { $0.0 - start } == (3..<15).map { Duration.seconds(2 * $0) })
        #expect(rounds.allSatisfy { $0.1.map(\.header.destination) == [TakeoverTests.sleeperMAC, .broadcast] })
        // Not claimed again while it is being woken: no ARP from the proxy for its address.
        let arp = restarted.log.injectedFrames.compactMap { try? EthernetFrame(parsing: $0) }.filter { $0.arp != nil }
        #expect(arp.isEmpty, "\(arp)")
        // Then the goodbyes, and the host goes.
        #expect(restarted.core.owners.isEmpty)
        #expect(restarted.log.sentMessages.filter { $0.answers.allSatisfy { $0.ttl == 0 } }.count == 6)
    }

    @Test func anOverdueRoundGoesOutAtOnce() throws {
        let (start, mirror) = try Self.wokenAndStored(for: .seconds(1))
        // Down for 20 s: the second round, due at 2 s, goes out as soon as the proxy is back.
        var restarted = Self.restarted(from: mirror, at: start + .seconds(21))
        let rounds = try Self.rounds(&restarted, until: start + .seconds(26))
        #expect(rounds.map { $0.0 - start } == [.seconds(21), .seconds(23), .seconds(25)])
    }

    /// A name-conflict wake withdraws one record: after a restart that record is still not answered, the others
    /// are, and when the host does not show up only that record goes.
    @Test func aRecordWakeContinuesForThatRecordOnly() throws {
        var harness = ConflictTests.holding()
        harness.mdns(ConflictTests.claim(IPv4Address(10, 77, 0, 66)), mac: ConflictTests.intruderMAC)
        harness.advance(.seconds(1))
        harness.mdns(ConflictTests.claim(IPv4Address(10, 77, 0, 66)), mac: ConflictTests.intruderMAC)
        var mirror = StoreMirror()
        mirror.apply(harness.log)
        let key = OwnerKey(interface: Harness.interface, primaryMAC: ConflictTests.mac)
        let withdrawn = try #require(mirror.wakes[key]?.withdrawn)
        let owner = try #require(mirror.owners[key])
        #expect(withdrawn.map { owner.records[$0].record.type } == [.a])

        var restarted = Self.restarted(from: mirror, at: harness.now + .seconds(1))
        // The restored records are probed silently first, as after any restart.
        restarted.run(until: restarted.now + .seconds(1))
        #expect(restarted.mdns(Query.bytes("sleepy.local.", .a, unicast: true)).transmissions.isEmpty)
        #expect(!restarted.mdns(Query.bytes("sleepy._ssh._tcp.local.", .srv, unicast: true)).transmissions.isEmpty)
        restarted.run(until: restarted.now + .seconds(40))
        let kept = try #require(restarted.owner(ConflictTests.mac))
        #expect(kept.records.count == owner.records.count - 1 && !kept.records.contains { $0.record.type == .a })
        mirror.apply(restarted.log)
        #expect(mirror.wakes[key] == nil, "the finished wake is cleared in the store")
    }

    /// The store keeps a record wake's records by position: when older records go (the host announced with its
    /// OWNER more than 60 s after registering them), the positions follow the records that are left.
    @Test func theWithdrawnPositionsFollowTheRecordsThatAreLeft() throws {
        var harness = ConflictTests.holding()
        let start = harness.now - .seconds(3)
        let extra = DNSRecord(name: "extra.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
        // A later datagram of the same registration adds one record, 30 s after the others.
        harness.now = start + .seconds(30)
        harness.register(
            Update.bytes(id: 0x4B2F, records: [extra], owner: OwnerOption(sequence: 1, primaryMAC: ConflictTests.mac)))
        harness.run(until: start + .seconds(31))
        let intruder = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [
                DNSRecord(name: "extra.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 66)))
            ]
        ).encoded()
        harness.mdns(intruder, mac: ConflictTests.intruderMAC)
        harness.advance(.seconds(1))
        harness.mdns(intruder, mac: ConflictTests.intruderMAC)
        let key = OwnerKey(interface: Harness.interface, primaryMAC: ConflictTests.mac)
        var mirror = StoreMirror()
        mirror.apply(harness.log)
        #expect(mirror.wakes[key]?.withdrawn == [5], "\(String(describing: mirror.wakes[key]))")
        // At 61 s the host announces with its OWNER: the five records of the first datagram are released.
        harness.run(until: start + .seconds(61))
        let announcement = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [
                DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
            ],
            additionals: [Update.opt(owner: OwnerOption(sequence: 1, primaryMAC: ConflictTests.mac), lease: nil)]
        ).encoded()
        harness.mdns(announcement, mac: ConflictTests.mac)
        mirror.apply(harness.log)
        let owner = try #require(mirror.owners[key])
        #expect(owner.records.map(\.record) == [extra])
        #expect(mirror.wakes[key]?.withdrawn == [0], "\(String(describing: mirror.wakes[key]))")
        let restarted = Self.restarted(from: mirror, at: harness.now)
        #expect(restarted.core.state(of: key) == .waking(reason: try #require(mirror.wakes[key]).reason, rounds: 15))
    }

    @Test func aRegistrationCallsARestoredWakeOffInTheStoreToo() throws {
        var harness = TakeoverTests.taken()
        harness.frame(WakeTests.segment(22, .syn))
        var mirror = StoreMirror()
        mirror.apply(harness.log)
        var restarted = Self.restarted(from: mirror, at: harness.now + .seconds(3))
        let registration = restarted.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: TakeoverTests.ipv4),
                owner: OwnerOption(sequence: 2, primaryMAC: TakeoverTests.sleeperMAC)))
        #expect(registration.events.map(\.kind).contains(.wakeCancelled))
        mirror.apply(restarted.log)
        #expect(mirror.wakes[Self.key] == nil)
        #expect(restarted.core.state(of: Self.key) == .takingOver)
    }

    /// A stored wake that does not fit its owner (records it does not hold) is not continued: the host is held,
    /// the store's copy is cleared, and the log says why.
    @Test func aWakeThatDoesNotFitItsOwnerIsDropped() throws {
        var harness = TakeoverTests.taken()
        var mirror = StoreMirror()
        mirror.apply(harness.log)
        mirror.wakes[Self.key] = StoredWake(
            rounds: 2, goodbyes: 0, next: harness.now, reason: "a SYN", withdrawn: [99])
        harness.now = harness.now + .seconds(1)
        let restarted = Self.restarted(from: mirror, at: harness.now)
        #expect(restarted.core.state(of: Self.key) == .takingOver)
        #expect(restarted.log.storeChanges.contains(.saveWake(Self.key, nil)))
        #expect(
            restarted.log.logLines.contains {
                $0.0 == .error && $0.1.contains("cannot go on") && $0.1.contains("[99]")
            })
    }
}
