public import NetworkAddresses

/// An IPv4 header (RFC 791). The header length and total length are derived from the options and the payload.
public struct IPv4Header: Hashable, Sendable {
    /// The three flag bits of the fragmentation word.
    public struct Flags: OptionSet, Hashable, Sendable {
        public var rawValue: UInt8

        public init(rawValue: UInt8) { self.rawValue = rawValue & 0x7 }

        /// The reserved bit (must be zero, RFC 791).
        public static let reserved = Flags(rawValue: 0x4)
        public static let dontFragment = Flags(rawValue: 0x2)
        public static let moreFragments = Flags(rawValue: 0x1)
    }

    /// Differentiated services code point, 0...63.
    public var dscp: UInt8
    /// Explicit congestion notification, 0...3.
    public var ecn: UInt8
    public var identification: UInt16
    public var flags: Flags
    /// Fragment offset in units of 8 bytes, 0...8191.
    public var fragmentOffset: UInt16
    public var timeToLive: UInt8
    public var transportProtocol: IPProtocol
    /// The header checksum as stored (see `IPv4Packet.headerChecksumIsValid`).
    public var checksum: UInt16
    public var source: IPv4Address
    public var destination: IPv4Address
    /// Option bytes after the 20-byte fixed header. When building, they are padded with zeros to a multiple of
    /// four and cut at 40 bytes.
    public var options: [UInt8]

    public init(
        dscp: UInt8 = 0,
        ecn: UInt8 = 0,
        identification: UInt16 = 0,
        flags: Flags = [],
        fragmentOffset: UInt16 = 0,
        timeToLive: UInt8 = 64,
        transportProtocol: IPProtocol,
        checksum: UInt16 = 0,
        source: IPv4Address,
        destination: IPv4Address,
        options: [UInt8] = []
    ) {
        self.dscp = dscp & 0x3F
        self.ecn = ecn & 0x3
        self.identification = identification
        self.flags = flags
        self.fragmentOffset = fragmentOffset & 0x1FFF
        self.timeToLive = timeToLive
        self.transportProtocol = transportProtocol
        self.checksum = checksum
        self.source = source
        self.destination = destination
        self.options = options
    }

    /// The header length in bytes: 20 plus the (padded) options.
    public var headerLength: Int { 20 + min(40, (options.count + 3) & ~3) }

    /// True for any fragment of a fragmented datagram (more-fragments set or a non-zero offset).
    public var isFragment: Bool { flags.contains(.moreFragments) || fragmentOffset != 0 }

    /// True for the first fragment of a fragmented datagram: offset 0 with more-fragments set. It carries the
    /// transport header.
    public var isFirstFragment: Bool { flags.contains(.moreFragments) && fragmentOffset == 0 }

    func write(to sink: inout some ByteSink, totalLength: Int, checksum: UInt16) {
        let length = headerLength
        sink.write(UInt8(0x40 | length / 4))
        sink.write((dscp & 0x3F) << 2 | (ecn & 0x3))
        sink.write(UInt16(truncatingIfNeeded: totalLength))
        sink.write(identification)
        sink.write(UInt16(flags.rawValue & 0x7) << 13 | (fragmentOffset & 0x1FFF))
        sink.write(timeToLive)
        sink.write(transportProtocol.rawValue)
        sink.write(checksum)
        sink.write(source)
        sink.write(destination)
        sink.writeOptions(options, length: length - 20)
    }
}

/// An IPv4 packet: header and decoded payload.
public struct IPv4Packet: Hashable, Sendable {
    public var header: IPv4Header
    public var payload: IPPayload

    public init(header: IPv4Header, payload: IPPayload) {
        self.header = header
        self.payload = payload
    }

    /// The transport header of a first fragment, read from the part of the datagram the fragment holds: a TCP
    /// segment whose payload is what arrived so far, or a UDP datagram likewise (its length field describes the
    /// whole datagram and is not checked). Nil for whole packets, later fragments and other protocols.
    public var firstFragmentTransport: IPPayload? {
        guard header.isFirstFragment, case .other(let bytes) = payload else { return nil }
        switch header.transportProtocol {
        case .tcp:
            return (try? TCPSegment(parsing: bytes)).map { .tcp($0) }
        case .udp where bytes.count >= 8:
            return .udp(
                UDPDatagram(
                    sourcePort: readU16(bytes, 0), destinationPort: readU16(bytes, 2), checksum: readU16(bytes, 6),
                    payload: Array(bytes[8...])))
        default:
            return nil
        }
    }

    /// Decodes an IPv4 packet at the start of `bytes`; bytes after the total length are ignored.
    public init(parsing bytes: [UInt8], verifying verification: ChecksumVerification = .none) throws(FrameError) {
        self = try IPv4Packet.parse(bytes, at: 0, verifying: verification).packet
    }

    /// The total length: header plus payload.
    public var totalLength: Int { header.headerLength + payload.length }

    /// The header checksum this header should carry.
    public var computedHeaderChecksum: UInt16 {
        var sum = InternetChecksum()
        header.write(to: &sum, totalLength: totalLength, checksum: 0)
        return sum.checksum
    }

