import DNSWire
import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import SleepProxyClientCore
import Testing

/// The sequence number and the kept registration, as the state directory holds them.
@Suite struct ClientStateTests {
    @Test func theSequenceNumberReadsBackAndAdvancesWrappingOnEachWake() throws {
        var sequence = try SequenceNumber(fileText: SequenceNumber(254).fileText)
        #expect(sequence.value == 254)
        sequence = sequence.advanced()
        #expect(sequence.value == 255)
        sequence = try SequenceNumber(fileText: sequence.advanced().fileText)
        #expect(sequence.value == 0)
        #expect(try SequenceNumber(fileText: " 7 \n").value == 7)
        for bad in ["", "256", "-1", "seven"] {
            #expect(throws: ClientStateError.self, "\(bad)") { try SequenceNumber(fileText: bad) }
        }
    }

    @Test func aSavedRegistrationReadsBackWithItsRecords() throws {
        let records = [
            DNSRecord(name: "sleeper.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2))),
            DNSRecord(name: "2.0.77.10.in-addr.arpa.", ttl: 120, cacheFlush: true, rdata: .ptr("sleeper.local.")),
        ]
        let registration = SleepRegistration(
            id: 0x1234, records: records, owner: OwnerOption(sequence: 9, primaryMAC: MACAddress("02:77:00:00:00:02")!))
        let saved = SavedRegistration(
            interface: "eth0", proxyAddress: .v4(IPv4Address(10, 77, 0, 1)), proxyPort: 5354,
            proxyName: "20-30-50-73.1 Lab Proxy._sleep-proxy._udp.local.", lease: 7200, registeredAt: 1_764_000_000,
            sequence: SequenceNumber(9), messages: try registration.datagrams())
        let back = try SavedRegistration(fileText: saved.fileText)
        #expect(back == saved)
        #expect(try back.records() == records)
        #expect(throws: ClientStateError.self) { try SavedRegistration(fileText: "interface eth0\n") }
        #expect(throws: ClientStateError.self) {
            try SavedRegistration(fileText: saved.fileText.replacingOccurrences(of: "message ", with: "message z"))
        }
    }
}

/// The announcement after a wake, against a Mac's captured one.
@Suite struct WakeAnnouncementTests {
    static func capturedAnnouncement() throws -> DNSMessage {
        let frame = try #require(try Fixture.hexPackets("pub-mac-mdns-announce-with-owner-opt.hex").first)
        return try DNSMessage(decoding: Array(frame[0x2A...]))
    }

    /// The Mac's records and OWNER give the Mac's message: ID 0, flags 84 00, the records as answers with their
    /// cache-flush bits and TTLs, and the OPT as Apple writes it (1440, TTL field 4500, OWNER alone).
    @Test func itIsTheMacsAnnouncementWithoutTheNSECs() throws {
        let mac = try Self.capturedAnnouncement()
        let owner = try #require(mac.optRecords.first?.optData?.owner)
        #expect(owner.sequence == 193 && owner.wakeMAC != nil)
        let messages = try WakeAnnouncement.messages(records: mac.answers, owner: owner)
        #expect(messages.count == 1)
        let ours = try DNSMessage(decoding: try #require(messages.first))
        #expect(ours.id == 0 && ours.flags.rawValue == 0x8400)
        #expect(ours.answers == mac.answers)
        #expect(ours.additionals == mac.optRecords)
        #expect(ours.questions.isEmpty && ours.authorities.isEmpty)
    }

    @Test func manyRecordsGoInSeveralMessagesEachWithTheOwner() throws {
        let records = (0..<100).map { n in
            DNSRecord(
                name: try! DNSName(labels: ["service number \(n)", "_http", "_tcp", "local"]), ttl: 4500,
                cacheFlush: true, rdata: .txt(try! TXTData(["path=/some/longer/path/\(n)"])))
        }
        let owner = OwnerOption(sequence: 3, primaryMAC: MACAddress("02:77:00:00:00:02")!)
        let messages = try WakeAnnouncement.messages(records: records, owner: owner)
        #expect(messages.count > 1)
        #expect(messages.allSatisfy { $0.count <= 12 + 1_440 })
        let decoded = try messages.map { try DNSMessage(decoding: $0) }
        #expect(decoded.flatMap(\.answers) == records)
        #expect(decoded.allSatisfy { $0.optRecords.first?.optData?.owner == owner })
    }

    /// After the wake the host may have other addresses: only what is still true is announced.
    @Test func recordsOfAddressesGoneAreNotAnnouncedAgain() throws {
        let host: DNSName = "sleeper.local."
        let kept = IPv4Address(10, 77, 0, 2)
        let gone = IPv6Address("fd77::2")!
        let registered = [
            DNSRecord(
                name: "sleeper SSH._ssh._tcp.local.", ttl: 120, cacheFlush: true,
                rdata: .srv(SRVData(port: 22, target: host))),
            DNSRecord(name: HostRecords.reverseName(of: .v4(kept)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
            DNSRecord(
                name: HostRecords.reverseName(of: .v6(gone)).lowercased(), ttl: 120, cacheFlush: true, rdata: .ptr(host)
            ),
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(kept)),
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(gone)),
        ]
        let announced = WakeAnnouncement.records(registered, addresses: [.v4(kept), .v6(IPv6Address("fe80::2")!)])
        #expect(announced == [registered[0], registered[1], registered[3]])
    }
}

/// What `return` puts on the wire besides the mDNS announcement: the host's addresses pointed back at its MAC.
@Suite struct NeighbourAnnouncementTests {
    static let mac = MACAddress("02:77:00:00:00:02")!

