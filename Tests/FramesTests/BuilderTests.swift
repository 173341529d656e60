import Frames
import NetworkAddresses
import Testing

@Suite("Builders")
struct BuilderTests {
    static let proxy = Lab.mac(Lab.proxy)
    static let sleeper = Lab.mac(Lab.sleeper)

    /// Serialises, parses back strictly and checks the parsed value is the built one.
    @discardableResult
    func roundTrip(_ frame: EthernetFrame, sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
        let bytes = frame.serialized()
        #expect(bytes.count == frame.length, sourceLocation: sourceLocation)
        #expect(frame.serialized(checksums: .preserve) == bytes, sourceLocation: sourceLocation)
        let parsed = try EthernetFrame(parsing: bytes, verifying: .all)
        #expect(parsed == frame, sourceLocation: sourceLocation)
        #expect(parsed.checksumsAreValid, sourceLocation: sourceLocation)
        return bytes
    }

    /// One builder for every "this address is at that MAC": the proxy's claim, its hand-back with the host's MAC
    /// (sent from the proxy's), and a host's own announcement.
    @Test func addressAnnouncementsSayWhichMACHoldsTheAddress() throws {
        let ipv6 = IPv6Address("fd77::2")!
        for owner in [nil, Self.sleeper] {
            let arp = EthernetFrame.addressAnnouncement(
                of: .v4(Lab.ipv4(Lab.sleeper)), source: Self.proxy, owner: owner)
            try roundTrip(arp)
            #expect(arp.header.source == Self.proxy && arp.header.destination == .broadcast)
            #expect(arp.arp?.isGratuitous == true && arp.arp?.senderHardwareAddress == owner ?? Self.proxy)

            let na = EthernetFrame.addressAnnouncement(of: .v6(ipv6), source: Self.proxy, owner: owner)
            try roundTrip(na)
            let advertisement = try #require(na.icmpv6?.neighborAdvertisement)
            #expect(na.header.source == Self.proxy && na.ipv6?.header.destination == .allNodes)
            #expect(na.ipv6?.header.source == ipv6 && na.ipv6?.header.hopLimit == 255)
            #expect(advertisement.flags == .override && advertisement.target == ipv6)
            #expect(advertisement.options == [.targetLinkLayerAddress(owner ?? Self.proxy)])
        }
    }

    @Test("ARP probe, announcement and reply match PROTOCOL.md 3.2")
    func arpFrames() throws {
        let probe = EthernetFrame.arpProbe(for: Lab.ipv4(Lab.sleeper), source: Self.proxy, destination: Self.sleeper)
        let probeBytes = try roundTrip(probe)
        #expect(probeBytes.count == 42)
        #expect(
            probeBytes
                == hexBytes(
                    "027700000002 027700000001 0806 0001 0800 06 04 0001 027700000001 00000000 000000000000 0a4d0002"))
        #expect(probe.arp?.isProbe == true)

        let announcement = EthernetFrame.arpAnnouncement(of: Lab.ipv4(Lab.sleeper), source: Self.proxy)
        let announcementBytes = try roundTrip(announcement)
        #expect(announcement.header.destination == .broadcast)
        #expect(announcement.arp?.isGratuitous == true)
        #expect(announcement.arp?.operation == .request)
        #expect(Array(announcementBytes[28..<32]) == [10, 77, 0, 2])
        #expect(Array(announcementBytes[38..<42]) == [10, 77, 0, 2])

