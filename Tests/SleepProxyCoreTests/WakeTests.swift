import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// Every branch of the trigger table, and the magic packets the proxy sends (PROTOCOL.md sections 3.5, 3.6).
@Suite("Wake triggers and Wake-on-LAN")
struct WakeTests {
    static let sleeperMAC = TakeoverTests.sleeperMAC
    static let wakerMAC = TakeoverTests.wakerMAC
    static let waker = TakeoverTests.waker

    static func segment(_ port: UInt16, _ flags: TCPSegment.Flags, payload: [UInt8] = []) -> [UInt8] {
        EthernetFrame.tcp(
            TCPSegment(sourcePort: 50_000, destinationPort: port, sequenceNumber: 1, flags: flags, payload: payload),
            sourceAddress: waker, destinationAddress: TakeoverTests.ipv4, source: wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
    }

    static func datagram(_ port: UInt16, _ payload: [UInt8]) -> [UInt8] {
        EthernetFrame.udp(
            UDPDatagram(sourcePort: 50_001, destinationPort: port, payload: payload), sourceAddress: waker,
            destinationAddress: TakeoverTests.ipv4, source: wakerMAC, destination: Harness.proxyMAC
        ).serialized()
    }

    static func wakes(_ actions: [Action]) -> [Event] { actions.events.filter { $0.kind == .wake } }

    @Test func aSYNToARegisteredPortWakesWithTheWholeStory() throws {
        var harness = TakeoverTests.taken()
        let actions = harness.frame(Self.segment(22, .syn))
        let event = try #require(Self.wakes(actions).first)
        #expect(event.source == Endpoint(address: .v4(Self.waker), port: 50_000))
        #expect(event.detail.contains("port 22"))
        #expect(event.detail.contains("sleepy._ssh._tcp.local."))
        // One info line: the host, the trigger, its source and port.
        let lines = actions.logLines.filter { $0.1.hasPrefix("waking ") }
        #expect(lines.count == 1 && lines.first?.0 == .info, "\(lines)")
        let line = try #require(lines.first).1
        #expect(line.hasPrefix("waking sleepy.local (02:77:00:00:00:02%eth0): TCP SYN"), "\(line)")
        #expect(line.contains("from \(Self.waker):50000") && line.contains("port 22"), "\(line)")
        // The first round: the 0x0842 frame and a UDP port 9 copy, both to the wake MAC only.
        let frames = try actions.injectedFrames.map { try EthernetFrame(parsing: $0, verifying: .all) }
        let magic = try #require(frames.first { $0.header.etherType == .wakeOnLAN })
        #expect(magic.header.destination == Self.sleeperMAC && magic.header.source == Harness.proxyMAC)
        #expect(magic.magicPacket?.target == Self.sleeperMAC)
        let udp = try #require(frames.first { $0.udp != nil })
        #expect(udp.udp?.destinationPort == 9)
        #expect(udp.ipv4?.header.destination == IPv4Address(10, 77, 0, 255))
        #expect(udp.header.destination == Self.sleeperMAC)
        #expect(udp.udp?.magicPacket?.target == Self.sleeperMAC)
        #expect(frames.filter { $0.arp == nil && $0.icmpv6 == nil }.allSatisfy { $0.header.destination != .broadcast })
        // The claimed addresses go back to the host at once, one announcement each carrying its MAC, IPv4 as IPv6.
        let handBack = frames.filter { $0.arp != nil || $0.icmpv6 != nil }
        #expect(handBack.compactMap(\.arp).map(\.senderHardwareAddress) == [Self.sleeperMAC])
        #expect(handBack.compactMap(\.arp).map(\.senderProtocolAddress) == [IPv4Address(10, 77, 0, 2)])
        #expect(handBack.compactMap(\.arp).allSatisfy { $0.targetProtocolAddress == $0.senderProtocolAddress })
        #expect(
            handBack.compactMap { $0.icmpv6?.neighborAdvertisement }.map(\.target) == [TakeoverTests.ipv6])
        // The magic packet is the first thing done: the shell carries actions out in order.
        guard case .injectFrame(_, let first) = actions.first else {
            Issue.record("the first action is not the magic packet: \(String(describing: actions.first))")
            return
        }
        #expect(try EthernetFrame(parsing: first).header.etherType == .wakeOnLAN)
    }

    @Test func retransmittedSYNsStartOneSequence() {
        var harness = TakeoverTests.taken()
        harness.frame(Self.segment(22, .syn))
        harness.advance(.seconds(1))
        let again = harness.frame(Self.segment(22, .syn))
        #expect(Self.wakes(again).isEmpty)
        #expect(again.injectedFrames.isEmpty)
    }

