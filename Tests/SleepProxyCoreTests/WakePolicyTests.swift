import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// The administrator's wake policy on top of the protocol's trigger table: ignored sources, hosts never woken,
/// extra wake ports and the dry run, with their events and rate limits.
@Suite("Wake policy")
struct WakePolicyTests {
    static let sleeperMAC = TakeoverTests.sleeperMAC
    static let key = OwnerKey(interface: Harness.interface, primaryMAC: sleeperMAC)
    static let monitor = IPv4Address(192, 0, 2, 9)
    static let monitoringNetwork = Link.Prefix(address: .v4(IPv4Address(192, 0, 2, 0)), length: 24)
    static let otherMAC = MACAddress(0x02, 0x77, 0, 0, 0, 4)
    static let otherIPv4 = IPv4Address(10, 77, 0, 4)

    // MARK: Building blocks

    /// `sleepy` (ssh on TCP 22, an IPv4 and an IPv6 address) registered under `policy`, its addresses claimed.
    static func taken(_ policy: WakePolicy = WakePolicy(), extraRecords: [DNSRecord] = []) -> Harness {
        var harness = Harness(configuration: CoreConfiguration(wakePolicy: policy))
        var records = Update.host("sleepy", ipv4: TakeoverTests.ipv4) + extraRecords
        records.append(
            DNSRecord(
                name: ReverseMapping.name(of: .v6(TakeoverTests.ipv6)), ttl: 120, cacheFlush: true,
                rdata: .ptr("sleepy.local.")))
        harness.register(Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: sleeperMAC)))
        harness.run(until: harness.now + .seconds(12))
        return harness
    }

    /// `sleepy` and a second host, `other` (ssh only), both claimed.
    static func twoHosts(_ policy: WakePolicy) -> Harness {
        var harness = taken(policy)
        harness.register(
            Update.bytes(
                records: Update.host("other", ipv4: otherIPv4), owner: OwnerOption(sequence: 1, primaryMAC: otherMAC)))
        harness.run(until: harness.now + .seconds(12))
        return harness
    }

    static func syn(
        from source: IPv4Address = WakeTests.waker, port: UInt16 = 22, to destination: IPv4Address = TakeoverTests.ipv4,
        sourcePort: UInt16 = 40_000
    ) -> [UInt8] {
        EthernetFrame.tcp(
            TCPSegment(sourcePort: sourcePort, destinationPort: port, sequenceNumber: 1, flags: .syn),
            sourceAddress: source, destinationAddress: destination, source: WakeTests.wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
    }

    static func syn6(from source: IPv6Address, port: UInt16 = 22) -> [UInt8] {
        EthernetFrame.tcp(
            TCPSegment(sourcePort: 40_000, destinationPort: port, sequenceNumber: 1, flags: .syn),
            sourceAddress: source, destinationAddress: TakeoverTests.ipv6, source: WakeTests.wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
    }

    static func datagram(
        from source: IPv4Address = WakeTests.waker, port: UInt16, payload: [UInt8] = [1, 2],
        to destination: IPv4Address = TakeoverTests.ipv4
    ) -> [UInt8] {
        EthernetFrame.udp(
            UDPDatagram(sourcePort: 40_001, destinationPort: port, payload: payload), sourceAddress: source,
            destinationAddress: destination, source: WakeTests.wakerMAC, destination: Harness.proxyMAC
        ).serialized()
    }

    /// Magic packets among the injected frames: the 0x0842 frame and its UDP port 9 copy.
    static func magicPackets(_ actions: [Action]) -> Int {
        actions.injectedFrames.compactMap { try? EthernetFrame(parsing: $0) }.filter {
            $0.header.etherType == .wakeOnLAN || $0.udp?.destinationPort == 9
        }.count
    }

    static func kinds(_ actions: [Action]) -> [Event.Kind] { actions.events.map(\.kind) }

    /// Whether the host is still answered and its IPv4 address still defended.
    static func isHeld(_ harness: inout Harness) -> Bool {
        let answered = !harness.mdns(Query.bytes("sleepy.local.", .a)).transmissions.isEmpty
        let request = TakeoverTests.arpRequest(
            from: WakeTests.wakerMAC, sender: WakeTests.waker, target: TakeoverTests.ipv4)
        let defended = !harness.frame(request).injectedFrames.isEmpty
        return answered && defended && harness.core.state(of: key) == .held
    }

    /// The detail a wake for a SYN from `source` to ssh would have.
    static func sshReason(from source: String) -> String {
        "TCP SYN from \(source) to 10.77.0.2 port 22 (sleepy._ssh._tcp.local.)"
    }

    // MARK: Ignored sources

    @Test func aSYNFromAnIgnoredSourceWakesNoOneAndSaysWhy() throws {
        var harness = Self.taken(WakePolicy(ignoredSources: [Self.monitoringNetwork]))
        let actions = harness.frame(Self.syn(from: Self.monitor))
        #expect(Self.magicPackets(actions) == 0)
        #expect(Self.kinds(actions) == [.wakeIgnored])
        let event = try #require(actions.events.first)
        let detail = "\(Self.sshReason(from: "192.0.2.9:40000")): source 192.0.2.0/24 is in wake.ignore_sources"
        #expect(event.detail == detail)
        #expect(event.source == Endpoint(address: .v4(Self.monitor), port: 40_000))
        #expect(event.owner == Self.sleeperMAC && event.interface == Harness.interface)
        #expect(actions.logLines.contains { $0 == (.info, "not waking \(Self.key): \(detail)") })
        #expect(Self.isHeld(&harness))
        #expect(Self.magicPackets(harness.run(until: harness.now + .seconds(60))) == 0)
        // Anyone else still wakes it.
        let other = harness.frame(Self.syn())
        #expect(Self.kinds(other) == [.wake] && Self.magicPackets(other) > 0)
    }

    struct Knock: Sendable, CustomTestStringConvertible {
        var frame: [UInt8]
        var reason: String
        var testDescription: String
    }

    static let remoteDesktopWake: [UInt8] = [0x13, 0x88] + [UInt8](repeating: 0, count: 108)

    /// Every kind of traffic that wakes under the protocol: from an ignored source, none does.
    static let knocks = [
        Knock(frame: syn(from: monitor), reason: sshReason(from: "192.0.2.9:40000"), testDescription: "TCP SYN"),
        Knock(
            frame: EthernetFrame.tcp(
                TCPSegment(
                    sourcePort: 40_000, destinationPort: 22, sequenceNumber: 1, flags: [.ack, .psh], payload: [1]),
                sourceAddress: monitor, destinationAddress: TakeoverTests.ipv4, source: WakeTests.wakerMAC,
                destination: Harness.proxyMAC
            ).serialized(),
            reason: "TCP to ssh from 192.0.2.9:40000 to 10.77.0.2 port 22 (sleepy._ssh._tcp.local.)",
            testDescription: "data to ssh"),
        Knock(
            frame: datagram(from: monitor, port: 7000),
            reason: "UDP from 192.0.2.9:40001 to 10.77.0.2 port 7000 (sleepy._sleep-test._udp.local.)",
            testDescription: "UDP to a service"),
        Knock(
            frame: datagram(from: monitor, port: 3283, payload: remoteDesktopWake),
            reason: "Apple Remote Desktop wake from 192.0.2.9:40001 (sleepy._net-assistant._udp.local.)",
            testDescription: "Apple Remote Desktop wake"),
        Knock(
            frame: datagram(from: monitor, port: 4500, payload: [0x12, 0x34, 0x56, 0x78, 1]),
            reason: "IPsec (UDP 4500) from 192.0.2.9:40001", testDescription: "IPsec"),
    ]

    static let udpServices = [
        DNSRecord(
            name: "sleepy._sleep-test._udp.local.", ttl: 120, cacheFlush: true,
            rdata: .srv(SRVData(port: 7000, target: "sleepy.local."))),
        DNSRecord(
            name: "sleepy._net-assistant._udp.local.", ttl: 120, cacheFlush: true,
            rdata: .srv(SRVData(port: 3283, target: "sleepy.local."))),
    ]

    @Test(arguments: knocks)
    func ignoredSourcesCoverEveryTrigger(_ knock: Knock) throws {
        // The oracle: the same packet wakes the host when no policy is set.
        var plain = Self.taken(extraRecords: Self.udpServices)
        #expect(WakeTests.wakes(plain.frame(knock.frame)).map(\.detail) == [knock.reason])

        var harness = Self.taken(
            WakePolicy(ignoredSources: [Self.monitoringNetwork]), extraRecords: Self.udpServices)
        let actions = harness.frame(knock.frame)
        #expect(Self.magicPackets(actions) == 0)
        #expect(actions.events.map(\.kind) == [.wakeIgnored])
        #expect(actions.events.first?.detail == "\(knock.reason): source 192.0.2.0/24 is in wake.ignore_sources")
    }

    /// A packet that would not wake anyone under the protocol is not an event, whatever its source.
    @Test func whatWouldNotWakeIsNoEvent() {
        var harness = Self.taken(
            WakePolicy(ignoredSources: [Self.monitoringNetwork], neverWake: [.mac(Self.sleeperMAC)]))
        #expect(harness.frame(Self.syn(from: Self.monitor, port: 80)).events.isEmpty)
        #expect(harness.frame(Self.datagram(from: Self.monitor, port: 3283, payload: [1, 2, 3])).events.isEmpty)
        #expect(harness.frame(Self.datagram(from: Self.monitor, port: 4500, payload: [0xFF])).events.isEmpty)
    }

    /// A monitoring box polling every 10 s: one event a minute per host and source address.
    @Test func ignoredTrafficIsRecordedAtMostOnceAMinutePerSource() {
        var harness = Self.taken(WakePolicy(ignoredSources: [Self.monitoringNetwork]))
        #expect(Self.kinds(harness.frame(Self.syn(from: Self.monitor))) == [.wakeIgnored])
        for _ in 1...5 {
            harness.advance(.seconds(10))
            let again = harness.frame(Self.syn(from: Self.monitor, sourcePort: 40_001))
            #expect(again.events.isEmpty)
            #expect(again.logLines.allSatisfy { $0.0 == .debug })
        }
        // Another address of the same network has its own allowance.
        #expect(Self.kinds(harness.frame(Self.syn(from: IPv4Address(192, 0, 2, 10)))) == [.wakeIgnored])
        harness.advance(.seconds(10))
        #expect(Self.kinds(harness.frame(Self.syn(from: Self.monitor))) == [.wakeIgnored])
        #expect(harness.log.events.filter { $0.kind == .wakeIgnored }.count == 3)
        #expect(Self.magicPackets(harness.log) == 0)
    }

    /// Spoofed sources cannot grow what is remembered, nor flood the history: past a few dozen addresses a
    /// minute, the others share one event.
    @Test func manySourcesAreBounded() {
        var harness = Self.taken(
            WakePolicy(ignoredSources: [Link.Prefix(address: .v4(IPv4Address(0, 0, 0, 0)), length: 0)]))
        var recorded = 0
        for last in 1...200 {
            recorded += harness.frame(Self.syn(from: IPv4Address(198, 51, 100, UInt8(last)))).events.count
        }
        #expect(recorded == 33)
        harness.advance(.seconds(60))
        #expect(harness.frame(Self.syn(from: IPv4Address(198, 51, 100, 250))).events.count == 1)
    }

    @Test func anIPv6SourceInAnIPv6Prefix() throws {
        let network = Link.Prefix(address: .v6(IPv6Address("2001:db8:77::")!), length: 48)
        var harness = Self.taken(WakePolicy(ignoredSources: [Self.monitoringNetwork, network]))
        let inside = IPv6Address("2001:db8:77:1::9")!
        let actions = harness.frame(Self.syn6(from: inside))
        #expect(Self.magicPackets(actions) == 0)
        let event = try #require(actions.events.first)
        #expect(Self.kinds(actions) == [.wakeIgnored])
        #expect(event.source == Endpoint(address: .v6(inside), port: 40_000))
        #expect(
            event.detail
                == "TCP SYN from [2001:db8:77:1::9]:40000 to fd77::2 port 22 (sleepy._ssh._tcp.local.): source 2001:db8:77::/48 is in wake.ignore_sources"
        )
        // Just outside the prefix, it wakes.
        let outside = harness.frame(Self.syn6(from: IPv6Address("2001:db8:78::9")!))
        #expect(Self.kinds(outside) == [.wake])
        #expect(Self.magicPackets(outside) > 0)
    }

    // MARK: Hosts never woken

    @Test(arguments: [WakePolicy.HostMatch.name("SLEEPY.local.")!, .name("sleepy")!, .mac(TakeoverTests.sleeperMAC)])
    func aNeverWakeHostIsAnsweredButNotWoken(_ match: WakePolicy.HostMatch) throws {
        var harness = Self.taken(WakePolicy(neverWake: [match]))
        let actions = harness.frame(Self.syn())
        #expect(Self.magicPackets(actions) == 0)
        #expect(Self.kinds(actions) == [.wakeIgnored])
        let detail = "\(Self.sshReason(from: "10.77.0.3:40000")): sleepy.local is in wake.never_wake"
        #expect(actions.events.first?.detail == detail)
        #expect(actions.logLines.contains { $0 == (.info, "not waking \(Self.key): \(detail)") })
        #expect(Self.isHeld(&harness))
        // Same rate limit as ignored sources.
        harness.advance(.seconds(30))
        #expect(harness.frame(Self.syn()).events.isEmpty)
        harness.advance(.seconds(30))
        #expect(Self.kinds(harness.frame(Self.syn())) == [.wakeIgnored])
        #expect(Self.magicPackets(harness.log) == 0)
    }

    /// Ignored sources come before never-wake hosts: the event names the first rule that holds.
    @Test func ignoredSourcesAreCheckedFirst() {
        var harness = Self.taken(WakePolicy(ignoredSources: [Self.monitoringNetwork], neverWake: [.name("sleepy")!]))
        let detail = harness.frame(Self.syn(from: Self.monitor)).events.first?.detail ?? ""
        #expect(detail.hasSuffix(": source 192.0.2.0/24 is in wake.ignore_sources"))
    }

    @Test func aNeverWakeHostsLeaseEndsWithoutAWake() throws {
        var harness = Self.taken(WakePolicy(neverWake: [.name("sleepy")!]))
        let actions = harness.run(until: harness.now + .seconds(7_200))
        #expect(Self.magicPackets(actions) == 0)
        #expect(Self.kinds(actions) == [.expired])
        let detail = "lease ended; sleepy.local is in wake.never_wake, so it is not woken: 6 records dropped"
        #expect(actions.events.first?.detail == detail)
        #expect(actions.logLines.contains { $0 == (.notice, "dropped \(Self.key): \(detail)") })
        #expect(actions.storeChanges.contains(.removeOwner(Self.key)))
        // Goodbyes (TTL 0) for its records, so that caches drop them at once.
        let goodbyes = actions.sentMessages.flatMap(\.answers).filter { $0.ttl == 0 }
        #expect(goodbyes.contains { $0.name == "sleepy.local." && $0.type == .a })
        #expect(harness.core.owners.isEmpty)
        #expect(harness.core.proxiedAddresses(on: Harness.interface).isEmpty)
        #expect(harness.run(until: harness.now + .seconds(60)).injectedFrames.isEmpty)
    }

    /// The administrator's explicit command is not traffic: it wakes a never-wake host.
    @Test func theAdministratorCanStillWakeANeverWakeHost() {
        var harness = Self.taken(WakePolicy(neverWake: [.name("sleepy")!]))
        let actions = harness.core.requestWake(Self.key, now: harness.now, reason: "sleepproxyctl wake")
        #expect(Self.kinds(actions) == [.wake])
        #expect(Self.magicPackets(actions) > 0)
    }

    // MARK: Extra ports

    static let extraPorts = WakePolicy.ExtraPorts(
        host: .name("sleepy.local")!, ports: [WakePolicy.Port(.tcp, 32_400), WakePolicy.Port(.udp, 9_999)])

    @Test func extraPortsWakeLikeARegisteredService() throws {
        var harness = Self.taken(WakePolicy(extraPorts: [Self.extraPorts]))
        let tcp = harness.frame(Self.syn(port: 32_400))
        #expect(Self.magicPackets(tcp) > 0)
        let event = try #require(WakeTests.wakes(tcp).first)
        #expect(event.detail == "TCP SYN from 10.77.0.3:40000 to 10.77.0.2 port 32400 (wake.extra_ports)")
        #expect(event.source == Endpoint(address: .v4(WakeTests.waker), port: 40_000))

        var udpHarness = Self.taken(WakePolicy(extraPorts: [Self.extraPorts]))
        let udp = udpHarness.frame(Self.datagram(port: 9_999))
        #expect(Self.magicPackets(udp) > 0)
        #expect(
            WakeTests.wakes(udp).map(\.detail) == ["UDP from 10.77.0.3:40001 to 10.77.0.2 port 9999 (wake.extra_ports)"]
        )
    }

    @Test func extraPortsKeepTheirTransport() {
        var harness = Self.taken(WakePolicy(extraPorts: [Self.extraPorts]))
        #expect(harness.frame(Self.datagram(port: 32_400)).events.isEmpty)
        #expect(harness.frame(Self.syn(port: 9_999)).events.isEmpty)
        // Only a SYN opens a connection to an extra TCP port.
        let ack = EthernetFrame.tcp(
            TCPSegment(
                sourcePort: 40_000, destinationPort: 32_400, sequenceNumber: 1, flags: [.ack, .psh], payload: [1]),
            sourceAddress: WakeTests.waker, destinationAddress: TakeoverTests.ipv4, source: WakeTests.wakerMAC,
            destination: Harness.proxyMAC
        ).serialized()
        #expect(harness.frame(ack).events.isEmpty)
    }

    @Test func extraPortsWakeOnlyTheHostsTheyName() {
        var harness = Self.twoHosts(WakePolicy(extraPorts: [Self.extraPorts]))
        let actions = harness.frame(Self.syn(port: 32_400, to: Self.otherIPv4))
        #expect(actions.events.isEmpty)
        #expect(Self.magicPackets(actions) == 0)
        #expect(harness.frame(Self.datagram(port: 9_999, to: Self.otherIPv4)).events.isEmpty)
        // The named host still wakes on them.
        #expect(Self.kinds(harness.frame(Self.syn(port: 32_400))) == [.wake])
    }

    /// An extra port is a trigger like any other: ignored sources and never-wake hosts still apply.
    @Test func extraPortsGoThroughTheRestOfThePolicy() {
        var ignored = Self.taken(WakePolicy(ignoredSources: [Self.monitoringNetwork], extraPorts: [Self.extraPorts]))
        let fromMonitor = ignored.frame(Self.syn(from: Self.monitor, port: 32_400))
        #expect(Self.kinds(fromMonitor) == [.wakeIgnored])
        #expect(
            fromMonitor.events.first?.detail
                == "TCP SYN from 192.0.2.9:40000 to 10.77.0.2 port 32400 (wake.extra_ports): source 192.0.2.0/24 is in wake.ignore_sources"
        )
        var never = Self.taken(WakePolicy(neverWake: [.mac(Self.sleeperMAC)], extraPorts: [Self.extraPorts]))
        #expect(Self.kinds(never.frame(Self.datagram(port: 9_999))) == [.wakeIgnored])
    }

    // MARK: Dry run

    @Test func aDryRunRecordsWhatWouldWakeAndSendsNothing() throws {
        var harness = Self.taken(WakePolicy(dryRun: true))
        let actions = harness.frame(Self.syn())
        #expect(Self.magicPackets(actions) == 0)
        #expect(actions.injectedFrames.isEmpty)
        #expect(Self.kinds(actions) == [.wouldWake])
        // The same detail a wake would have.
        var plain = Self.taken()
        let wake = try #require(WakeTests.wakes(plain.frame(Self.syn())).first)
        let event = try #require(actions.events.first)
        #expect(event.detail == wake.detail)
        #expect(event.source == wake.source)
        #expect(
            actions.logLines.contains {
                $0.0 == .info && $0.1.hasPrefix("would wake ")
                    && $0.1.hasSuffix("(\(Self.key)) (wake.dry_run, no magic packet sent): \(wake.detail)")
            })
        // Still held and answered, not waking.
        #expect(Self.isHeld(&harness))
        #expect(Self.magicPackets(harness.run(until: harness.now + .seconds(40))) == 0)
        #expect(harness.core.owners.count == 1)
    }

    @Test func wouldWakeIsRecordedAtMostOnceAMinutePerHost() {
        var harness = Self.taken(WakePolicy(dryRun: true))
        #expect(Self.kinds(harness.frame(Self.syn())) == [.wouldWake])
        harness.advance(.seconds(10))
        #expect(harness.frame(Self.syn(from: IPv4Address(10, 77, 0, 5))).events.isEmpty)
        harness.advance(.seconds(49))
        #expect(harness.frame(Self.syn()).events.isEmpty)
        harness.advance(.seconds(1))
        let next = harness.frame(Self.syn())
        #expect(Self.kinds(next) == [.wouldWake])
        // The two folded meanwhile are counted in it, as the README says.
        let detail = next.events.first?.detail ?? ""
        #expect(detail.hasSuffix("(and 2 more since the last would-wake event, folded into this one)"), "\(detail)")
        harness.advance(.seconds(60))
        #expect(harness.frame(Self.syn()).events.first?.detail.contains("folded") == false, "counted once")
    }

    @Test func aDryRunLeaseExpiryRecordsTheWakeThenDropsTheHost() throws {
        var harness = Self.taken(WakePolicy(dryRun: true))
        // A would-wake a moment before does not hide the lease's end.
        harness.advance(.seconds(7_180))
        #expect(Self.kinds(harness.frame(Self.syn())) == [.wouldWake])
        let actions = harness.run(until: harness.now + .seconds(10))
        #expect(Self.magicPackets(actions) == 0)
        #expect(Self.kinds(actions) == [.wouldWake, .expired])
        #expect(actions.events[0].detail == "lease expired")
        #expect(
            actions.events[1].detail == "lease ended; wake.dry_run is on, so it is not woken: 6 records dropped")
        #expect(actions.sentMessages.flatMap(\.answers).contains { $0.ttl == 0 && $0.name == "sleepy.local." })
        #expect(harness.core.owners.isEmpty)
        #expect(harness.run(until: harness.now + .seconds(60)).injectedFrames.isEmpty)
    }

    /// The dry run is global: even the administrator's request only records what it would do.
    @Test func aDryRunAdministratorRequestOnlyRecords() {
        var harness = Self.taken(WakePolicy(dryRun: true))
        harness.frame(Self.syn())
        let actions = harness.core.requestWake(Self.key, now: harness.now, reason: "sleepproxyctl wake")
        #expect(Self.magicPackets(actions) == 0)
        #expect(actions.events.map(\.kind) == [.wouldWake])
        #expect(actions.events.first?.detail == "sleepproxyctl wake")
        #expect(Self.isHeld(&harness))
    }

    /// Conflicts that would wake are dry-run too.
    @Test func aDryRunAddressConflictOnlyRecords() {
        var harness = Self.taken(WakePolicy(dryRun: true))
        let intruder = MACAddress(0x02, 0, 0, 0, 0, 0x66)
        let actions = harness.frame(
            TakeoverTests.arpRequest(from: intruder, sender: TakeoverTests.ipv4, target: TakeoverTests.ipv4))
        #expect(Self.kinds(actions) == [.wouldWake])
        #expect(actions.events.first?.detail.hasPrefix("address conflict") == true)
        #expect(Self.magicPackets(harness.run(until: harness.now + .seconds(40))) == 0)
        #expect(harness.core.owners.count == 1)
    }

    @Test func aDryRunStopWakesNoOne() {
        var harness = Self.twoHosts(WakePolicy(dryRun: true))
        let actions = harness.core.wakeEveryone(now: harness.now, reason: "the proxy is stopping")
        #expect(actions.injectedFrames.isEmpty)
        #expect(Self.kinds(actions) == [.wouldWake, .wouldWake])
    }

    // MARK: Hosts the policy does not name

    static let unrelated = WakePolicy(
        ignoredSources: [monitoringNetwork, Link.Prefix(address: .v6(IPv6Address("2001:db8::")!), length: 32)],
        neverWake: [.name("other")!, .mac(MACAddress(0x02, 0, 0, 0, 0, 0x99))],
        extraPorts: [WakePolicy.ExtraPorts(host: .name("other")!, ports: [WakePolicy.Port(.tcp, 80)])])

    /// A host no rule names, woken by traffic from no ignored source: exactly what happens without a policy.
    @Test func aHostNoRuleNamesWakesExactlyAsBefore() {
        var plain = Self.taken()
        var policed = Self.taken(Self.unrelated)
        #expect(policed.frame(Self.syn(port: 80)) == plain.frame(Self.syn(port: 80)))
        let wake = policed.frame(Self.syn())
        #expect(wake == plain.frame(Self.syn()))
        #expect(Self.kinds(wake) == [.wake])
        let until = plain.now + .seconds(60)
        #expect(policed.run(until: until) == plain.run(until: until))
        #expect(policed.core.owners.isEmpty && plain.core.owners.isEmpty)
    }

    @Test func aHostNoRuleNamesIsWokenAtTheEndOfItsLease() {
        var plain = Self.taken()
        var policed = Self.taken(Self.unrelated)
        let until = plain.now + .seconds(7_200)
        let actions = policed.run(until: until)
        #expect(actions == plain.run(until: until))
        #expect(Self.kinds(actions) == [.expired, .wake])
        #expect(Self.magicPackets(actions) > 0)
    }
}
