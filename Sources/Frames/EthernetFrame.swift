/// Which checksums a parse checks. Transport checksums are not checked by default: frames captured on the sending
/// host or on veth carry offloaded (not yet computed) TCP and UDP checksums.
public struct ChecksumVerification: Hashable, Sendable {
    private enum Level: Int, Hashable, Sendable {
        case none
        case ipv4Header
        case all
    }

    private var level: Level

    private init(_ level: Level) { self.level = level }

    /// Check nothing; the `...IsValid` properties still tell.
    public static let none = ChecksumVerification(.none)
    /// Reject IPv4 headers whose checksum is wrong (header checksums are never offloaded).
    public static let ipv4Header = ChecksumVerification(.ipv4Header)
    /// Reject wrong IPv4 header, TCP, UDP and ICMPv6 checksums.
    public static let all = ChecksumVerification(.all)

    var verifiesIPv4Header: Bool { level.rawValue >= Level.ipv4Header.rawValue }
    var verifiesTransport: Bool { level == .all }
}

/// How serialisation treats the stored checksum fields.
public struct ChecksumGeneration: Hashable, Sendable {
    private enum Mode: Hashable, Sendable {
        case compute
        case preserve
    }

    private var mode: Mode

    private init(_ mode: Mode) { self.mode = mode }

    /// Compute every checksum (a UDP-over-IPv4 checksum of 0, "none", stays 0).
    public static let compute = ChecksumGeneration(.compute)
    /// Write the stored checksum fields as they are, right or wrong.
    public static let preserve = ChecksumGeneration(.preserve)

    var computes: Bool { mode == .compute }
}

/// What an Ethernet frame carries, decoded by EtherType.
public enum EthernetPayload: Hashable, Sendable {
    case arp(ARPPacket)
    case ipv4(IPv4Packet)
    case ipv6(IPv6Packet)
    /// EtherType 0x0842.
    case wakeOnLAN(MagicPacket)
    /// Any other EtherType: the bytes after the header.
    case other([UInt8])

    /// The number of bytes the payload occupies, without Ethernet padding.
    public var length: Int {
        switch self {
        case .arp: ARPPacket.length
        case .ipv4(let packet): packet.totalLength
        case .ipv6(let packet): IPv6Header.length + packet.payloadLength
        case .wakeOnLAN(let magic): magic.length
        case .other(let bytes): bytes.count
        }
    }
}

/// A decoded Ethernet II frame: header, payload decoded down to TCP, UDP, ICMPv6 Neighbour Discovery or the magic
/// packet, and whatever followed the payload (Ethernet padding).
///
/// `EthernetFrame(parsing:)` is the entry point for captured frames. Serialising a parsed frame with
/// `.preserve` gives back the original bytes; with `.compute` too, whenever its checksums were right.
public struct EthernetFrame: Hashable, Sendable {
    /// The minimum frame length on the wire without the FCS.
    public static let minimumLength = 60

    public var header: EthernetHeader
    public var payload: EthernetPayload
    /// Bytes after the network-layer packet (the IPv4 total length, the IPv6 payload length, ARP's 28 bytes):
    /// normally Ethernet padding.
    public var padding: [UInt8]

    public init(header: EthernetHeader, payload: EthernetPayload, padding: [UInt8] = []) {
        self.header = header
        self.payload = payload
        self.padding = padding
    }

