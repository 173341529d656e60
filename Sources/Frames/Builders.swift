public import NetworkAddresses

// Builders for the frames a sleep proxy sends. Every builder writes the given source MAC into the Ethernet header
// (on Linux nothing overwrites it) and fills in lengths and checksums; `serialized()` gives the bytes.

extension EthernetFrame {
    /// An ARP packet in a frame (42 bytes, 46 with a VLAN tag; see `paddedToMinimumLength()`).
    public static func arp(
        _ packet: ARPPacket, source: MACAddress, destination: MACAddress, vlan: VLANTag? = nil
    ) -> EthernetFrame {
        EthernetFrame(
            header: EthernetHeader(destination: destination, source: source, vlan: vlan, etherType: .arp),
            payload: .arp(packet)
        )
    }

    /// An ARP probe for `address` (RFC 5227): request with sender IP 0.0.0.0 and an all-zero target MAC.
    /// A sleep proxy sends it unicast to the sleeping client's MAC to ask whether the client is still awake.
    public static func arpProbe(
        for address: IPv4Address, source: MACAddress, destination: MACAddress = .broadcast, vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let packet = ARPPacket(
            operation: .request,
            senderHardwareAddress: source,
            senderProtocolAddress: .any,
            targetHardwareAddress: .zero,
            targetProtocolAddress: address
        )
        return arp(packet, source: source, destination: destination, vlan: vlan)
    }

    /// A gratuitous ARP announcement (RFC 5227) claiming `address` for `source`: broadcast request with sender and
    /// target IP both `address` and an all-zero target MAC. With `owner`, the announcement says the address is at
    /// that MAC instead (sent from `source`): how a proxy hands an address back to the host that owns it.
    public static func arpAnnouncement(
        of address: IPv4Address, source: MACAddress, owner: MACAddress? = nil, vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let packet = ARPPacket(
            operation: .request,
            senderHardwareAddress: owner ?? source,
            senderProtocolAddress: address,
            targetHardwareAddress: .zero,
            targetProtocolAddress: address
        )
        return arp(packet, source: source, destination: .broadcast, vlan: vlan)
    }

    /// A unicast ARP reply saying `address` is at `source`, sent to the requester.
    public static func arpReply(
        for address: IPv4Address,
        source: MACAddress,
        requesterMAC: MACAddress,
        requesterAddress: IPv4Address,
        vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let packet = ARPPacket(
            operation: .reply,
            senderHardwareAddress: source,
            senderProtocolAddress: address,
            targetHardwareAddress: requesterMAC,
            targetProtocolAddress: requesterAddress
        )
        return arp(packet, source: source, destination: requesterMAC, vlan: vlan)
    }

    /// An IPv4 packet in a frame. The protocol field follows a decoded payload; lengths and checksums are computed
    /// (also a UDP checksum).
    public static func ipv4(
        header: IPv4Header, payload: IPPayload, source: MACAddress, destination: MACAddress, vlan: VLANTag? = nil
    ) -> EthernetFrame {
        var packet = IPv4Packet(header: header, payload: payload)
        if let number = payload.protocolNumber { packet.header.transportProtocol = number }
        packet.payload.computeChecksum(packet.pseudoHeader, replacingNone: true)
        packet.header.checksum = packet.computedHeaderChecksum
        return EthernetFrame(
            header: EthernetHeader(destination: destination, source: source, vlan: vlan, etherType: .ipv4),
            payload: .ipv4(packet)
        )
    }

    /// An IPv6 packet in a frame. The next header follows a decoded payload; the transport checksum is computed.
    public static func ipv6(
        header: IPv6Header, payload: IPPayload, source: MACAddress, destination: MACAddress, vlan: VLANTag? = nil
    ) -> EthernetFrame {
        var packet = IPv6Packet(header: header, payload: payload)
        if let number = payload.protocolNumber { packet.header.nextHeader = number }
        packet.computeChecksums()
        return EthernetFrame(
            header: EthernetHeader(destination: destination, source: source, vlan: vlan, etherType: .ipv6),
            payload: .ipv6(packet)
        )
    }

    /// A TCP segment over IPv4 (TTL 64, don't-fragment) with computed checksums.
    public static func tcp(
        _ segment: TCPSegment,
        sourceAddress: IPv4Address,
        destinationAddress: IPv4Address,
        source: MACAddress,
        destination: MACAddress,
        vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let header = IPv4Header(
            flags: .dontFragment, transportProtocol: .tcp, source: sourceAddress, destination: destinationAddress)
        return ipv4(header: header, payload: .tcp(segment), source: source, destination: destination, vlan: vlan)
    }

    /// A TCP segment over IPv6 (hop limit 64) with a computed checksum.
    public static func tcp(
        _ segment: TCPSegment,
        sourceAddress: IPv6Address,
        destinationAddress: IPv6Address,
        source: MACAddress,
        destination: MACAddress,
        vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let header = IPv6Header(nextHeader: .tcp, source: sourceAddress, destination: destinationAddress)
        return ipv6(header: header, payload: .tcp(segment), source: source, destination: destination, vlan: vlan)
    }

    /// A UDP datagram over IPv4 (TTL 64) with computed checksums.
    public static func udp(
        _ datagram: UDPDatagram,
        sourceAddress: IPv4Address,
        destinationAddress: IPv4Address,
        source: MACAddress,
        destination: MACAddress,
        vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let header = IPv4Header(transportProtocol: .udp, source: sourceAddress, destination: destinationAddress)
        return ipv4(header: header, payload: .udp(datagram), source: source, destination: destination, vlan: vlan)
    }

