import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// Interfaces coming and going (a reload), groups shared by held addresses, and what status output reads.
@Suite struct LinkTests {
    static let secondMAC = MACAddress(0x02, 0x77, 0, 0, 0, 4)

    /// Two hosts whose IPv6 addresses share a solicited-node group (same last 24 bits, other prefix).
    static func twoHostsSharingAGroup() -> (Harness, [Action]) {
        var harness = Harness(extraPrefixes: [Link.Prefix(address: .v6(IPv6Address("fd78::1")!), length: 64)])
        var actions: [Action] = []
        for (mac, address, name) in [
            (TakeoverTests.sleeperMAC, IPv6Address("fd77::2")!, "one"),
            (secondMAC, IPv6Address("fd78::2")!, "two"),
        ] {
            let records = [
                DNSRecord(
                    name: DNSName(stringLiteral: "\(name).local."), ttl: 120, cacheFlush: true, rdata: .aaaa(address)),
                DNSRecord(
                    name: ReverseMapping.name(of: .v6(address)), ttl: 120, cacheFlush: true,
                    rdata: .ptr(DNSName(stringLiteral: "\(name).local."))),
            ]
            actions += harness.register(
                Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: mac)))
        }
        return (harness, actions)
    }

    static func joins(_ actions: [Action]) -> [IPv6Address] {
        actions.compactMap { if case .joinMulticastGroup(_, let group) = $0 { group } else { nil } }
    }

    static func leaves(_ actions: [Action]) -> [IPv6Address] {
        actions.compactMap { if case .leaveMulticastGroup(_, let group) = $0 { group } else { nil } }
    }

    @Test func aSharedGroupIsJoinedOnceAndLeftWithItsLastAddress() {
        var (harness, actions) = Self.twoHostsSharingAGroup()
        let group = IPv6Address("fd77::2")!.solicitedNodeGroup
        #expect(group == IPv6Address("fd78::2")!.solicitedNodeGroup)
        #expect(Self.joins(actions) == [group])
        let first = harness.core.forget(
            OwnerKey(interface: Harness.interface, primaryMAC: TakeoverTests.sleeperMAC), now: harness.now,
            reason: "test")
        #expect(Self.leaves(first).isEmpty, "the other address still uses the group")
        let second = harness.core.forget(
            OwnerKey(interface: Harness.interface, primaryMAC: Self.secondMAC), now: harness.now, reason: "test")
        #expect(Self.leaves(second) == [group])
    }

    @Test func theAddressListTravelsWithTheChange() {
        let (_, actions) = Self.twoHostsSharingAGroup()
        let lists = actions.compactMap {
            if case .watchDestinations(_, let prefixes) = $0 { prefixes.map(\.address) } else { nil }
        }
        #expect(lists.last == [.v6(IPv6Address("fd77::2")!), .v6(IPv6Address("fd78::2")!)])
    }

    static let key = OwnerKey(interface: Harness.interface, primaryMAC: TakeoverTests.sleeperMAC)

    static func parsed(_ actions: [Action]) -> [EthernetFrame] {
        actions.injectedFrames.compactMap { try? EthernetFrame(parsing: $0) }
    }

    static func stops(_ actions: [Action]) -> [InterfaceName] {
        actions.compactMap { if case .stopServing(let name) = $0 { name } else { nil } }
    }

    /// A removed interface is not closed under its hosts: each is woken as every wake goes (15 rounds, 2 s apart,
    /// the first two unicast only, then goodbyes), and only then is the interface let go of.
    @Test func aRemovedLinkServesTheWholeWakeOfItsHostsThenCloses() throws {
        var harness = TakeoverTests.taken()
        let actions = harness.core.removeLink(Harness.interface, now: harness.now, reason: "eth0 was removed")
        harness.log += actions
        #expect(actions.contains(.wakeStarted(Harness.interface, .unserved)))
        // Both families are handed back with the first round, one announcement each with the host's MAC.
        let handBack = Self.parsed(actions).filter { $0.arp != nil || $0.icmpv6 != nil }
        #expect(handBack.compactMap(\.arp).map(\.senderHardwareAddress) == [TakeoverTests.sleeperMAC])
        #expect(
            handBack.compactMap { $0.icmpv6?.neighborAdvertisement?.options }.flatMap(\.self)
                == [.targetLinkLayerAddress(TakeoverTests.sleeperMAC)])
        #expect(harness.core.links[Harness.interface] != nil && harness.core.retiring == [Harness.interface])
        #expect(harness.core.owners.count == 1 && Self.stops(actions).isEmpty)
        // Nobody registers there any more.
        let refused = harness.register(
            Update.bytes(
                records: Update.host("other", ipv4: IPv4Address(10, 77, 0, 5)),
                owner: OwnerOption(sequence: 1, primaryMAC: LinkTests.secondMAC)))
        #expect(refused.replies.isEmpty && refused.events.first?.kind == .refused)

        let rest = harness.run(until: harness.now + .seconds(60))
        let magic = (Self.parsed(actions) + Self.parsed(rest)).filter { $0.magicPacket != nil }
        #expect(magic.count == 2 + 13 * 2, "15 rounds: two unicast, then unicast and broadcast")
        let goodbyes = rest.sentMessages.filter { $0.answers.allSatisfy { $0.ttl == 0 } }
        #expect(goodbyes.count >= 3)
        #expect(harness.core.owners.isEmpty)
        #expect(rest.contains(.store(.removeOwner(Self.key))))
        // Closed after its last goodbyes went out, and forgotten.
        let stop = try #require(rest.firstIndex(of: .stopServing(Harness.interface)))
        let lastGoodbye = try #require(rest.lastIndex { if case .sendMDNS = $0 { true } else { false } })
        #expect(lastGoodbye < stop)
        #expect(harness.core.links[Harness.interface] == nil && harness.core.retiring.isEmpty)
        #expect(harness.core.nextDeadline == nil)
        #expect(harness.core.tick(now: harness.now + .seconds(60)).isEmpty)
    }

    /// A host back before its wake is over (its OWNER with a new sequence) is let go silently, and the interface
    /// closes with it.
    @Test func aRemovedLinkClosesWhenItsLastHostIsBack() throws {
        var harness = TakeoverTests.taken()
        harness.log += harness.core.removeLink(Harness.interface, now: harness.now, reason: "eth0 was removed")
        harness.run(until: harness.now + .seconds(5))
        let back = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [
                DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(TakeoverTests.ipv4))
            ],
            additionals: [Update.opt(owner: OwnerOption(sequence: 2, primaryMAC: TakeoverTests.sleeperMAC), lease: nil)]
        ).encoded()
        let actions = harness.mdns(
            back, from: Endpoint(address: .v4(TakeoverTests.ipv4), port: 5353), mac: TakeoverTests.sleeperMAC)
        #expect(harness.core.owners.isEmpty)
        #expect(Self.stops(actions) == [Harness.interface])
        #expect(actions.sentMessages.isEmpty, "no goodbyes: the host answers for itself")
        #expect(harness.core.links[Harness.interface] == nil)
    }

    /// Put back before the wakes are over, the interface is served again: the wake goes on, registrations are
    /// taken, and it does not close.
    @Test func aLinkPutBackDuringItsWakesIsServedAgain() {
        var harness = TakeoverTests.taken()
        harness.log += harness.core.removeLink(Harness.interface, now: harness.now, reason: "eth0 was removed")
        let servedAgain = harness.core.restoreLink(Harness.interface)
        let twice = harness.core.restoreLink(Harness.interface)
        #expect(servedAgain && !twice)
        let accepted = harness.register(
            Update.bytes(
                records: Update.host("other", ipv4: IPv4Address(10, 77, 0, 5)),
                owner: OwnerOption(sequence: 1, primaryMAC: LinkTests.secondMAC)))
        #expect(accepted.replies.count == 1)
        let rest = harness.run(until: harness.now + .seconds(60))
        #expect(harness.owner(TakeoverTests.sleeperMAC) == nil, "the woken host's wake ran its course")
        #expect(Self.stops(rest).isEmpty && harness.core.links[Harness.interface] != nil)
    }

    /// In a dry run nobody is woken: a `would-wake` event, goodbyes, and the interface closes at once.
    @Test func aDryRunRemovalRecordsAndCloses() {
        var configuration = CoreConfiguration()
        configuration.wakePolicy.dryRun = true
        var harness = Harness(configuration: configuration)
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: TakeoverTests.ipv4),
                owner: OwnerOption(sequence: 1, primaryMAC: TakeoverTests.sleeperMAC)))
        harness.run(until: harness.now + .seconds(12))
        let actions = harness.core.removeLink(Harness.interface, now: harness.now, reason: "eth0 was removed")
        #expect(Self.parsed(actions).allSatisfy { $0.magicPacket == nil })
        #expect(actions.events.map(\.kind) == [.wouldWake, .released])
        #expect(Self.stops(actions) == [Harness.interface] && harness.core.owners.isEmpty)
    }

    /// Hosts the store kept on an interface nothing can serve (it could not be opened) cannot be woken: they are
    /// dropped, and the log says why.
    @Test func hostsOnAnInterfaceThatCannotBeServedAreDropped() throws {
        var harness = Harness()
        let gone: InterfaceName = "eth9"
        let records = Update.host("sleepy", ipv4: TakeoverTests.ipv4)
        let saved = Owner(
            key: OwnerKey(interface: gone, primaryMAC: TakeoverTests.sleeperMAC), wakeMAC: TakeoverTests.sleeperMAC,
            sequence: 1, registeredAt: harness.now, updatedAt: harness.now,
            records: records.map {
                HeldRecord(record: $0, sequence: 1, registeredAt: harness.now, expiresAt: harness.now + .seconds(7200))
            })
        harness.log += harness.core.restore([saved], now: harness.now)
        #expect(harness.core.unservedInterfaces == [gone])
        let actions = harness.core.removeLink(gone, now: harness.now, reason: "eth9 is no longer in the configuration")
        #expect(harness.core.owners.isEmpty && harness.core.unservedInterfaces.isEmpty)
        #expect(actions.contains(.store(.removeOwner(saved.key))))
        #expect(actions.logLines.contains { $0.1.contains("cannot be served, so the host is dropped without a wake") })
        #expect(actions.injectedFrames.isEmpty && Self.stops(actions).isEmpty)
    }

    @Test func addressStatesFollowTheTakeOver() {
        var (harness, _) = TakeoverTests.registering()
        let key = OwnerKey(interface: Harness.interface, primaryMAC: TakeoverTests.sleeperMAC)
        #expect(harness.core.addressStates(of: key, now: harness.now).map(\.phase) == [.probing, .probing])
        harness.run(until: harness.now + .seconds(12))
        #expect(harness.core.addressStates(of: key, now: harness.now).map(\.phase) == [.claimed, .claimed])
        _ = harness.core.requestWake(key, now: harness.now, reason: "test")
        #expect(harness.core.addressStates(of: key, now: harness.now).map(\.phase) == [.released, .released])
    }

    @Test func aCleanStopRemovesOurNeighbourEntries() {
        var harness = TakeoverTests.taken()
        // Our own host asks for the sleeper's address: the core points it at the sleeper's NIC.
        _ = harness.frame(
            TakeoverTests.arpRequest(
                from: Harness.proxyMAC, sender: IPv4Address(10, 77, 0, 1), target: TakeoverTests.ipv4))
        #expect(harness.core.actionsOnStop() == [.removeNeighbour(Harness.interface, .v4(TakeoverTests.ipv4))])
    }
}
