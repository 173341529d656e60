import DNSWire
import Frames
import NetworkAddresses
import SleepProxyCore
import Testing

/// Hosts declared in the configuration, which never register: watched on the wire, probed when silent, held when
/// they answer no probe, let go of at their first frame.
struct DeclaredHostTests {
    static let mac = MACAddress(0x3C, 0x22, 0xFB, 0x10, 0x20, 0x30)
    static let ipv4 = IPv4Address(10, 77, 0, 20)
    static let ipv6 = IPv6Address("fd77::20")!
    static let key = OwnerKey(interface: Harness.interface, primaryMAC: mac)

    static func declaration(
        addresses: [IPAddress] = [.v4(ipv4), .v6(ipv6)], learns: Bool = false,
        wakePorts: [WakePolicy.Port] = [.init(.tcp, 3389)]
    ) -> DeclaredHost {
        DeclaredHost(
            name: "pc", interface: Harness.interface, mac: mac, addresses: addresses, learnsAddresses: learns,
            wakePorts: wakePorts, hostName: "Study-PC",
            services: [DeclaredHost.Service(name: "Study PC", type: "_smb._tcp", port: 445, txt: ["model=Xserve"])])
    }

    /// A core watching the declared host from `harness.now`.
    static func harness(_ declaration: DeclaredHost = declaration(), policy: WakePolicy = WakePolicy()) -> Harness {
        var configuration = CoreConfiguration(wakePolicy: policy)
        configuration.declaredHosts = [declaration]
        var harness = Harness(configuration: configuration)
        harness.log += harness.core.watchDeclaredHosts(now: harness.now)
        return harness
    }

    /// An ARP request the host sends for its gateway: what a waking PC sends first.
    static func arpFromHost(sender: IPv4Address = ipv4) -> [UInt8] {
        EthernetFrame.arp(
            ARPPacket(
                operation: .request, senderHardwareAddress: mac, senderProtocolAddress: sender,
                targetHardwareAddress: .zero, targetProtocolAddress: IPv4Address(10, 77, 0, 254)),
            source: mac, destination: .broadcast
        ).serialized()
    }

    static func parsed(_ frames: [[UInt8]]) -> [EthernetFrame] { frames.compactMap { try? EthernetFrame(parsing: $0) } }

    /// Runs until the host is held and its address claimed; returns when the first announcement went out.
    static func sleepAndTakeOver(_ harness: inout Harness) -> UnixTime {
        let start = harness.now
        for _ in 0..<60 {
            harness.run(until: harness.now + .seconds(1))
            if harness.log.events.contains(where: { $0.kind == .takeover }) { return harness.now }
        }
        Issue.record("not taken over within a minute of \(start)")
        return harness.now
    }

    @Test func aSilentHostIsProbedWithBackOffThenHeldAndItsAddressesTakenOverWithinHalfAMinute() throws {
        var harness = Self.harness()
        let start = harness.now
        // Nothing is asked while the host may just be quiet.
        #expect(harness.run(until: start + .seconds(9)).injectedFrames.isEmpty)
        #expect(harness.core.declaredHosts.first?.liveness == .awake)

        // Then three probes, 1 s and 2 s apart, unicast to its MAC: its IPv4 address first, then IPv6, in turn.
        var probeTimes: [Duration] = []
        var probes: [EthernetFrame] = []
        while harness.core.owners[Self.key] == nil, harness.now < start + .seconds(40) {
            let frames = Self.parsed(harness.run(until: harness.now + .milliseconds(100)).injectedFrames)
            for frame in frames {
                probes.append(frame)
                probeTimes.append(harness.now - start)
            }
        }
        #expect(probes.count == 3, "\(probes.count) probes")
        #expect(probes.allSatisfy { $0.header.destination == Self.mac && $0.header.source == Harness.proxyMAC })
        #expect(probes.first?.arp?.targetProtocolAddress == Self.ipv4)
        #expect(probes.first?.arp?.senderProtocolAddress == .any, "an ARP probe, from 0.0.0.0")
        #expect(probes.dropFirst().first?.icmpv6?.neighborSolicitation?.target == Self.ipv6)
        let gaps = zip(probeTimes.dropFirst(), probeTimes).map { $0 - $1 }
        #expect(gaps.count == 2 && gaps[1] > gaps[0], "the waits grow: \(gaps)")

        // Held as a declared host: an `asleep` event, and nothing for the lease store.
        let owner = try #require(harness.core.owners[Self.key])
        #expect(harness.core.declaration(of: Self.key)?.name == "pc")
        #expect(harness.log.events.map(\.kind).contains(.asleep))
        #expect(harness.log.savedOwners.isEmpty && harness.core.storedOwners.isEmpty)
        #expect(Set(owner.proxiedAddresses) == [.v4(Self.ipv4), .v6(Self.ipv6)])
        #expect(owner.records.contains { $0.record.type == .srv } && owner.records.contains { $0.record.type == .a })

        // Its address is claimed as a registered host's is, within half a minute of its last frame.
        let claimed = Self.sleepAndTakeOver(&harness)
        #expect(claimed - start <= .seconds(30), "claimed \(claimed - start) after its last frame")
        #expect(harness.log.storeChanges.allSatisfy { if case .appendEvent = $0 { true } else { false } })
    }