    struct Branch: Sendable, CustomTestStringConvertible {
        var port: UInt16
        var flags: TCPSegment.Flags
        var wakes: Bool
        var testDescription: String
    }

    static let branches = [
        Branch(port: 22, flags: [.syn, .rst], wakes: false, testDescription: "RST"),
        Branch(port: 22, flags: [.fin], wakes: false, testDescription: "a lone FIN to ssh"),
        Branch(port: 22, flags: [.fin, .ack], wakes: false, testDescription: "FIN+ACK to ssh"),
        Branch(port: 22, flags: [.ack, .psh], wakes: true, testDescription: "data to ssh (the ssh special case)"),
        Branch(port: 22, flags: [.syn, .ack], wakes: true, testDescription: "SYN+ACK"),
        Branch(port: 80, flags: [.syn], wakes: false, testDescription: "SYN to a port with no service"),
        Branch(port: 80, flags: [.ack, .psh], wakes: false, testDescription: "data to a port with no service"),
    ]

    @Test(arguments: branches)
    func tcpBranches(_ branch: Branch) {
        var harness = TakeoverTests.taken()
        let payload: [UInt8] = branch.flags.contains(.psh) ? [1, 2, 3] : []
        let actions = harness.frame(Self.segment(branch.port, branch.flags, payload: payload))
        #expect(Self.wakes(actions).isEmpty != branch.wakes, "\(branch.testDescription)")
    }

