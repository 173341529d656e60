import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

@Suite("Conflicts over held names, and forgetting")
struct ConflictTests {
    static let mac = MACAddress(0x02, 0x77, 0, 0, 0, 2)
    static let intruderMAC = MACAddress(0x02, 0, 0, 0, 0, 0x66)

    /// A harness that has just registered `sleepy.local.` (10.77.0.2) for ``mac``.
    static func registered() -> Harness {
        var harness = Harness()
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: IPv4Address(10, 77, 0, 2)),
                owner: OwnerOption(sequence: 1, primaryMAC: mac)))
        return harness
    }

    /// ``registered()`` three seconds on: the host is held and announced.
    static func holding() -> Harness {
        var harness = registered()
        harness.run(until: harness.now + .seconds(3))
        return harness
    }

    static func claim(_ address: IPv4Address) -> [UInt8] {
        try! DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(address))]
        ).encoded()
    }

    /// mDNS.c `mDNSCoreReceiveResponse`: a verified record answered by another host with other data goes back
    /// to silent probing (not answered meanwhile), then is announced four times; nobody is woken.
    @Test func aConflictSendsTheRecordBackToSilentProbingThenReannouncesIt() throws {
        var harness = Self.holding()
        let start = harness.now
        let actions = harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        #expect(actions.transmissions.isEmpty)
        #expect(actions.events.isEmpty)
        #expect(harness.mdns(Query.bytes("sleepy.local.", .a, unicast: true)).transmissions.isEmpty, "probing")
        // The host's other records are still answered.
        #expect(!harness.mdns(Query.bytes("sleepy._ssh._tcp.local.", .srv, unicast: true)).transmissions.isEmpty)
        var announced: [Duration] = []
        while let deadline = harness.core.nextDeadline, deadline <= start + .seconds(20) {
            harness.now = deadline
            let sent = harness.tick().sentMessages
            if sent.contains(where: { $0.answers.contains { $0.rdata == .a(IPv4Address(10, 77, 0, 2)) } }) {
                announced.append(harness.now - start)
            }
        }
        #expect(announced == [750, 1750, 3750, 7750].map { Duration.milliseconds($0) })
        #expect(harness.log.events.allSatisfy { $0.kind != .wake })
        #expect(harness.core.owners.count == 1)
    }

    /// A record in its probe after a conflict stays silent when a later datagram of the same sequence moves it
    /// among the host's records (a re-sent record goes to the end) and adds another: the probe follows the record,
    /// not its place, and the new record gets a probe of its own.
    @Test func aProbeFollowsItsRecordWhenALaterDatagramMovesIt() throws {
        var harness = Self.holding()
        harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        let address = DNSRecord(
            name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
        let added = DNSRecord(
            name: "sleepy._sftp-ssh._tcp.local.", ttl: 120, cacheFlush: true,
            rdata: .srv(SRVData(port: 22, target: "sleepy.local.")))
        let reply = harness.register(
            Update.bytes(id: 0x4B2F, records: [added, address], owner: OwnerOption(sequence: 1, primaryMAC: Self.mac)))
        #expect(reply.events.map(\.kind) == [.renewed], "the later datagram is accepted")
        let heldNames = harness.core.owners.values.first?.records.map { "\($0.record.name) \($0.record.type)" }
        #expect(heldNames?.last == "sleepy.local. A", "the address record moved to the end")
        harness.advance(.milliseconds(100))
        #expect(harness.mdns(Query.bytes("sleepy.local.", .a, unicast: true)).transmissions.isEmpty, "probing")
        #expect(
            harness.mdns(Query.bytes("sleepy._sftp-ssh._tcp.local.", .srv, unicast: true)).transmissions.isEmpty,
            "the new record is probed too")
        #expect(!harness.mdns(Query.bytes("sleepy._ssh._tcp.local.", .srv, unicast: true)).transmissions.isEmpty)
        harness.run(until: harness.now + .seconds(1))
        #expect(!harness.mdns(Query.bytes("sleepy.local.", .a, unicast: true)).transmissions.isEmpty, "verified")
        #expect(!harness.mdns(Query.bytes("sleepy._sftp-ssh._tcp.local.", .srv, unicast: true)).transmissions.isEmpty)
    }

    /// Conflicts in the first tick of a probe are ignored (Apple counts one per packet), and one during the probe
    /// is forgiven with a pause of a second; the next wakes the owner.
    @Test func oneConflictDuringTheProbeIsForgivenTheNextWakes() throws {
        var harness = Self.holding()
        harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        harness.advance(.milliseconds(100))
        #expect(harness.mdns(Self.claim(IPv4Address(10, 77, 0, 67)), mac: Self.intruderMAC).events.isEmpty)
        // A verified record whose re-announcements are not over yet: this conflict is the further one.
        harness.run(until: harness.now + .seconds(1))
        let actions = harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        #expect(actions.events.map(\.kind) == [.conflict, .wake])
    }

    @Test func aConflictAtRegistrationIsForgivenOnceThenWakes() throws {
        var harness = Harness()
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: IPv4Address(10, 77, 0, 2)),
                owner: OwnerOption(sequence: 1, primaryMAC: Self.mac)))
        #expect(
            harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC).logLines.contains {
                $0.1.contains("before the first probe tick")
            })
        harness.advance(.milliseconds(300))
        #expect(
            harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC).logLines.contains {
                $0.1.contains("pausing a second")
            })
        harness.advance(.milliseconds(1100))
        let actions = harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        #expect(actions.events.map(\.kind) == [.conflict, .wake])
    }

    /// A conflict wakes the owner for that record only (mDNS.c 2451-2462): the first two rounds are unicast, the
    /// record is no longer answered, the others are, and when the host never shows up only that record goes.
    @Test func aConflictWakeWithdrawsOnlyThatRecord() throws {
        var harness = Self.holding()
        harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        harness.advance(.seconds(1))
        let wake = harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        let magic = try wake.injectedFrames.map { try EthernetFrame(parsing: $0) }.filter {
            $0.header.etherType == .wakeOnLAN
        }
        #expect(magic.map(\.header.destination) == [Self.mac])
        #expect(
            wake.injectedFrames.allSatisfy { (try? EthernetFrame(parsing: $0))?.icmpv6 == nil }, "no IPv6 hand-back")
        #expect(harness.mdns(Query.bytes("sleepy.local.", .a, unicast: true)).transmissions.isEmpty)
        #expect(!harness.mdns(Query.bytes("sleepy._ssh._tcp.local.", .srv, unicast: true)).transmissions.isEmpty)
        // The address is still claimed (its first announcement went out): ARP requests are answered.
        harness.run(until: harness.now + .seconds(1))
        let request = TakeoverTests.arpRequest(
            from: TakeoverTests.wakerMAC, sender: TakeoverTests.waker, target: IPv4Address(10, 77, 0, 2))
        #expect(harness.frame(request).injectedFrames.count == 1)
        harness.run(until: harness.now + .seconds(40))
        let owner = try #require(harness.owner(Self.mac))
        #expect(owner.records.count == 4)
        #expect(!owner.records.contains { $0.record.type == .a })
        let goodbyes = harness.log.sentMessages.filter { $0.answers.contains { $0.ttl == 0 } }
        #expect(goodbyes.count == 6)
        #expect(goodbyes.allSatisfy { $0.answers.map(\.type) == [.a] })
    }

    @Test func aPersistentConflictWakesTheOwner() throws {
        var harness = Self.holding()
        harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        harness.advance(.seconds(1))
        let actions = harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        let wakes = actions.events.filter { $0.kind == .wake }
        #expect(wakes.map(\.owner) == [Self.mac])
        #expect(wakes.first?.detail.contains("sleepy.local.") == true)
        #expect(actions.events.map(\.kind) == [.conflict, .wake])
        // The first round of magic packets goes out at once.
        #expect(!actions.injectedFrames.isEmpty)
    }

    @Test func conflictsFarApartAreEachDefendedOnly() {
        var harness = Self.holding()
        harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        harness.advance(.seconds(10))
        let actions = harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        #expect(actions.events.allSatisfy { $0.kind != .wake })
    }

    @Test func identicalDataAndSharedRecordsAreNoConflict() {
        var harness = Self.holding()
        #expect(harness.mdns(Self.claim(IPv4Address(10, 77, 0, 2)), mac: Self.intruderMAC).transmissions.isEmpty)
        // Another host's instance under the same service type: shared PTRs never conflict.
        let browse = try! DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query),
            answers: [DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("other._ssh._tcp.local."))]
        ).encoded()
        #expect(harness.mdns(browse, mac: Self.intruderMAC).transmissions.isEmpty)
    }

    @Test func aProbeFromAnotherHostIsDefendedNotWoken() throws {
        var harness = Self.holding()
        let probe = Query.bytes(
            [DNSQuestion(name: "sleepy.local.", type: .any, unicastResponse: true)],
            authorities: [DNSRecord(name: "sleepy.local.", ttl: 120, rdata: .a(IPv4Address(10, 77, 0, 66)))])
        let actions = harness.mdns(probe, mac: Self.intruderMAC)
        #expect(actions.sentMessages.contains { $0.answers.contains { $0.rdata == .a(IPv4Address(10, 77, 0, 2)) } })
        #expect(actions.events.allSatisfy { $0.kind != .wake })
        #expect(harness.core.owners.count == 1)
    }

    @Test func forgettingSaysGoodbye() throws {
        var harness = Self.holding()
        let key = OwnerKey(interface: Harness.interface, primaryMAC: Self.mac)
        let actions = harness.core.forget(key, now: harness.now, reason: "the administrator asked")
        #expect(harness.core.owners.isEmpty)
        let goodbyes = actions.sentMessages
        #expect(goodbyes.count == 2)  // IPv4 and IPv6 groups
        #expect(goodbyes.allSatisfy { $0.answers.count == 5 && $0.answers.allSatisfy { $0.ttl == 0 } })
        #expect(actions.storeChanges.contains(.removeOwner(key)))
        #expect(actions.events.first?.detail == "forgotten: the administrator asked")
        #expect(harness.core.forget(key, now: harness.now, reason: "again").logLines.first?.0 == .warning)
    }
}
