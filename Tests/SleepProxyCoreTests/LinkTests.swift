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

    @Test func removingALinkWakesItsHostsAndDropsThem() throws {
        var harness = TakeoverTests.taken()
        let actions = harness.core.removeLink(Harness.interface, now: harness.now, reason: "eth0 was removed")
        let magic = actions.compactMap { action -> MACAddress? in
            guard case .injectFrame(_, let bytes) = action else { return nil }
            return (try? EthernetFrame(parsing: bytes))?.magicPacket?.target
        }
        #expect(magic.contains(TakeoverTests.sleeperMAC))
        #expect(
            actions.contains(
                .store(.removeOwner(OwnerKey(interface: Harness.interface, primaryMAC: TakeoverTests.sleeperMAC)))))
        #expect(harness.core.owners.isEmpty)
        #expect(harness.core.links[Harness.interface] == nil)
        #expect(harness.core.nextDeadline == nil || harness.core.nextDeadline! > harness.now)
        // The goodbyes went out before the link was forgotten; nothing is scheduled for it afterwards.
        #expect(
            harness.core.tick(now: harness.now + .seconds(60)).allSatisfy {
                if case .sendMDNS = $0 { false } else { true }
            })
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
