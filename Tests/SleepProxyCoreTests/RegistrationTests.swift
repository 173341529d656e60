import DNSWire
import FixtureSupport
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

@Suite("Registrations")
struct RegistrationTests {
    /// A Mac's registration (OS X 10.9): no zone, cache-flush classes, SRV targets in full, OWNER in 8 bytes.
    @Test func macFormatIsAcceptedAndAnsweredLikeApple() throws {
        let fixture = try Fixture.macRegistration()
        var harness = Harness(extraPrefixes: [Link.Prefix(address: .v4(IPv4Address(10, 2, 2, 1)), length: 24)])
        let source = Endpoint(address: .v4(IPv4Address(10, 2, 2, 15)), port: 5353)
        let actions = harness.register(try fixture.wireBytes(), from: source)

        // The reply: same ID, flags 0xA800, counts 0/0/0/1, one OPT holding only the granted 4-byte lease.
        let reply = try #require(actions.replies.first)
        #expect(actions.replies.count == 1)
        #expect(
            reply.bytes
                == HexDump.bytes("B11E A800 0000 0000 0000 0001 00 0029 05A0 00001194 0008 0002 0004 00001C20"))
        #expect(reply.destination == source)
        #expect(reply.source == Harness.proxy)
        #expect(reply.interface == Harness.interface)

        // The store learns of the owner before the reply goes out.
        let saveIndex = try #require(actions.firstIndex { if case .store(.saveOwner) = $0 { true } else { false } })
        let replyIndex = try #require(actions.firstIndex { if case .reply = $0 { true } else { false } })
        #expect(saveIndex < replyIndex)

