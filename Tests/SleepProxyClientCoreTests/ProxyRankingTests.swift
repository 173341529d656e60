import DNSWire
import SleepProxyClientCore
import Testing

/// Which proxy a client picks, as a Mac does (mDNS.c `FindSPSInCache`, `ReorderSPSByFeature`).
@Suite struct ProxyRankingTests {
    static func proxy(_ label: String) -> DiscoveredProxy {
        DiscoveredProxy(instance: try! DNSName(labels: [label, "_sleep-proxy", "_udp", "local"]))
    }

    static func names(_ proxies: [DiscoveredProxy]) -> [String] {
        proxies.map { String(decoding: $0.instance.labels[0], as: UTF8.self) }
    }

    @Test(
        arguments: [
            ("20-30-50-73.1 homeserver", 203_050, 1),
            ("70-35-60-63.1 Apple TV", 703_560, 1),
            ("50-34-10-70.1 Backup", 503_410, 1),
            ("20-30-50-73 plain", 203_050, 0),
            ("20-30-50-73.0 zero", 203_050, 0),
            // The prototype every unknown Mac model advertises, and names that are not a proxy's.
            ("80-99-99-99 Mac", ProxyRanking.unusable, 0),
            ("10-99-99-99.1 Mac", ProxyRanking.unusable, 1),
            ("2x-30-50-73 odd", ProxyRanking.unusable, 0),
            ("1234", ProxyRanking.unusable, 0),
            ("My printer", ProxyRanking.unusable, 0),
        ] as [(String, Int, Int)])
    func metricAndFeaturesComeFromTheName(_ label: String, _ metric: Int, _ features: Int) {
        let proxy = Self.proxy(label)
        #expect(proxy.metric == metric)
        #expect(proxy.features == features)
    }

    @Test func theLowestMetricsAreKeptThreeAtMost() {
        let seen = ["50-34-10-70 d", "40-30-50-73 c", "20-30-50-73 a", "30-30-50-73 b", "60-30-50-73 e"].map(
            Self.proxy)
        #expect(Self.names(ProxyRanking.choose(seen)) == ["20-30-50-73 a", "30-30-50-73 b", "40-30-50-73 c"])
    }

    /// Total power (DD) is not part of the metric: proxies that differ only there tie, and the one seen first wins.
    @Test func aTieGoesToTheOneSeenFirst() {
        let seen = ["20-30-50-90 later", "20-30-50-10 first"].map(Self.proxy)
        #expect(Self.names(ProxyRanking.choose(seen)) == ["20-30-50-90 later", "20-30-50-10 first"])
        #expect(Self.names(ProxyRanking.choose(seen.reversed())) == ["20-30-50-10 first", "20-30-50-90 later"])
    }

    /// Any proxy offering keepalive goes before any that does not, whatever the numbers, by Apple's three swaps,
    /// which do not keep the order of the others.
    @Test func aFeatureDigitGoesFirstByApplesSwaps() {
        let seen = ["20-30-50-73 a", "30-30-50-73 b", "70-35-60-63.1 Apple TV"].map(Self.proxy)
        #expect(Self.names(ProxyRanking.choose(seen)) == ["70-35-60-63.1 Apple TV", "30-30-50-73 b", "20-30-50-73 a"])
        let two = ["20-30-50-73.1 ours", "70-35-60-63.1 Apple TV", "10-10-10-10 bare"].map(Self.proxy)
        #expect(
            Self.names(ProxyRanking.choose(two)) == [
                "20-30-50-73.1 ours", "70-35-60-63.1 Apple TV", "10-10-10-10 bare",
            ])
    }

    @Test func unusableNamesAndOurOwnAreNeverChosen() {
        let own = Self.proxy("10-10-10-10.1 me")
        let seen = [Self.proxy("80-99-99-99 Mac"), Self.proxy("printer"), own, Self.proxy("70-35-60-63.1 Apple TV")]
        #expect(Self.names(ProxyRanking.choose(seen, excluding: own.instance)) == ["70-35-60-63.1 Apple TV"])
        #expect(ProxyRanking.choose([Self.proxy("80-99-99-99 Mac")]).isEmpty)
    }

    /// An administrator's choices: preferred proxies first, in the config's order, named by their whole label or
    /// the part after the numbers in any case; excluded ones never, however good; three at most.
    @Test func preferredProxiesGoFirstAndExcludedOnesNever() {
        let seen = ["20-30-50-73.1 homeserver", "70-35-60-63.1 Apple TV", "10-10-10-10 Kitchen", "30-30-50-73 nas"]
            .map(Self.proxy)
        #expect(
            Self.names(ProxyRanking.choose(seen, prefer: ["NAS", "missing"], exclude: ["10-10-10-10 kitchen"])) == [
                "30-30-50-73 nas", "20-30-50-73.1 homeserver", "70-35-60-63.1 Apple TV",
            ])
        #expect(
            Self.names(ProxyRanking.choose(seen, prefer: [], exclude: ["homeserver", "apple tv"])) == [
                "10-10-10-10 Kitchen", "30-30-50-73 nas",
            ])
        #expect(Self.names(ProxyRanking.choose(seen, prefer: [], exclude: [])) == Self.names(ProxyRanking.choose(seen)))
        #expect(!Self.proxy("20-30-50-73.1 homeserver").isNamed("home"))
    }

    /// `status` lists the proxies in the order `register` tries them, then the others, then the excluded ones,
    /// whatever order they were heard in.
    @Test func statusListsTheProxiesInTheOrderTheyAreTried() {
        let seen = [
            "70-35-60-63 Apple TV", "10-10-10-10 Kitchen", "80-99-99-99 Mac", "50-30-50-73 nas", "60-30-50-73 old",
            "30-30-50-73 attic", "20-30-50-73.1 homeserver",
        ].map(Self.proxy)
        let listed = ProxyRanking.listed(seen, prefer: ["old"], exclude: ["kitchen"])
        #expect(
            Self.names(listed.map(\.proxy)) == [
                "60-30-50-73 old", "20-30-50-73.1 homeserver", "30-30-50-73 attic", "50-30-50-73 nas",
                "70-35-60-63 Apple TV", "80-99-99-99 Mac", "10-10-10-10 Kitchen",
            ])
        #expect(listed.map(\.choice) == [1, 2, 3, nil, nil, nil, nil])
        #expect(listed.map(\.excluded) == [false, false, false, false, false, false, true])
        let plain = ProxyRanking.listed(seen, prefer: [], exclude: [])
        #expect(Self.names(plain.prefix(3).map(\.proxy)) == Self.names(ProxyRanking.choose(seen)))
    }
}
