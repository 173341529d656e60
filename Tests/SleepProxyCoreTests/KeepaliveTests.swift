import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// Every branch of the keepalive rules with the injected clock (PROTOCOL.md section 3.8; mDNS.c
/// `mDNS_SendKeepalives`, `mDNS_SendKeepaliveACK`, the TCP branch of `mDNSCoreReceiveRawTransportPacket`).
@Suite("TCP keepalive offload")
struct KeepaliveTests {
    static let peerPort: UInt16 = 4_000
    static let localPort: UInt16 = 50_000
    static let connection = KeepaliveConnection(
        interval: 20, local: Endpoint(address: .v4(TakeoverTests.ipv4), port: localPort),
        remote: Endpoint(address: .v4(TakeoverTests.waker), port: peerPort), remoteMAC: TakeoverTests.wakerMAC,
        sequence: 1_000, acknowledgment: 5_000, window: 2_048)

    /// The take-over host of `TakeoverTests` (IPv4 and IPv6 addresses, ssh) with keepalive records.
    static func registering(
        _ connections: [KeepaliveConnection] = [connection], extra: [DNSRecord] = [], sequence: UInt8 = 1,
        configuration: CoreConfiguration = CoreConfiguration(), into harness: Harness? = nil
    ) -> (Harness, [Action]) {
        var harness = harness ?? Harness(configuration: configuration)
        var records = Update.host("sleepy", ipv4: TakeoverTests.ipv4)
        records.append(
            DNSRecord(
                name: ReverseMapping.name(of: .v6(TakeoverTests.ipv6)), ttl: 120, cacheFlush: true,
                rdata: .ptr("sleepy.local.")))
        records += connections.map { KeepaliveRecord.record($0) } + extra
        let actions = harness.register(
            Update.bytes(
                records: records, owner: OwnerOption(sequence: sequence, primaryMAC: TakeoverTests.sleeperMAC)))
        return (harness, actions)
    }

    /// Keepalive segments among `actions`: TCP frames leaving for the peer.
    static func segments(_ actions: [Action]) throws -> [EthernetFrame] {
        try actions.injectedFrames.map { try EthernetFrame(parsing: $0, verifying: .all) }.filter { $0.tcp != nil }
    }

    /// A segment from the peer to the host's end of the connection.
    static func fromPeer(
        _ flags: TCPSegment.Flags, sequence: UInt32, acknowledgment: UInt32, payload: [UInt8] = [],
        sourcePort: UInt16 = peerPort
    ) -> [UInt8] {
        EthernetFrame.tcp(
            TCPSegment(
                sourcePort: sourcePort, destinationPort: localPort, sequenceNumber: sequence,
                acknowledgmentNumber: acknowledgment, flags: flags, window: 501, payload: payload),
            sourceAddress: TakeoverTests.waker, destinationAddress: TakeoverTests.ipv4, source: TakeoverTests.wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
    }

    static func kept(_ harness: Harness) throws -> KeptConnection {
        try #require(
            harness.core.keptConnections(of: OwnerKey(interface: "eth0", primaryMAC: TakeoverTests.sleeperMAC)).first)
    }

