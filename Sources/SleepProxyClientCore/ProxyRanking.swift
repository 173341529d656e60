public import DNSWire

/// A sleep proxy as a client finds it: an instance of `_sleep-proxy._udp` named by a browse answer, with the
/// numbers its name advertises (PROTOCOL.md section 1.1).
public struct DiscoveredProxy: Hashable, Sendable {
    /// The instance, `20-30-50-73.1 homeserver._sleep-proxy._udp.local.`.
    public var instance: DNSName
    /// AA·10000 + BB·100 + CC of `AA-BB-CC-DD[.F]`, lower is better; ``ProxyRanking/unusable`` for a name that is
    /// not a proxy's or is the prototype `xx-99-99-99`.
    public let metric: Int
    /// The feature digit `F` (1: TCP keepalive offload); 0 when the name has none.
    public let features: Int

    public init(instance: DNSName) {
        self.instance = instance
        (metric, features) = ProxyRanking.numbers(of: instance)
    }

    /// The instance's first label, `20-30-50-73.1 homeserver`.
    public var label: String { instance.label(at: 0).map { String(decoding: $0, as: UTF8.self) } ?? "" }

    /// Whether an administrator's `name` means this proxy: its whole label (`20-30-50-73.1 homeserver`) or the
    /// part after its numbers (`homeserver`), in any case.
    public func isNamed(_ name: String) -> Bool {
        let wanted = name.lowercased()
        let label = label.lowercased()
        return wanted == label || label.split(separator: " ", maxSplits: 1).dropFirst().first.map(String.init) == wanted
    }
}

/// How a Mac chooses among the proxies it has seen (mDNS.c `FindSPSInCache1`, `FindSPSInCache`,
/// `ReorderSPSByFeature`; mDNSEmbeddedAPI.h `SPSMetric`, `ValidSPSName`, `PrototypeSPSName`, `SPSFeatures`),
/// followed to the byte, so that a Linux host picks the proxy a Mac on the same LAN would pick.
public enum ProxyRanking {
    /// The metric of a name that is not a usable proxy's; such a proxy is never chosen.
    public static let unusable = 1_000_000
    /// How many proxies a client keeps, and tries one after the other.
    public static let kept = 3

    /// The metric and feature digit of `instance`, read from its wire form as Apple's macros read it: the first
    /// label's length byte, then its bytes (`X[1]`, `X[2]` are A and A of `AA`, and so on). Bytes past the end of
    /// the name count as zero.
    static func numbers(of instance: DNSName) -> (metric: Int, features: Int) {
        let x = instance.wire
        func at(_ index: Int) -> Int { index < x.count ? Int(x[index]) : 0 }
        func isDigit(_ index: Int) -> Bool { (0x30...0x39).contains(at(index)) }
        func value(_ index: Int) -> Int { at(index) - 0x30 }
        let dash = 0x2D
        let nine = 0x39
        let valid = at(0) >= 5 && isDigit(1) && isDigit(2) && isDigit(4) && isDigit(5)
        let prototype =
            at(0) >= 11 && at(3) == dash && at(4) == nine && at(5) == nine && at(6) == dash && at(7) == nine
            && at(8) == nine && at(9) == dash && at(10) == nine && at(11) == nine
        let metric =
            !valid || prototype
            ? unusable
            : value(1) * 100_000 + value(2) * 10_000 + value(4) * 1_000 + value(5) * 100 + value(7) * 10 + value(8)
        let features = at(0) >= 13 && at(12) == 0x2E ? value(13) : 0
        return (metric, features)
    }

    /// The proxies to try, in order: the (up to) three with the lowest metrics, where the one seen first wins a
    /// tie and an unusable name is never taken; then any with a feature digit moved ahead of those without, by
    /// the three swaps `ReorderSPSByFeature` makes (which is not a stable sort: of `[a, b, F]` it makes
    /// `[F, b, a]`). `own` is the client's own advertisement, if it has one, and is left out.
    public static func choose(_ seen: [DiscoveredProxy], excluding own: DNSName? = nil) -> [DiscoveredProxy] {
        var remaining = seen.filter { proxy in own.map { !proxy.instance.caseInsensitiveEquals($0) } ?? true }
        var chosen: [DiscoveredProxy] = []
        while chosen.count < kept {
            var best: Int?
            for index in remaining.indices
            where remaining[index].metric < (best.map { remaining[$0].metric } ?? unusable) {
                best = index
            }
            guard let best else { break }
            chosen.append(remaining.remove(at: best))
        }
        for (first, second) in [(0, 1), (0, 2), (1, 2)] where second < chosen.count {
            let a = chosen[first]
            let b = chosen[second]
            if a.features == 0, b.features != 0, b.metric >= a.metric { chosen.swapAt(first, second) }
        }
        return chosen
    }

    /// A proxy seen, as `status` lists it.
    public struct Listed: Hashable, Sendable {
        public var proxy: DiscoveredProxy
        /// 1 for the proxy tried first, 2 and 3 for the next ones; nil for one that would not be tried.
        public var choice: Int?
        /// Whether the config's `exclude` names it.
        public var excluded: Bool
    }

    /// Every proxy seen, in the order `status` lists them: those ``choose(_:prefer:exclude:)`` picks, in the order
    /// they would be tried; then the others the config allows, lowest metric first; then those it excludes, lowest
    /// metric first. The one seen first goes first among equals.
    public static func listed(_ seen: [DiscoveredProxy], prefer: [String], exclude: [String]) -> [Listed] {
        let chosen = choose(seen, prefer: prefer, exclude: exclude)
        let listed = seen.map { proxy in
            Listed(
                proxy: proxy, choice: chosen.firstIndex(of: proxy).map { $0 + 1 },
                excluded: exclude.contains(where: proxy.isNamed))
        }
        let tried = chosen.compactMap { proxy in listed.first { $0.proxy == proxy } }
        let others = listed.enumerated().filter { $0.element.choice == nil }.sorted { a, b in
            (a.element.excluded ? 1 : 0, a.element.proxy.metric, a.offset)
                < (b.element.excluded ? 1 : 0, b.element.proxy.metric, b.offset)
        }
        return tried + others.map(\.element)
    }

    /// The proxies to try with an administrator's choices: those named in `prefer` first, in that order, then the
    /// best of the others as ``choose(_:excluding:)`` ranks them; none named in `exclude`; three at most.
    public static func choose(_ seen: [DiscoveredProxy], prefer: [String], exclude: [String]) -> [DiscoveredProxy] {
        let allowed = seen.filter { proxy in !exclude.contains(where: proxy.isNamed) }
        var preferred: [DiscoveredProxy] = []
        for name in prefer {
            if let proxy = allowed.first(where: { $0.isNamed(name) }), !preferred.contains(proxy) {
                preferred.append(proxy)
            }
        }
        let others = choose(allowed.filter { !preferred.contains($0) })
        return Array((preferred + others).prefix(kept))
    }
}
