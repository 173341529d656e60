/// An error decoding or encoding a DNS message.
///
/// Every error names the field that failed, the byte offset where it was found (for decoding) and what was
/// expected there, so that a log line is enough to understand a refused packet.
public struct DNSWireError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure, for tests and callers that branch on it.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: Hashable, Sendable {
            case truncated
            case labelTooLong
            case nameTooLong
            case badLabelType
            case pointerLoop
            case forwardPointer
            case pointerIntoHeader
            case badRDataLength
            case badRData
            case badOptionLength
            case trailingBytes
            case messageTooLarge
            case countTooLarge
        }
        private let code: Code

        /// The data ended before the field did.
        public static let truncated = Kind(code: .truncated)
        /// A label longer than 63 bytes.
        public static let labelTooLong = Kind(code: .labelTooLong)
        /// A name longer than 255 bytes in wire form.
        public static let nameTooLong = Kind(code: .nameTooLong)
        /// A label length byte with the reserved top bits `01` or `10`.
        public static let badLabelType = Kind(code: .badLabelType)
        /// A compression pointer that does not point strictly backwards of the previous one.
        public static let pointerLoop = Kind(code: .pointerLoop)
        /// A compression pointer to a position at or after the pointer itself.
        public static let forwardPointer = Kind(code: .forwardPointer)
        /// A compression pointer into the 12-byte header.
        public static let pointerIntoHeader = Kind(code: .pointerIntoHeader)
        /// RDATA whose length does not fit its type (an A record of 5 bytes, an RDLENGTH past the end).
        public static let badRDataLength = Kind(code: .badRDataLength)
        /// RDATA whose content is not valid for its type (an NSEC bitmap with a bad window).
        public static let badRData = Kind(code: .badRData)
        /// An EDNS0 option with a length its code does not allow (OWNER of 10 bytes, Lease of 6).
        public static let badOptionLength = Kind(code: .badOptionLength)
        /// Bytes left over after the last record the counts announce.
        public static let trailingBytes = Kind(code: .trailingBytes)
        /// An encoded message or RDATA larger than 65,535 bytes.
        public static let messageTooLarge = Kind(code: .messageTooLarge)
        /// More than 65,535 entries in one section.
        public static let countTooLarge = Kind(code: .countTooLarge)

        public var description: String {
            switch code {
            case .truncated: "truncated"
            case .labelTooLong: "label too long"
            case .nameTooLong: "name too long"
            case .badLabelType: "bad label type"
            case .pointerLoop: "compression pointer loop"
            case .forwardPointer: "forward compression pointer"
            case .pointerIntoHeader: "compression pointer into header"
            case .badRDataLength: "bad RDATA length"
            case .badRData: "bad RDATA"
            case .badOptionLength: "bad option length"
            case .trailingBytes: "trailing bytes"
            case .messageTooLarge: "too large"
            case .countTooLarge: "count too large"
            }
        }
    }

    public let kind: Kind
    /// The field being read or written, e.g. `answer[2].rdata(SRV).target`.
    public let field: String
    /// The byte offset in the message where the problem was found (-1 when encoding).
    public let offset: Int
    /// What was expected there.
    public let expected: String

    public init(_ kind: Kind, field: String, offset: Int, expected: String) {
        self.kind = kind
        self.field = field
        self.offset = offset
        self.expected = expected
    }

    public var description: String {
        if offset < 0 {
            return "DNS encode: \(field): \(kind): expected \(expected)"
        }
        return "DNS decode: \(field) at offset \(offset): \(kind): expected \(expected)"
    }

    /// A copy with the field name prefixed by its context (`answer[3].` + `name`).
    func within(_ context: String) -> DNSWireError {
        DNSWireError(kind, field: field.isEmpty ? context : "\(context).\(field)", offset: offset, expected: expected)
    }
}
