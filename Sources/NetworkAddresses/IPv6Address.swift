/// An IPv6 address as its sixteen bytes in wire order.
public struct IPv6Address: Hashable, Sendable, Comparable {
    /// The 128 bits as two halves, so that the type stays a cheap value without heap storage.
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Reads sixteen bytes in wire order; nil unless there are exactly sixteen.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 16 else { return nil }
        var h: UInt64 = 0
        var l: UInt64 = 0
        for (i, byte) in bytes.enumerated() {
            if i < 8 { h = h << 8 | UInt64(byte) } else { l = l << 8 | UInt64(byte) }
        }
        high = h
        low = l
    }

    /// Parses RFC 4291 text forms: full, `::`-compressed and with a trailing dotted quad.
    /// A zone suffix (`%eth0`) is not accepted here.
    public init?(_ text: some StringProtocol) {
        let s = String(text)
        guard !s.isEmpty, !s.contains("%") else { return nil }
        var groups: [UInt16] = []
        var tailGroups: [UInt16] = []
        let halves = s.components(separatedByString: "::")
        guard halves.count <= 2 else { return nil }
        func parse(_ part: String, allowIPv4: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            var out: [UInt16] = []
            for (i, field) in fields.enumerated() {
                if allowIPv4, i == fields.count - 1, field.contains(".") {
                    guard let v4 = IPv4Address(field) else { return nil }
                    out.append(UInt16(v4.value >> 16))
                    out.append(UInt16(truncatingIfNeeded: v4.value))
                    continue
                }
                guard (1...4).contains(field.count), let v = UInt16(field, radix: 16) else { return nil }
                out.append(v)
            }
            return out
        }
        if halves.count == 2 {
            guard let head = parse(halves[0], allowIPv4: false), let tail = parse(halves[1], allowIPv4: true),
                head.count + tail.count <= 7
            else { return nil }
            groups = head
            tailGroups = tail
            groups += Array(repeating: 0, count: 8 - head.count - tail.count) + tailGroups
        } else {
            guard let all = parse(halves[0], allowIPv4: true), all.count == 8 else { return nil }
            groups = all
        }
        var h: UInt64 = 0
        var l: UInt64 = 0
        for (i, g) in groups.enumerated() {
            if i < 4 { h = h << 16 | UInt64(g) } else { l = l << 16 | UInt64(g) }
        }
        high = h
        low = l
    }

    public static let unspecified = IPv6Address(high: 0, low: 0)
    public static let allNodes = IPv6Address(high: 0xFF02_0000_0000_0000, low: 1)
    public static let mdnsGroup = IPv6Address(high: 0xFF02_0000_0000_0000, low: 0xFB)

    /// The sixteen bytes in wire order.
    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            out[i] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i)))
            out[8 + i] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i)))
        }
        return out
    }

    /// The eight 16-bit groups.
    public var groups: [UInt16] {
        (0..<8).map { i in
            let half = i < 4 ? high : low
            return UInt16(truncatingIfNeeded: half >> (48 - 16 * UInt64(i % 4)))
        }
    }

    public var isUnspecified: Bool { high == 0 && low == 0 }
    public var isMulticast: Bool { high >> 56 == 0xFF }
    public var isLinkLocal: Bool { high >> 54 == 0x3FA }  // fe80::/10
    public var isUniqueLocal: Bool { high >> 57 == 0x7E }  // fc00::/7

    /// The solicited-node multicast group `ff02::1:ffXX:XXXX` of this address (RFC 4291 section 2.7.1).
    public var solicitedNodeGroup: IPv6Address {
        IPv6Address(high: 0xFF02_0000_0000_0000, low: 0x0000_0001_FF00_0000 | (low & 0x00FF_FFFF))
    }

    public static func < (lhs: IPv6Address, rhs: IPv6Address) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}

extension IPv6Address: CustomStringConvertible {
    /// The RFC 5952 canonical text: lower case, leading zeros dropped, the longest run (of at least two) of
    /// zero groups compressed to `::`, the first such run on a tie.
    public var description: String {
        let g = groups
        var bestStart = -1
        var bestLength = 0
        var i = 0
        while i < 8 {
            if g[i] == 0 {
                var j = i
                while j < 8 && g[j] == 0 { j += 1 }
                if j - i > bestLength {
                    bestStart = i
                    bestLength = j - i
                }
                i = j
            } else {
                i += 1
            }
        }
        if bestLength < 2 { bestStart = -1 }
        func text(_ range: Range<Int>) -> String {
            g[range].map { String($0, radix: 16) }.joined(separator: ":")
        }
        if bestStart < 0 { return text(0..<8) }
        return text(0..<bestStart) + "::" + text((bestStart + bestLength)..<8)
    }
}

extension String {
    /// Splits on a multi-character separator without Foundation.
    fileprivate func components(separatedByString separator: String) -> [String] {
        var result: [String] = []
        var current = ""
        var rest = Substring(self)
        while !rest.isEmpty {
            if rest.hasPrefix(separator) {
                result.append(current)
                current = ""
                rest = rest.dropFirst(separator.count)
            } else {
                current.append(rest.removeFirst())
            }
        }
        result.append(current)
        return result
    }
}
