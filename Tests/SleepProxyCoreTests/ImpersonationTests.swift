import DNSWire
import FixtureSupport
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// Nobody on the LAN can make the proxy answer for, take over, or let go of a host that is not theirs.
@Suite("Impersonation")
struct ImpersonationTests {
    static let victim = MACAddress(0x02, 0x77, 0, 0, 0, 2)
    static let intruder = MACAddress(0x02, 0x77, 0, 0, 0, 0x66)
    static let victimAddress = IPv4Address(10, 77, 0, 2)

    static func holdingVictim() -> Harness {
        var harness = Harness()
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: victimAddress),
                owner: OwnerOption(sequence: 1, primaryMAC: victim)))
        harness.run(until: harness.now + .seconds(12))
        return harness
    }

    /// Another owner's address record for a held address, under a name of its own: refused whole, nothing held
    /// changes, and the name is not answered.
    @Test(arguments: [
        DNSRecord(name: "evil.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2))),
        DNSRecord(name: "evil.local.", ttl: 120, cacheFlush: false, rdata: .a(IPv4Address(10, 77, 0, 2))),
    ])
    func anAddressHeldForAnotherOwnerCannotBeClaimed(record: DNSRecord) throws {
        var harness = Self.holdingVictim()
        let before = harness.core.owners
        let actions = harness.register(
            Update.bytes(
                records: Update.host("evil", ipv4: IPv4Address(10, 77, 0, 66)).filter { $0.type != .a } + [record],
                owner: OwnerOption(sequence: 1, primaryMAC: Self.intruder)))
        #expect(actions.replies.isEmpty, "refused silently, as every refusal")
        let event = try #require(actions.events.first)
        #expect(event.reason == .addressHijack, "\(event)")
        #expect(event.detail.contains("claims 10.77.0.2, held for \(Self.victim)"), "\(event)")
        #expect(harness.core.owners == before)
        let answers = harness.mdns(Query.bytes("evil.local.", .a))
        #expect(answers.transmissions.isEmpty, "the name is not answered")
    }

    /// The host itself may register its own address again (a renewal), and a freed address can be taken.
    @Test func theOwnerKeepsItsAddressAndAFreedOneCanBeTaken() throws {
        var harness = Self.holdingVictim()
        let renewal = harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: Self.victimAddress),
                owner: OwnerOption(sequence: 1, primaryMAC: Self.victim)))
        #expect(renewal.replies.count == 1)
        _ = harness.core.forget(
            OwnerKey(interface: "eth0", primaryMAC: Self.victim), now: harness.now, reason: "the administrator asked")
        let taken = harness.register(
            Update.bytes(
                records: Update.host("other", ipv4: Self.victimAddress),
                owner: OwnerOption(sequence: 1, primaryMAC: Self.intruder)))
        #expect(taken.replies.count == 1, "\(taken.events)")
    }

    /// An OWNER for a held host in mDNS from another MAC does not release it; from the host it does.
    @Test func aForgedOwnerCannotReleaseAHost() throws {
        var harness = Self.holdingVictim()
        let forged = ClientMessage.announcement(
            records: [DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(Self.victimAddress))],
            owner: OwnerOption(sequence: 2, primaryMAC: Self.victim))
        let first = harness.mdns(forged, from: Harness.waker, mac: Self.intruder)
        #expect(harness.core.owners.count == 1, "still held")
        #expect(first.events.isEmpty)
        #expect(first.logLines.filter { $0.0 == .warning && $0.1.contains("ignored its OWNER") }.count == 1)
        // A flood of them costs one line a minute, no event.
        var later: [Action] = []
        for _ in 0..<50 { later += harness.mdns(forged, from: Harness.waker, mac: Self.intruder) }
        #expect(later.logLines.isEmpty && later.events.isEmpty)
        #expect(harness.core.owners.count == 1)
        // The host itself, back with a new sequence: released.
        let back = harness.mdns(forged, from: Harness.sleeper, mac: Self.victim)
        #expect(back.events.map(\.kind) == [.released])
        #expect(harness.core.owners.isEmpty)
    }

    /// A registration for an address a live host answers for (its ARP reply to our probe comes from another MAC)
    /// never gets that address: no announcement, no answer for it, and the registrant is woken to defend it.
    @Test func anAddressALiveHostAnswersForIsNeverClaimed() throws {
        var harness = Harness()
        let live = IPv4Address(10, 77, 0, 50)
        let liveMAC = MACAddress(0x02, 0x77, 0, 0, 0, 0x50)
        harness.register(
            Update.bytes(
                records: Update.host("evil", ipv4: live), owner: OwnerOption(sequence: 1, primaryMAC: Self.intruder)))
        let reply = EthernetFrame.arp(
            ARPPacket(
                operation: .reply, senderHardwareAddress: liveMAC, senderProtocolAddress: live,
                targetHardwareAddress: Self.intruder, targetProtocolAddress: .any),
            source: liveMAC, destination: Harness.proxyMAC
        ).serialized()
        var sent: [Action] = []
        // The live host answers every probe for a minute and more.
        while harness.now < UnixTime(seconds: 1_800_000_000) + .seconds(90) {
            sent += harness.run(until: harness.now + .milliseconds(500))
            sent += harness.frame(reply)
        }
        let claims = try sent.injectedFrames.map { try EthernetFrame(parsing: $0) }.filter { frame in
            guard let arp = frame.arp else { return false }
            return arp.senderProtocolAddress == live && arp.senderHardwareAddress == Harness.proxyMAC
        }
        #expect(claims.isEmpty, "never announced or answered as ours: \(claims)")
        #expect(!sent.events.filter { $0.kind == .wake }.isEmpty, "the registrant is woken to defend its address")
        #expect(!sent.events.contains { $0.kind == .takeover })
    }
}
