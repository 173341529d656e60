import DNSWire
import NetworkAddresses
import SleepProxyCore
import Testing

@Suite("Conflicts over held names, and forgetting")
struct ConflictTests {
    static let mac = MACAddress(0x02, 0x77, 0, 0, 0, 2)
    static let intruderMAC = MACAddress(0x02, 0, 0, 0, 0, 0x66)

    static func holding() -> Harness {
        var harness = Harness()
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: IPv4Address(10, 77, 0, 2)),
                owner: OwnerOption(sequence: 1, primaryMAC: mac)))
        harness.run(until: harness.now + .seconds(3))
        return harness
    }

    static func claim(_ address: IPv4Address) -> [UInt8] {
        try! DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(address))]
        ).encoded()
    }

    @Test func aSingleConflictIsDefended() throws {
        var harness = Self.holding()
        let actions = harness.mdns(Self.claim(IPv4Address(10, 77, 0, 66)), mac: Self.intruderMAC)
        let defense = try #require(actions.sentMessages.first)
        #expect(defense.answers.map(\.rdata) == [.a(IPv4Address(10, 77, 0, 2))])
        #expect(actions.events.allSatisfy { $0.kind != .wake })
        #expect(harness.core.owners.count == 1)
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
