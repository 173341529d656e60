public import Foundation

/// A reader for classic libpcap capture files (the `.pcap` format, not pcapng), used to load test fixtures.
public struct PcapFile: Sendable {
    public struct Record: Sendable {
        public var seconds: UInt32
        public var subseconds: UInt32
        public var originalLength: Int
        public var bytes: [UInt8]
    }

    public struct ReadError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The link type from the file header (1 = Ethernet).
    public var linkType: UInt32
    public var nanosecondResolution: Bool
    public var records: [Record]

    public init(contentsOf url: URL) throws {
        try self.init(bytes: [UInt8](Data(contentsOf: url)))
    }

    public init(bytes: [UInt8]) throws {
        guard bytes.count >= 24 else { throw ReadError(description: "pcap: file shorter than its 24-byte header") }
        let magic = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
        let littleEndian: Bool
        switch magic {
        case 0xA1B2_C3D4: (littleEndian, nanosecondResolution) = (true, false)
        case 0xD4C3_B2A1: (littleEndian, nanosecondResolution) = (false, false)
        case 0xA1B2_3C4D: (littleEndian, nanosecondResolution) = (true, true)
        case 0x4D3C_B2A1: (littleEndian, nanosecondResolution) = (false, true)
        default: throw ReadError(description: "pcap: unknown magic 0x\(String(magic, radix: 16))")
        }
        func u32(_ offset: Int) -> UInt32 {
            let b = bytes[offset..<offset + 4].map(UInt32.init)
            return littleEndian
                ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24
                : b[3] | b[2] << 8 | b[1] << 16 | b[0] << 24
        }
        linkType = u32(20)
        records = []
        var offset = 24
        while offset < bytes.count {
            guard offset + 16 <= bytes.count else {
                throw ReadError(description: "pcap: truncated record header at offset \(offset)")
            }
            let captured = Int(u32(offset + 8))
            let record = Record(
                seconds: u32(offset),
                subseconds: u32(offset + 4),
                originalLength: Int(u32(offset + 12)),
                bytes: []
            )
            offset += 16
            guard offset + captured <= bytes.count else {
                throw ReadError(description: "pcap: record at offset \(offset - 16) claims \(captured) bytes")
            }
            var filled = record
            filled.bytes = Array(bytes[offset..<offset + captured])
            records.append(filled)
            offset += captured
        }
    }
}