    /// A UDP datagram over IPv6 (hop limit 64) with a computed checksum.
    public static func udp(
        _ datagram: UDPDatagram,
        sourceAddress: IPv6Address,
        destinationAddress: IPv6Address,
        source: MACAddress,
        destination: MACAddress,
        vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let header = IPv6Header(nextHeader: .udp, source: sourceAddress, destination: destinationAddress)
        return ipv6(header: header, payload: .udp(datagram), source: source, destination: destination, vlan: vlan)
    }

    /// A Neighbour Solicitation for `target` (hop limit 255). By default it goes to the target's solicited-node
    /// group and carries a source link-layer address option unless the source address is `::` (a DAD or
    /// sleep-proxy probe, RFC 4861 section 4.3).
    public static func neighborSolicitation(
        for target: IPv6Address,
        sourceAddress: IPv6Address,
        destinationAddress: IPv6Address? = nil,
        source: MACAddress,
        destination: MACAddress,
        includeSourceLinkLayerAddress: Bool? = nil,
        vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let withOption = includeSourceLinkLayerAddress ?? !sourceAddress.isUnspecified
        let solicitation = NeighborSolicitation(
            target: target, options: withOption ? [.sourceLinkLayerAddress(source)] : [])
        let header = IPv6Header(
            nextHeader: .icmpv6,
            hopLimit: 255,
            source: sourceAddress,
            destination: destinationAddress ?? target.solicitedNodeGroup
        )
        let message = ICMPv6Message(content: .neighborSolicitation(solicitation))
        return ipv6(header: header, payload: .icmpv6(message), source: source, destination: destination, vlan: vlan)
    }

    /// A Neighbour Advertisement for `target` (hop limit 255), with a target link-layer address option when
    /// `targetLinkLayerAddress` is given. An unsolicited announcement goes to `ff02::1` (MAC 33:33:00:00:00:01)
    /// with flags `[.override]`.
    public static func neighborAdvertisement(
        for target: IPv6Address,
        flags: NeighborAdvertisement.Flags,
        targetLinkLayerAddress: MACAddress?,
        sourceAddress: IPv6Address,
        destinationAddress: IPv6Address = .allNodes,
        source: MACAddress,
        destination: MACAddress = MACAddress(ipv6Multicast: .allNodes),
        vlan: VLANTag? = nil
    ) -> EthernetFrame {
        let options: [NDOption] = targetLinkLayerAddress.map { [.targetLinkLayerAddress($0)] } ?? []
        let advertisement = NeighborAdvertisement(flags: flags, target: target, options: options)
        let header = IPv6Header(
            nextHeader: .icmpv6, hopLimit: 255, source: sourceAddress, destination: destinationAddress)
        let message = ICMPv6Message(content: .neighborAdvertisement(advertisement))
        return ipv6(header: header, payload: .icmpv6(message), source: source, destination: destination, vlan: vlan)
    }

    /// The announcement, to everyone, that `address` is at `owner` (by default `source`, the sender): a gratuitous
    /// ARP for IPv4 (`arpAnnouncement`), an unsolicited Neighbour Advertisement with Override and the target
    /// link-layer address for IPv6 (RFC 4861 section 7.2.6). A proxy claims an address with its own MAC, and hands
    /// it back with the host's; a host announces its own.
    public static func addressAnnouncement(
        of address: IPAddress, source: MACAddress, owner: MACAddress? = nil
    ) -> EthernetFrame {
        switch address {
        case .v4(let v4):
            return arpAnnouncement(of: v4, source: source, owner: owner)
        case .v6(let v6):
            return neighborAdvertisement(
                for: v6, flags: .override, targetLinkLayerAddress: owner ?? source, sourceAddress: v6, source: source)
        }
    }

    /// An EtherType 0x0842 magic-packet frame, 116 bytes without a password. It goes to `destination`, by default
    /// the MAC being woken; pass `.broadcast` for the broadcast copy. Throws when `source` is all-zero or a group
    /// address: Linux bridges drop such frames, so the interface's own MAC must be used.
    public static func wakeOnLAN(
        _ magic: MagicPacket, source: MACAddress, destination: MACAddress? = nil, vlan: VLANTag? = nil
    ) throws(FrameError) -> EthernetFrame {
        try checkWakeSource(source)
        return EthernetFrame(
            header: EthernetHeader(
                destination: destination ?? magic.target, source: source, vlan: vlan, etherType: .wakeOnLAN),
            payload: .wakeOnLAN(magic)
        )
    }

    /// A magic packet as the payload of a UDP datagram (port 9 by default) over IPv4, to a broadcast or unicast
    /// address, with computed checksums. `destination` defaults to the broadcast MAC; for a unicast copy pass the
    /// MAC that the neighbour entry of `destinationAddress` points at. Throws like `wakeOnLAN(_:source:)`.
    public static func wakeOnLANDatagram(
        _ magic: MagicPacket,
        sourceAddress: IPv4Address,
        destinationAddress: IPv4Address = .broadcast,
        sourcePort: UInt16 = 9,
        destinationPort: UInt16 = 9,
        source: MACAddress,
        destination: MACAddress = .broadcast,
        vlan: VLANTag? = nil
    ) throws(FrameError) -> EthernetFrame {
        try checkWakeSource(source)
        let datagram = UDPDatagram(sourcePort: sourcePort, destinationPort: destinationPort, payload: magic.bytes)
        return udp(
            datagram, sourceAddress: sourceAddress, destinationAddress: destinationAddress, source: source,
            destination: destination, vlan: vlan)
    }

    private static func checkWakeSource(_ source: MACAddress) throws(FrameError) {
        guard !source.isZero, !source.isMulticast else {
            throw FrameError(
                .invalidArgument, at: 6,
                "Ethernet source \(source) at offset 6: expected the interface's own unicast MAC "
                    + "(bridges drop frames from a zero or group source)")
        }
    }
}
