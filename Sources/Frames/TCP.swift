/// A TCP segment (RFC 9293): header fields, options and payload. The data offset is derived from the options.
public struct TCPSegment: Hashable, Sendable {
    /// The nine control bits, plus the three reserved bits before them (kept so that frames round-trip).
    public struct Flags: OptionSet, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: UInt16

        public init(rawValue: UInt16) { self.rawValue = rawValue & 0x0FFF }

        public static let fin = Flags(rawValue: 0x001)
        public static let syn = Flags(rawValue: 0x002)
        public static let rst = Flags(rawValue: 0x004)
        public static let psh = Flags(rawValue: 0x008)
        public static let ack = Flags(rawValue: 0x010)
        public static let urg = Flags(rawValue: 0x020)
        public static let ece = Flags(rawValue: 0x040)
        public static let cwr = Flags(rawValue: 0x080)
        /// The ECN nonce bit (RFC 3540, historic).
        public static let ns = Flags(rawValue: 0x100)

        public var description: String {
            let names: [(Flags, String)] = [
                (.ns, "NS"), (.cwr, "CWR"), (.ece, "ECE"), (.urg, "URG"), (.ack, "ACK"), (.psh, "PSH"),
                (.rst, "RST"), (.syn, "SYN"), (.fin, "FIN"),
            ]
            var parts = names.filter { contains($0.0) }.map(\.1)
            if rawValue & 0x0E00 != 0 { parts.append("reserved \(hex(rawValue & 0x0E00, digits: 3))") }
            return "[" + parts.joined(separator: ",") + "]"
        }
    }

    public var sourcePort: UInt16
    public var destinationPort: UInt16
    public var sequenceNumber: UInt32
    public var acknowledgmentNumber: UInt32
    public var flags: Flags
    public var window: UInt16
    /// The checksum as stored; verify it through the enclosing packet (`transportChecksumIsValid`).
    public var checksum: UInt16
    public var urgentPointer: UInt16
    /// Option bytes. When building, they are padded with zeros to a multiple of four and cut at 40 bytes.
    public var options: [UInt8]
    public var payload: [UInt8]

    public init(
        sourcePort: UInt16,
        destinationPort: UInt16,
        sequenceNumber: UInt32 = 0,
        acknowledgmentNumber: UInt32 = 0,
        flags: Flags,
        window: UInt16 = 64240,
        checksum: UInt16 = 0,
        urgentPointer: UInt16 = 0,
        options: [UInt8] = [],
        payload: [UInt8] = []
    ) {
        self.sourcePort = sourcePort
        self.destinationPort = destinationPort
        self.sequenceNumber = sequenceNumber
        self.acknowledgmentNumber = acknowledgmentNumber
        self.flags = flags
        self.window = window
        self.checksum = checksum
        self.urgentPointer = urgentPointer
        self.options = options
        self.payload = payload
    }

    /// Decodes a whole segment; every byte after the header is payload.
    public init(parsing bytes: [UInt8]) throws(FrameError) {
        self = try TCPSegment.parse(bytes, from: 0, to: bytes.count)
    }

    /// The header length in bytes (data offset × 4).
    public var headerLength: Int { 20 + min(40, (options.count + 3) & ~3) }

    /// Header plus payload.
    public var length: Int { headerLength + payload.count }

    static func parse(_ bytes: [UInt8], from start: Int, to end: Int) throws(FrameError) -> TCPSegment {
        let available = end - start
        guard available >= 20 else {
            throw .truncated("TCP header", at: start, needed: 20, available: available)
        }
        let offsetWord = readU16(bytes, start + 12)
        let words = Int(offsetWord >> 12)
        guard words >= 5 else {
            throw FrameError(
                .invalidLength, at: start + 12,
                "TCP data offset \(words) words at offset \(start + 12): expected at least 5")
        }
        let headerLength = words * 4
        guard headerLength <= available else {
            throw .truncated("TCP header with options", at: start, needed: headerLength, available: available)
        }
        return TCPSegment(
            sourcePort: readU16(bytes, start),
            destinationPort: readU16(bytes, start + 2),
            sequenceNumber: readU32(bytes, start + 4),
            acknowledgmentNumber: readU32(bytes, start + 8),
            flags: Flags(rawValue: offsetWord),
            window: readU16(bytes, start + 14),
            checksum: readU16(bytes, start + 16),
            urgentPointer: readU16(bytes, start + 18),
            options: copyBytes(bytes, start + 20, start + headerLength),
            payload: copyBytes(bytes, start + headerLength, end)
        )
    }

    func write(to sink: inout some ByteSink) {
        let length = headerLength
        sink.write(sourcePort)
        sink.write(destinationPort)
        sink.write(sequenceNumber)
        sink.write(acknowledgmentNumber)
        sink.write(UInt16(length / 4) << 12 | flags.rawValue & 0x0FFF)
        sink.write(window)
        sink.write(checksum)
        sink.write(urgentPointer)
        sink.writeOptions(options, length: length - 20)
        sink.write(payload)
    }
}
