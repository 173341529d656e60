public import NetworkAddresses

/// The fixed IPv6 header (RFC 8200). The payload length is derived from the payload.
public struct IPv6Header: Hashable, Sendable {
    public var trafficClass: UInt8
    /// Flow label, 20 bits.
    public var flowLabel: UInt32
    public var nextHeader: IPProtocol
    public var hopLimit: UInt8
    public var source: IPv6Address
    public var destination: IPv6Address

    public init(
        trafficClass: UInt8 = 0,
        flowLabel: UInt32 = 0,
        nextHeader: IPProtocol,
        hopLimit: UInt8 = 64,
        source: IPv6Address,
        destination: IPv6Address
    ) {
        self.trafficClass = trafficClass
        self.flowLabel = flowLabel & 0xF_FFFF
        self.nextHeader = nextHeader
        self.hopLimit = hopLimit
        self.source = source
        self.destination = destination
    }

    /// The fixed header length.
    public static let length = 40

    /// True when the next header is an IPv6 extension header. Such packets are kept undecoded (`IPPayload.other`);
    /// a sleep proxy does not look past extension headers.
    public var hasExtensionHeader: Bool { nextHeader.isIPv6ExtensionHeader }

    func write(to sink: inout some ByteSink, payloadLength: Int) {
        sink.write(UInt32(6) << 28 | UInt32(trafficClass) << 20 | (flowLabel & 0xF_FFFF))
        sink.write(UInt16(truncatingIfNeeded: payloadLength))
        sink.write(nextHeader.rawValue)
        sink.write(hopLimit)
        sink.write(source)
        sink.write(destination)
    }
}

/// An IPv6 packet: fixed header and decoded payload.
public struct IPv6Packet: Hashable, Sendable {
    public var header: IPv6Header
    public var payload: IPPayload

    public init(header: IPv6Header, payload: IPPayload) {
        self.header = header
        self.payload = payload
    }

    /// Decodes an IPv6 packet at the start of `bytes`; bytes after the payload length are ignored.
    public init(parsing bytes: [UInt8], verifying verification: ChecksumVerification = .none) throws(FrameError) {
        self = try IPv6Packet.parse(bytes, at: 0, verifying: verification).packet
    }

    /// The payload length field: the number of bytes after the fixed header.
    public var payloadLength: Int { payload.length }

    /// Whether the TCP, UDP or ICMPv6 checksum is right over the IPv6 pseudo-header; nil when the payload is not
    /// decoded. A UDP checksum of 0 is invalid over IPv6.
    public var transportChecksumIsValid: Bool? { payload.checksumIsValid(pseudoHeader) }

    /// Sets the transport checksum.
    public mutating func computeChecksums() {
        payload.computeChecksum(pseudoHeader, replacingNone: true)
    }

    /// The packet's bytes.
    public func serialized(checksums: ChecksumGeneration = .compute) -> [UInt8] {
        var packet = self
        if checksums.computes { packet.computeChecksums() }
        var buffer = ByteBuffer(capacity: IPv6Header.length + payloadLength)
        packet.write(to: &buffer)
        return buffer.bytes
    }

    var pseudoHeader: PseudoHeader { .ipv6(source: header.source, destination: header.destination) }

    func write(to sink: inout some ByteSink) {
        header.write(to: &sink, payloadLength: payloadLength)
        payload.write(to: &sink)
    }

    static func parse(
        _ bytes: [UInt8], at start: Int, verifying verification: ChecksumVerification
    ) throws(FrameError) -> (packet: IPv6Packet, end: Int) {
        let available = bytes.count - start
        guard available >= IPv6Header.length else {
            throw .truncated("IPv6 header", at: start, needed: IPv6Header.length, available: available)
        }
        let first = readU32(bytes, start)
        let version = first >> 28
        guard version == 6 else {
            throw FrameError(.invalidVersion, at: start, "IPv6 version \(version) at offset \(start): expected 6")
        }
        let payloadLength = Int(readU16(bytes, start + 4))
        guard IPv6Header.length + payloadLength <= available else {
            throw .truncated(
                "IPv6 packet", at: start, needed: IPv6Header.length + payloadLength, available: available)
        }
        let header = IPv6Header(
            trafficClass: UInt8(truncatingIfNeeded: first >> 20),
            flowLabel: first & 0xF_FFFF,
            nextHeader: IPProtocol(rawValue: bytes[start + 6]),
            hopLimit: bytes[start + 7],
            source: readIPv6(bytes, start + 8),
            destination: readIPv6(bytes, start + 24)
        )
        let payloadStart = start + IPv6Header.length
        let end = payloadStart + payloadLength
        let payload = try IPPayload.parse(
            bytes, from: payloadStart, to: end, protocol: header.nextHeader, allowICMPv6: true)
        let packet = IPv6Packet(header: header, payload: payload)
        if verification.verifiesTransport, packet.transportChecksumIsValid == false {
            let at = payloadStart + payload.checksumOffset
            throw FrameError(
                .checksumMismatch, at: at,
                "\(header.nextHeader) checksum \(hex(payload.checksum)) at offset \(at): expected "
                    + hex(payload.computedChecksum(packet.pseudoHeader) ?? 0))
        }
        return (packet, end)
    }
}
