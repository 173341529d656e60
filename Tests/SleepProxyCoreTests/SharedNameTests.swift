import DNSWire
import FixtureSupport
import NetworkAddresses
import SleepProxyCore
import Testing

/// Many held hosts share names (`_ssh._tcp.local.` is held by every host with ssh). Another host's records of such
/// a name, a conflict on one host's unique record, a goodbye and a host speaking for itself again each concern the
/// hosts they name, and only those: found through the records and unique names held, not by visiting every host
/// that holds the shared name (which made every captured announcement cost as much as the table was large).
@Suite("Names shared by many held hosts")
struct SharedNameTests {
    static let hosts = 40
    static let intruderMAC = MACAddress(0x02, 0, 0, 0, 0, 0x66)

    static func mac(_ index: Int) -> MACAddress { MACAddress(0x02, 0x77, 0, 0, 1, UInt8(index)) }
    static func address(_ index: Int) -> IPv4Address { IPv4Address(10, 77, 0, UInt8(10 + index)) }
    static func name(_ index: Int) -> String { "host\(index)" }

    /// `hosts` hosts with ssh, each announced and settled.
    static func holding() -> Harness {
        var harness = Harness()
        for index in 0..<hosts {
            harness.register(
                Update.bytes(
                    id: UInt16(index + 1), records: Update.host(name(index), ipv4: address(index)),
                    owner: OwnerOption(sequence: 1, primaryMAC: mac(index))))
        }
        harness.run(until: harness.now + .seconds(10))
        #expect(harness.core.owners.count == hosts)
        return harness
    }

    static func response(_ records: [DNSRecord]) -> [UInt8] {
        try! DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records
        ).encoded()
    }

    @Test func anotherHostsServiceOfASharedTypeConflictsWithNone() throws {
        var harness = Self.holding()
        let theirs = DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("intruder._ssh._tcp.local."))
        for _ in 0..<3 {
            let actions = harness.mdns(Self.response([theirs]), mac: Self.intruderMAC)
            #expect(actions.events.isEmpty)
            #expect(actions.transmissions.isEmpty)
            harness.advance(.seconds(2))
        }
        #expect(harness.core.owners.count == Self.hosts)
    }

    @Test func aConflictOnOneHostsAddressWakesThatHostAlone() throws {
        var harness = Self.holding()
        let claim = DNSRecord(
            name: try DNSName(labels: [Self.name(7), "local"]), ttl: 120, cacheFlush: true,
            rdata: .a(IPv4Address(10, 77, 0, 99)))
        #expect(harness.mdns(Self.response([claim]), mac: Self.intruderMAC).events.isEmpty, "probed again first")
        harness.advance(.seconds(1))
        let actions = harness.mdns(Self.response([claim]), mac: Self.intruderMAC)
        #expect(actions.events.map(\.kind) == [.conflict, .wake])
        #expect(actions.events.allSatisfy { $0.owner == Self.mac(7) })
    }

    /// Their record is ours with its names in another case: the same record (RFC 4343), so a goodbye for it is
    /// answered by announcing ours again at once, and it is never a conflict.
    @Test func aGoodbyeForOurRecordInAnotherCaseIsAnsweredWithOurs() throws {
        var harness = Self.holding()
        let instance = try DNSName(labels: [Self.name(7), "_ssh", "_tcp", "local"])
        let goodbye = DNSRecord(
            name: instance, ttl: 0, cacheFlush: true,
            rdata: .srv(SRVData(port: 22, target: try DNSName(labels: ["HOST7", "LOCAL"]))))
        let actions = harness.mdns(Self.response([goodbye]), mac: Self.intruderMAC)
        #expect(actions.events.isEmpty)
        let announced = actions.sentMessages.flatMap(\.answers).filter { $0.type == .srv }
        #expect(announced.map(\.name) == [instance])
        #expect(announced.allSatisfy { $0.ttl == 120 })
        #expect(harness.core.owners.count == Self.hosts)
    }

    /// A host that never sends OWNER announces its own name from its own MAC a minute after it registered: it is
    /// back, and released; the others, which share its service type, stay.
    @Test func aHostAnnouncingItselfIsReleasedAlone() throws {
        var harness = Self.holding()
        harness.advance(.seconds(61))
        let own = ClientMessage.host(named: Self.name(7), address: .v4(Self.address(7)))
        let actions = harness.mdns(
            Self.response(own.filter { ReverseMapping.address(of: $0) == nil }), mac: Self.mac(7))
        #expect(actions.events.map(\.kind) == [.released])
        #expect(actions.events.first?.owner == Self.mac(7))
        #expect(harness.core.owners.count == Self.hosts - 1)
        #expect(harness.owner(Self.mac(7)) == nil)
        // Its service type from a MAC that holds nothing releases nobody.
        let shared = DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("host3._ssh._tcp.local."))
        #expect(harness.mdns(Self.response([shared]), mac: Self.intruderMAC).events.isEmpty)
        #expect(harness.core.owners.count == Self.hosts - 1)
    }
}
