import FixtureSupport
import Frames
import NetworkAddresses
import Testing

/// MLD queries read and reports written, checked byte by byte against RFC 2710 and RFC 3810.
@Suite("Multicast Listener Discovery")
struct MLDTests {
    static let querierMAC = MACAddress(0x02, 0x77, 0, 0, 0, 9)
    static let querier = IPv6Address("fe80::9")!
    static let proxyMAC = MACAddress(0x02, 0x77, 0, 0, 0, 1)
    static let proxy = IPv6Address("fe80::1")!
    static let group = IPv6Address("ff02::1:ff00:1234")!

    static func checksum(source: IPv6Address, destination: IPv6Address, icmp: [UInt8]) -> UInt16 {
        MLDFrames.checksum(source: source, destination: destination, icmp: icmp)
    }

    static func query(
        version2: Bool = true, group: IPv6Address = .unspecified, code: UInt16 = 10_000,
        source: IPv6Address = querier, hopLimit: UInt8 = 1, routerAlert: Bool = true, corrupt: Bool = false
    ) -> [UInt8] {
        MLDFrames.query(
            version2: version2, group: group, code: code, source: source, sourceMAC: querierMAC, hopLimit: hopLimit,
            routerAlert: routerAlert, corrupt: corrupt)
    }

    static func parse(_ bytes: [UInt8]) throws -> MLDQuery? {
        MLDQuery(try EthernetFrame(parsing: bytes))
    }

    @Test func readsGeneralAndGroupQueriesOfBothVersions() throws {
        let general = try #require(try Self.parse(Self.query()))
        #expect(general.version == .v2)
        #expect(general.group == nil)
        #expect(general.maximumResponseDelay == .seconds(10))
        #expect(general.source == Self.querier)

        let specific = try #require(try Self.parse(Self.query(group: Self.group, code: 1_000)))
        #expect(specific.group == Self.group)
        #expect(specific.maximumResponseDelay == .seconds(1))

        let old = try #require(try Self.parse(Self.query(version2: false, code: 10_000)))
        #expect(old.version == .v1)
        #expect(old.group == nil)
        #expect(old.maximumResponseDelay == .seconds(10))
    }

    /// RFC 3810 section 5.1.3: codes from 32768 on are (mantissa | 0x1000) << (exponent + 3) milliseconds.
    @Test func readsTheFloatingPointResponseCode() throws {
        // exponent 1, mantissa 0x000: 0x1000 << 4 = 65,536 ms.
        let query = try #require(try Self.parse(Self.query(code: 0x9000)))
        #expect(query.maximumResponseDelay == .milliseconds(65_536))
        // The largest: exponent 7, mantissa 0xFFF: 0x1FFF << 10 = 8,387,584 ms.
        let largest = try #require(try Self.parse(Self.query(code: 0xFFFF)))
        #expect(largest.maximumResponseDelay == .milliseconds(8_387_584))
    }

    @Test func ignoresQueriesAListenerMustNotActOn() throws {
        #expect(try Self.parse(Self.query(source: IPv6Address("fd77::9")!)) == nil, "not link-local")
        #expect(try Self.parse(Self.query(hopLimit: 255)) == nil, "hop limit not 1")
        #expect(try Self.parse(Self.query(routerAlert: false)) == nil, "no Router Alert")
        #expect(try Self.parse(Self.query(corrupt: true)) == nil, "bad checksum")
        #expect(try Self.parse(Self.query(group: IPv6Address("fd77::1")!)) == nil, "not a multicast group")
        var short = Self.query()
        short.removeLast(2)
        short[19] -= 2  // the IPv6 payload length
        #expect(try Self.parse(short) == nil, "26 bytes: neither version")
    }

    @Test func writesAnMLDv2ReportAsRFC3810LaysItOut() throws {
        let other = IPv6Address("ff02::1:ff00:5678")!
        let frame = EthernetFrame.mldv2Report(
            [(.changeToExclude, Self.group), (.changeToInclude, other)], sourceAddress: Self.proxy,
            source: Self.proxyMAC
        ).serialized()
        #expect(Array(frame[0..<6]) == [0x33, 0x33, 0, 0, 0, 0x16])
        #expect(Array(frame[6..<12]) == Self.proxyMAC.array)
        #expect(Array(frame[12..<14]) == [0x86, 0xDD])
        #expect(frame[20] == 0, "next header: Hop-by-Hop")
        #expect(frame[21] == 1, "hop limit 1")
        #expect(Array(frame[22..<38]) == Self.proxy.bytes)
        #expect(Array(frame[38..<54]) == IPv6Address("ff02::16")!.bytes)
        #expect(Array(frame[54..<62]) == [58, 0, 5, 2, 0, 0, 1, 0], "Router Alert (MLD), PadN")
        let icmp = Array(frame[62...])
        #expect(Int(frame[18]) << 8 | Int(frame[19]) == 8 + icmp.count, "payload length")
        #expect(icmp.count == 8 + 2 * 20)
        #expect(icmp[0] == 143)
        #expect(Array(icmp[6..<8]) == [0, 2], "two records")
        #expect(Array(icmp[8..<12]) == [4, 0, 0, 0])
        #expect(Array(icmp[12..<28]) == Self.group.bytes)
        #expect(Array(icmp[28..<32]) == [3, 0, 0, 0])
        #expect(Array(icmp[32..<48]) == other.bytes)
        var zeroed = icmp
        zeroed[2] = 0
        zeroed[3] = 0
        let expected = Self.checksum(source: Self.proxy, destination: IPv6Address("ff02::16")!, icmp: zeroed)
        #expect(UInt16(icmp[2]) << 8 | UInt16(icmp[3]) == expected)
    }

    @Test func writesMLDv1ReportsToTheGroupAndDonesToAllRouters() throws {
        let report = EthernetFrame.mldv1Message(
            for: Self.group, done: false, sourceAddress: Self.proxy, source: Self.proxyMAC
        ).serialized()
        #expect(Array(report[0..<6]) == [0x33, 0x33, 0xFF, 0, 0x12, 0x34])
        #expect(Array(report[38..<54]) == Self.group.bytes)
        let icmp = Array(report[62...])
        #expect(icmp.count == 24)
        #expect(icmp[0] == 131)
        #expect(Array(icmp[8..<24]) == Self.group.bytes)
        var zeroed = icmp
        zeroed[2] = 0
        zeroed[3] = 0
        #expect(
            UInt16(icmp[2]) << 8 | UInt16(icmp[3])
                == Self.checksum(source: Self.proxy, destination: Self.group, icmp: zeroed))

        let done = EthernetFrame.mldv1Message(
            for: Self.group, done: true, sourceAddress: Self.proxy, source: Self.proxyMAC
        ).serialized()
        #expect(Array(done[38..<54]) == IPv6Address("ff02::2")!.bytes)
        #expect(done[62] == 132)
        #expect(Array(done[70..<86]) == Self.group.bytes)
    }
}
