public import NetworkAddresses

/// The limits and policies of the core. Every value has a default that serves a home network.
public struct CoreConfiguration: Hashable, Sendable {
    /// Apple's sleep proxy grants at most 24 hours (PROTOCOL.md section 2.6); so do we, and never more.
    public static let leaseCeiling: UInt32 = 86_400

    /// The longest lease granted, in seconds; requests are clamped to it. At most `leaseCeiling`.
    public var maximumLease: UInt32 {
        didSet { maximumLease = min(max(maximumLease, 1), Self.leaseCeiling) }
    }
    /// Records one owner may hold. A Mac with every sharing service on registers well under a hundred.
    public var maximumRecordsPerOwner: Int
    /// Records all owners together may hold. Apple's limit is 10,000 ("400 machines × 25 records").
    public var maximumRecordsTotal: Int

    public init(maximumLease: UInt32 = 86_400, maximumRecordsPerOwner: Int = 1_000, maximumRecordsTotal: Int = 10_000) {
        self.maximumLease = min(max(maximumLease, 1), Self.leaseCeiling)
        self.maximumRecordsPerOwner = maximumRecordsPerOwner
        self.maximumRecordsTotal = maximumRecordsTotal
    }
}

/// What the core knows of an interface it serves: its addresses and their prefixes, to decide what is on-link.
public struct Link: Hashable, Sendable {
    public struct Prefix: Hashable, Sendable, CustomStringConvertible {
        public var address: IPAddress
        public var length: Int

        public init(address: IPAddress, length: Int) {
            self.address = address
            self.length = length
        }

        public var description: String { "\(address)/\(length)" }
    }

    public var name: InterfaceName
    public var macAddress: MACAddress
    public var prefixes: [Prefix]

    public init(name: InterfaceName, macAddress: MACAddress, prefixes: [Prefix]) {
        self.name = name
        self.macAddress = macAddress
        self.prefixes = prefixes
    }

    /// Whether `address` is a neighbour on this link: inside one of its prefixes, or link-local (IPv6 `fe80::/10`,
    /// which arrives scoped to this interface, and IPv4 `169.254/16`).
    public func isOnLink(_ address: IPAddress) -> Bool {
        switch address {
        case .v6(let v6) where v6.isLinkLocal: return true
        case .v4(let v4) where v4.isLinkLocal: return true
        default: return prefixes.contains { address.sharesPrefix(with: $0.address, length: $0.length) }
        }
    }
}
