import FixtureSupport
import Frames
import NetworkAddresses
import Testing

/// Generates frame values that the wire format can represent, with arbitrary (usually wrong) checksum fields.
struct FrameGenerator {
    var random: SeededGenerator

    mutating func mac() -> MACAddress {
        MACAddress(random.byte(), random.byte(), random.byte(), random.byte(), random.byte(), random.byte())
    }

    mutating func ipv4Address() -> IPv4Address { IPv4Address(value: random.u32()) }
    mutating func ipv6Address() -> IPv6Address { IPv6Address(high: random.next(), low: random.next()) }

    mutating func frame() -> EthernetFrame {
        let vlan =
            random.int(in: 0...3) == 0
            ? VLANTag(priority: random.byte(), dropEligible: random.bool(), identifier: random.u16()) : nil
        let payload: EthernetPayload
        let etherType: EtherType
        var padding: [UInt8] = []
        switch random.int(in: 0...9) {
        case 0, 1:
            etherType = .arp
            payload = .arp(
                ARPPacket(
                    operation: ARPPacket.Operation(rawValue: random.int(in: 0...1) == 0 ? random.u16() : 1),
                    senderHardwareAddress: mac(), senderProtocolAddress: ipv4Address(),
                    targetHardwareAddress: mac(), targetProtocolAddress: ipv4Address()))
            padding = random.bytes(upTo: 18)
        case 2, 3, 4:
            etherType = .ipv4
            payload = .ipv4(ipv4Packet())
            padding = random.bytes(upTo: 10)
        case 5, 6, 7:
            etherType = .ipv6
            payload = .ipv6(ipv6Packet())
            padding = random.bytes(upTo: 10)
        case 8:
            etherType = .wakeOnLAN
            let password = SecureOnPassword(random.bytes([0, 4, 6][random.int(in: 0...2)]))
            payload = .wakeOnLAN(MagicPacket(target: mac(), password: password))
        default:
            let known: Set<UInt16> = [0x0800, 0x0806, 0x0842, 0x8100, 0x86DD]
            var type = random.u16()
            while known.contains(type) { type = random.u16() }
            etherType = EtherType(rawValue: type)
            payload = .other(random.bytes(upTo: 80))
        }
        return EthernetFrame(
            header: EthernetHeader(destination: mac(), source: mac(), vlan: vlan, etherType: etherType),
            payload: payload, padding: padding)
    }

    mutating func ipv4Packet() -> IPv4Packet {
        var header = IPv4Header(
            dscp: random.byte(), ecn: random.byte(), identification: random.u16(),
            flags: IPv4Header.Flags(rawValue: random.byte() & 0x6), fragmentOffset: 0, timeToLive: random.byte(),
            transportProtocol: .tcp, checksum: random.u16(), source: ipv4Address(), destination: ipv4Address(),
            options: random.bytes(4 * random.int(in: 0...(random.bool() ? 0 : 10))))
        let payload: IPPayload
        switch random.int(in: 0...3) {
        case 0:
            payload = .tcp(tcpSegment())
        case 1:
            header.transportProtocol = .udp
            payload = .udp(udpDatagram())
        case 2:
            // A fragment: never decoded, whatever the protocol.
            header.transportProtocol = IPProtocol(rawValue: random.byte())
            header.flags.insert(.moreFragments)
            header.fragmentOffset = random.u16() & 0x1FFF
            payload = .other(random.bytes(upTo: 60))
        default:
            var number = random.byte()
            while number == 6 || number == 17 { number = random.byte() }
            header.transportProtocol = IPProtocol(rawValue: number)
            payload = .other(random.bytes(upTo: 60))
        }
        return IPv4Packet(header: header, payload: payload)
    }

