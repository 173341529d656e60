import Frames
import NetworkAddresses
import Testing

@testable import DNSWire
@testable import SleepProxyCore

/// The machines heard on the link, for `sleepproxyctl seen`: who they are by what they announce for themselves,
/// bounded whatever the link sends.
struct SeenMachinesTests {
    typealias Learned = LearnedRecordsTests

    static func machine(_ mac: MACAddress, _ harness: Harness) -> SeenMachine? {
        harness.core.seenMachines.first { $0.mac == mac }
    }

    /// The host name is kept as long as the machine is: a copy of its own, not the names of the packet it came in
    /// (half a kilobyte at least, for each of up to 512 machines, filling again after every start).
    @Test func theHostNameKeptIsACopyOfItsOwn() throws {
        var harness = Harness()
        Learned.announce(Learned.announcement, &harness)
        let name = try #require(Self.machine(Learned.mac, harness)?.hostName)
        #expect(name == Learned.hostName)
        #expect(
            name.storageCapacity <= name.wireLength + DNSName.compactSlack,
            "\(name.storageCapacity) bytes kept for a name of \(name.wireLength)")
    }

    @Test func aMachineIsKnownByTheHostNameAndServicesItAnnouncesForItself() throws {
        var harness = Harness()
        Learned.announce(Learned.announcement, &harness)
        let imac = try #require(Self.machine(Learned.mac, harness))
        #expect(imac.interface == Harness.interface)
        #expect(imac.hostName == Learned.hostName)
        #expect(imac.addresses == [.v4(Learned.ipv4)])
        #expect(
            imac.services == [
                SeenMachine.Service(name: "Anna's iMac", type: "_rfb._tcp", port: 5900),
                SeenMachine.Service(name: "Anna's iMac", type: "_smb._tcp", port: 445),
            ])
        #expect(imac.role == .neither)
        #expect(imac.firstHeard == harness.now && imac.lastHeard == harness.now)

        // A goodbye withdraws the service from the list; a query from it counts as hearing it.
        harness.advance(.seconds(30))
        Learned.announce(Learned.goodbyes(Learned.service(Learned.screen, port: 5900)), &harness)
        #expect(Self.machine(Learned.mac, harness)?.services.map(\.type) == ["_smb._tcp"])
        harness.advance(.seconds(30))
        harness.mdns(Query.bytes("_ipp._tcp.local.", .ptr), from: Learned.source, mac: Learned.mac)
        #expect(Self.machine(Learned.mac, harness)?.lastHeard == harness.now)
    }

    /// An Apple TV answering for a sleeping Mac sends the Mac's records from its own address: they are not taken
    /// for the Apple TV's own.
    @Test func recordsSentForAnotherAddressAreNotTheSendersOwn() throws {
        var harness = Harness()
        let appleTV = MACAddress(0x3C, 0x22, 0xFB, 0x99, 0x00, 0x01)
        let tvSource = Endpoint(address: .v4(IPv4Address(10, 77, 0, 30)), port: 5353)
        harness.mdns(Learned.response(Learned.announcement), from: tvSource, mac: appleTV)
        let tv = try #require(Self.machine(appleTV, harness))
        #expect(tv.hostName == nil)
        #expect(tv.services.isEmpty)
        #expect(tv.addresses == [tvSource.address])
        // Its own name, sent for its own address, is.
        let own = DNSRecord(
            name: "Living-Room.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 30)))
        harness.mdns(Learned.response([own]), from: tvSource, mac: appleTV)
        #expect(Self.machine(appleTV, harness)?.hostName == "Living-Room.local.")
    }

    @Test func theProxysOwnFramesAndAddressesOffTheLinkAreNotListed() throws {
        var harness = Harness()
        harness.mdns(Query.bytes("_smb._tcp.local.", .ptr), from: Harness.waker, mac: Harness.proxyMAC)
        #expect(harness.core.seenMachines.isEmpty)
        let offLink = Endpoint(address: .v4(IPv4Address(192, 0, 2, 7)), port: 5353)
        harness.mdns(Learned.response(Learned.announcement), from: offLink, mac: Learned.mac)
        let imac = try #require(Self.machine(Learned.mac, harness))
        #expect(imac.addresses.isEmpty)
        #expect(imac.hostName == nil, "a host name is only taken for an address on the link")
    }

    @Test func anARPRequestIsHeard() throws {
        var harness = Harness()
        harness.frame(DeclaredHostTests.arpFromHost())
        let pc = try #require(Self.machine(DeclaredHostTests.mac, harness))
        #expect(pc.addresses == [.v4(DeclaredHostTests.ipv4)])
        #expect(pc.hostName == nil)
    }

    @Test func eachMachineSaysWhetherItRegistersIsDeclaredOrNeither() throws {
        var harness = Learned.harness()
        Learned.announce(Learned.announcement, &harness)
        harness.register(Update.bytes(records: RegistrationDecisionTests.records))
        harness.mdns(Query.bytes("_smb._tcp.local.", .ptr), from: Harness.waker, mac: MACAddress(2, 0, 0, 0, 0, 3))
        let roles = Dictionary(uniqueKeysWithValues: harness.core.seenMachines.map { ($0.mac, $0.role) })
        #expect(roles[Learned.mac] == .declared("imac"))
        #expect(roles[Update.mac] == .registers)
        #expect(roles[MACAddress(2, 0, 0, 0, 0, 3)] == .neither)
        // Listed the most recently heard first.
        harness.advance(.seconds(1))
        harness.frame(DeclaredHostTests.arpFromHost())
        #expect(harness.core.seenMachines.first?.mac == Learned.mac)
    }

    /// A flood of invented MACs: the table stays within its limit, keeping the machines heard most recently, in the
    /// storage it had from the start.
    @Test func theTableIsBoundedAndDropsTheLeastRecentlyHeard() throws {
        var harness = Harness()
        let capacity = harness.core.seen.machines.capacity
        #expect(capacity >= SeenMachines.limit, "sized for its limit from the start")
        Learned.announce(Learned.announcement, &harness)
        for index in 0..<(SeenMachines.limit * 2) {
            harness.advance(.milliseconds(10))
            let mac = MACAddress(0x02, 0x55, 0, 0, UInt8(index >> 8), UInt8(index & 0xFF))
            let frame = EthernetFrame.arp(
                ARPPacket(
                    operation: .request, senderHardwareAddress: mac,
                    senderProtocolAddress: IPv4Address(10, 77, 1, UInt8(index & 0xFF)), targetHardwareAddress: .zero,
                    targetProtocolAddress: IPv4Address(10, 77, 0, 254)),
                source: mac, destination: .broadcast)
            harness.frame(frame.serialized())
            // The iMac keeps talking: it is never the least recently heard.
            if index % 100 == 0 { Learned.announce(Learned.addressRecords, &harness) }
            #expect(harness.core.seenMachineCount <= SeenMachines.limit)
        }
        let machines = harness.core.seenMachines
        #expect(machines.count > SeenMachines.limit * 7 / 8)
        #expect(machines.contains { $0.mac == Learned.mac })
        #expect(machines.contains { $0.mac == MACAddress(0x02, 0x55, 0, 0, 0x03, 0xFF) }, "the newest is kept")
        #expect(!machines.contains { $0.mac == MACAddress(0x02, 0x55, 0, 0, 0, 0) }, "the oldest is dropped")
        #expect(harness.core.seen.machines.capacity == capacity, "no storage grown or copied as it filled")
        harness.advance(.seconds(1))
        harness.core.seen.moveTimes(by: .seconds(-5))
        harness.core.seen.remove(on: Harness.interface)
        #expect(harness.core.seenMachineCount == 0)
        #expect(harness.core.seen.machines.capacity == capacity, "nor after a clock step and an interface's removal")
    }

    @Test func aMachineKeepsAFewAddressesAndServicesAtMost() throws {
        var harness = Harness()
        for index in 0..<(SeenMachines.serviceLimit + 5) {
            let instance = try DNSName(labels: ["Share \(index)", "_smb", "_tcp", "local"])
            Learned.announce(Learned.addressRecords + Learned.service(instance, port: 445), &harness)
        }
        for index in 0..<(SeenMachines.addressLimit + 5) {
            harness.frame(DeclaredHostTests.arpFromHost(sender: IPv4Address(10, 77, 0, UInt8(100 + index))))
        }
        let imac = try #require(Self.machine(Learned.mac, harness))
        #expect(imac.services.count == SeenMachines.serviceLimit)
        #expect(imac.services.last?.name == "Share \(SeenMachines.serviceLimit + 4)")
        #expect(imac.addresses.count == SeenMachines.addressLimit)
        #expect(imac.addresses.last == .v4(IPv4Address(10, 77, 0, UInt8(100 + SeenMachines.addressLimit + 4))))
    }

    @Test func aClockStepMovesWhenEachWasHeard() throws {
        var harness = Harness()
        Learned.announce(Learned.announcement, &harness)
        let heard = harness.now
        _ = harness.core.clockStepped(by: .seconds(3_600))
        #expect(Self.machine(Learned.mac, harness)?.lastHeard == heard + .seconds(3_600))
    }
}