    @Test func theFirstKeepaliveGoesOutWithTheClaimThenOneEveryInterval() throws {
        var (harness, registered) = Self.registering()
        #expect(try Self.segments(registered).isEmpty, "nothing before the address is claimed")
        let event = try #require(registered.events.first { $0.kind == .keepalive })
        #expect(event.detail.contains("10.77.0.2:50000") && event.detail.contains("10.77.0.3:4000"), "\(event)")

        // Probes at +1, +2, +3 s; the claim (first announcement) at +4 s.
        let beforeClaim = harness.run(until: harness.now + .seconds(3) + .milliseconds(500))
        #expect(try Self.segments(beforeClaim).isEmpty)
        let claim = harness.run(until: harness.now + .seconds(1))
        let first = try #require(try Self.segments(claim).first, "a keepalive at the claim")
        #expect(try Self.segments(claim).count == 1)

        // The segment, as Apple's proxy builds it, from our MAC to the MAC the host gave.
        #expect(first.header.source == Harness.proxyMAC && first.header.destination == TakeoverTests.wakerMAC)
        let ipv4 = try #require(first.ipv4)
        #expect(ipv4.header.source == TakeoverTests.ipv4 && ipv4.header.destination == TakeoverTests.waker)
        #expect(ipv4.header.timeToLive == 63 && ipv4.header.identification == 9_864)
        #expect(ipv4.header.flags.isEmpty, "no don't-fragment bit, as Apple's raw socket sends it")
        let tcp = try #require(first.tcp)
        #expect(tcp.sourcePort == Self.localPort && tcp.destinationPort == Self.peerPort)
        #expect(tcp.flags == .ack && tcp.sequenceNumber == 1_000 && tcp.acknowledgmentNumber == 5_000)
        #expect(tcp.window == 2_048 && tcp.payload.isEmpty && tcp.options.isEmpty, "a 20-byte header, data offset 5")
        #expect(first.serialized().count == 14 + 40, "IPv4 and TCP headers only")

        // Then every 20 s, and not in between.
        let claimedAt = harness.now
        #expect(try Self.segments(harness.run(until: claimedAt + .seconds(19))).isEmpty)
        #expect(try Self.segments(harness.run(until: claimedAt + .seconds(21))).count == 1)
        #expect(try Self.segments(harness.run(until: claimedAt + .seconds(41))).count == 1)
        #expect(try Self.kept(harness).keepalivesSent == 3)
    }

    @Test func thePeersKeepaliveProbeIsAnsweredAndWakesNobody() throws {
        var (harness, _) = Self.registering()
        harness.run(until: harness.now + .seconds(12))
        let actions = harness.frame(Self.fromPeer(.ack, sequence: 4_999, acknowledgment: 1_001))
        #expect(WakeTests.wakes(actions).isEmpty)
        let answer = try #require(try Self.segments(actions).first)
        let tcp = try #require(answer.tcp)
        #expect(tcp.flags == .ack && tcp.sequenceNumber == 1_001 && tcp.acknowledgmentNumber == 5_000)
        #expect(answer.header.destination == TakeoverTests.wakerMAC)
        let kept = try Self.kept(harness)
        #expect(kept.probesAnswered == 1 && kept.lastProbeAnswered == harness.now && kept.lastHeard == harness.now)
    }

    /// The peer's kernel acknowledges our keepalive (an old sequence number) with a duplicate ACK: heard, not
    /// answered, no wake.
    @Test func theDuplicateACKOfOurKeepaliveIsOnlyNoted() throws {
        var (harness, _) = Self.registering()
        harness.run(until: harness.now + .seconds(12))
        let actions = harness.frame(Self.fromPeer(.ack, sequence: 5_000, acknowledgment: 1_001))
        #expect(actions.injectedFrames.isEmpty && WakeTests.wakes(actions).isEmpty)
        #expect(try Self.kept(harness).lastHeard == harness.now)
    }

    struct Trigger: Sendable, CustomStringConvertible {
        var flags: TCPSegment.Flags
        var sequence: UInt32
        var acknowledgment: UInt32
        var payload: [UInt8]
        var cause: String
        var description: String { cause }
    }

    @Test(arguments: [
        Trigger(flags: .rst, sequence: 5_000, acknowledgment: 0, payload: [], cause: "TCP RST"),
        Trigger(flags: [.fin, .ack], sequence: 5_000, acknowledgment: 1_001, payload: [], cause: "TCP FIN"),
        Trigger(
            flags: [.ack, .psh], sequence: 5_000, acknowledgment: 1_001, payload: Array("hello".utf8),
            cause: "TCP data (5 bytes)"),
        Trigger(
            flags: [.ack, .psh], sequence: 5_003, acknowledgment: 1_001, payload: Array("later".utf8),
            cause: "TCP data (5 bytes)"),
    ])
    func whatWakesTheHost(_ trigger: Trigger) throws {
        let (flags, sequence, acknowledgment, payload, cause) = (
            trigger.flags, trigger.sequence, trigger.acknowledgment, trigger.payload, trigger.cause
        )
        var (harness, _) = Self.registering()
        harness.run(until: harness.now + .seconds(12))
        let actions = harness.frame(
            Self.fromPeer(flags, sequence: sequence, acknowledgment: acknowledgment, payload: payload))
        let wake = try #require(WakeTests.wakes(actions).first, "\(cause) wakes the host")
        #expect(wake.detail.hasPrefix(cause) && wake.detail.contains("kept-alive connection"), "\(wake)")
        #expect(wake.source == Self.connection.remote)
        // No service is registered on port 50000: a keepalive wake needs none.
        #expect(actions.injectedFrames.contains { (try? EthernetFrame(parsing: $0).magicPacket) != nil })
    }