    @Test func udpToAServiceWakesButNotToOtherPorts() throws {
        var harness = Harness()
        var records = Update.host("sleepy", ipv4: TakeoverTests.ipv4)
        let instance: DNSName = "sleepy._sleep-test._udp.local."
        records.append(
            DNSRecord(
                name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 7000, target: "sleepy.local."))))
        harness.register(
            Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: Self.sleeperMAC)))
        harness.run(until: harness.now + .seconds(12))
        #expect(Self.wakes(harness.frame(Self.datagram(7001, [1]))).isEmpty)
        // A TCP SYN to a _udp service's port is not a match either.
        #expect(Self.wakes(harness.frame(Self.segment(7000, .syn))).isEmpty)
        let event = try #require(Self.wakes(harness.frame(Self.datagram(7000, [1, 2]))).first)
        #expect(event.detail.contains("sleepy._sleep-test._udp.local."))
    }

    /// A phone app that cannot broadcast sends its magic packet to the host's own address, port 9 or 7: held, that
    /// address is ours, so the proxy wakes the host with its own magic packets. Only a magic packet naming the host
    /// does; anything else to those ports is discarded as before.
    @Test(arguments: [UInt16(9), 7])
    func aMagicPacketToAHeldAddressWakesItsHost(port: UInt16) throws {
        var harness = TakeoverTests.taken()
        #expect(Self.wakes(harness.frame(Self.datagram(port, [0x01, 0x02]))).isEmpty, "not a magic packet")
        let other = MagicPacket(target: MACAddress(0x02, 0x77, 0, 0, 0, 0x99))
        let refused = harness.frame(Self.datagram(port, other.bytes))
        #expect(Self.wakes(refused).isEmpty, "a magic packet for another machine")
        #expect(refused.logLines.contains { $0.1.contains("names 02:77:00:00:00:99, not this host") })
        #expect(Self.wakes(harness.frame(Self.datagram(5_000, MagicPacket(target: Self.sleeperMAC).bytes))).isEmpty)

        let actions = harness.frame(Self.datagram(port, MagicPacket(target: Self.sleeperMAC).bytes))
        let event = try #require(Self.wakes(actions).first)
        #expect(event.detail.contains("magic packet from \(Self.waker):50001"), "\(event.detail)")
        #expect(event.detail.contains("port \(port)"), "\(event.detail)")
        let frames = try actions.injectedFrames.map { try EthernetFrame(parsing: $0, verifying: .all) }
        #expect(
            frames.contains { $0.magicPacket?.target == Self.sleeperMAC && $0.header.destination == Self.sleeperMAC })
    }

    @Test func aMagicPacketToAHeldAddressFollowsTheWakePolicy() {
        let waker = Link.Prefix(address: .v4(Self.waker), length: 32)
        var harness = WakePolicyTests.taken(WakePolicy(ignoredSources: [waker]))
        let actions = harness.frame(Self.datagram(9, MagicPacket(target: Self.sleeperMAC).bytes))
        #expect(Self.wakes(actions).isEmpty)
        #expect(actions.injectedFrames.isEmpty)
        let ignored = actions.events.filter { $0.kind == .wakeIgnored }
        #expect(ignored.count == 1 && ignored.first?.detail.contains("magic packet") == true, "\(actions.events)")
    }

    @Test func ipsecAndRemoteDesktopSpecialCases() {
        var harness = TakeoverTests.taken()
        #expect(Self.wakes(harness.frame(Self.datagram(4500, [0xFF]))).isEmpty, "NAT keep-alive")
        var ikeInit = [UInt8](repeating: 0, count: 4 + 28)
        ikeInit[4 + 18] = 34
        #expect(Self.wakes(harness.frame(Self.datagram(4500, ikeInit))).isEmpty, "IKE_SA_INIT")
        #expect(Self.wakes(harness.frame(Self.datagram(3283, [0x13, 0x88]))).isEmpty, "short ARD datagram")
        var ard = [UInt8](repeating: 0, count: 110)
        ard[0] = 0x13
        ard[1] = 0x88
        #expect(Self.wakes(harness.frame(Self.datagram(3283, ard))).isEmpty, "no ARD service registered")
        var other = TakeoverTests.taken()
        #expect(Self.wakes(other.frame(Self.datagram(4500, [0x12, 0x34, 0x56, 0x78, 1]))).count == 1, "ESP")
    }

    @Test func icmpNeverWakes() {
        var harness = TakeoverTests.taken()
        let ping = EthernetFrame.ipv4(
            header: IPv4Header(transportProtocol: .icmp, source: Self.waker, destination: TakeoverTests.ipv4),
            payload: .other([8, 0, 0xF7, 0xFF, 0, 0, 0, 0]), source: Self.wakerMAC, destination: Harness.proxyMAC
        ).serialized()
        #expect(harness.frame(ping).isEmpty)
    }

    @Test func roundsEveryTwoSecondsUnicastFirstThenBroadcastThenGoodbyes() throws {
        var harness = TakeoverTests.taken()
        let start = harness.now
        var rounds: [(Duration, [EthernetFrame])] = [
            (.zero, try harness.frame(Self.segment(22, .syn)).injectedFrames.map { try EthernetFrame(parsing: $0) })
        ]
        while let deadline = harness.core.nextDeadline, deadline <= start + .seconds(60) {
            harness.now = deadline
            let frames = try harness.tick().injectedFrames.map { try EthernetFrame(parsing: $0) }
            if !frames.isEmpty { rounds.append((harness.now - start, frames)) }
        }
        #expect(rounds.count == 15)
        #expect(rounds.map(\.0) == (0..<15).map { Duration.seconds(2 * $0) })
        for (index, round) in rounds.enumerated() {
            let magic = round.1.filter { $0.header.etherType == .wakeOnLAN }
            #expect(magic.map(\.header.destination) == (index < 2 ? [Self.sleeperMAC] : [Self.sleeperMAC, .broadcast]))
        }
        // The first round hands the IPv6 address back to the host's MAC, once.
        let handBack = rounds[0].1.compactMap { $0.icmpv6?.neighborAdvertisement }
        #expect(handBack.map(\.targetLinkLayerAddress) == [Self.sleeperMAC])
        #expect(rounds.dropFirst().allSatisfy { $0.1.allSatisfy { $0.icmpv6 == nil } })
        // No sign: three goodbyes two seconds apart, then the owner goes.
        #expect(harness.core.owners.isEmpty)
        #expect(harness.log.sentMessages.filter { $0.answers.allSatisfy { $0.ttl == 0 } }.count == 6)
    }

    @Test func theHostShowingItselfStopsTheWake() throws {
        var harness = TakeoverTests.taken()
        harness.frame(Self.segment(22, .syn))
        harness.advance(.seconds(3))
        // The woken Mac announces with OWNER and its next sequence number.
        let announcement = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: [DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(TakeoverTests.ipv4))],
            additionals: [Update.opt(owner: OwnerOption(sequence: 2, primaryMAC: Self.sleeperMAC), lease: nil)]
        ).encoded()
        let released = harness.mdns(announcement, mac: Self.sleeperMAC)
        #expect(released.events.map(\.kind) == [.released])
        #expect(released.transmissions.isEmpty && released.injectedFrames.isEmpty)
        #expect(harness.core.owners.isEmpty)
        #expect(harness.run(until: harness.now + .seconds(40)).injectedFrames.isEmpty)
    }

    @Test func whileWakingNothingIsAnswered() {
        var harness = TakeoverTests.taken()
        harness.frame(Self.segment(22, .syn))
        #expect(harness.mdns(Query.bytes("sleepy.local.", .a)).transmissions.isEmpty)
        let request = TakeoverTests.arpRequest(from: Self.wakerMAC, sender: Self.waker, target: TakeoverTests.ipv4)
        #expect(harness.frame(request).injectedFrames.isEmpty)
    }

    @Test func theSecureOnPasswordIsSent() throws {
        var harness = Harness()
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: TakeoverTests.ipv4),
                owner: OwnerOption(
                    sequence: 1, primaryMAC: Self.sleeperMAC, wakeMAC: Self.sleeperMAC, password: [1, 2, 3, 4, 5, 6])))
        harness.run(until: harness.now + .seconds(12))
        let frames = try harness.frame(Self.segment(22, .syn)).injectedFrames.map { try EthernetFrame(parsing: $0) }
        let magic = try #require(frames.first { $0.header.etherType == .wakeOnLAN }?.magicPacket)
        #expect(magic.password?.bytes == [1, 2, 3, 4, 5, 6])
    }

    @Test func anAdministratorCanAskForAWake() {
        var harness = TakeoverTests.taken()
        let key = OwnerKey(interface: "eth0", primaryMAC: Self.sleeperMAC)
        let actions = harness.core.requestWake(key, now: harness.now, reason: "sleepproxyctl wake")
        #expect(Self.wakes(actions).first?.detail == "sleepproxyctl wake")
    }
}