    /// Decodes a captured frame (without FCS). Never traps: malformed input throws a `FrameError` naming the layer,
    /// field and offset. IPv4 fragments and IPv6 packets with extension headers are kept as undecoded payloads.
    public init(parsing bytes: [UInt8], verifying verification: ChecksumVerification = .none) throws(FrameError) {
        let header = try EthernetHeader.parse(bytes)
        let start = header.length
        let payload: EthernetPayload
        var end = bytes.count
        switch header.etherType {
        case .arp:
            payload = .arp(try ARPPacket.parse(bytes, at: start))
            end = start + ARPPacket.length
        case .ipv4:
            let parsed = try IPv4Packet.parse(bytes, at: start, verifying: verification)
            payload = .ipv4(parsed.packet)
            end = parsed.end
        case .ipv6:
            let parsed = try IPv6Packet.parse(bytes, at: start, verifying: verification)
            payload = .ipv6(parsed.packet)
            end = parsed.end
        case .wakeOnLAN:
            payload = .wakeOnLAN(try MagicPacket.parse(bytes, from: start, to: bytes.count))
        default:
            payload = .other(copyBytes(bytes, start, bytes.count))
        }
        self.init(header: header, payload: payload, padding: copyBytes(bytes, end, bytes.count))
    }

    /// The frame length: header, payload and padding.
    public var length: Int { header.length + payload.length + padding.count }

    /// The frame's bytes. With `.compute` (the default), IPv4 header and transport checksums are computed.
    public func serialized(checksums: ChecksumGeneration = .compute) -> [UInt8] {
        var frame = self
        if checksums.computes { frame.computeChecksums() }
        var buffer = ByteBuffer(capacity: length)
        frame.header.write(to: &buffer)
        switch frame.payload {
        case .arp(let packet): packet.write(to: &buffer)
        case .ipv4(let packet): packet.write(to: &buffer)
        case .ipv6(let packet): packet.write(to: &buffer)
        case .wakeOnLAN(let magic): magic.write(to: &buffer)
        case .other(let bytes): buffer.write(bytes)
        }
        buffer.write(frame.padding)
        return buffer.bytes
    }

    /// Sets every checksum field to its computed value (a UDP-over-IPv4 checksum of 0, "none", stays 0).
    public mutating func computeChecksums() {
        switch payload {
        case .ipv4(var packet):
            packet.computeChecksums()
            payload = .ipv4(packet)
        case .ipv6(var packet):
            packet.computeChecksums()
            payload = .ipv6(packet)
        case .arp, .wakeOnLAN, .other:
            break
        }
    }

    /// True when every checksum the frame carries (IPv4 header, TCP, UDP, ICMPv6) is right.
    public var checksumsAreValid: Bool {
        switch payload {
        case .ipv4(let packet): packet.headerChecksumIsValid && packet.transportChecksumIsValid != false
        case .ipv6(let packet): packet.transportChecksumIsValid != false
        case .arp, .wakeOnLAN, .other: true
        }
    }

    /// A copy with zero padding appended up to `minimumLength` (60) bytes, as a NIC would send it.
    public func paddedToMinimumLength() -> EthernetFrame {
        var frame = self
        let missing = EthernetFrame.minimumLength - length
        if missing > 0 { frame.padding += repeatElement(0, count: missing) }
        return frame
    }
}

// Shortcuts to the decoded layers.
extension EthernetFrame {
    public var arp: ARPPacket? {
        if case .arp(let packet) = payload { return packet }
        return nil
    }

    public var ipv4: IPv4Packet? {
        if case .ipv4(let packet) = payload { return packet }
        return nil
    }

    public var ipv6: IPv6Packet? {
        if case .ipv6(let packet) = payload { return packet }
        return nil
    }

    /// The EtherType 0x0842 magic packet (a UDP magic packet is `udp?.magicPacket`).
    public var magicPacket: MagicPacket? {
        if case .wakeOnLAN(let magic) = payload { return magic }
        return nil
    }

    /// The IPv4 or IPv6 payload.
    public var ipPayload: IPPayload? {
        switch payload {
        case .ipv4(let packet): packet.payload
        case .ipv6(let packet): packet.payload
        case .arp, .wakeOnLAN, .other: nil
        }
    }

    public var tcp: TCPSegment? {
        if case .tcp(let segment) = ipPayload { return segment }
        return nil
    }

    public var udp: UDPDatagram? {
        if case .udp(let datagram) = ipPayload { return datagram }
        return nil
    }

    public var icmpv6: ICMPv6Message? {
        if case .icmpv6(let message) = ipPayload { return message }
        return nil
    }
}