    @Test(arguments: [
        // Data the host has seen already (a retransmission from before it slept).
        (UInt32(4_000), UInt32(1_001), "old data"),
        // Data that does not acknowledge what the host sent last.
        (5_000, 1_000, "no acknowledgment of the keepalive's byte"),
        (5_000, 900, "an older acknowledgment"),
    ])
    func dataThatWakesNobody(sequence: UInt32, acknowledgment: UInt32, what: String) throws {
        var (harness, _) = Self.registering()
        harness.run(until: harness.now + .seconds(12))
        let actions = harness.frame(
            Self.fromPeer([.ack, .psh], sequence: sequence, acknowledgment: acknowledgment, payload: [1, 2, 3]))
        #expect(WakeTests.wakes(actions).isEmpty, "\(what)")
    }

    /// The comparisons are those of 32-bit sequence space: numbers that wrapped around still count as later.
    @Test func sequenceNumbersWrapAround() throws {
        var wrapped = Self.connection
        wrapped.sequence = UInt32.max
        wrapped.acknowledgment = UInt32.max - 1
        var (harness, _) = Self.registering([wrapped])
        harness.run(until: harness.now + .seconds(12))
        let probe = harness.frame(Self.fromPeer(.ack, sequence: UInt32.max - 2, acknowledgment: 0))
        #expect(try Self.segments(probe).first?.tcp?.sequenceNumber == 0, "s + 1 wraps to 0")
        let data = harness.frame(
            Self.fromPeer([.ack, .psh], sequence: UInt32.max - 1, acknowledgment: 0, payload: [1]))
        #expect(!WakeTests.wakes(data).isEmpty)
    }

    @Test func aSilentPeerIsReportedOnceAndNotWokenFor() throws {
        var (harness, _) = Self.registering()
        let start = harness.now
        // Keepalives at the claim (+4 s), +24, +44: nothing back, but the third has had no interval yet.
        let actions = harness.run(until: start + .seconds(4 + 20 * 2) + .milliseconds(500))
        #expect(try Self.segments(actions).count == 3)
        #expect(actions.events.filter { $0.detail.contains("has not answered") }.isEmpty, "not yet")
        let fourth = harness.run(until: start + .seconds(4 + 20 * 3) + .milliseconds(500))
        let report = try #require(fourth.events.first { $0.detail.contains("has not answered") })
        #expect(report.kind == .keepalive && report.source == Self.connection.remote)
        #expect(WakeTests.wakes(harness.log).isEmpty, "a silent peer wakes nobody")
        #expect(try Self.kept(harness).reportedSilent)
        let later = harness.run(until: start + .seconds(4 + 20 * 8))
        #expect(later.events.filter { $0.detail.contains("has not answered") }.isEmpty, "reported once")
        // The peer speaks again: silence is over, and would be reported anew.
        harness.frame(Self.fromPeer(.ack, sequence: 5_000, acknowledgment: 1_001))
        #expect(try !Self.kept(harness).reportedSilent && Self.kept(harness).unanswered == 0)
    }

