/// An IPv4 or IPv6 address.
public enum IPAddress: Hashable, Sendable, Comparable {
    case v4(IPv4Address)
    case v6(IPv6Address)

    /// Parses IPv4 dotted-quad or IPv6 text (no zone suffix).
    public init?(_ text: some StringProtocol) {
        if let v4 = IPv4Address(text) {
            self = .v4(v4)
        } else if let v6 = IPv6Address(text) {
            self = .v6(v6)
        } else {
            return nil
        }
    }

    /// Four or sixteen bytes in wire order.
    public init?(bytes: [UInt8]) {
        switch bytes.count {
        case 4: self = .v4(IPv4Address(bytes: bytes)!)
        case 16: self = .v6(IPv6Address(bytes: bytes)!)
        default: return nil
        }
    }

    public var bytes: [UInt8] {
        switch self {
        case .v4(let address): address.bytes
        case .v6(let address): address.bytes
        }
    }

    /// True when `self` and `other` agree in their first `prefixLength` bits (and are of the same family).
    public func sharesPrefix(with other: IPAddress, length prefixLength: Int) -> Bool {
        let a = bytes
        let b = other.bytes
        guard a.count == b.count, prefixLength >= 0, prefixLength <= a.count * 8 else { return false }
        let whole = prefixLength / 8
        if a[0..<whole] != b[0..<whole] { return false }
        let rest = prefixLength % 8
        guard rest > 0 else { return true }
        let mask = UInt8(0xFF) << UInt8(8 - rest)
        return a[whole] & mask == b[whole] & mask
    }
}

extension IPAddress: CustomStringConvertible {
    public var description: String {
        switch self {
        case .v4(let address): address.description
        case .v6(let address): address.description
        }
    }
}
