import DNSWire
import FixtureSupport
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// The proxy reports the solicited-node groups of the IPv6 addresses it holds with MLD, as the kernel would for a
/// joined group (RFC 3810 sections 6 and 8.2.1, RFC 2710), with the clock injected.
@Suite("MLD for held addresses")
struct MulticastListenerTests {
    static let linkLocal = IPv6Address("fe80::1")!

    /// A harness whose link has a link-local address, and a host holding `fd77::2` registered in it.
    static func registered(addresses: [IPv6Address] = [IPv6Address("fd77::2")!]) -> Harness {
        var harness = Harness(extraPrefixes: [Link.Prefix(address: .v6(linkLocal), length: 64)])
        var records = Update.host("sleepy", ipv4: IPv4Address(10, 77, 0, 2))
        for address in addresses {
            records.append(
                DNSRecord(
                    name: ReverseMapping.name(of: .v6(address)), ttl: 120, cacheFlush: true,
                    rdata: .ptr("sleepy.local.")))
        }
        harness.register(
            Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: TakeoverTests.sleeperMAC)))
        return harness
    }

    /// The MLD messages among `actions`: (ICMPv6 type, source, destination, records as (type, group)).
    static func reports(_ actions: [Action]) -> [(type: UInt8, source: IPv6Address, records: [(UInt8, IPv6Address)])] {
        actions.mldReports.compactMap { bytes in
            guard bytes.count > 62, bytes[12] == 0x86, bytes[13] == 0xDD, bytes[20] == 0 else { return nil }
            let source = IPv6Address(bytes: bytes[22..<38])!
            let icmp = Array(bytes[62...])
            switch icmp[0] {
            case 143:
                let count = Int(icmp[6]) << 8 | Int(icmp[7])
                let records = (0..<count).map { index in
                    let start = 8 + 20 * index
                    return (icmp[start], IPv6Address(bytes: icmp[(start + 4)..<(start + 20)])!)
                }
                return (143, source, records)
            case 131, 132:
                return (icmp[0], source, [(icmp[0], IPv6Address(bytes: icmp[8..<24])!)])
            default:
                return nil
            }
        }
    }

    static let group = IPv6Address("fd77::2")!.solicitedNodeGroup

    @Test func aTakenOverAddressIsReportedAtOnceAndOnceMoreWithinASecond() throws {
        var harness = Self.registered()
        let first = harness.run(until: harness.now)
        let sent = Self.reports(first)
        try #require(sent.count == 1)
        #expect(sent[0].type == 143)
        #expect(sent[0].source == Self.linkLocal)
        #expect(sent[0].records.map(\.0) == [4], "CHANGE_TO_EXCLUDE {}")
        #expect(sent[0].records.map(\.1) == [Self.group])
        let start = harness.now
        let again = Self.reports(harness.run(until: start + .seconds(1)))
        #expect(again.count == 1, "robustness 2: one retransmission within the Unsolicited Report Interval")
        #expect(again.first?.records.map(\.1) == [Self.group])
        #expect(Self.reports(harness.run(until: start + .seconds(300))).isEmpty, "then quiet until asked")
    }

    @Test func aGeneralQueryIsAnsweredWithinItsDelayWithEveryGroup() throws {
        let addresses = (1...100).map { IPv6Address(high: 0xFD77_0000_0000_0000, low: UInt64(0x1000 + $0)) }
        var harness = Self.registered(addresses: addresses)
        harness.run(until: harness.now + .seconds(30))
        let asked = harness.now
        #expect(Self.reports(harness.frame(MLDFrames.query(code: 2_000))).isEmpty, "not at once, but within 2 s")
        let answers = Self.reports(harness.run(until: asked + .seconds(2)))
        #expect(answers.count == 2, "100 records: 72 in the first report, 28 in the second")
        let records = answers.flatMap(\.records)
        #expect(Set(records.map(\.1)) == Set(addresses.map(\.solicitedNodeGroup)))
        #expect(records.allSatisfy { $0.0 == 2 }, "MODE_IS_EXCLUDE {}")
        #expect(Self.reports(harness.run(until: asked + .seconds(60))).isEmpty)
    }

    /// A sender asking many times a second, with no delay allowed, gets the state of every group once a second.
    @Test func generalQueriesAreAnsweredAtMostOnceASecond() throws {
        let addresses = (1...100).map { IPv6Address(high: 0xFD77_0000_0000_0000, low: UInt64(0x1000 + $0)) }
        var harness = Self.registered(addresses: addresses)
        harness.run(until: harness.now + .seconds(30))
        let start = harness.now
        var reports = 0
        for _ in 0..<100 {
            harness.frame(MLDFrames.query(code: 0))
            reports += Self.reports(harness.run(until: harness.now + .milliseconds(50))).count
        }
        #expect(harness.now - start == .seconds(5))
        // Two frames (100 records) per answer, one answer a second: at most 6 answers in 5 s.
        #expect(reports >= 2 * 5 && reports <= 2 * 6, "\(reports) reports")
    }

    @Test func aQueryForOneGroupIsAnsweredForThatGroupOnly() throws {
        var harness = Self.registered()
        harness.run(until: harness.now + .seconds(30))
        let asked = harness.now
        harness.frame(MLDFrames.query(group: Self.group, code: 1_000))
        harness.frame(MLDFrames.query(group: IPv6Address("ff02::1:ff00:9999")!, code: 1_000))
        let answers = Self.reports(harness.run(until: asked + .seconds(1)))
        #expect(answers.count == 1)
        #expect(answers.first?.records.map(\.1) == [Self.group])
        #expect(answers.first?.records.map(\.0) == [2])
    }

    @Test func anMLDv1QuerierGetsMLDv1ReportsAndDones() throws {
        var harness = Self.registered()
        harness.run(until: harness.now + .seconds(30))
        let asked = harness.now
        harness.frame(MLDFrames.query(version2: false, code: 1_000))
        let answers = Self.reports(harness.run(until: asked + .seconds(1)))
        #expect(answers.map(\.type) == [131])
        #expect(answers.first?.records.map(\.1) == [Self.group])
        // Within the Older Version Querier Present Timeout, a release says Done.
        harness.advance(.seconds(10))
        let forgotten = harness.core.forget(
            try #require(harness.core.owners.first?.key), now: harness.now, reason: "test")
        let done = Self.reports(forgotten + harness.run(until: harness.now + .seconds(1)))
        #expect(done.map(\.type).first == 132)
        #expect(done.first?.records.map(\.1) == [Self.group])
    }

    @Test func aReleasedAddressIsReportedLeftAndNoLongerAnswered() throws {
        var harness = Self.registered()
        harness.run(until: harness.now + .seconds(30))
        let key = try #require(harness.core.owners.first?.key)
        let forgotten = harness.core.forget(key, now: harness.now, reason: "test")
        #expect(forgotten.contains(.leaveMulticastGroup("eth0", Self.group)))
        let left = Self.reports(harness.run(until: harness.now + .seconds(1)))
        #expect(left.count == 2, "CHANGE_TO_INCLUDE {}, twice")
        #expect(left.allSatisfy { $0.records.map(\.0) == [3] && $0.records.map(\.1) == [Self.group] })
        let asked = harness.now
        harness.frame(MLDFrames.query(code: 1_000))
        #expect(Self.reports(harness.run(until: asked + .seconds(5))).isEmpty, "no group held: the kernel answers")
    }

    @Test func withoutALinkLocalAddressReportsComeFromTheUnspecifiedAddress() throws {
        var harness = Harness()
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: IPv4Address(10, 77, 0, 2)) + [
                    DNSRecord(
                        name: ReverseMapping.name(of: .v6(IPv6Address("fd77::2")!)), ttl: 120, cacheFlush: true,
                        rdata: .ptr("sleepy.local."))
                ], owner: OwnerOption(sequence: 1, primaryMAC: TakeoverTests.sleeperMAC)))
        let sent = Self.reports(harness.run(until: harness.now))
        #expect(sent.first?.source == .unspecified)
    }
}