    /// Whether the stored header checksum is right. Unlike transport checksums, it is never offloaded.
    public var headerChecksumIsValid: Bool {
        var sum = InternetChecksum()
        header.write(to: &sum, totalLength: totalLength, checksum: header.checksum)
        return sum.verifies
    }

    /// Whether the TCP or UDP checksum is right, over the IPv4 pseudo-header; nil when the payload is not decoded.
    /// A UDP checksum of 0 ("none") counts as valid. Captures taken on the sending host or on veth often hold
    /// offloaded, not yet computed, transport checksums.
    public var transportChecksumIsValid: Bool? { payload.checksumIsValid(pseudoHeader) }

    /// Sets the header checksum and the transport checksum (a UDP checksum of 0 stays "none").
    public mutating func computeChecksums() {
        payload.computeChecksum(pseudoHeader, replacingNone: false)
        header.checksum = computedHeaderChecksum
    }

    /// The packet's bytes.
    public func serialized(checksums: ChecksumGeneration = .compute) -> [UInt8] {
        var packet = self
        if checksums.computes { packet.computeChecksums() }
        var buffer = ByteBuffer(capacity: totalLength)
        packet.write(to: &buffer)
        return buffer.bytes
    }

    var pseudoHeader: PseudoHeader { .ipv4(source: header.source, destination: header.destination) }

    func write(to sink: inout some ByteSink) {
        header.write(to: &sink, totalLength: totalLength, checksum: header.checksum)
        payload.write(to: &sink)
    }

    /// Decodes the packet at `start`; returns it and the offset just after its total length.
    static func parse(
        _ bytes: [UInt8], at start: Int, verifying verification: ChecksumVerification
    ) throws(FrameError) -> (packet: IPv4Packet, end: Int) {
        let available = bytes.count - start
        guard available >= 20 else {
            throw .truncated("IPv4 header", at: start, needed: 20, available: available)
        }
        let version = bytes[start] >> 4
        guard version == 4 else {
            throw FrameError(.invalidVersion, at: start, "IPv4 version \(version) at offset \(start): expected 4")
        }
        let words = Int(bytes[start] & 0x0F)
        guard words >= 5 else {
            throw FrameError(
                .invalidLength, at: start, "IPv4 header length \(words) words at offset \(start): expected at least 5")
        }
        let headerLength = words * 4
        guard available >= headerLength else {
            throw .truncated("IPv4 header with options", at: start, needed: headerLength, available: available)
        }
        let totalLength = Int(readU16(bytes, start + 2))
        guard totalLength >= headerLength else {
            throw FrameError(
                .invalidLength, at: start + 2,
                "IPv4 total length \(totalLength) at offset \(start + 2): expected at least \(headerLength) "
                    + "(the header length)")
        }
        guard totalLength <= available else {
            throw .truncated("IPv4 datagram", at: start, needed: totalLength, available: available)
        }
        let fragmentWord = readU16(bytes, start + 6)
        let header = IPv4Header(
            dscp: bytes[start + 1] >> 2,
            ecn: bytes[start + 1] & 0x3,
            identification: readU16(bytes, start + 4),
            flags: IPv4Header.Flags(rawValue: UInt8(fragmentWord >> 13)),
            fragmentOffset: fragmentWord & 0x1FFF,
            timeToLive: bytes[start + 8],
            transportProtocol: IPProtocol(rawValue: bytes[start + 9]),
            checksum: readU16(bytes, start + 10),
            source: readIPv4(bytes, start + 12),
            destination: readIPv4(bytes, start + 16),
            options: copyBytes(bytes, start + 20, start + headerLength)
        )
        let end = start + totalLength
        let payload: IPPayload
        if header.isFragment {
            payload = .other(copyBytes(bytes, start + headerLength, end))
        } else {
            payload = try IPPayload.parse(
                bytes, from: start + headerLength, to: end, protocol: header.transportProtocol, allowICMPv6: false)
        }
        let packet = IPv4Packet(header: header, payload: payload)
        if verification.verifiesIPv4Header, !packet.headerChecksumIsValid {
            throw FrameError(
                .checksumMismatch, at: start + 10,
                "IPv4 header checksum \(hex(header.checksum)) at offset \(start + 10): "
                    + "expected \(hex(packet.computedHeaderChecksum))")
        }
        if verification.verifiesTransport, packet.transportChecksumIsValid == false {
            let at = start + headerLength + packet.payload.checksumOffset
            throw FrameError(
                .checksumMismatch, at: at,
                "\(header.transportProtocol) checksum \(hex(packet.payload.checksum)) at offset \(at): expected "
                    + hex(packet.payload.computedChecksum(packet.pseudoHeader) ?? 0))
        }
        return (packet, end)
    }
}

extension IPPayload {
    /// The offset of the checksum field inside the transport header.
    var checksumOffset: Int {
        switch self {
        case .tcp: 16
        case .udp: 6
        case .icmpv6: 2
        case .other: 0
        }
    }
}
