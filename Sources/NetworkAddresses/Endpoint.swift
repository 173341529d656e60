/// An address and port (a UDP source or destination).
public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    public var address: IPAddress
    public var port: UInt16

    public init(address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }

    public var description: String {
        switch address {
        case .v4: "\(address):\(port)"
        case .v6: "[\(address)]:\(port)"
        }
    }
}

/// Where multicast DNS is spoken (RFC 6762): its port and its two groups. The responder's rules (TTL caps,
/// rate limits) are the core's.
public enum MulticastDNS {
    public static let port: UInt16 = 5353
    public static let ipv4Group = Endpoint(address: .v4(.mdnsGroup), port: port)
    public static let ipv6Group = Endpoint(address: .v6(.mdnsGroup), port: port)

    /// The group of `address`'s family: where a multicast answer to a querier at `address` goes.
    public static func group(for address: IPAddress) -> Endpoint {
        switch address {
        case .v4: ipv4Group
        case .v6: ipv6Group
        }
    }
}
