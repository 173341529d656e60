/// Why a frame could not be decoded (or a frame could not be built).
///
/// The description names the layer and field, the byte offset from the start of the parsed buffer and what was
/// expected, for example `IPv4 header length 4 words at offset 14: expected at least 5`.
public struct FrameError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure, for callers that branch on it. New kinds may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Backing: Hashable, Sendable {
            case truncated
            case invalidLength
            case invalidVersion
            case unsupportedAddressFormat
            case invalidOption
            case invalidMagicPacket
            case checksumMismatch
            case invalidArgument
        }

        private var backing: Backing

        private init(_ backing: Backing) { self.backing = backing }

        /// The buffer ends before the layer or field does.
        public static let truncated = Code(.truncated)
        /// A length field is inconsistent with the header or with the bytes that follow.
        public static let invalidLength = Code(.invalidLength)
        /// The IP version nibble does not match the EtherType.
        public static let invalidVersion = Code(.invalidVersion)
        /// ARP for something other than Ethernet hardware and IPv4 protocol addresses.
        public static let unsupportedAddressFormat = Code(.unsupportedAddressFormat)
        /// A malformed Neighbour Discovery option (for example length 0).
        public static let invalidOption = Code(.invalidOption)
        /// A Wake-on-LAN payload without the synchronisation stream or the sixteen address repetitions.
        public static let invalidMagicPacket = Code(.invalidMagicPacket)
        /// A checksum the caller asked to verify does not match.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// A builder was given a value it refuses to put on the wire.
        public static let invalidArgument = Code(.invalidArgument)

        public var description: String {
            switch backing {
            case .truncated: "truncated"
            case .invalidLength: "invalid length"
            case .invalidVersion: "invalid version"
            case .unsupportedAddressFormat: "unsupported address format"
            case .invalidOption: "invalid option"
            case .invalidMagicPacket: "invalid magic packet"
            case .checksumMismatch: "checksum mismatch"
            case .invalidArgument: "invalid argument"
            }
        }
    }

    /// What went wrong.
    public var code: Code
    /// The byte offset of the offending field from the start of the parsed buffer.
    public var offset: Int
    /// A sentence naming the layer, the field, the offset and what was expected.
    public var description: String

    init(_ code: Code, at offset: Int, _ description: String) {
        self.code = code
        self.offset = offset
        self.description = description
    }

    /// `what` (a layer or field) starting at `offset` needs `needed` bytes but only `available` remain.
    static func truncated(_ what: String, at offset: Int, needed: Int, available: Int) -> FrameError {
        FrameError(
            .truncated,
            at: offset,
            "\(what) at offset \(offset) truncated: expected \(needed) bytes, \(max(available, 0)) available"
        )
    }
}

func hex(_ value: some BinaryInteger, digits: Int = 4) -> String {
    let text = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: max(0, digits - text.count)) + text
}
