import DNSWire
import FixtureSupport
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// A host that is back shows it: an OWNER with a new sequence number, an old registration, or (for clients that
/// never send OWNER) its own announcement or probe from its wake MAC. It is let go at once and silently.
@Suite("Release when the host is back")
struct ReleaseTests {
    /// Registers the owner with `mac` and `sequence`, with a small host's records.
    static func holding(_ mac: MACAddress, sequence: UInt8, wake: MACAddress? = nil) -> Harness {
        var harness = Harness()
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: IPv4Address(10, 77, 0, 2)),
                owner: OwnerOption(sequence: sequence, primaryMAC: mac, wakeMAC: wake)))
        harness.run(until: harness.now + .seconds(3))
        return harness
    }

    static func payload(_ file: String, index: Int = 0) throws -> (bytes: [UInt8], mac: MACAddress?) {
        let packet = try HexDump.packets(contentsOf: Fixture.url(file))[index]
        if let frame = try? EthernetFrame(parsing: packet), let udp = frame.udp {
            return (udp.payload, frame.header.source)
        }
        return (packet, nil)
    }

    static func expectReleased(_ actions: [Action], _ mac: MACAddress, harness: Harness) {
        #expect(harness.core.owners.isEmpty)
        #expect(actions.storeChanges.contains(.removeOwner(OwnerKey(interface: "eth0", primaryMAC: mac))))
        #expect(actions.events.map(\.kind) == [.released])
        #expect(actions.transmissions.isEmpty, "a release is silent: no goodbyes")
        #expect(!actions.events.contains { $0.kind == .expired || $0.kind == .wake })
    }

    /// The python-zeroconf vector: a QU query carrying OWNER seq 100.
    @Test func aQueryWithANewSequenceReleases() throws {
        let (bytes, _) = try Self.payload("pub-mdns-qu-query-with-owner-opt.hex")
        let mac = MACAddress("7a:7b:8a:36:9c:7a")!
        var harness = Self.holding(mac, sequence: 99)
        let actions = harness.mdns(bytes)
        Self.expectReleased(actions, mac, harness: harness)
        #expect(actions.events.first?.detail.contains("OWNER seq 100 (held 99) in an mDNS query") == true)
    }

    @Test func theSameSequenceWithinAMinuteDoesNotRelease() throws {
        let (bytes, _) = try Self.payload("pub-mdns-qu-query-with-owner-opt.hex")
        let mac = MACAddress("7a:7b:8a:36:9c:7a")!
        var harness = Self.holding(mac, sequence: 100)
        #expect(harness.mdns(bytes).events.isEmpty)
        #expect(harness.core.owners.count == 1)
        // More than 60 s after the registration the same sequence releases too (IPConfiguration's release).
        harness.advance(.seconds(61))
        Self.expectReleased(harness.mdns(bytes), mac, harness: harness)
    }

    /// The Mac announcement vector: OWNER seq 193, primary 26:a2:e1:90:a9:5d, wake 24:a2:e1:90:a9:5d.
    @Test func aMacAnnouncementReleases() throws {
        let (bytes, source) = try Self.payload("pub-mac-mdns-announce-with-owner-opt.hex")
        #expect(source == MACAddress("24:a2:e1:90:a9:5d"))
        let mac = MACAddress("26:a2:e1:90:a9:5d")!
        var harness = Self.holding(mac, sequence: 192, wake: MACAddress("24:a2:e1:90:a9:5d"))
        Self.expectReleased(harness.mdns(bytes, mac: source), mac, harness: harness)
    }

    @Test func anIOSAnnouncementOverIPv6Releases() throws {
        let (bytes, _) = try Self.payload("pub-ios-mdns-announce-with-owner-opt-ipv6.hex")
        let mac = MACAddress("26:e3:14:4d:84:c0")!
        var harness = Self.holding(mac, sequence: 206)
        let source = Endpoint(address: .v6(IPv6Address("fe80::42a:2c03:ab2b:2f14")!), port: 5353)
        Self.expectReleased(harness.mdns(bytes, from: source, to: .v6(.mdnsGroup)), mac, harness: harness)
    }

    /// The Apple TV across epochs: seq 38 is what it registered with, 118 is its next wake.
    @Test func appleTVAcrossSequenceNumbers() throws {
        let mac = MACAddress("90:dd:5d:b5:95:65")!
        var harness = Self.holding(mac, sequence: 38)
        let (epoch38, _) = try Self.payload("pub-appletv-mdns-responses-with-owner-opt.hex", index: 0)
        #expect(harness.mdns(epoch38).events.isEmpty)
        let (epoch118, _) = try Self.payload("pub-appletv-mdns-responses-with-owner-opt.hex", index: 1)
        Self.expectReleased(harness.mdns(epoch118), mac, harness: harness)
        // Another owner's OWNER changes nothing.
        var other = Self.holding(MACAddress(0x02, 0, 0, 0, 0, 9), sequence: 1)
        #expect(other.mdns(epoch118).events.isEmpty)
    }

    /// A Linux host with avahi never sends OWNER. Its own announcements and answers from its wake MAC in the first
    /// minute are it still talking as it goes to sleep (its avahi answers the resolves its client just made): they
    /// change nothing. Later, they mean it is back, and it is released before the proxy could defend its names
    /// against it (the `#2` rename of the lab capture).
    @Test func anAnnouncementFromTheWakeMACReleasesOnlyAfterAMinute() throws {
        let mac = MACAddress(0x02, 0x77, 0, 0, 0, 2)
        var harness = Self.holding(mac, sequence: 0)
        let announcement = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [
                DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
            ]
        ).encoded()
        // From some other MAC it is not a release (it is identical data: no conflict either).
        #expect(harness.mdns(announcement, mac: MACAddress(0x02, 0, 0, 0, 0, 0x66)).events.isEmpty)
        #expect(harness.mdns(announcement, mac: mac).events.isEmpty, "3 s after the registration")
        harness.advance(.seconds(57))
        #expect(harness.mdns(announcement, mac: mac).events.isEmpty, "60 s after the registration")
        harness.advance(.seconds(1))
        Self.expectReleased(harness.mdns(announcement, mac: mac), mac, harness: harness)
    }

    @Test func aProbeFromTheWakeMACReleasesBeforeItIsAnswered() throws {
        let mac = MACAddress(0x02, 0x77, 0, 0, 0, 2)
        var harness = Self.holding(mac, sequence: 0)
        let probe = Query.bytes(
            [DNSQuestion(name: "sleepy.local.", type: .any, unicastResponse: true)],
            authorities: [DNSRecord(name: "sleepy.local.", ttl: 120, rdata: .a(IPv4Address(10, 77, 0, 2)))])
        let actions = harness.mdns(probe, mac: mac)
        Self.expectReleased(actions, mac, harness: harness)
    }

    /// A host seen sending its own OWNER in mDNS (a Mac, as it goes to sleep) leaves by Apple's OWNER rule alone: a
    /// probe without OWNER from its MAC is not its return, and is defended as from anyone else.
    @Test func aHostThatSendsOwnerIsNotReleasedByAProbeWithout() throws {
        let mac = MACAddress(0x02, 0x77, 0, 0, 0, 2)
        var harness = Self.holding(mac, sequence: 7)
        let record = DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
        let goingToSleep = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: [record],
            additionals: [Update.opt(owner: OwnerOption(sequence: 7, primaryMAC: mac), lease: nil)]
        ).encoded()
        #expect(harness.mdns(goingToSleep, mac: mac).events.isEmpty, "the same sequence within the minute")
        let probe = Query.bytes(
            [DNSQuestion(name: "sleepy.local.", type: .any, unicastResponse: true)],
            authorities: [DNSRecord(name: "sleepy.local.", ttl: 120, rdata: .a(IPv4Address(10, 77, 0, 2)))])
        let actions = harness.mdns(probe, mac: mac)
        #expect(harness.core.owners.count == 1)
        #expect(!actions.events.contains { $0.kind == .released })
        // Its OWNER with the next sequence releases it, as Apple's proxy does.
        let back = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: [record],
            additionals: [Update.opt(owner: OwnerOption(sequence: 8, primaryMAC: mac), lease: nil)]
        ).encoded()
        Self.expectReleased(harness.mdns(back, mac: mac), mac, harness: harness)
    }

    /// A response scheduled before the release is not sent after it.
    @Test func nothingIsAnsweredAfterARelease() throws {
        let mac = MACAddress(0x02, 0x77, 0, 0, 0, 2)
        var harness = Self.holding(mac, sequence: 0)
        harness.mdns(Query.bytes("_ssh._tcp.local.", .ptr))
        let probe = Query.bytes(
            [DNSQuestion(name: "sleepy.local.", type: .any, unicastResponse: true)],
            authorities: [DNSRecord(name: "sleepy.local.", ttl: 120, rdata: .a(IPv4Address(10, 77, 0, 2)))])
        Self.expectReleased(harness.mdns(probe, mac: mac), mac, harness: harness)
        #expect(harness.run(until: harness.now + .seconds(2)).transmissions.isEmpty)
        #expect(harness.mdns(Query.bytes("sleepy.local.", .a)).transmissions.isEmpty)
    }
}
