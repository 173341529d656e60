/// An IPv4 address, stored in network byte order semantics as a 32-bit value (`a.b.c.d` = `a << 24 | ...`).
public struct IPv4Address: Hashable, Sendable, Comparable {
    public var value: UInt32

    public init(value: UInt32) { self.value = value }

    public init(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        value = UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d)
    }

    /// Reads four bytes in wire order; nil unless there are exactly four.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 4 else { return nil }
        value = bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Parses dotted-quad text (`10.77.0.1`); no leading zeros beyond a single `0`, no shortcuts.
    /// One pass over the UTF-8 bytes: the lease store reads one address per held host at start-up.
    public init?(_ text: some StringProtocol) {
        var result: UInt32 = 0
        var dots = 0
        var octet: UInt32 = 0
        var digits = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, dots < 3 else { return nil }
                result = result << 8 | octet
                dots += 1
                octet = 0
                digits = 0
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                // At most three digits, no leading zero, at most 255.
                guard digits < 3, digits == 0 || octet != 0 else { return nil }
                octet = octet * 10 + UInt32(byte - UInt8(ascii: "0"))
                guard octet <= 255 else { return nil }
                digits += 1
            } else {
                return nil
            }
        }
        guard dots == 3, digits > 0 else { return nil }
        value = result << 8 | octet
    }

    public static let any = IPv4Address(value: 0)
    public static let broadcast = IPv4Address(value: 0xFFFF_FFFF)
    public static let mdnsGroup = IPv4Address(224, 0, 0, 251)

    /// The four bytes in wire order.
    public var bytes: [UInt8] {
        [
            UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
            UInt8(truncatingIfNeeded: value),
        ]
    }

    public var isMulticast: Bool { value >> 28 == 0xE }
    public var isLinkLocal: Bool { value >> 16 == 0xA9FE }
    public var isUnspecified: Bool { value == 0 }

    public static func < (lhs: IPv4Address, rhs: IPv4Address) -> Bool { lhs.value < rhs.value }
}

extension IPv4Address: CustomStringConvertible {
    public var description: String {
        bytes.map { String($0) }.joined(separator: ".")
    }
}
