public import NetworkAddresses

extension Link.Prefix: Comparable {
    /// One address alone (a /32 or /128).
    public init(host address: IPAddress) {
        switch address {
        case .v4: self.init(address: address, length: 32)
        case .v6: self.init(address: address, length: 128)
        }
    }

    /// Whether the block is one address.
    public var isHost: Bool {
        switch address {
        case .v4: length == 32
        case .v6: length == 128
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.address == rhs.address ? lhs.length < rhs.length : lhs.address < rhs.address
    }
}

/// The addresses held on one interface as the capture watches them: listed one by one while few, folded into the
/// narrowest prefixes that keep the list short when many (`prefixes(limit:)`). For that, it keeps how many held
/// addresses fall in each prefix at every length it may fold to, so that an address that comes or goes costs a
/// few dictionary updates however many are held, and the list is worked out without going through them.
public struct WatchedPrefixes: Sendable, Equatable {
    /// The lengths an IPv4 or IPv6 address may be folded to, the narrowest first.
    static let v4Lengths = [32, 28, 24, 20, 16, 8, 0]
    static let v6Lengths = [128, 120, 112, 104, 96, 80, 64, 48, 0]

    /// For each of `v4Lengths`, the addresses held under each prefix of that length.
    private var v4: [[UInt32: Int]] = Array(repeating: [:], count: v4Lengths.count)
    private var v6: [[IPv6Address: Int]] = Array(repeating: [:], count: v6Lengths.count)
    /// Addresses held, of both families.
    public private(set) var count = 0

    public init() {}

    public init(_ addresses: some Sequence<IPAddress>) {
        for address in addresses { add(address) }
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func add(_ address: IPAddress) {
        change(address, by: 1)
    }

    /// Removes one address added before (the caller keeps track: removing one never added would take it off
    /// the prefixes it shares with others).
    public mutating func remove(_ address: IPAddress) {
        assert(count > 0, "an address removed that was never added")
        change(address, by: -1)
    }

    private mutating func change(_ address: IPAddress, by step: Int) {
        count += step
        switch address {
        case .v4(let v4Address):
            for (index, length) in Self.v4Lengths.enumerated() {
                let prefix = Self.mask(v4Address.value, length)
                let left = (v4[index][prefix] ?? 0) + step
                v4[index][prefix] = left > 0 ? left : nil
            }
        case .v6(let v6Address):
            for (index, length) in Self.v6Lengths.enumerated() {
                let prefix = Self.mask(v6Address, length)
                let left = (v6[index][prefix] ?? 0) + step
                v6[index][prefix] = left > 0 ? left : nil
            }
        }
    }

    /// The prefixes to watch, at most `limit` in all: for each family the narrowest length at which its addresses
    /// fall in no more than `limit / 2` prefixes (all of a family's addresses fold into one prefix at worst).
    public func prefixes(limit: Int) -> [Link.Prefix] {
        var result: [Link.Prefix] = []
        if let index = v4.indices.first(where: { v4[$0].count <= limit / 2 || Self.v4Lengths[$0] == 0 }),
            !v4[index].isEmpty
        {
            result += v4[index].keys.sorted().map {
                Link.Prefix(address: .v4(IPv4Address(value: $0)), length: Self.v4Lengths[index])
            }
        }
        if let index = v6.indices.first(where: { v6[$0].count <= limit / 2 || Self.v6Lengths[$0] == 0 }),
            !v6[index].isEmpty
        {
            result += v6[index].keys.sorted().map { Link.Prefix(address: .v6($0), length: Self.v6Lengths[index]) }
        }
        return result
    }

    static func mask(_ value: UInt32, _ length: Int) -> UInt32 {
        length == 0 ? 0 : value & (UInt32.max << UInt32(32 - length))
    }

    static func mask(_ address: IPv6Address, _ length: Int) -> IPv6Address {
        if length >= 64 {
            let mask = length == 128 ? UInt64.max : UInt64.max << UInt64(128 - length)
            return IPv6Address(high: address.high, low: address.low & mask)
        }
        let mask = length == 0 ? 0 : UInt64.max << UInt64(64 - length)
        return IPv6Address(high: address.high & mask, low: 0)
    }
}
