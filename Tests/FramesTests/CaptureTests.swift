import Frames
import NetworkAddresses
import Testing

@Suite("Lab captures")
struct CaptureTests {
    @Test("every frame parses and serialises back to its bytes", arguments: Capture.allCases)
    func everyFrameRoundTrips(capture: Capture) throws {
        let frames = try capture.frames()
        #expect(frames.count > 20)
        for (index, bytes) in frames.enumerated() {
            let frame = try EthernetFrame(parsing: bytes)
            #expect(frame.length == bytes.count, "frame \(index + 1)")
            #expect(frame.serialized(checksums: .preserve) == bytes, "frame \(index + 1)")
            if frame.checksumsAreValid {
                #expect(frame.serialized() == bytes, "frame \(index + 1)")
            } else {
                // Recomputing fixes the offloaded checksum, and only the checksum field changes.
                let fixed = frame.serialized()
                #expect(fixed != bytes)
                #expect(fixed.count == bytes.count)
                #expect(try EthernetFrame(parsing: fixed, verifying: .all).checksumsAreValid, "frame \(index + 1)")
            }
        }
    }

    @Test("IPv4 header and ICMPv6 checksums are real, TCP and UDP ones offloaded", arguments: Capture.allCases)
    func checksumsMatchTheCaptureSetup(capture: Capture) throws {
        var counts = (ipv4: 0, transport: 0, icmpv6: 0)
        for (index, bytes) in try capture.frames().enumerated() {
            let frame = try EthernetFrame(parsing: bytes, verifying: .ipv4Header)
            if let packet = frame.ipv4 {
                counts.ipv4 += 1
                #expect(packet.headerChecksumIsValid, "frame \(index + 1)")
            }
            switch frame.ipPayload {
            case .tcp, .udp:
                counts.transport += 1
                #expect(frame.ipv4?.transportChecksumIsValid ?? frame.ipv6?.transportChecksumIsValid == false)
                #expect(throws: FrameError.self, "frame \(index + 1)") {
                    try EthernetFrame(parsing: bytes, verifying: .all)
                }
            case .icmpv6:
                counts.icmpv6 += 1
                #expect(frame.ipv6?.transportChecksumIsValid == true, "frame \(index + 1)")
                _ = try EthernetFrame(parsing: bytes, verifying: .all)
            case .other, nil:
                break
            }
        }
        #expect(counts.ipv4 > 0)
        #expect(counts.transport > 0)
        #expect(counts.icmpv6 > 0)
    }

    @Test("ARP request from the sleeper, and the proxy's reply")
    func arpRequestAndReply() throws {
        let request = try EthernetFrame(parsing: Capture.lurtzWatchHost.frame(2))
        #expect(request.header.destination == .broadcast)
        #expect(request.header.source == Lab.mac(Lab.sleeper))
        #expect(request.header.etherType == .arp)
        #expect(request.header.vlan == nil)
        #expect(request.padding.isEmpty)
        #expect(
            request.arp
                == ARPPacket(
                    operation: .request,
                    senderHardwareAddress: Lab.mac(Lab.sleeper),
                    senderProtocolAddress: Lab.ipv4(Lab.sleeper),
                    targetHardwareAddress: .zero,
                    targetProtocolAddress: Lab.ipv4(Lab.proxy)
                ))

        let reply = try EthernetFrame(parsing: Capture.lurtzWatchHost.frame(3))
        #expect(reply.header.destination == Lab.mac(Lab.sleeper))
        #expect(reply.header.source == Lab.mac(Lab.proxy))
        let arp = try #require(reply.arp)
        #expect(arp.operation == .reply)
        #expect(arp.senderHardwareAddress == Lab.mac(Lab.proxy))
        #expect(arp.senderProtocolAddress == Lab.ipv4(Lab.proxy))
        #expect(arp.targetHardwareAddress == Lab.mac(Lab.sleeper))
        #expect(arp.targetProtocolAddress == Lab.ipv4(Lab.sleeper))
        #expect(!arp.isProbe)
    }

    @Test("the proxy's take-over reply to the waker carries the proxy's MAC for the sleeper's address")
    func takeOverReply() throws {
        let arp = try #require(try EthernetFrame(parsing: Capture.sleepThenSYN.frame(77)).arp)
        #expect(arp.operation == .reply)
        #expect(arp.senderHardwareAddress == Lab.mac(Lab.proxy))
        #expect(arp.senderProtocolAddress == Lab.ipv4(Lab.sleeper))
        #expect(arp.targetHardwareAddress == Lab.mac(Lab.waker))
        #expect(arp.targetProtocolAddress == Lab.ipv4(Lab.waker))
    }

    @Test("arping -D probe: sender address 0.0.0.0")
    func arpProbe() throws {
        let arp = try #require(try EthernetFrame(parsing: Capture.lurtzWatchHost.frame(24)).arp)
        #expect(arp.isProbe)
        #expect(!arp.isGratuitous)
        #expect(arp.senderProtocolAddress == .any)
        #expect(arp.targetHardwareAddress == .broadcast)
        #expect(arp.targetProtocolAddress == Lab.ipv4(Lab.sleeper))
    }

    @Test("gratuitous ARP padded to 58 bytes keeps its padding")
    func paddedGratuitousARP() throws {
        let padded = try Capture.selfWake.frames().filter { $0.count == 58 }
        #expect(padded.count == 2)
        for bytes in padded {
            let frame = try EthernetFrame(parsing: bytes)
            let arp = try #require(frame.arp)
            #expect(arp.isGratuitous)
            #expect(arp.senderProtocolAddress == Lab.ipv4(Lab.sleeper))
            #expect(arp.senderHardwareAddress == Lab.mac(Lab.sleeper))
            #expect(frame.padding == [UInt8](repeating: 0, count: 16))
            #expect(frame.serialized() == bytes)
        }
    }

    @Test("the waker's SYN to port 22, with its offloaded TCP checksum")
    func wakerSYN() throws {
        let bytes = try Capture.lurtzWatchHost.frame(23)
        let frame = try EthernetFrame(parsing: bytes)
        #expect(frame.header.source == Lab.mac(Lab.waker))
        #expect(frame.header.destination == Lab.mac(Lab.proxy))
        let ip = try #require(frame.ipv4)
        #expect(ip.header.source == Lab.ipv4(Lab.waker))
        #expect(ip.header.destination == Lab.ipv4(Lab.sleeper))
        #expect(ip.header.transportProtocol == .tcp)
        #expect(ip.header.timeToLive == 64)
        #expect(ip.header.flags == .dontFragment)
        #expect(ip.header.identification == 0x6FBD)
        #expect(ip.header.options.isEmpty)
        #expect(ip.totalLength == 60)
        #expect(ip.header.checksum == 0xB660)
        #expect(ip.headerChecksumIsValid)

        let tcp = try #require(frame.tcp)
        #expect(tcp.sourcePort == 40918)
        #expect(tcp.destinationPort == 22)
        #expect(tcp.sequenceNumber == 3_125_785_263)
        #expect(tcp.acknowledgmentNumber == 0)
        #expect(tcp.flags == [.syn])
        #expect(!tcp.flags.contains(.ack) && !tcp.flags.contains(.rst))
        #expect(tcp.window == 64240)
        #expect(tcp.headerLength == 40)
        #expect(tcp.options.prefix(4) == [0x02, 0x04, 0x05, 0xB4])  // MSS 1460
        #expect(tcp.payload.isEmpty)

        // Checksum offload on veth: the field holds the folded pseudo-header sum
        // 0x0a4d + 0x0003 + 0x0a4d + 0x0002 + 0x0006 + 0x0028 = 0x14cd, not the checksum.
        #expect(tcp.checksum == 0x14CD)
        #expect(ip.transportChecksumIsValid == false)
        #expect(!frame.checksumsAreValid)
        // The real checksum, 0xb4ea, was computed by scapy from the same bytes with the field cleared.
        let fixed = frame.serialized()
        #expect(field16(fixed, 14 + 20 + 16) == 0xB4EA)
        #expect(Array(fixed[..<50]) == Array(bytes[..<50]))
        #expect(Array(fixed[52...]) == Array(bytes[52...]))

        #expect(try EthernetFrame(parsing: bytes, verifying: .ipv4Header) == frame)
        let error = try #require(parseError(bytes, verifying: .all))
        #expect(error.code == .checksumMismatch)
        #expect(error.offset == 50)
        #expect(error.description == "TCP checksum 0x14cd at offset 50: expected 0xb4ea")
    }

    @Test("the SYN of the sleep-then-SYN run")
    func sleepThenSYN() throws {
        let syns = try Capture.sleepThenSYN.frames().compactMap { try EthernetFrame(parsing: $0).tcp }
        #expect(syns.count == 4)
        for tcp in syns {
            #expect(tcp.flags == .syn)
            #expect(tcp.sourcePort == 37838)
            #expect(tcp.destinationPort == 22)
            #expect(tcp.sequenceNumber == 4_006_197_913)
        }
        let frame = try EthernetFrame(parsing: Capture.sleepThenSYN.frame(78))
        #expect(frame.ipv4?.header.destination == Lab.ipv4(Lab.sleeper))
        #expect(field16(frame.serialized(), 50) == 0x50B1)  // scapy, as above
    }

    @Test("EtherType 0x0842 magic packet to the sleeper")
    func magicPacket() throws {
        let bytes = try Capture.lurtzWatchHost.frame(35)
        #expect(bytes.count == 116)
        let frame = try EthernetFrame(parsing: bytes)
        #expect(frame.header.etherType == .wakeOnLAN)
        #expect(frame.header.source == Lab.mac(Lab.proxy))
        #expect(frame.header.destination == Lab.mac(Lab.sleeper))
        let magic = try #require(frame.magicPacket)
        #expect(magic.target == Lab.mac(Lab.sleeper))
        #expect(magic.password == nil)
        #expect(frame.serialized() == bytes)
        #expect(
            try EthernetFrame.wakeOnLAN(MagicPacket(target: Lab.mac(Lab.sleeper)), source: Lab.mac(Lab.proxy)) == frame)
    }

    @Test("DAD Neighbour Solicitation with a Nonce option")
    func dadNeighborSolicitation() throws {
        let frame = try EthernetFrame(parsing: Capture.sleepThenSYN.frame(89))
        #expect(frame.header.destination == MACAddress(ipv6Multicast: Lab.ipv6(Lab.sleeper).solicitedNodeGroup))
        let ip = try #require(frame.ipv6)
        #expect(ip.header.source == .unspecified)
        #expect(ip.header.destination == Lab.ipv6(Lab.sleeper).solicitedNodeGroup)
        #expect(ip.header.hopLimit == 255)
        #expect(ip.header.nextHeader == .icmpv6)
        #expect(!ip.header.hasExtensionHeader)
        #expect(ip.payloadLength == 32)
        let message = try #require(frame.icmpv6)
        #expect(message.type == 135)
        #expect(message.checksum == 0x1EEA)
        #expect(ip.transportChecksumIsValid == true)
        let solicitation = try #require(message.neighborSolicitation)
        #expect(solicitation.target == Lab.ipv6(Lab.sleeper))
        #expect(solicitation.sourceLinkLayerAddress == nil)
        #expect(solicitation.options == [.other(type: 14, data: [0xB0, 0x65, 0xDF, 0xF0, 0xBF, 0x62])])
    }

    @Test("MLDv2 reports behind a Hop-by-Hop header are kept undecoded")
    func hopByHop() throws {
        let frames = try Capture.lurtzWatchHost.frames().map { try EthernetFrame(parsing: $0) }
        let behindExtension = frames.compactMap(\.ipv6).filter(\.header.hasExtensionHeader)
        #expect(behindExtension.count == 6)
        for packet in behindExtension {
            #expect(packet.header.nextHeader.rawValue == 0)
            guard case .other(let bytes) = packet.payload else {
                Issue.record("payload decoded behind an extension header")
                continue
            }
            #expect(bytes.count == packet.payloadLength)
            #expect(bytes.first == 58)  // the Hop-by-Hop header's own next header: ICMPv6
        }
    }

    @Test("the layer parsers decode a layer on its own as the frame parser does", arguments: Capture.allCases)
    func layerParsers(capture: Capture) throws {
        for bytes in try capture.frames() {
            let frame = try EthernetFrame(parsing: bytes)
            let network = Array(bytes[frame.header.length...])
            switch frame.payload {
            case .arp(let packet):
                #expect(try ARPPacket(parsing: network) == packet)
                #expect(packet.bytes == Array(network.prefix(ARPPacket.length)))
            case .ipv4(let packet):
                #expect(try IPv4Packet(parsing: network) == packet)
                #expect(packet.serialized(checksums: .preserve) == network)
                let transport = Array(network[packet.header.headerLength...])
                if case .udp(let datagram) = packet.payload { #expect(try UDPDatagram(parsing: transport) == datagram) }
                if case .tcp(let segment) = packet.payload { #expect(try TCPSegment(parsing: transport) == segment) }
            case .ipv6(let packet):
                #expect(try IPv6Packet(parsing: network) == packet)
                #expect(packet.serialized(checksums: .preserve) == network)
                if case .icmpv6(let message) = packet.payload {
                    #expect(try ICMPv6Message(parsing: Array(network[IPv6Header.length...])) == message)
                }
            case .wakeOnLAN(let magic):
                #expect(try MagicPacket(parsing: network) == magic)
                #expect(magic.bytes == network)
            case .other:
                Issue.record("the lab captures hold only ARP, IPv4, IPv6 and 0x0842 frames")
            }
        }
    }
}