        let owner = try #require(harness.owner(MACAddress("d4:9a:20:de:9d:38")!))
        #expect(owner.sequence == 21)
        #expect(owner.wakeMAC == owner.key.primaryMAC)
        #expect(owner.password == nil)
        #expect(owner.records.map(\.record) == fixture.records.map(\.record))
        #expect(owner.records.filter(\.isUnique).count == 12)
        #expect(owner.records.allSatisfy { $0.expiresAt == harness.now + .seconds(7200) })
        #expect(
            Set(owner.proxiedAddresses) == [
                .v4(IPv4Address(10, 2, 2, 15)), .v6(IPv6Address("fe80::d69a:20ff:fede:9d39")!),
            ])
        #expect(actions.events.map(\.kind) == [.registered])
        #expect(actions.events.first?.detail.contains("22 held") == true)
        #expect(harness.core.nextLeaseExpiry == harness.now + .seconds(7200))
    }

    /// A third-party client (awein SleepProxyClient): zone count 1 (`. SOA`), no cache-flush bits, sequence 0,
    /// lower-case ip6.arpa nibbles.
    @Test func thirdPartyFormatIsAccepted() throws {
        let bytes = try Fixture.thirdPartyRegistration()
        var harness = Harness()
        let actions = harness.register(bytes)
        let reply = try #require(actions.replies.first)
        let request = try DNSMessage(decoding: bytes)
        let decodedReply = try DNSMessage(decoding: reply.bytes)
        #expect(decodedReply.id == request.id)
        #expect(decodedReply.flags.rawValue == 0xA800)
        #expect(decodedReply.questions.isEmpty && decodedReply.updates.isEmpty)
        #expect(decodedReply.optRecords.first?.optData?.options == [.updateLease(UpdateLease(lease: 7200))])

        let owner = try #require(harness.owner(MACAddress(0x02, 0x77, 0, 0, 0, 2)))
        #expect(owner.sequence == 0)
        #expect(owner.records.count == 8)
        #expect(owner.records.allSatisfy { !$0.isUnique })
        #expect(
            Set(owner.proxiedAddresses) == [
                .v4(IPv4Address(10, 77, 0, 2)), .v6(IPv6Address("fe80::77:ff:fe00:2")!),
            ])
    }

    /// A registration that needs three datagrams, each with its own OPT and (OS X 10.8 and later) the same ID.
    @Test(arguments: [true, false])
    func registrationSplitOverThreeDatagrams(sameID: Bool) throws {
        let records = try Fixture.macRegistration().records.map(\.record)
        var harness = Harness()
        let parts = [Array(records[0..<8]), Array(records[8..<15]), Array(records[15...])]
        for (index, part) in parts.enumerated() {
            let id: UInt16 = sameID ? 0x7777 : 0x7000 + UInt16(index)
            let actions = harness.register(Update.bytes(id: id, records: part))
            let reply = try #require(actions.replies.first, "datagram \(index) was not answered")
            #expect(try DNSMessage(decoding: reply.bytes).id == id)
            #expect(actions.events.map(\.kind) == [index == 0 ? .registered : .renewed])
        }
        let owner = try #require(harness.owner(Update.mac))
        #expect(owner.records.map(\.record) == records)
        #expect(harness.core.recordCount == 22)
    }

    @Test func retransmissionsAreIdempotentAndAnswered() throws {
        var harness = Harness()
        let bytes = Update.bytes(records: Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 2)))
        let first = harness.register(bytes)
        let stateAfterFirst = harness.core.owners
        harness.advance(.seconds(1))
        let second = harness.register(bytes)
        #expect(first.replies.map(\.bytes) == second.replies.map(\.bytes))
        #expect(harness.core.recordCount == 5)
        #expect(Set(harness.core.owners.keys) == Set(stateAfterFirst.keys))
        // The retransmission refreshed the expiry of the same records.
        let owner = try #require(harness.owner(Update.mac))
        #expect(owner.records.allSatisfy { $0.expiresAt == harness.now + .seconds(7200) })
        #expect(owner.registeredAt == stateAfterFirst.values.first?.registeredAt)
        #expect(second.events.isEmpty, "a retransmission costs no event")
    }

    /// A replay of a datagram already answered, from anyone, while the host is being woken: answered, but the
    /// wake goes on (only the host's next registration calls it off).
    @Test func aReplayDoesNotCallAWakeOff() throws {
        var harness = Harness()
        let bytes = Update.bytes(records: Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 2)))
        harness.register(bytes)
        let key = try #require(harness.core.owners.keys.first)
        harness.run(until: harness.now + .seconds(12))
        _ = harness.core.requestWake(key, now: harness.now, reason: "a test")
        let replay = harness.register(bytes, from: Endpoint(address: .v4(IPv4Address(10, 77, 0, 66)), port: 5353))
        #expect(replay.replies.count == 1)
        #expect(!replay.events.contains { $0.kind == .wakeCancelled }, "\(replay.events)")
        guard case .waking = harness.core.state(of: key) else {
            Issue.record("the wake goes on: \(String(describing: harness.core.state(of: key)))")
            return
        }
        let later = harness.run(until: harness.now + .seconds(5))
        #expect(later.injectedFrames.contains { (try? EthernetFrame(parsing: $0).magicPacket) != nil })
        // The host's own next registration (a new sequence) calls it off.
        let next = harness.register(
            Update.bytes(
                records: Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 2)), owner: Update.owner(sequence: 22)))
        #expect(next.events.contains { $0.kind == .wakeCancelled })
    }

    @Test func aNewSequenceNumberReplacesTheOldRecords() throws {
        var harness = Harness()
        harness.register(Update.bytes(records: Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 2))))
        harness.advance(.seconds(6480))
        // The host woke (maintenance wake), moved to a new address and registered again with seq 22.
        let newRecords = Array(Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 20))[0..<2])
        let actions = harness.register(Update.bytes(records: newRecords, owner: Update.owner(sequence: 22)))
        #expect(actions.events.map(\.kind) == [.replaced])
        #expect(actions.events.first?.detail.contains("5 records of seq 21 replaced") == true)
        let owner = try #require(harness.owner(Update.mac))
        #expect(owner.sequence == 22)
        #expect(owner.records.map(\.record) == newRecords)
        #expect(owner.proxiedAddresses == [.v4(IPv4Address(10, 77, 0, 20))])
        #expect(owner.registeredAt == harness.now)
        // Sequence numbers wrap and are compared only for equality.
        let wrapped = harness.register(Update.bytes(records: newRecords, owner: Update.owner(sequence: 0)))
        #expect(wrapped.events.map(\.kind) == [.replaced])
    }

    /// Another proxy going to sleep hands the host's records over: other source address, the host's OWNER.
    @Test func handOverFromAnotherProxyKeepsTheSameOwner() throws {
        var harness = Harness()
        let records = Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 2))
        harness.register(Update.bytes(records: records))
        let actions = harness.register(Update.bytes(records: records), from: Harness.otherProxy)
        #expect(actions.replies.first?.destination == Harness.otherProxy)
        #expect(harness.core.owners.count == 1)
        let owner = try #require(harness.owner(Update.mac))
        #expect(owner.lastSource == Harness.otherProxy)
        #expect(owner.records.count == 5)
    }

    @Test func wakeMACAndPasswordAreKeptPerOwner() throws {
        var harness = Harness()
        let wake = MACAddress(0x24, 0xA2, 0xE1, 0x90, 0xA9, 0x5D)
        let owner = OwnerOption(sequence: 3, primaryMAC: Update.mac, wakeMAC: wake, password: [1, 2, 3, 4, 5, 6])
        harness.register(Update.bytes(records: Update.host("a", ipv4: IPv4Address(10, 77, 0, 2)), owner: owner))
        let held = try #require(harness.owner(Update.mac))
        #expect(held.wakeMAC == wake)
        #expect(held.password == [1, 2, 3, 4, 5, 6])
    }

    @Test(arguments: [
        (UInt32(7200), UInt32(86_400), UInt32(7200)), (200_000, 86_400, 86_400), (7200, 3600, 3600), (1, 3600, 1),
    ])
    func leasesAreClamped(asked: UInt32, maximum: UInt32, granted: UInt32) throws {
        var harness = Harness(configuration: CoreConfiguration(maximumLease: maximum))
        let actions = harness.register(
            Update.bytes(records: Update.host("a", ipv4: IPv4Address(10, 77, 0, 2)), lease: UpdateLease(lease: asked)))
        let reply = try DNSMessage(decoding: #require(actions.replies.first).bytes)
        #expect(reply.optRecords.first?.optData?.updateLease == UpdateLease(lease: granted))
        #expect(harness.core.nextLeaseExpiry == harness.now + .seconds(Int64(granted)))
    }

    @Test func theMaximumLeaseNeverExceedsTheCeiling() {
        #expect(CoreConfiguration(maximumLease: 1_000_000).maximumLease == 86_400)
    }

    /// The 8-byte form (lease and key lease) is answered in the 8-byte form.
    @Test func eightByteLeaseIsAnsweredInKind() throws {
        var harness = Harness()
        let actions = harness.register(
            Update.bytes(
                records: Update.host("a", ipv4: IPv4Address(10, 77, 0, 2)),
                lease: UpdateLease(lease: 100_000, keyLease: 200_000)))
        let reply = try DNSMessage(decoding: #require(actions.replies.first).bytes)
        #expect(
            reply.optRecords.first?.optData?.options == [.updateLease(UpdateLease(lease: 86_400, keyLease: 86_400))])
    }

    /// OS X 10.10 sent one OPT per interface; the first with both Lease and OWNER counts.
    @Test func theFirstOPTWithLeaseAndOwnerCounts() throws {
        var harness = Harness()
        let opts = [
            Update.opt(owner: nil, lease: UpdateLease(lease: 60)),
            Update.opt(owner: Update.owner(sequence: 5), lease: UpdateLease(lease: 7200)),
            Update.opt(owner: Update.owner(sequence: 9), lease: UpdateLease(lease: 30)),
        ]
        let actions = harness.register(
            Update.bytes(records: Update.host("a", ipv4: IPv4Address(10, 77, 0, 2)), opts: opts))
        #expect(actions.replies.count == 1)
        #expect(harness.owner(Update.mac)?.sequence == 5)
        #expect(harness.core.nextLeaseExpiry == harness.now + .seconds(7200))
    }

    /// Newer macOS may register OPT-typed records with a real name; they are skipped, never a failure.
    @Test func optTypedRecordsWithANameAreSkipped() throws {
        var harness = Harness()
        var records = Update.host("a", ipv4: IPv4Address(10, 77, 0, 2))
        records.append(
            DNSRecord(
                name: "a.local.", type: .opt, recordClass: .internet, cacheFlush: false, ttl: 4500,
                rdata: .opt(OPTData(options: [.other(code: 65002, data: [1, 2, 3])]))))
        let actions = harness.register(Update.bytes(records: records))
        #expect(actions.replies.count == 1)
        #expect(harness.owner(Update.mac)?.records.count == 5)
        #expect(actions.events.first?.detail.contains("skipped: OPT-typed record a.local.") == true)
    }

    /// Only reverse-mapping PTRs make the proxy claim an address; an A or AAAA record alone does not.
    @Test func addressesComeFromReverseMappingsOnly() throws {
        var harness = Harness()
        let host: DNSName = "lonely.local."
        harness.register(
            Update.bytes(records: [
                DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2))),
                DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fd77::2")!)),
            ]))
        #expect(harness.owner(Update.mac)?.proxiedAddresses == [])
    }
}
