import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// The index of records lists only the records of names two owners or more hold; a record of a name one owner
/// holds is found through that owner. Names become shared and stop being shared as hosts come and go, and a
/// record is found, once per holder, all along.
@Suite("Holders of shared and unshared names")
struct HolderIndexTests {
    static func mac(_ index: Int) -> MACAddress { MACAddress(0x02, 0x77, 0, 0, 2, UInt8(index)) }

    /// Host `index` with ssh, and the services entry every host with a service holds alike.
    static func register(_ index: Int, in harness: inout Harness, sequence: UInt8 = 1) {
        let records = ClientMessage.host(
            try! DNSName(labels: ["host\(index)", "local"]), address: .v4(IPv4Address(10, 77, 1, UInt8(10 + index))),
            instance: try! DNSName(labels: ["host\(index)", "_ssh", "_tcp", "local"]), servicesEntry: true)
        let actions = harness.register(
            Update.bytes(
                id: UInt16(index + 1), records: records,
                owner: OwnerOption(sequence: sequence, primaryMAC: mac(index))))
        #expect(!actions.replies.isEmpty, "host \(index) registered")
    }

    static let services = DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr("_ssh._tcp.local."))

    static func holders(of record: DNSRecord, in harness: Harness) -> [MACAddress] {
        harness.core.hosts.holders(of: record, on: Harness.interface).map(\.primaryMAC)
    }

    @Test func aNameSharedThenOneOwnersThenSharedAgainFindsEachHolderOnce() throws {
        var harness = Harness()
        Self.register(0, in: &harness)
        #expect(Self.holders(of: Self.services, in: harness) == [Self.mac(0)])
        Self.register(1, in: &harness)
        #expect(Set(Self.holders(of: Self.services, in: harness)) == [Self.mac(0), Self.mac(1)])
        #expect(harness.core.hosts.indexProblems() == [])

        _ = harness.core.forget(
            OwnerKey(interface: Harness.interface, primaryMAC: Self.mac(0)), now: harness.now, reason: "test")
        #expect(Self.holders(of: Self.services, in: harness) == [Self.mac(1)])
        #expect(harness.core.hosts.indexProblems() == [])

        // Shared again: host 1's entries from before are not entered twice.
        Self.register(2, in: &harness)
        #expect(Set(Self.holders(of: Self.services, in: harness)) == [Self.mac(1), Self.mac(2)])
        #expect(Self.holders(of: Self.services, in: harness).count == 2)
        // Host 1 registers afresh (its records go out of the indexes and in again), then host 2 goes.
        Self.register(1, in: &harness, sequence: 2)
        #expect(harness.core.hosts.indexProblems() == [])
        _ = harness.core.forget(
            OwnerKey(interface: Harness.interface, primaryMAC: Self.mac(2)), now: harness.now, reason: "test")
        #expect(Self.holders(of: Self.services, in: harness) == [Self.mac(1)])
        #expect(harness.core.hosts.indexProblems() == [])

        // A record of a name one host holds: that host; a record nobody holds of that name: that host too (its
        // records are checked); a record of a name nobody holds: nobody.
        let address = DNSRecord(
            name: "host1.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 1, 11)))
        #expect(Self.holders(of: address, in: harness) == [Self.mac(1)])
        #expect(
            Self.holders(
                of: DNSRecord(name: "nobody.local.", ttl: 120, rdata: .a(IPv4Address(1, 2, 3, 4))), in: harness
            ).isEmpty)
    }

    /// The goodbye for a record two hosts hold alike is left out while the other still holds it, whichever went
    /// first and however the name was shared before.
    @Test func aSharedRecordGetsNoGoodbyeWhileAnotherHostHoldsIt() throws {
        var harness = Harness()
        for index in 0..<3 { Self.register(index, in: &harness) }
        harness.run(until: harness.now + .seconds(10))
        for index in 0..<2 {
            let actions = harness.core.forget(
                OwnerKey(interface: Harness.interface, primaryMAC: Self.mac(index)), now: harness.now, reason: "test")
            harness.log += actions
            harness.run(until: harness.now + .seconds(2))
        }
        var goodbyes: [DNSRecord] = []
        for message in harness.log.sentMessages { goodbyes += message.answers.filter { $0.ttl == 0 } }
        #expect(!goodbyes.isEmpty, "the hosts that went said goodbye for their own records")
        #expect(!goodbyes.contains { RecordDigest.sameRecord($0, Self.services) }, "host 2 still holds it")
        #expect(harness.core.hosts.indexProblems() == [])
    }
}