    /// A keepalive record that cannot be used is held as an ordinary record; the event names the field.
    @Test func aRecordMissingAFieldIsHeldAndNamed() throws {
        let broken = DNSRecord(
            name: "1234._keepalive._dns-sd._udp.local.", ttl: 120, cacheFlush: true,
            rdata: .null(
                Self.rdataText(
                    "t=20 i=30 c=10 h=10.77.0.2 d=10.77.0.3 l=50000 r=4000 m=02:77:00:00:00:03 a=5000 w=2048")))
        var (harness, registered) = Self.registering([], extra: [broken])
        let event = try #require(registered.events.first { $0.kind == .keepalive })
        #expect(event.detail.contains("held as an ordinary record") && event.detail.contains("field s"), "\(event)")
        #expect(registered.logLines.contains { $0.0 == .warning && $0.1.contains("field s") })
        let owner = try #require(harness.core.owners.values.first)
        #expect(owner.records.contains { $0.record.name == broken.name })
        #expect(try Self.segments(harness.run(until: harness.now + .seconds(60))).isEmpty)
    }

    /// New numbers in a registration (the host woke briefly and slept again): a keepalive with them at once.
    @Test func aNewRegistrationSendsTheNewNumbersAtOnce() throws {
        var (harness, _) = Self.registering()
        harness.run(until: harness.now + .seconds(12))
        var moved = Self.connection
        moved.sequence = 2_000
        moved.acknowledgment = 6_000
        var records = Update.host("sleepy", ipv4: TakeoverTests.ipv4)
        records.append(KeepaliveRecord.record(moved))
        // The same sequence: the host is still asleep and the address stays claimed; the new numbers go out at
        // the next tick.
        let actions =
            harness.register(
                Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: TakeoverTests.sleeperMAC)))
            + harness.run(until: harness.now + .seconds(5))
        let segment = try #require(try Self.segments(actions).first?.tcp, "\(actions)")
        #expect(segment.sequenceNumber == 2_000 && segment.acknowledgmentNumber == 6_000)
        #expect(try Self.kept(harness).keepalivesSent == 2, "the count carries over")
    }

    @Test func nothingIsSentWhileTheHostIsWoken() throws {
        var (harness, _) = Self.registering()
        harness.run(until: harness.now + .seconds(12))
        let wake = harness.frame(WakeTests.segment(22, .syn))
        #expect(!WakeTests.wakes(wake).isEmpty)
        let during = harness.run(until: harness.now + .seconds(25))
        #expect(try Self.segments(during).isEmpty, "\(during)")
    }

    @Test func offloadSwitchedOffHoldsTheRecordsAndSendsNothing() throws {
        var (harness, registered) = Self.registering(configuration: CoreConfiguration(keepaliveOffload: false))
        #expect(registered.events.allSatisfy { $0.kind != .keepalive })
        #expect(try Self.segments(harness.run(until: harness.now + .seconds(60))).isEmpty)
        // A segment of the connection falls under the ordinary rules: a RST wakes nobody.
        #expect(WakeTests.wakes(harness.frame(Self.fromPeer(.rst, sequence: 5_000, acknowledgment: 0))).isEmpty)
    }

    /// A segment of another connection to the same host follows the ordinary rules.
    @Test func otherConnectionsFollowTheOrdinaryRules() throws {
        var (harness, _) = Self.registering()
        harness.run(until: harness.now + .seconds(12))
        let rst = harness.frame(Self.fromPeer(.rst, sequence: 5_000, acknowledgment: 0, sourcePort: 4_001))
        #expect(WakeTests.wakes(rst).isEmpty)
    }

    @Test func anIPv6ConnectionIsKeptWithTheKernelsHopLimit() throws {
        let peer = IPv6Address("fd77::3")!
        let connection = KeepaliveConnection(
            interval: 30, local: Endpoint(address: .v6(TakeoverTests.ipv6), port: Self.localPort),
            remote: Endpoint(address: .v6(peer), port: 443), remoteMAC: TakeoverTests.wakerMAC, sequence: 77,
            acknowledgment: 88, window: 65_535)
        var (harness, _) = Self.registering([connection])
        let actions = harness.run(until: harness.now + .seconds(12))
        let frame = try #require(try Self.segments(actions).first)
        let ipv6 = try #require(frame.ipv6)
        #expect(ipv6.header.source == TakeoverTests.ipv6 && ipv6.header.destination == peer)
        #expect(ipv6.header.hopLimit == 64)
        #expect(frame.tcp?.sequenceNumber == 77 && frame.tcp?.window == 65_535)
    }

    static func rdataText(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8) + [0]
        return [UInt8(bytes.count)] + bytes
    }
}