    @Test func aFrameFromTheHostWhileItIsProbedMeansItIsAwakeAndNothingIsHeld() {
        var harness = Self.harness()
        harness.run(until: harness.now + .seconds(11))
        #expect(harness.core.declaredHosts.first?.liveness == .probing(probes: 2))
        harness.frame(Self.arpFromHost())
        #expect(harness.core.declaredHosts.first?.liveness == .awake)
        // Silent again: asked again only after another quiet spell.
        #expect(harness.run(until: harness.now + .seconds(9)).injectedFrames.isEmpty)
        harness.run(until: harness.now + .seconds(20))
        #expect(harness.core.owners.isEmpty == false, "silent again, it is held in the end")
    }

    @Test func aHostThatKeepsTalkingIsNeverProbedOrHeld() {
        var harness = Self.harness()
        for _ in 0..<12 {
            harness.run(until: harness.now + .seconds(5))
            harness.frame(Self.arpFromHost())
        }
        #expect(harness.log.injectedFrames.isEmpty)
        #expect(harness.core.owners.isEmpty)
    }

    @Test func theFirstFrameOfAHeldHostReleasesItAtOnceAndHandsItsAddressesBack() throws {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        harness.run(until: harness.now + .seconds(10))
        let actions = harness.frame(Self.arpFromHost())
        #expect(harness.core.owners.isEmpty)
        let released = try #require(actions.events.first { $0.kind == .released })
        #expect(released.detail.contains("declared host pc is back: ARP request for 10.77.0.254"), "\(released.detail)")
        #expect(!actions.storeChanges.contains { if case .removeOwner = $0 { true } else { false } })
        #expect(actions.transmissions.isEmpty, "no goodbyes: the host is back")
        // One gratuitous ARP and one unsolicited NA carrying the host's own MAC.
        let handed = Self.parsed(actions.injectedFrames)
        #expect(handed.count == 2)
        #expect(handed.contains { $0.arp?.senderHardwareAddress == Self.mac && $0.arp?.isGratuitous == true })
        #expect(
            handed.contains {
                $0.icmpv6?.neighborAdvertisement?.target == Self.ipv6
                    && $0.icmpv6?.neighborAdvertisement?.targetLinkLayerAddress == Self.mac
            })
        #expect(harness.core.declaredHosts.first?.liveness == .awake)
    }

    @Test func aSYNToADeclaredPortWakesItAndToAnotherPortDoesNot() throws {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        let other = harness.frame(WakePolicyTests.syn(port: 8080, to: Self.ipv4))
        #expect(other.events.isEmpty)
        let declared = harness.frame(WakePolicyTests.syn(port: 3389, to: Self.ipv4))
        let wake = try #require(declared.events.first { $0.kind == .wake })
        #expect(wake.detail.contains("hosts.pc.wake_ports"), "\(wake.detail)")
        let magic = Self.parsed(declared.injectedFrames).compactMap(\.magicPacket)
        #expect(magic.first?.target == Self.mac)
        // Its declared service's port wakes too.
        var again = Self.harness()
        _ = Self.sleepAndTakeOver(&again)
        #expect(again.frame(WakePolicyTests.syn(port: 445, to: Self.ipv4)).events.map(\.kind) == [.wake])
    }

    @Test func theWakePolicyAppliesToDeclaredHosts() {
        var harness = Self.harness(policy: WakePolicy(neverWake: [.mac(Self.mac)]))
        _ = Self.sleepAndTakeOver(&harness)
        #expect(harness.frame(WakePolicyTests.syn(port: 3389, to: Self.ipv4)).events.map(\.kind) == [.wakeIgnored])
        var dry = Self.harness(policy: WakePolicy(dryRun: true))
        _ = Self.sleepAndTakeOver(&dry)
        let actions = dry.frame(WakePolicyTests.syn(port: 3389, to: Self.ipv4))
        #expect(actions.events.map(\.kind) == [.wouldWake] && actions.injectedFrames.isEmpty)
    }

    @Test func aWakeItNeverAnswersEndsAndTheHostIsHeldAgainWhileItSleeps() {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        harness.frame(WakePolicyTests.syn(port: 3389, to: Self.ipv4))
        // 15 rounds and 3 goodbyes 2 s apart, then it is let go and watched afresh.
        harness.run(until: harness.now + .seconds(40))
        #expect(harness.log.events.contains { $0.kind == .expired })
        harness.run(until: harness.now + .seconds(30))
        #expect(harness.core.owners[Self.key] != nil, "asleep still, it is held again")
        #expect(harness.log.events.filter { $0.kind == .asleep }.count == 2)
    }

    @Test func itsRecordsAreAnsweredWhileItSleepsAndNotWhileItIsAwake() {
        let type: DNSName = "_smb._tcp.local."
        var harness = Self.harness()
        let awake = harness.mdns(Query.bytes(id: 7, type, .ptr, unicast: true))
        #expect(
            (awake + harness.run(until: harness.now + .seconds(1))).sentMessages.isEmpty,
            "awake: the host answers for itself")
        _ = Self.sleepAndTakeOver(&harness)
        let asleep = harness.mdns(Query.bytes(id: 8, type, .ptr, unicast: true))
        let answers = (asleep + harness.run(until: harness.now + .seconds(1))).sentMessages.flatMap(\.answers)
        #expect(answers.contains { $0.name == type && $0.rdata == .ptr("Study PC._smb._tcp.local.") }, "\(answers)")
    }

    @Test func learnedAddressesAreProbedAndTakenOverAndNothingIsAskedBeforeOneIsKnown() throws {
        var harness = Self.harness(Self.declaration(addresses: [], learns: true))
        harness.run(until: harness.now + .seconds(30))
        #expect(harness.log.injectedFrames.isEmpty, "no address known: nothing to ask with")
        #expect(harness.core.owners.isEmpty)
        // Its ARP says which address it uses; an address off the link is not learned.
        harness.frame(Self.arpFromHost(sender: IPv4Address(192, 0, 2, 9)))
        harness.frame(Self.arpFromHost())
        #expect(harness.core.declaredHosts.first?.addresses == [.v4(Self.ipv4)])
        _ = Self.sleepAndTakeOver(&harness)
        #expect(harness.core.owners[Self.key]?.proxiedAddresses == [.v4(Self.ipv4)])
    }

    @Test func anAddressOffTheLinkIsNeverTakenOver() {
        var harness = Self.harness(Self.declaration(addresses: [.v4(IPv4Address(192, 0, 2, 9)), .v4(Self.ipv4)]))
        _ = Self.sleepAndTakeOver(&harness)
        #expect(harness.core.owners[Self.key]?.proxiedAddresses == [.v4(Self.ipv4)])
        var offLink = Self.harness(Self.declaration(addresses: [.v4(IPv4Address(192, 0, 2, 9))]))
        offLink.run(until: offLink.now + .seconds(60))
        #expect(offLink.core.owners.isEmpty)
        #expect(offLink.core.declaredHosts.first?.unheld?.contains("192.0.2.9 is not on eth0") == true)
    }

    @Test func itsRegistrationWinsAndIsStored() throws {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        let records = Update.host("Study-PC", ipv4: Self.ipv4)
        let actions = harness.register(Update.bytes(records: records, owner: Update.owner(mac: Self.mac)))
        #expect(actions.replies.count == 1)
        #expect(harness.core.declaration(of: Self.key) == nil, "held through its registration now")
        #expect(actions.savedOwners.first?.key == Self.key)
        #expect(harness.core.storedOwners.map(\.key) == [Self.key])
        // Its probes find it asleep; the registration keeps holding it.
        harness.run(until: harness.now + .seconds(30))
        #expect(harness.core.declaration(of: Self.key) == nil)
        #expect(harness.core.declaredHosts.first?.unheld == "its own registration holds it")
    }

    /// Its registration ends the declared hold as every hold ends: counted as a release under its own reason, with
    /// its event and log line, before the registration's event. Nothing is said goodbye to, and the host, asleep
    /// still, is not watched afresh: its registration holds it.
    @Test func itsRegistrationEndsTheDeclaredHoldAsACountedRelease() throws {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        #expect(harness.core.statistics.releases.isEmpty)
        let records = Update.host("Study-PC", ipv4: Self.ipv4)
        let actions = harness.register(Update.bytes(records: records, owner: Update.owner(mac: Self.mac)))
        #expect(harness.core.statistics.releases == [.registered: 1])
        #expect(actions.events.map(\.kind) == [.released, .registered])
        let released = try #require(actions.events.first)
        #expect(released.owner == Self.mac)
        #expect(released.detail.contains("declared host pc registered itself"), "\(released.detail)")
        #expect(actions.logLines.contains { $0.0 == .info && $0.1.hasPrefix("released \(Self.key): declared host pc") })
        #expect(!actions.sentMessages.contains { $0.answers.contains { $0.ttl == 0 } }, "no goodbyes")
        #expect(!actions.storeChanges.contains(.removeOwner(Self.key)), "the declared hold was never stored")
        let watch = try #require(harness.core.declaredHosts.first)
        #expect(watch.liveness == .asleep && watch.unheld == "its own registration holds it")
        #expect(harness.core.owners[Self.key]?.sequence == 21)
    }

    /// Nothing of a declared host reaches the lease store but its events: not when it is taken over, its clock
    /// steps, it is woken and comes back, nor when a wake goes unanswered and it is held again, nor when it is
    /// forgotten.
    @Test func aDeclaredHostIsNeverStored() {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        harness.log += harness.core.clockStepped(by: .seconds(60))
        harness.now = harness.now + .seconds(60)
        harness.frame(WakePolicyTests.syn(port: 3389, to: Self.ipv4))
        #expect(harness.core.state(of: Self.key).map { if case .waking = $0 { true } else { false } } == true)
        #expect(harness.core.storedOwners.isEmpty && harness.core.storedWakes.isEmpty)
        harness.run(until: harness.now + .seconds(5))
        harness.frame(Self.arpFromHost())
        #expect(harness.core.owners.isEmpty, "back")
        // Asleep again; this time the wake goes unanswered, and the host is held again.
        let back = harness.now
        while harness.core.state(of: Self.key) != .held, harness.now < back + .seconds(60) {
            harness.run(until: harness.now + .seconds(1))
        }
        #expect(harness.core.state(of: Self.key) == .held)
        harness.frame(WakePolicyTests.syn(port: 3389, to: Self.ipv4))
        harness.run(until: harness.now + .seconds(40))
        #expect(harness.core.statistics.releases[.unanswered] == 1)
        harness.run(until: harness.now + .seconds(30))
        #expect(harness.core.owners[Self.key] != nil && harness.core.storedOwners.isEmpty)
        harness.log += harness.core.forget(Self.key, now: harness.now, reason: "test")
        #expect(harness.core.owners.isEmpty)
        let changes = harness.log.storeChanges
        #expect(changes.contains { if case .appendEvent = $0 { true } else { false } })
        #expect(changes.allSatisfy { if case .appendEvent = $0 { true } else { false } }, "\(changes)")
    }

    @Test func aHostKeptFromBeingHeldIsHeldOnceWhatKeptItPasses() throws {
        var harness = Self.harness(Self.declaration(addresses: [.v4(Self.ipv4)]))
        // Another machine's registration (a stale one, say) holds the address the PC uses.
        harness.register(Update.bytes(records: Update.host("old", ipv4: Self.ipv4)))
        harness.run(until: harness.now + .seconds(25))
        #expect(harness.core.declaration(of: Self.key) == nil)
        let why = try #require(harness.core.declaredHosts.first?.unheld)
        #expect(why.contains("10.77.0.20 is held for \(Update.mac)"), "\(why)")
        _ = harness.core.forget(
            OwnerKey(interface: Harness.interface, primaryMAC: Update.mac), now: harness.now, reason: "test")
        harness.run(until: harness.now + .seconds(31))
        #expect(harness.core.declaration(of: Self.key) != nil, "held once the address is free, without a frame from it")
    }

    @Test func aRegistrationReplacingADeclaredHoldIsNotRefusedForTheHostLimit() {
        var configuration = CoreConfiguration()
        configuration.maximumHostsPerInterface = 1
        configuration.declaredHosts = [Self.declaration()]
        var harness = Harness(configuration: configuration)
        harness.log += harness.core.watchDeclaredHosts(now: harness.now)
        _ = Self.sleepAndTakeOver(&harness)
        let actions = harness.register(
            Update.bytes(records: Update.host("Study-PC", ipv4: Self.ipv4), owner: Update.owner(mac: Self.mac)))
        #expect(actions.replies.count == 1, "\(actions.events.map(\.detail))")
    }

    @Test func anInterfaceNoLongerServedLetsGoOfItWithoutWakingIt() {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        harness.run(until: harness.now + .seconds(10))
        let actions = harness.core.removeLink(Harness.interface, now: harness.now, reason: "removed")
        #expect(harness.core.owners.isEmpty)
        let frames = Self.parsed(actions.injectedFrames)
        #expect(frames.allSatisfy { $0.magicPacket == nil })
        #expect(!actions.events.contains { $0.kind == .wake })
        // Its addresses go back to its own MAC, and nothing else keeps the interface open.
        #expect(frames.compactMap(\.arp).map(\.senderHardwareAddress) == [Self.mac])
        #expect(frames.compactMap { $0.icmpv6?.neighborAdvertisement?.targetLinkLayerAddress } == [Self.mac])
        #expect(actions.contains(.stopServing(Harness.interface)))
    }

    /// The take-over's probes of a declared host ask the whole link ("is anyone using this address?"), not its
    /// MAC alone: the declaration may be stale.
    @Test func theTakeOverProbesOfADeclaredHostAskTheWholeLink() {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        let probes = Self.parsed(harness.log.injectedFrames).filter {
            $0.arp?.senderProtocolAddress == .any || $0.icmpv6?.neighborSolicitation != nil
        }
        // Three liveness probes to its MAC, then the take-over's three per address to everyone.
        let toLink = probes.filter { $0.header.destination != Self.mac }
        #expect(toLink.filter { $0.arp != nil }.count == 3)
        #expect(toLink.filter { $0.arp != nil }.allSatisfy { $0.header.destination == .broadcast })
        #expect(toLink.filter { $0.icmpv6 != nil }.count == 3)
        #expect(
            toLink.filter { $0.icmpv6 != nil }.allSatisfy {
                $0.header.destination == MACAddress(ipv6Multicast: Self.ipv6.solicitedNodeGroup)
            })
    }

    /// Another machine answers the take-over's probe for a declared address (DHCP gave it away): the proxy never
    /// claims it, never wakes anyone over it, says so, and holds the host with the addresses it has left.
    @Test func aDeclaredAddressAnotherMachineAnswersForIsNeverClaimed() throws {
        var harness = Self.harness()
        let other = MACAddress(0x02, 0x77, 0, 0, 0, 0x99)
        // Found asleep (three unanswered liveness probes), then the take-over's first probe goes out.
        while harness.core.owners[Self.key] == nil, harness.now < UnixTime(seconds: 1_800_000_060) {
            harness.run(until: harness.now + .milliseconds(100))
        }
        harness.run(until: harness.now + .milliseconds(1_100))
        // The other machine's kernel answers the ARP probe, to the proxy's MAC.
        let answer = EthernetFrame.arp(
            ARPPacket(
                operation: .reply, senderHardwareAddress: other, senderProtocolAddress: Self.ipv4,
                targetHardwareAddress: Harness.proxyMAC, targetProtocolAddress: .any),
            source: other, destination: Harness.proxyMAC
        ).serialized()
        let actions = harness.frame(answer)
        #expect(harness.core.owners[Self.key] == nil, "let go")
        #expect(Self.parsed(actions.injectedFrames).allSatisfy { $0.magicPacket == nil }, "nobody woken")
        let released = try #require(actions.events.first { $0.kind == .released })
        #expect(released.detail.contains("10.77.0.20 is in use by 02:77:00:00:00:99"), "\(released.detail)")
        #expect(actions.logLines.contains { $0.0 == .warning })
        #expect(harness.core.statistics.releases[.addressInUse] == 1)
        // Watched afresh and held again with its IPv6 address alone; the IPv4 one is never claimed.
        harness.run(until: harness.now + .seconds(60))
        let owner = try #require(harness.core.owners[Self.key])
        #expect(owner.proxiedAddresses == [.v6(Self.ipv6)])
        let request = TakeoverTests.arpRequest(
            from: TakeoverTests.wakerMAC, sender: TakeoverTests.waker, target: Self.ipv4)
        #expect(harness.frame(request).injectedFrames.isEmpty)
        #expect(
            !Self.parsed(harness.log.injectedFrames).contains {
                $0.arp?.senderProtocolAddress == Self.ipv4 && $0.arp?.senderHardwareAddress == Harness.proxyMAC
            }, "never announced as the proxy's")
        #expect(harness.log.events.filter { $0.kind == .wake }.isEmpty)
    }

    /// `sleepproxyctl hosts` says `held` once the addresses are the proxy's: not between the last probe and the
    /// first announcement, when nothing is answered yet either.
    @Test func heldOnlyOnceTheFirstAnnouncementWentOut() {
        var harness = Self.harness()
        var sawTakingOver = false
        while harness.core.state(of: Self.key) != .held, harness.now < UnixTime(seconds: 1_800_000_060) {
            let frames = Self.parsed(harness.run(until: harness.now + .milliseconds(100)).injectedFrames)
            if harness.core.state(of: Self.key) == .takingOver { sawTakingOver = true }
            if harness.core.state(of: Self.key) == .held {
                #expect(
                    frames.contains {
                        $0.arp?.senderHardwareAddress == Harness.proxyMAC && $0.arp?.isGratuitous == true
                    }, "held from the tick that announced")
            } else if harness.core.owners[Self.key] != nil {
                let request = TakeoverTests.arpRequest(
                    from: TakeoverTests.wakerMAC, sender: TakeoverTests.waker, target: Self.ipv4)
                #expect(harness.frame(request).injectedFrames.isEmpty, "not answered before the claim")
            }
        }
        #expect(sawTakingOver && harness.core.state(of: Self.key) == .held)
    }

    /// The wake policy names a declared host by its table name too (`[hosts.pc]`), as logs and events do.
    @Test(arguments: ["pc", "PC.local", "study-pc"])
    func thePolicyNamesADeclaredHostByItsTableName(_ name: String) throws {
        let match = try #require(WakePolicy.HostMatch(parsing: name))
        var never = Self.harness(policy: WakePolicy(neverWake: [match]))
        _ = Self.sleepAndTakeOver(&never)
        #expect(never.frame(WakePolicyTests.syn(port: 3389, to: Self.ipv4)).events.map(\.kind) == [.wakeIgnored])
        var extra = Self.harness(
            policy: WakePolicy(extraPorts: [WakePolicy.ExtraPorts(host: match, ports: [.init(.tcp, 32_400)])]))
        _ = Self.sleepAndTakeOver(&extra)
        let wake = try #require(extra.frame(WakePolicyTests.syn(port: 32_400, to: Self.ipv4)).events.first)
        #expect(wake.kind == .wake && wake.detail.contains("wake.extra_ports"), "\(wake.detail)")
        #expect(match.names(Self.declaration()))
    }

    @Test func aDeclarationRemovedOnReloadLetsGoWithGoodbyes() {
        var harness = Self.harness()
        _ = Self.sleepAndTakeOver(&harness)
        harness.run(until: harness.now + .seconds(10))
        let actions = harness.core.reconfigure(CoreConfiguration(), now: harness.now)
        #expect(harness.core.owners.isEmpty && harness.core.declaredHosts.isEmpty)
        #expect(actions.sentMessages.flatMap(\.answers).allSatisfy { $0.ttl == 0 } && !actions.sentMessages.isEmpty)
        #expect(actions.contains(.watchSources(Harness.interface, [])))
    }

    @Test func theCaptureIsToldWhichMACsToWatch() {
        let harness = Self.harness()
        #expect(harness.log.contains(.watchSources(Harness.interface, [Self.mac])))
    }

    @Test func aClockStepMovesItsProbesWithIt() {
        var harness = Self.harness()
        _ = harness.core.clockStepped(by: .seconds(3_600))
        harness.now = harness.now + .seconds(3_600)
        #expect(harness.run(until: harness.now + .seconds(9)).injectedFrames.isEmpty)
        #expect(harness.run(until: harness.now + .milliseconds(1_500)).injectedFrames.count == 1)
    }
}