    mutating func ipv6Packet() -> IPv6Packet {
        var header = IPv6Header(
            trafficClass: random.byte(), flowLabel: random.u32(), nextHeader: .icmpv6, hopLimit: random.byte(),
            source: ipv6Address(), destination: ipv6Address())
        let payload: IPPayload
        switch random.int(in: 0...5) {
        case 0:
            header.nextHeader = .tcp
            payload = .tcp(tcpSegment())
        case 1:
            header.nextHeader = .udp
            payload = .udp(udpDatagram())
        case 2, 3:
            payload = .icmpv6(ICMPv6Message(checksum: random.u16(), content: neighborDiscovery()))
        case 4:
            var type = random.byte()
            while type == 135 || type == 136 { type = random.byte() }
            let content = ICMPv6Message.Content.other(type: type, code: random.byte(), body: random.bytes(upTo: 40))
            payload = .icmpv6(ICMPv6Message(checksum: random.u16(), content: content))
        default:
            let extensions: [UInt8] = [0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254, 59]
            header.nextHeader = IPProtocol(rawValue: extensions[random.int(in: 0...(extensions.count - 1))])
            payload = .other(random.bytes(upTo: 60))
        }
        return IPv6Packet(header: header, payload: payload)
    }

    mutating func tcpSegment() -> TCPSegment {
        TCPSegment(
            sourcePort: random.u16(), destinationPort: random.u16(), sequenceNumber: random.u32(),
            acknowledgmentNumber: random.u32(), flags: TCPSegment.Flags(rawValue: random.u16()),
            window: random.u16(), checksum: random.u16(), urgentPointer: random.u16(),
            options: random.bytes(4 * random.int(in: 0...10)), payload: random.bytes(upTo: 90))
    }

    mutating func udpDatagram() -> UDPDatagram {
        UDPDatagram(
            sourcePort: random.u16(), destinationPort: random.u16(),
            checksum: random.int(in: 0...4) == 0 ? 0 : random.u16(), payload: random.bytes(upTo: 90))
    }

    mutating func neighborDiscovery() -> ICMPv6Message.Content {
        var options: [NDOption] = []
        for _ in 0..<random.int(in: 0...3) {
            switch random.int(in: 0...2) {
            case 0: options.append(.sourceLinkLayerAddress(mac()))
            case 1: options.append(.targetLinkLayerAddress(mac()))
            default:
                // Types 1 and 2 with length 1 are the typed cases; any other (type, length) stays raw.
                let units = random.int(in: 1...3)
                var type = random.byte()
                while units == 1 && (type == 1 || type == 2) { type = random.byte() }
                options.append(.other(type: type, data: random.bytes(units * 8 - 2)))
            }
        }
        if random.bool() {
            return .neighborSolicitation(
                NeighborSolicitation(target: ipv6Address(), options: options, reserved: random.u32()))
        }
        return .neighborAdvertisement(
            NeighborAdvertisement(
                flags: NeighborAdvertisement.Flags(rawValue: random.u32()), target: ipv6Address(), options: options))
    }
}

@Suite("Generated frames")
struct PropertyTests {
    @Test("parse(serialize(x)) == x, keeping the stored checksums", arguments: [1, 2, 3] as [UInt64])
    func preservingRoundTrip(seed: UInt64) throws {
        var generator = FrameGenerator(random: SeededGenerator(seed: seed))
        for index in 0..<300 {
            let frame = generator.frame()
            let bytes = frame.serialized(checksums: .preserve)
            #expect(bytes.count == frame.length, "case \(index)")
            let parsed = try EthernetFrame(parsing: bytes)
            #expect(parsed == frame, "case \(index): \(frame)")
        }
    }

    @Test("serialising with computed checksums gives frames that pass strict parsing", arguments: [4, 5] as [UInt64])
    func computingRoundTrip(seed: UInt64) throws {
        var generator = FrameGenerator(random: SeededGenerator(seed: seed))
        var wrongBefore = 0
        for index in 0..<300 {
            let frame = generator.frame()
            if !frame.checksumsAreValid { wrongBefore += 1 }
            let bytes = frame.serialized()
            let parsed = try EthernetFrame(parsing: bytes, verifying: .all)
            #expect(parsed.checksumsAreValid, "case \(index)")
            var fixed = frame
            fixed.computeChecksums()
            #expect(parsed == fixed, "case \(index)")
            #expect(parsed.serialized() == bytes, "case \(index)")
            #expect(parsed.serialized(checksums: .preserve) == bytes, "case \(index)")
        }
        // The generator's random checksums are almost always wrong, so the recomputation did real work.
        #expect(wrongBefore > 100)
    }
}