/// Wake rules that match Apple's `mDNSCoreReceiveRawTransportPacket`, beyond the trigger table.
@Suite("Wake rules as Apple applies them")
struct WakeRuleTests {
    static func ardHost() -> Harness {
        var harness = Harness()
        let ard = DNSRecord(
            name: "sleepy._net-assistant._udp.local.", ttl: 120, cacheFlush: true,
            rdata: .srv(SRVData(port: 3283, target: "sleepy.local.")))
        harness.register(
            Update.bytes(
                records: Update.host("sleepy", ipv4: TakeoverTests.ipv4) + [ard],
                owner: OwnerOption(sequence: 1, primaryMAC: TakeoverTests.sleeperMAC)))
        harness.run(until: harness.now + .seconds(12))
        return harness
    }

    /// ARD consoles poll UDP 3283 all the time: only ARD's own wake datagram wakes, and only a host with ARD.
    @Test func remoteDesktopPollsNeverWakeItsWakeDatagramDoes() {
        var harness = Self.ardHost()
        #expect(WakeTests.wakes(harness.frame(WakeTests.datagram(3283, Array(repeating: 1, count: 200)))).isEmpty)
        var wake = [UInt8](repeating: 0, count: 110)
        wake[0] = 0x13
        wake[1] = 0x88
        #expect(WakeTests.wakes(harness.frame(WakeTests.datagram(3283, wake))).count == 1)
    }

    static func fragment(offset: UInt16, moreFragments: Bool, port: UInt16) -> [UInt8] {
        let whole = EthernetFrame.tcp(
            TCPSegment(sourcePort: 50_000, destinationPort: port, sequenceNumber: 1, flags: .syn),
            sourceAddress: WakeTests.waker, destinationAddress: TakeoverTests.ipv4, source: WakeTests.wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
        let tcp = Array(whole[34...]) + [UInt8](repeating: 0, count: 16)
        return EthernetFrame.ipv4(
            header: IPv4Header(
                identification: 7, flags: moreFragments ? .moreFragments : [], fragmentOffset: offset,
                transportProtocol: .tcp, source: WakeTests.waker, destination: TakeoverTests.ipv4),
            payload: .other(offset == 0 ? tcp : Array(repeating: 0, count: 16)), source: WakeTests.wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
    }

    /// The first fragment (offset 0, more to come) carries the TCP header and is examined; later ones are not.
    @Test func aFirstFragmentIsExamined() {
        var harness = TakeoverTests.taken()
        #expect(WakeTests.wakes(harness.frame(Self.fragment(offset: 2, moreFragments: false, port: 22))).isEmpty)
        #expect(WakeTests.wakes(harness.frame(Self.fragment(offset: 0, moreFragments: true, port: 80))).isEmpty)
        #expect(WakeTests.wakes(harness.frame(Self.fragment(offset: 0, moreFragments: true, port: 22))).count == 1)
    }

    /// The proxy's own host is a client like any other: its SYN to a held service wakes the host.
    @Test func ourOwnHostsSYNWakes() throws {
        var harness = TakeoverTests.taken()
        let syn = EthernetFrame.tcp(
            TCPSegment(sourcePort: 40_000, destinationPort: 22, sequenceNumber: 1, flags: .syn),
            sourceAddress: IPv4Address(10, 77, 0, 1), destinationAddress: TakeoverTests.ipv4, source: Harness.proxyMAC,
            destination: TakeoverTests.sleeperMAC
        ).serialized()
        let event = try #require(WakeTests.wakes(harness.frame(syn)).first)
        #expect(event.detail.contains("TCP SYN from 10.77.0.1:40000"))
    }
}
