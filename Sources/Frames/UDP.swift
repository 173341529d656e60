/// A UDP datagram (RFC 768). The length field is derived from the payload.
public struct UDPDatagram: Hashable, Sendable {
    public var sourcePort: UInt16
    public var destinationPort: UInt16
    /// The checksum as stored; 0 means "none" over IPv4. Verify it through the enclosing packet.
    public var checksum: UInt16
    public var payload: [UInt8]

    public init(sourcePort: UInt16, destinationPort: UInt16, checksum: UInt16 = 0, payload: [UInt8]) {
        self.sourcePort = sourcePort
        self.destinationPort = destinationPort
        self.checksum = checksum
        self.payload = payload
    }

    /// Decodes a whole datagram; its length field must equal `bytes.count`.
    public init(parsing bytes: [UInt8]) throws(FrameError) {
        self = try UDPDatagram.parse(bytes, from: 0, to: bytes.count)
    }

    /// The length field: 8 plus the payload.
    public var length: Int { 8 + payload.count }

    /// The payload decoded as a Wake-on-LAN magic packet, if it is one.
    public var magicPacket: MagicPacket? { try? MagicPacket(parsing: payload) }

    static func parse(_ bytes: [UInt8], from start: Int, to end: Int) throws(FrameError) -> UDPDatagram {
        let available = end - start
        guard available >= 8 else {
            throw .truncated("UDP header", at: start, needed: 8, available: available)
        }
        let length = Int(readU16(bytes, start + 4))
        guard length >= 8 else {
            throw FrameError(
                .invalidLength, at: start + 4, "UDP length \(length) at offset \(start + 4): expected at least 8")
        }
        guard length <= available else {
            throw .truncated("UDP datagram", at: start, needed: length, available: available)
        }
        guard length == available else {
            throw FrameError(
                .invalidLength, at: start + 4,
                "UDP length \(length) at offset \(start + 4): expected \(available) (the IP payload length)")
        }
        return UDPDatagram(
            sourcePort: readU16(bytes, start),
            destinationPort: readU16(bytes, start + 2),
            checksum: readU16(bytes, start + 6),
            payload: copyBytes(bytes, start + 8, end)
        )
    }

    func write(to sink: inout some ByteSink) {
        sink.write(sourcePort)
        sink.write(destinationPort)
        sink.write(UInt16(truncatingIfNeeded: length))
        sink.write(checksum)
        sink.write(payload)
    }
}
