/// A 48-bit IEEE 802 MAC address.
public struct MACAddress: Hashable, Sendable, Comparable {
    /// The six bytes, most significant first, as on the wire.
    public var bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)

    public init(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8, _ b3: UInt8, _ b4: UInt8, _ b5: UInt8) {
        bytes = (b0, b1, b2, b3, b4, b5)
    }

    /// Reads six bytes; returns nil when `bytes` does not hold exactly six.
    /// Inlinable, so that it is specialized where it is called (the lease store reads two per held host).
    @inlinable
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 6 else { return nil }
        var i = bytes.startIndex
        func next() -> UInt8 {
            defer { i = bytes.index(after: i) }
            return bytes[i]
        }
        self.init(next(), next(), next(), next(), next(), next())
    }

    /// Parses `aa:bb:cc:dd:ee:ff` (also with `-` separators), either case.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: text.contains("-") ? "-" : ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var values: [UInt8] = []
        for part in parts {
            guard part.count == 2, let value = UInt8(part, radix: 16) else { return nil }
            values.append(value)
        }
        self.init(bytes: values)
    }

    public static let zero = MACAddress(0, 0, 0, 0, 0, 0)
    public static let broadcast = MACAddress(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)

    public var array: [UInt8] { [bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5] }

    public var isZero: Bool { self == .zero }
    public var isBroadcast: Bool { self == .broadcast }
    /// Group bit: the least significant bit of the first byte.
    public var isMulticast: Bool { bytes.0 & 0x01 != 0 }
    public var isLocallyAdministered: Bool { bytes.0 & 0x02 != 0 }

    /// The multicast MAC of an IPv6 multicast group (33:33 + low 32 bits, RFC 2464).
    public init(ipv6Multicast group: IPv6Address) {
        let b = group.bytes
        self.init(0x33, 0x33, b[12], b[13], b[14], b[15])
    }

    public static func == (lhs: MACAddress, rhs: MACAddress) -> Bool {
        lhs.bytes == rhs.bytes
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.0)
        hasher.combine(bytes.1)
        hasher.combine(bytes.2)
        hasher.combine(bytes.3)
        hasher.combine(bytes.4)
        hasher.combine(bytes.5)
    }

    public static func < (lhs: MACAddress, rhs: MACAddress) -> Bool {
        lhs.bytes < rhs.bytes
    }
}

extension MACAddress: CustomStringConvertible {
    /// Lower-case, colon separated: `02:77:00:00:00:01`. Written in place: every wake's log line and event names
    /// a MAC.
    public var description: String {
        let bytes = array
        return String(unsafeUninitializedCapacity: 17) { text in
            func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }
            for (index, byte) in bytes.enumerated() {
                if index > 0 { text[index * 3 - 1] = UInt8(ascii: ":") }
                text[index * 3] = digit(byte >> 4)
                text[index * 3 + 1] = digit(byte & 0x0F)
            }
            return 17
        }
    }
}