    @Test func eachIPv4AddressGetsAGratuitousARPAndEachIPv6AddressAnUnsolicitedAdvertisement() throws {
        let addresses: [IPAddress] = [
            .v4(IPv4Address("10.77.0.2")!), .v6(IPv6Address("fd77::2")!), .v6(IPv6Address("fe80::77:ff:fe00:2")!),
        ]
        let frames = try NeighbourAnnouncement.frames(mac: Self.mac, addresses: addresses).map {
            try EthernetFrame(parsing: $0, verifying: .all)
        }
        #expect(frames.count == 3)
        #expect(frames.allSatisfy { $0.header.source == Self.mac && $0.checksumsAreValid })

        // RFC 5227's announcement: a broadcast request with sender and target both the address, from this MAC.
        let arp = try #require(frames[0].arp)
        #expect(frames[0].header.destination == .broadcast && frames[0].length == 60)
        #expect(arp.operation == .request && arp.senderHardwareAddress == Self.mac)
        #expect(
            arp.senderProtocolAddress == IPv4Address("10.77.0.2")!
                && arp.targetProtocolAddress == arp.senderProtocolAddress)

        // RFC 4861 7.2.6: from the address, to all nodes, Override and not Solicited, with this MAC as target LLA.
        for (frame, address) in zip(frames.dropFirst(), ["fd77::2", "fe80::77:ff:fe00:2"]) {
            let packet = try #require(frame.ipv6)
            let advertisement = try #require(frame.icmpv6?.neighborAdvertisement)
            #expect(frame.header.destination == MACAddress("33:33:00:00:00:01")!)
            #expect(packet.header.hopLimit == 255 && packet.header.destination == .allNodes)
            #expect(packet.header.source == IPv6Address(address)! && advertisement.target == IPv6Address(address)!)
            #expect(advertisement.flags == [.override])
            #expect(advertisement.options == [.targetLinkLayerAddress(Self.mac)])
        }
    }

    /// `/proc/net/if_inet6` as Linux writes it: a ULA still in duplicate address detection, an optimistic global
    /// one (tentative too), one that failed it (tentative and dadfailed), a settled one, and other interfaces'.
    @Test func onlyAddressesWhoseDuplicateAddressDetectionPassedAreAnnounced() {
        let text = """
            fe80000000000000007700fffe000002 03 40 20 80     eth0
            fd770000000000000000000000000002 03 40 00 c0     eth0
            20010db8000000000000000000000002 03 40 00 44     eth0
            20010db8000000000000000000000003 03 40 00 c8     eth0
            20010db8000000000000000000000004 03 40 00 00     eth0
            00000000000000000000000000000001 01 80 10 80       lo
            fd990000000000000000000000000002 04 40 00 80    wlan0
            """
        let addresses = NeighbourAnnouncement.ipv6Addresses(procText: text, interface: "eth0")
        #expect(addresses.settled == [IPv6Address("fe80::77:ff:fe00:2")!, IPv6Address("2001:db8::4")!])
        #expect(
            addresses.tentative == [
                IPv6Address("fd77::2")!, IPv6Address("2001:db8::2")!, IPv6Address("2001:db8::3")!,
            ])
        #expect(NeighbourAnnouncement.ipv6Addresses(procText: "", interface: "eth0").settled.isEmpty)
        let garbled = NeighbourAnnouncement.ipv6Addresses(
            procText: "fd77 03 40 00 80 eth0\nfd77000000000000000000000000000z 03 40 00 80 eth0\nnonsense",
            interface: "eth0")
        #expect(garbled.settled.isEmpty && garbled.tentative.isEmpty)
    }

    @Test func noAddressNoFrame() {
        #expect(NeighbourAnnouncement.frames(mac: Self.mac, addresses: []).isEmpty)
    }
}