        let reply = EthernetFrame.arpReply(
            for: Lab.ipv4(Lab.sleeper), source: Self.proxy, requesterMAC: Lab.mac(Lab.waker),
            requesterAddress: Lab.ipv4(Lab.waker))
        try roundTrip(reply)
        #expect(reply.header.destination == Lab.mac(Lab.waker))
        #expect(
            reply.arp
                == ARPPacket(
                    operation: .reply, senderHardwareAddress: Self.proxy, senderProtocolAddress: Lab.ipv4(Lab.sleeper),
                    targetHardwareAddress: Lab.mac(Lab.waker), targetProtocolAddress: Lab.ipv4(Lab.waker)))
    }

    @Test("ARP padded to 60 bytes")
    func arpPadding() throws {
        let reply = EthernetFrame.arpReply(
            for: Lab.ipv4(Lab.sleeper), source: Self.proxy, requesterMAC: Lab.mac(Lab.waker),
            requesterAddress: Lab.ipv4(Lab.waker))
        let padded = reply.paddedToMinimumLength()
        let bytes = padded.serialized()
        #expect(bytes.count == 60)
        #expect(Array(bytes[..<42]) == reply.serialized())
        #expect(bytes[42...].allSatisfy { $0 == 0 })
        let parsed = try EthernetFrame(parsing: bytes)
        #expect(parsed.arp == reply.arp)
        #expect(parsed.padding.count == 18)
        // A frame already at the minimum is unchanged.
        #expect(padded.paddedToMinimumLength() == padded)
    }

    @Test("known answer: IPv4 header and TCP checksums of a SYN")
    func synKnownAnswer() throws {
        let syn = TCPSegment(sourcePort: 40918, destinationPort: 22, sequenceNumber: 3_125_785_263, flags: .syn)
        let frame = EthernetFrame.tcp(
            syn, sourceAddress: Lab.ipv4(Lab.waker), destinationAddress: Lab.ipv4(Lab.sleeper),
            source: Lab.mac(Lab.waker), destination: Self.proxy)
        let bytes = try roundTrip(frame)
        // scapy 2.8: raw(IP(src="10.77.0.3", dst="10.77.0.2", id=0, flags="DF", ttl=64)
        //   / TCP(sport=40918, dport=22, seq=3125785263, flags="S", window=64240))
        // gives IP checksum 0x2632 and TCP checksum 0x9367, and these bytes.
        #expect(frame.ipv4?.header.checksum == 0x2632)
        #expect(frame.tcp?.checksum == 0x9367)
        #expect(
            Array(bytes[14...])
                == hexBytes(
                    "4500002800004000400626320a4d00030a4d00029fd60016ba4fb2af000000005002faf093670000"))
    }

    @Test("known answer: ICMPv6 checksum of an unsolicited Neighbour Advertisement")
    func neighborAdvertisementKnownAnswer() throws {
        let frame = EthernetFrame.neighborAdvertisement(
            for: Lab.ipv6(Lab.sleeper), flags: .override, targetLinkLayerAddress: Self.proxy,
            sourceAddress: Lab.ipv6(Lab.proxy), source: Self.proxy)
        let bytes = try roundTrip(frame)
        // scapy 2.8: raw(IPv6(src="fe80::77:ff:fe00:1", dst="ff02::1", hlim=255)
        //   / ICMPv6ND_NA(R=0, S=0, O=1, tgt="fe80::77:ff:fe00:2") / ICMPv6NDOptDstLLAddr(lladdr="02:77:00:00:00:01"))
        // gives ICMPv6 checksum 0x5835 and these bytes.
        #expect(frame.icmpv6?.checksum == 0x5835)
        #expect(
            Array(bytes[14...])
                == hexBytes(
                    "6000000000203afffe80000000000000007700fffe000001ff020000000000000000000000000001"
                        + "8800583520000000fe80000000000000007700fffe0000020201027700000001"))
        #expect(frame.header.destination == MACAddress(0x33, 0x33, 0, 0, 0, 1))
        #expect(frame.ipv6?.payloadLength == 32)
    }

    @Test("Neighbour Solicitation probe (source ::, no option) and with a source link-layer address")
    func neighborSolicitations() throws {
        let probe = EthernetFrame.neighborSolicitation(
            for: Lab.ipv6(Lab.sleeper), sourceAddress: .unspecified, source: Self.proxy, destination: Self.sleeper)
        try roundTrip(probe)
        let ip = try #require(probe.ipv6)
        #expect(ip.header.hopLimit == 255)
        #expect(ip.header.destination == IPv6Address("ff02::1:ff00:2"))
        #expect(ip.payloadLength == 24)
        #expect(probe.icmpv6?.neighborSolicitation?.options == [])
        #expect(probe.header.destination == Self.sleeper)

        let query = EthernetFrame.neighborSolicitation(
            for: Lab.ipv6(Lab.sleeper), sourceAddress: Lab.ipv6(Lab.proxy), source: Self.proxy,
            destination: MACAddress(ipv6Multicast: Lab.ipv6(Lab.sleeper).solicitedNodeGroup))
        try roundTrip(query)
        #expect(query.icmpv6?.neighborSolicitation?.sourceLinkLayerAddress == Self.proxy)
        #expect(query.ipv6?.payloadLength == 32)
    }

    @Test(
        "Neighbour Advertisement flags",
        arguments: [
            NeighborAdvertisement.Flags.override, [.solicited, .override], [.router, .solicited, .override], [],
        ])
    func neighborAdvertisementFlags(flags: NeighborAdvertisement.Flags) throws {
        let frame = EthernetFrame.neighborAdvertisement(
            for: Lab.ipv6(Lab.sleeper), flags: flags, targetLinkLayerAddress: Self.proxy,
            sourceAddress: Lab.ipv6(Lab.sleeper), destinationAddress: Lab.ipv6(Lab.waker), source: Self.proxy,
            destination: Lab.mac(Lab.waker))
        let bytes = try roundTrip(frame)
        #expect(UInt32(bytes[58]) << 24 == flags.rawValue)
        let advertisement = try #require(frame.icmpv6?.neighborAdvertisement)
        #expect(advertisement.flags == flags)
        #expect(advertisement.targetLinkLayerAddress == Self.proxy)
    }

    @Test("TCP SYN over IPv4 and IPv6, UDP over IPv4 and IPv6")
    func transport() throws {
        let syn = TCPSegment(
            sourcePort: 50000, destinationPort: 548, sequenceNumber: 1, flags: [.syn, .ece, .cwr],
            options: [0x02, 0x04, 0x05, 0xB4])
        let v4 = EthernetFrame.tcp(
            syn, sourceAddress: Lab.ipv4(Lab.waker), destinationAddress: Lab.ipv4(Lab.sleeper),
            source: Lab.mac(Lab.waker), destination: Self.proxy)
        let v4Bytes = try roundTrip(v4)
        #expect(v4Bytes.count == 14 + 20 + 24)
        #expect(v4Bytes[14 + 20 + 12] == 0x60)  // data offset 6 words
        #expect(v4Bytes[14 + 20 + 13] == 0xC2)  // CWR, ECE, SYN
        let v6 = EthernetFrame.tcp(
            syn, sourceAddress: Lab.ipv6(Lab.waker), destinationAddress: Lab.ipv6(Lab.sleeper),
            source: Lab.mac(Lab.waker), destination: Self.proxy)
        try roundTrip(v6)
        #expect(v6.ipv6?.header.nextHeader == .tcp)
        // The same segment gets a different checksum under each pseudo-header.
        #expect(v4.tcp?.checksum != v6.tcp?.checksum)

        let datagram = UDPDatagram(sourcePort: 5353, destinationPort: 5353, payload: Array("odd".utf8))
        let udp4 = EthernetFrame.udp(
            datagram, sourceAddress: Lab.ipv4(Lab.proxy), destinationAddress: .mdnsGroup, source: Self.proxy,
            destination: MACAddress(0x01, 0x00, 0x5E, 0, 0, 0xFB))
        let udp4Bytes = try roundTrip(udp4)
        #expect(field16(udp4Bytes, 14 + 20 + 4) == 11)
        #expect(udp4.udp?.checksum != 0)
        let udp6 = EthernetFrame.udp(
            datagram, sourceAddress: Lab.ipv6(Lab.proxy), destinationAddress: .mdnsGroup, source: Self.proxy,
            destination: MACAddress(ipv6Multicast: .mdnsGroup))
        try roundTrip(udp6)
    }

    @Test("UDP checksum 0 means none over IPv4 only")
    func udpWithoutChecksum() throws {
        var frame = EthernetFrame.udp(
            UDPDatagram(sourcePort: 1, destinationPort: 2, payload: [1, 2, 3]), sourceAddress: Lab.ipv4(Lab.proxy),
            destinationAddress: Lab.ipv4(Lab.sleeper), source: Self.proxy, destination: Self.sleeper)
        guard case .ipv4(var packet) = frame.payload, case .udp(var datagram) = packet.payload else {
            Issue.record("not UDP over IPv4")
            return
        }
        datagram.checksum = 0
        packet.payload = .udp(datagram)
        frame.payload = .ipv4(packet)
        #expect(frame.checksumsAreValid)
        #expect(field16(frame.serialized(), 14 + 20 + 6) == 0)  // "none" survives recomputation
        #expect(try EthernetFrame(parsing: frame.serialized(), verifying: .all) == frame)

        var v6 = EthernetFrame.udp(
            UDPDatagram(sourcePort: 1, destinationPort: 2, payload: [1, 2, 3]), sourceAddress: Lab.ipv6(Lab.proxy),
            destinationAddress: Lab.ipv6(Lab.sleeper), source: Self.proxy, destination: Self.sleeper)
        let computed = try #require(v6.udp?.checksum)
        var packet6 = try #require(v6.ipv6)
        packet6.payload = .udp(UDPDatagram(sourcePort: 1, destinationPort: 2, checksum: 0, payload: [1, 2, 3]))
        v6.payload = .ipv6(packet6)
        #expect(v6.ipv6?.transportChecksumIsValid == false)
        #expect(field16(v6.serialized(), 14 + 40 + 6) == computed)
    }

    @Test("EtherType 0x0842 magic frame", arguments: [0, 4, 6])
    func magicFrame(passwordLength: Int) throws {
        let password = SecureOnPassword((0..<passwordLength).map { UInt8(0xA0 + $0) })
        #expect((password == nil) == (passwordLength == 0))
        let magic = MagicPacket(target: Self.sleeper, password: password)
        let frame = try EthernetFrame.wakeOnLAN(magic, source: Self.proxy)
        let bytes = try roundTrip(frame)
        #expect(bytes.count == 116 + passwordLength)
        #expect(Array(bytes[0..<6]) == Self.sleeper.array)
        #expect(Array(bytes[6..<12]) == Self.proxy.array)
        #expect(Array(bytes[12..<14]) == [0x08, 0x42])
        #expect(Array(bytes[14..<20]) == [UInt8](repeating: 0xFF, count: 6))
        for repetition in 0..<16 {
            let start = 20 + repetition * 6
            #expect(Array(bytes[start..<start + 6]) == Self.sleeper.array)
        }
        #expect(Array(bytes[116...]) == password?.bytes ?? [])
        let parsed = try #require(try EthernetFrame(parsing: bytes).magicPacket)
        #expect(parsed.target == Self.sleeper)
        #expect(parsed.password == password)

        let broadcast = try EthernetFrame.wakeOnLAN(magic, source: Self.proxy, destination: .broadcast)
        #expect(try EthernetFrame(parsing: broadcast.serialized()).header.destination == .broadcast)
    }

    @Test("magic frames refuse a zero or group source MAC", arguments: [MACAddress.zero, .broadcast])
    func magicSourceMustBeReal(source: MACAddress) throws {
        let magic = MagicPacket(target: Self.sleeper)
        let error = try #require(throws: FrameError.self) { try EthernetFrame.wakeOnLAN(magic, source: source) }
        #expect(error.code == .invalidArgument)
        #expect(error.description.contains("\(source)"))
        #expect(throws: FrameError.self) {
            try EthernetFrame.wakeOnLANDatagram(magic, sourceAddress: Lab.ipv4(Lab.proxy), source: source)
        }
    }

    @Test("UDP/9 magic datagram: known answer to the subnet broadcast, and a unicast copy")
    func magicDatagram() throws {
        let magic = MagicPacket(target: Self.sleeper)
        let broadcast = try EthernetFrame.wakeOnLANDatagram(
            magic, sourceAddress: Lab.ipv4(Lab.proxy), destinationAddress: IPv4Address(10, 77, 0, 255),
            source: Self.proxy)
        let bytes = try roundTrip(broadcast)
        #expect(bytes.count == 14 + 20 + 8 + 102)
        #expect(broadcast.header.destination == .broadcast)
        // scapy 2.8: raw(IP(src="10.77.0.1", dst="10.77.0.255", id=0, ttl=64) / UDP(sport=9, dport=9) / magic)
        // gives IP checksum 0x64d2 and UDP checksum 0xc1d6.
        #expect(broadcast.ipv4?.header.checksum == 0x64D2)
        #expect(broadcast.udp?.checksum == 0xC1D6)
        #expect(broadcast.udp?.destinationPort == 9)
        #expect(broadcast.udp?.magicPacket == magic)

        let unicast = try EthernetFrame.wakeOnLANDatagram(
            MagicPacket(target: Self.sleeper, password: SecureOnPassword([1, 2, 3, 4])),
            sourceAddress: Lab.ipv4(Lab.proxy), destinationAddress: Lab.ipv4(Lab.sleeper), sourcePort: 40000,
            source: Self.proxy, destination: Self.sleeper)
        try roundTrip(unicast)
        #expect(unicast.header.destination == Self.sleeper)
        #expect(unicast.ipv4?.header.destination == Lab.ipv4(Lab.sleeper))
        #expect(unicast.udp?.sourcePort == 40000)
        #expect(unicast.udp?.magicPacket?.password?.bytes == [1, 2, 3, 4])
    }

    @Test(
        "VLAN-tagged frames keep their tag",
        arguments: [
            VLANTag(priority: 5, dropEligible: true, identifier: 0x123), VLANTag(identifier: 0),
            VLANTag(priority: 7, identifier: 4095),
        ])
    func vlanTagged(tag: VLANTag) throws {
        let arp = EthernetFrame.arpAnnouncement(of: Lab.ipv4(Lab.sleeper), source: Self.proxy, vlan: tag)
        let bytes = try roundTrip(arp)
        #expect(bytes.count == 46)
        #expect(Array(bytes[12..<14]) == [0x81, 0x00])
        #expect(field16(bytes, 14) == tag.tagControlInformation)
        #expect(Array(bytes[16..<18]) == [0x08, 0x06])
        #expect(try EthernetFrame(parsing: bytes).header.vlan == tag)

        let syn = EthernetFrame.tcp(
            TCPSegment(sourcePort: 1, destinationPort: 22, flags: .syn), sourceAddress: Lab.ipv4(Lab.waker),
            destinationAddress: Lab.ipv4(Lab.sleeper), source: Lab.mac(Lab.waker), destination: Self.proxy, vlan: tag)
        try roundTrip(syn)
        let magic = try EthernetFrame.wakeOnLAN(MagicPacket(target: Self.sleeper), source: Self.proxy, vlan: tag)
        #expect(try roundTrip(magic).count == 120)
    }
}
