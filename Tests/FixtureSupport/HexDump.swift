public import Foundation

/// Reads Wireshark "hex dump" text (`0000  de ad be ef ...`), the layout `text2pcap` accepts.
///
/// Lines starting with `#` are comments. A packet starts where the offset returns to `0000`. Text after the hex
/// bytes of a line (an ASCII column) is ignored: a byte field is exactly two hex digits.
public enum HexDump {
    public struct ReadError: Error, CustomStringConvertible {
        public var description: String
    }

    public static func packets(contentsOf url: URL) throws -> [[UInt8]] {
        try packets(text: String(decoding: Data(contentsOf: url), as: UTF8.self))
    }

    public static func packets(text: String) throws -> [[UInt8]] {
        var packets: [[UInt8]] = []
        var current: [UInt8] = []
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let offsetField = fields.first, offsetField.count >= 4, let offset = Int(offsetField, radix: 16)
            else { throw ReadError(description: "hexdump: line \(number + 1) has no offset") }
            if offset == 0, !current.isEmpty {
                packets.append(current)
                current = []
            }
            guard offset == current.count else {
                throw ReadError(
                    description: "hexdump: line \(number + 1) offset \(offset), expected \(current.count)")
            }
            for field in fields.dropFirst() {
                guard field.count == 2, let byte = UInt8(field, radix: 16) else { break }
                current.append(byte)
            }
        }
        if !current.isEmpty { packets.append(current) }
        return packets
    }

    /// Parses a plain string of hex digits, ignoring whitespace (for inline test vectors).
    public static func bytes(_ hex: String) -> [UInt8] {
        let digits = hex.filter { !$0.isWhitespace }
        precondition(digits.count % 2 == 0, "odd number of hex digits")
        var out: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { preconditionFailure("bad hex: \(hex)") }
            out.append(byte)
            index = next
        }
        return out
    }
}
