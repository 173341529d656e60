import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// Frames in and out of the address take-over, with the clock injected (PROTOCOL.md sections 3.2 and 3.3).
@Suite("Address take-over")
struct TakeoverTests {
    static let sleeperMAC = MACAddress(0x02, 0x77, 0, 0, 0, 2)
    static let wakerMAC = MACAddress(0x02, 0x77, 0, 0, 0, 3)
    static let ipv4 = IPv4Address(10, 77, 0, 2)
    static let ipv6 = IPv6Address("fd77::2")!
    static let waker = IPv4Address(10, 77, 0, 3)

    /// A host with an IPv4 and an IPv6 address (each with its reverse PTR) and ssh, registered at `now`.
    static func registering() -> (Harness, [Action]) {
        var harness = Harness()
        var records = Update.host("sleepy", ipv4: ipv4)
        records.append(
            DNSRecord(
                name: ReverseMapping.name(of: .v6(ipv6)), ttl: 120, cacheFlush: true, rdata: .ptr("sleepy.local.")))
        let actions = harness.register(
            Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: sleeperMAC)))
        return (harness, actions)
    }

    static func taken() -> Harness {
        var (harness, _) = registering()
        harness.run(until: harness.now + .seconds(12))
        return harness
    }

    /// The sleeper's kernel answering our ARP probe: it is awake.
    static let probeAnswer = EthernetFrame.arp(
        ARPPacket(
            operation: .reply, senderHardwareAddress: sleeperMAC, senderProtocolAddress: ipv4,
            targetHardwareAddress: Harness.proxyMAC, targetProtocolAddress: .any),
        source: sleeperMAC, destination: Harness.proxyMAC
    ).serialized()

    static func arpRequest(from mac: MACAddress, sender: IPv4Address, target: IPv4Address) -> [UInt8] {
        EthernetFrame.arp(
            ARPPacket(
                operation: .request, senderHardwareAddress: mac, senderProtocolAddress: sender,
                targetHardwareAddress: .zero, targetProtocolAddress: target),
            source: mac, destination: .broadcast
        ).serialized()
    }

    /// The addresses the capture watches (each alone while few) stay sorted and complete as hosts come and go, in
    /// whatever order they register, and each list in an action is the whole of it.
    @Test func theWatchedListFollowsEveryHost() throws {
        var harness = Harness()
        let addresses: [IPv4Address] = [
            IPv4Address(10, 77, 0, 40), IPv4Address(10, 77, 0, 12), IPv4Address(10, 77, 0, 31),
        ]
        var lastList: [IPAddress] = []
        for (index, address) in addresses.enumerated() {
            let actions = harness.register(
                Update.bytes(
                    records: Update.host("host\(index)", ipv4: address),
                    owner: OwnerOption(sequence: 1, primaryMAC: MACAddress(0x02, 0x55, 0, 0, 0, UInt8(index + 1)))))
            for case .watchDestinations("eth0", let prefixes) in actions { lastList = prefixes.map(\.address) }
        }
        let all = addresses.map { IPAddress.v4($0) }.sorted()
        #expect(lastList == all)
        #expect(harness.core.proxiedAddresses(on: "eth0") == all)

        // The same host registering again with the same address changes nothing on the list.
        let again = harness.register(
            Update.bytes(
                records: Update.host("host0", ipv4: addresses[0]),
                owner: OwnerOption(sequence: 2, primaryMAC: MACAddress(0x02, 0x55, 0, 0, 0, 1))))
        #expect(!again.contains { if case .watchDestinations = $0 { true } else { false } })
        // Moving to another address replaces it in the list.
        let moved = harness.register(
            Update.bytes(
                records: Update.host("host0", ipv4: IPv4Address(10, 77, 0, 5)),
                owner: OwnerOption(sequence: 3, primaryMAC: MACAddress(0x02, 0x55, 0, 0, 0, 1))))
        let expected = ([IPv4Address(10, 77, 0, 5)] + addresses.dropFirst()).map { IPAddress.v4($0) }.sorted()
        #expect(
            moved.contains {
                if case .watchDestinations("eth0", let prefixes) = $0 {
                    prefixes.map(\.address) == expected
                } else {
                    false
                }
            })
        #expect(harness.core.proxiedAddresses(on: "eth0") == expected)
    }

    /// Registrations read together change the watched list once, at the end, with every new address in it; a
    /// host in the batch that moves its address takes the old one off the list.
    @Test func aBatchOfRegistrationsChangesTheWatchedListOnce() throws {
        var harness = Harness()
        func datagram(_ index: Int, address: UInt8, sequence: UInt8 = 1) -> RegistrationDatagram {
            RegistrationDatagram(
                interface: Harness.interface, source: Harness.sleeper, destination: Harness.proxy,
                bytes: Update.bytes(
                    id: UInt16(index), records: Update.host("host\(index)", ipv4: IPv4Address(10, 77, 0, address)),
                    owner: OwnerOption(sequence: sequence, primaryMAC: MACAddress(0x02, 0x56, 0, 0, 0, UInt8(index)))))
        }
        let batch = [datagram(1, address: 41), datagram(2, address: 12), datagram(3, address: 33)]
        let actions = harness.core.handleRegistrations(batch, now: harness.now)
        #expect(actions.replies.count == 3)
        let lists = actions.compactMap {
            if case .watchDestinations(_, let prefixes) = $0 { prefixes.map(\.address) } else { nil }
        }
        let first: [IPAddress] = [41, 12, 33].map { .v4(IPv4Address(10, 77, 0, $0)) }.sorted()
        #expect(lists == [first])

        // Within a batch the list is appended to and sorted at the end; an address that goes meanwhile (host 1
        // wakes and sleeps again with another) is taken out of it all the same.
        let next = harness.core.handleRegistrations(
            (0..<4).map { datagram(10 + $0, address: UInt8(5 + $0)) } + [datagram(1, address: 42, sequence: 2)],
            now: harness.now)
        let after = next.compactMap {
            if case .watchDestinations(_, let prefixes) = $0 { prefixes.map(\.address) } else { nil }
        }
        let second: [IPAddress] = [42, 12, 33, 5, 6, 7, 8].map { .v4(IPv4Address(10, 77, 0, $0)) }.sorted()
        #expect(after == [second])
        #expect(harness.core.proxiedAddresses(on: "eth0") == second)
        // A batch of one is a single registration: its list comes with it.
        let single = harness.core.handleRegistrations([datagram(5, address: 60)], now: harness.now)
        #expect(single.contains { if case .watchDestinations = $0 { true } else { false } })
    }

    /// With many held, the capture watches prefixes: a host that comes or goes within one of them changes nothing
    /// the shell is told; one outside them does.
    @Test func manyAddressesAreWatchedAsPrefixesThatRarelyChange() throws {
        var harness = Harness()
        func datagram(_ index: Int, address: IPv4Address) -> RegistrationDatagram {
            RegistrationDatagram(
                interface: Harness.interface, source: Harness.sleeper, destination: Harness.proxy,
                bytes: Update.bytes(
                    id: UInt16(index), records: Update.host("host\(index)", ipv4: address),
                    owner: OwnerOption(
                        sequence: 1, primaryMAC: MACAddress(0x02, 0x57, 0, 0, UInt8(index >> 8), UInt8(index & 0xFF)))))
        }
        // 100 addresses in 10.77.0.0/24 are more than 32: folded into the seven /28 blocks they use.
        let actions = harness.core.handleRegistrations(
            (1...100).map { datagram($0, address: IPv4Address(10, 77, 0, UInt8($0))) }, now: harness.now)
        let watched = actions.compactMap { if case .watchDestinations(_, let prefixes) = $0 { prefixes } else { nil } }
        #expect(watched.count == 1)
        #expect(watched.first?.map(\.description) == (0..<7).map { "10.77.0.\($0 * 16)/28" })
        // One more in a block already watched: nothing to tell the shell.
        let inside = harness.core.handleRegistrations(
            [datagram(101, address: IPv4Address(10, 77, 0, 101))], now: harness.now)
        #expect(inside.replies.count == 1)
        #expect(!inside.contains { if case .watchDestinations = $0 { true } else { false } })
        // One in a block not watched yet: the blocks grow by one.
        let outside = harness.core.handleRegistrations(
            [datagram(102, address: IPv4Address(10, 77, 0, 200))], now: harness.now)
        #expect(
            outside.contains {
                if case .watchDestinations("eth0", let prefixes) = $0 { prefixes.count == 8 } else { false }
            })
        #expect(harness.core.proxiedAddresses(on: "eth0").count == 102)
        // A capture opened anew there (an interface served again from a reload) is handed them all the same.
        let reopened = harness.core.captureOpened(on: "eth0")
        #expect(
            reopened.contains {
                if case .watchDestinations("eth0", let prefixes) = $0 { prefixes.count == 8 } else { false }
            })
    }

    @Test func probesThenAnnouncesOnApplesSchedule() throws {
        var (harness, first) = Self.registering()
        let start = harness.now
        #expect(first.contains(.joinMulticastGroup("eth0", Self.ipv6.solicitedNodeGroup)))
        #expect(
            first.contains {
                if case .watchDestinations("eth0", let prefixes) = $0 { !prefixes.isEmpty } else { false }
            })
        #expect(Set(harness.core.proxiedAddresses(on: "eth0")) == [.v4(Self.ipv4), .v6(Self.ipv6)])
        var sent: [(Duration, EthernetFrame)] = []
        while let deadline = harness.core.nextDeadline, deadline <= start + .seconds(20) {
            harness.now = deadline
            for bytes in harness.tick().injectedFrames {
                sent.append((harness.now - start, try EthernetFrame(parsing: bytes, verifying: .all)))
            }
        }
        let arp = sent.filter { $0.1.arp != nil }
        #expect(arp.map(\.0) == [1, 2, 3, 4, 5, 7, 11].map { Duration.seconds($0) })
        // Probes: unicast to the wake MAC, sender address 0.0.0.0, our MAC.
        for (_, probe) in arp.prefix(3) {
            #expect(probe.header.destination == Self.sleeperMAC && probe.header.source == Harness.proxyMAC)
            #expect(probe.arp?.isProbe == true && probe.arp?.targetProtocolAddress == Self.ipv4)
        }
        // Announcements: broadcast, sender and target the held address, our MAC.
        for (_, announcement) in arp.suffix(4) {
            #expect(announcement.header.destination == .broadcast)
            #expect(announcement.arp?.isGratuitous == true)
            #expect(announcement.arp?.senderHardwareAddress == Harness.proxyMAC)
            #expect(announcement.arp?.senderProtocolAddress == Self.ipv4)
        }
        let nd = sent.filter { $0.1.icmpv6 != nil }
        #expect(nd.map(\.0) == [1, 2, 3, 4, 5, 7, 11].map { Duration.seconds($0) })
        let probe = try #require(nd.first?.1)
        #expect(probe.header.destination == Self.sleeperMAC)
        #expect(probe.ipv6?.header.source == .unspecified && probe.ipv6?.header.hopLimit == 255)
        #expect(probe.ipv6?.header.destination == Self.ipv6.solicitedNodeGroup)
        #expect(probe.icmpv6?.neighborSolicitation?.target == Self.ipv6)
        #expect(probe.icmpv6?.neighborSolicitation?.sourceLinkLayerAddress == nil)
        let advertisement = try #require(nd.last?.1)
        #expect(advertisement.ipv6?.header.destination == .allNodes)
        #expect(advertisement.icmpv6?.neighborAdvertisement?.flags == .override)
        #expect(advertisement.icmpv6?.neighborAdvertisement?.targetLinkLayerAddress == Harness.proxyMAC)
        #expect(harness.log.events.filter { $0.kind == .takeover }.count == 2)
    }

    /// Claiming lazily: the same three probes, then nothing sent of our own; requests are answered from the
    /// moment the probes went unanswered, and the take-over is recorded as answering requests only.
    @Test func aLazyClaimSendsNoAnnouncementAndStillAnswersRequests() throws {
        var configuration = CoreConfiguration()
        configuration.addressClaim = .lazy
        var harness = Harness(configuration: configuration)
        var records = Update.host("sleepy", ipv4: Self.ipv4)
        records.append(
            DNSRecord(
                name: ReverseMapping.name(of: .v6(Self.ipv6)), ttl: 120, cacheFlush: true, rdata: .ptr("sleepy.local."))
        )
        harness.register(Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: Self.sleeperMAC)))
        let start = harness.now
        var sent: [(Duration, EthernetFrame)] = []
        while let deadline = harness.core.nextDeadline, deadline <= start + .seconds(20) {
            harness.now = deadline
            for bytes in harness.tick().injectedFrames {
                sent.append((harness.now - start, try EthernetFrame(parsing: bytes, verifying: .all)))
            }
        }
        #expect(sent.filter { $0.1.arp != nil }.map(\.0) == [1, 2, 3].map { Duration.seconds($0) })
        #expect(sent.filter { $0.1.icmpv6 != nil }.map(\.0) == [1, 2, 3].map { Duration.seconds($0) })
        #expect(sent.allSatisfy { $0.1.header.destination == Self.sleeperMAC }, "probes only, to the host")
        let takeovers = harness.log.events.filter { $0.kind == .takeover }
        #expect(
            takeovers.map(\.detail).sorted() == [
                "took over 10.77.0.2 (answering requests only)", "took over fd77::2 (answering requests only)",
            ])

        let request = Self.arpRequest(from: Self.wakerMAC, sender: Self.waker, target: Self.ipv4)
        let reply = try EthernetFrame(parsing: #require(harness.frame(request).injectedFrames.first))
        #expect(reply.header.destination == Self.wakerMAC)
        #expect(reply.arp?.operation == .reply && reply.arp?.senderHardwareAddress == Harness.proxyMAC)
    }

    @Test func requestsAreAnsweredOnlyAfterTheFirstAnnouncement() throws {
        var (harness, _) = Self.registering()
        let request = Self.arpRequest(from: Self.wakerMAC, sender: Self.waker, target: Self.ipv4)
        harness.run(until: harness.now + .milliseconds(2500))
        #expect(harness.frame(request).injectedFrames.isEmpty, "still probing: the blind spot")
        harness.run(until: harness.now + .seconds(2))
        let reply = try EthernetFrame(parsing: #require(harness.frame(request).injectedFrames.first))
        #expect(reply.header.destination == Self.wakerMAC)
        #expect(reply.arp?.operation == .reply)
        #expect(reply.arp?.senderHardwareAddress == Harness.proxyMAC && reply.arp?.senderProtocolAddress == Self.ipv4)
        #expect(reply.arp?.targetHardwareAddress == Self.wakerMAC && reply.arp?.targetProtocolAddress == Self.waker)
    }

    @Test func theHostAskingForItsOwnAddressRestartsProbing() throws {
        var harness = Self.taken()
        let start = harness.now
        harness.frame(Self.arpRequest(from: Self.sleeperMAC, sender: .any, target: Self.ipv4))
        // A restart after the announcements began waits 10 s before probing again, then probes three times.
        func probes(_ actions: [Action]) -> Int {
            actions.injectedFrames.compactMap { try? EthernetFrame(parsing: $0) }.filter { $0.arp?.isProbe == true }
                .count
        }
        #expect(probes(harness.run(until: start + .milliseconds(9_900))) == 0)
        #expect(probes(harness.run(until: start + .seconds(12))) == 3)
        #expect(harness.core.owners.count == 1)
    }

    /// A gratuitous ARP from the host may be a stray packet from before it slept (mDNS.c `RestartARPProbing`):
    /// probing starts again, ten seconds later since the address was claimed, and nothing is released.
    @Test func aGratuitousARPFromTheHostRestartsProbingAndNeverReleasesByItself() throws {
        var harness = Self.taken()
        let actions = harness.frame(Self.arpRequest(from: Self.sleeperMAC, sender: Self.ipv4, target: Self.ipv4))
        #expect(actions.events.isEmpty)
        #expect(harness.core.owners.count == 1)
        // Requests from others are not answered while the address is probed again.
        let request = Self.arpRequest(from: Self.wakerMAC, sender: Self.waker, target: Self.ipv4)
        #expect(harness.frame(request).injectedFrames.isEmpty)
        let start = harness.now
        var probes: [Duration] = []
        while let deadline = harness.core.nextDeadline, deadline <= start + .seconds(15) {
            harness.now = deadline
            for bytes in harness.tick().injectedFrames {
                if let arp = try EthernetFrame(parsing: bytes).arp, arp.senderProtocolAddress.isUnspecified,
                    arp.targetProtocolAddress == Self.ipv4
                {
                    probes.append(harness.now - start)
                }
            }
        }
        #expect(probes == [10, 11, 12].map { Duration.seconds($0) })
        #expect(harness.frame(request).injectedFrames.count == 1, "answered again once it is claimed again")
    }

    /// A host that keeps answering our probes after probing was restarted the maximum number of times is awake:
    /// it is released rather than have its address claimed under it (a lease restored after the proxy was down
    /// may belong to a host that woke meanwhile).
    @Test func aHostStillAnsweringAfterTheLastRestartIsReleased() throws {
        var (harness, _) = Self.registering()
        let reply = Self.probeAnswer
        var answered = 0
        var released: [Event] = []
        while released.isEmpty, answered < 30, let deadline = harness.core.nextDeadline {
            harness.now = deadline
            let sent = harness.tick().injectedFrames.compactMap { try? EthernetFrame(parsing: $0).arp }
            #expect(!sent.contains { $0.senderProtocolAddress == Self.ipv4 }, "the address is never claimed")
            if sent.contains(where: { $0.senderProtocolAddress.isUnspecified && $0.targetProtocolAddress == Self.ipv4 })
            {
                answered += 1
                released = harness.frame(reply).events.filter { $0.kind == .released }
            }
        }
        #expect(answered == 21, "20 restarts, then the 21st answer releases")
        #expect(released.first?.detail.contains("after 20 probe restarts: it is awake") == true)
        #expect(harness.core.owners.isEmpty)
        #expect(
            harness.log.transmissions.allSatisfy {
                (try? DNSMessage(decoding: $0.bytes))?.answers.allSatisfy { $0.ttl > 0 } ?? true
            })
    }

    @Test func anotherMACUsingAHeldAddressIsAConflictThatWakes() {
        var harness = Self.taken()
        let intruder = MACAddress(0x02, 0, 0, 0, 0, 0x66)
        let actions = harness.frame(Self.arpRequest(from: intruder, sender: Self.ipv4, target: Self.ipv4))
        #expect(actions.events.map(\.kind) == [.wake])
        #expect(actions.events.first?.detail.contains("address conflict") == true)
        #expect(harness.core.owners.count == 1)
    }

    @Test func ourOwnHostIsPointedAtTheRealNIC() {
        var harness = Self.taken()
        let request = Self.arpRequest(from: Harness.proxyMAC, sender: IPv4Address(10, 77, 0, 1), target: Self.ipv4)
        let actions = harness.frame(request)
        #expect(actions.contains(.setNeighbour("eth0", .v4(Self.ipv4), Self.sleeperMAC)))
        #expect(actions.injectedFrames.isEmpty)
        // Released (the host probes for its name, as a returning host's mDNS stack does): the entry goes.
        let probe = Query.bytes(
            [DNSQuestion(name: "sleepy.local.", type: .any, unicastResponse: true)],
            authorities: [DNSRecord(name: "sleepy.local.", ttl: 120, rdata: .a(Self.ipv4))])
        let release = harness.mdns(probe, mac: Self.sleeperMAC)
        #expect(release.contains(.removeNeighbour("eth0", .v4(Self.ipv4))))
    }

    /// The capture also returns the proxy's own probes and announcements: they change nothing.
    @Test func ourOwnFramesComingBackAreIgnored() throws {
        var (harness, _) = Self.registering()
        let start = harness.now
        while let deadline = harness.core.nextDeadline, deadline <= start + .seconds(12) {
            harness.now = deadline
            for bytes in harness.tick().injectedFrames {
                let echo = harness.frame(bytes)
                #expect(echo.isEmpty, "our own frame caused \(echo)")
            }
        }
        #expect(harness.core.owners.count == 1)
    }

    @Test func neighbourSolicitationsAreAnswered() throws {
        var harness = Self.taken()
        let wakerIPv6 = IPv6Address("fd77::3")!
        let solicitation = EthernetFrame.neighborSolicitation(
            for: Self.ipv6, sourceAddress: wakerIPv6, source: Self.wakerMAC,
            destination: MACAddress(ipv6Multicast: Self.ipv6.solicitedNodeGroup)
        ).serialized()
        let answer = try EthernetFrame(
            parsing: #require(harness.frame(solicitation).injectedFrames.first), verifying: .all)
        #expect(answer.header.destination == Self.wakerMAC)
        #expect(answer.ipv6?.header.destination == wakerIPv6)
        #expect(answer.icmpv6?.neighborAdvertisement?.flags == [.solicited, .override])
        #expect(answer.icmpv6?.neighborAdvertisement?.targetLinkLayerAddress == Harness.proxyMAC)
        // A duplicate-address probe (from ::) is answered to all nodes, Override only.
        let dad = EthernetFrame.neighborSolicitation(
            for: Self.ipv6, sourceAddress: .unspecified, source: Self.wakerMAC,
            destination: MACAddress(ipv6Multicast: Self.ipv6.solicitedNodeGroup)
        ).serialized()
        let defense = try EthernetFrame(parsing: #require(harness.frame(dad).injectedFrames.first))
        #expect(defense.ipv6?.header.destination == .allNodes)
        #expect(defense.icmpv6?.neighborAdvertisement?.flags == .override)
    }

    @Test func anAdvertisementFromTheHostRestartsProbingOfThatAddressOnly() throws {
        var harness = Self.taken()
        let advertisement = EthernetFrame.neighborAdvertisement(
            for: Self.ipv6, flags: .override, targetLinkLayerAddress: Self.sleeperMAC, sourceAddress: Self.ipv6,
            source: Self.sleeperMAC
        ).serialized()
        #expect(harness.frame(advertisement).events.isEmpty)
        #expect(harness.core.owners.count == 1)
        #expect(harness.core.state(of: OwnerKey(interface: "eth0", primaryMAC: Self.sleeperMAC)) == .takingOver)
        // IPv4 is still claimed: its requests are answered.
        let request = Self.arpRequest(from: Self.wakerMAC, sender: Self.waker, target: Self.ipv4)
        #expect(harness.frame(request).injectedFrames.count == 1)
    }
}
