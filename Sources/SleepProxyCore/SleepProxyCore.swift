import DNSWire
public import Frames
public import NetworkAddresses

/// The sleep proxy's state machine: what is held, for whom, until when.
///
/// It has no sockets, clock or threads. The shell feeds it inputs stamped with the current time and carries out
/// the actions it returns, in order (see `Action` for the order the shell keeps). This file is its face: what it
/// holds, and every input it takes and every report it gives, each delegating to the rules: registrations in
/// `Registration.swift`, when a host leaves in `Release.swift`, conflicts over held names in `Conflicts.swift`,
/// answers in `Answers.swift`, multicast timing in `MulticastTiming.swift`, addresses in `Takeover.swift` (and
/// their multicast groups in `MulticastListener.swift`),
/// wakes in `Wake.swift`, keepalives in `Keepalive.swift`, links in `Links.swift`, the proxy's own service in
/// `Advertisement.swift`, clock steps in `ClockStep.swift`.
public struct SleepProxyCore: Sendable {
    public private(set) var configuration: CoreConfiguration
    /// The interfaces served, with their addresses.
    public internal(set) var links: [InterfaceName: Link] = [:]
    /// Links removed from the configuration that stay open only for the wakes of their hosts (`Links.swift`).
    public internal(set) var retiring: Set<InterfaceName> = []
    /// Every held host with its records, what the proxy does for it, and the indexes over them.
    var hosts = HeldHosts()
    /// How much each sender may have of the proxy, and the log.
    var allowances = Allowances()
    /// Multicast waiting for its time, when records last went out, and the answers worked out already.
    var schedule = MulticastSchedule()
    /// The proxy's own `_sleep-proxy._udp` service, per interface.
    var advertisements = Advertisements()
    var random: CoreRandom
    /// Hosts declared in the configuration, watched to know when each sleeps (`Declared.swift`).
    var declared: [OwnerKey: DeclaredWatch] = [:]
    /// Every machine heard on the served links (`SeenMachines.swift`).
    var seen = SeenMachines()
    /// MLD for the solicited-node groups of held addresses (`MulticastListener.swift`).
    var listener = MulticastListener()
    /// What it has done so far, counted for the daemon's metrics.
    public internal(set) var statistics = CoreStatistics()

    /// `seed` makes the random answer delays repeatable; the shell passes a random one.
    public init(configuration: CoreConfiguration = CoreConfiguration(), seed: UInt64 = 0x5EED) {
        self.configuration = configuration
        random = CoreRandom(seed: seed)
    }

    // MARK: Inputs

    /// Applies new limits, a new wake policy and new declared hosts (a reload). Leases granted keep their length;
    /// held hosts stay, except declared ones whose declaration changed or went (`Declared.swift`).
    public mutating func reconfigure(_ configuration: CoreConfiguration, now: UnixTime) -> [Action] {
        self.configuration = configuration
        return syncDeclared(now: now)
    }

    /// Starts watching the declared hosts of the configuration, counted awake from `now` (at start-up, once the
    /// links are set), each with the records the lease store kept of what it announced (`learned`, saved through
    /// `StoreChange.saveLearned`): a host found asleep is held with them (`Declared.swift`).
    public mutating func watchDeclaredHosts(now: UnixTime, learned: [OwnerKey: [LearnedRecord]] = [:]) -> [Action] {
        syncDeclared(now: now, restoring: learned)
    }

    /// Serves `link`, or updates what is known of it (its addresses changed).
    public mutating func setLink(_ link: Link) {
        let changed = links[link.name] != link
        links[link.name] = link
        if changed, var advertisement = advertisements[link.name] {
            advertisement.buildRecords(for: link)
            advertisements.set(advertisement, on: link.name)
        }
    }

    /// Stops serving `interface`: its registered hosts are woken, and it closes with `.stopServing` once their
    /// wakes are over (`Links.swift`).
    public mutating func removeLink(_ interface: InterfaceName, now: UnixTime, reason: String) -> [Action] {
        retire(interface, now: now, reason: reason)
    }

    /// Serves an interface being removed again, for good; whether it was being removed (`Links.swift`).
    public mutating func restoreLink(_ interface: InterfaceName) -> Bool {
        serveAgain(interface)
    }

    /// The interfaces of held hosts that are not served (hosts the lease store kept on an interface the
    /// configuration no longer names), for the shell to open and `removeLink`.
    public var unservedInterfaces: [InterfaceName] {
        Set(hosts.keys.map(\.interface)).filter { links[$0] == nil }.sorted()
    }

    /// Takes over the owners the lease store kept, at start-up (`Registration.swift`).
    public mutating func restore(_ saved: [Owner], wakes: [OwnerKey: StoredWake] = [:], now: UnixTime) -> [Action] {
        restoreOwners(saved, wakes: wakes, now: now)
    }

    /// One registration datagram: accepted (store changes, then the reply) or refused silently on the wire
    /// (`Registration.swift`).
    public mutating func handleRegistration(_ datagram: RegistrationDatagram, now: UnixTime) -> [Action] {
        register(datagram, now: now)
    }

    /// Registrations read together: each as `handleRegistration`, the lists of held addresses sent once per
    /// interface at the end.
    public mutating func handleRegistrations(_ batch: [RegistrationDatagram], now: UnixTime) -> [Action] {
        guard batch.count > 1 else { return batch.first.map { register($0, now: now) } ?? [] }
        hosts.deferListChanges()
        var actions: [Action] = []
        for datagram in batch { actions += register(datagram, now: now) }
        return actions + endDeferredAddressChanges()
    }

    /// One mDNS packet seen on an interface: releases, conflicts, then answers (`Answers.swift`).
    public mutating func handleMDNS(_ packet: MDNSPacket, now: UnixTime) -> [Action] {
        receiveMDNS(packet, now: now)
    }

    /// One captured frame: ARP and Neighbour Discovery for held addresses, and wake triggers (`Takeover.swift`).
    public mutating func handleFrame(_ input: CapturedFrameInput, now: UnixTime) -> [Action] {
        guard let frame = try? EthernetFrame(parsing: input.bytes) else { return expire(now: now) }
        return receiveFrame(frame, on: input.interface, now: now)
    }

    /// The same for a frame the shell parsed already (to tell mDNS from the rest), so that it is parsed once.
    public mutating func handleFrame(_ frame: EthernetFrame, on interface: InterfaceName, now: UnixTime) -> [Action] {
        receiveFrame(frame, on: interface, now: now)
    }

    /// Does what is due by `now`: lease expiries, take-over steps, record probes, wake rounds, keepalives,
    /// multicast responses and the proxy's own advertisement.
    public mutating func tick(now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        actions += advanceHosts(now: now)
        actions += advanceDeclared(now: now)
        actions += sendDueResponses(now: now)
        actions += sendDueReports(now: now)
        for interface in advertisements.interfaces {
            actions += stepAdvertisement(on: interface, now: now)
        }
        return actions
    }

    /// The administrator asks to wake a held host (`Wake.swift`).
    /// `source` is the administrator's client when the request came over the network (the page), for the event.
    public mutating func requestWake(_ key: OwnerKey, now: UnixTime, reason: String, source: Endpoint? = nil)
        -> [Action]
    {
        administratorWake(key, now: now, reason: reason, source: source)
    }

    /// Wakes every held host (`Wake.swift`).
    public mutating func wakeEveryone(now: UnixTime, reason: String) -> [Action] {
        wakeAll(now: now, reason: reason)
    }

    /// Forgets an owner at the administrator's request, with goodbyes (`Release.swift`).
    public mutating func forget(_ key: OwnerKey, now: UnixTime, reason: String, source: Endpoint? = nil) -> [Action] {
        guard hosts[key] != nil else { return [.log(.warning, "forget \(key): not held")] }
        return drop(key, reason: .forgotten(reason, source: source), now: now)
    }

    /// The wall clock stepped by `step`: everything held moves with it (`ClockStep.swift`).
    public mutating func clockStepped(by step: Duration) -> [Action] {
        moveTimes(by: step)
    }

    /// Advertises the proxy's own service on `interface` (`Advertisement.swift`).
    public mutating func startAdvertising(
        on interface: InterfaceName, configuration: AdvertisementConfiguration, port: UInt16, now: UnixTime
    ) -> [Action] {
        advertise(on: interface, configuration: configuration, port: port, now: now)
    }

    /// Withdraws the advertisement, on one interface or all (`Advertisement.swift`).
    public mutating func stopAdvertising(on only: InterfaceName? = nil, now: UnixTime) -> [Action] {
        withdrawAdvertisement(on: only, now: now)
    }

    // MARK: Reports

    /// The held owners, as a view over the held hosts: a lookup, a count or a list copies nothing.
    public var owners: HeldOwners { hosts.owners }

    /// Records held by all owners together.
    public var recordCount: Int { hosts.recordCount }

    /// Where a held host is in its lifecycle, for status output.
    public func state(of key: OwnerKey) -> HostState? {
        guard let host = hosts[key] else { return nil }
        switch host.state {
        case .waking(let wake): return .waking(reason: wake.reason, rounds: wake.rounds)
        case .proxying:
            return host.takeovers.contains { !$0.takeover.isClaimed } ? .takingOver : .held
        }
    }

    /// The addresses the proxy holds on `interface`: what the capture must watch.
    public func proxiedAddresses(on interface: InterfaceName) -> [IPAddress] {
        hosts.addressList(on: interface)
    }

    /// Answers worked out and kept for questions asked again (at most `MulticastSchedule.answerCacheLimit`).
    public var cachedAnswerCount: Int { schedule.answerCache.count }

    /// Entries in every table of allowances together: bounded, whatever senders do.
    public var allowanceEntryCount: Int { allowances.entryCount }

    /// The earliest lease expiry of all owners, if any.
    public var nextLeaseExpiry: UnixTime? { hosts.nextLeaseExpiry }

    /// The next time `tick` has work to do, if any.
    public var nextDeadline: UnixTime? {
        [
            hosts.nextLeaseExpiry, schedule.earliestDue, advertisementDeadline, hosts.nextStep, declaredDeadline,
            listener.nextDue,
        ]
        .compactMap { $0 }.min()
    }

    // MARK: Steps

    /// Steps every held host whose time has come: its take-overs, keepalives, record probes and wake.
    mutating func advanceHosts(now: UnixTime) -> [Action] {
        guard let deadline = hosts.nextStep, deadline <= now else { return [] }
        var actions: [Action] = []
        // Only the hosts with a step due: with thousands held, most have nothing to do at any moment.
        for key in hosts.popDueSteps(by: now) {
            actions += advanceTakeovers(of: key, now: now)
            actions += advanceKeepalives(of: key, now: now)
            settleProbes(of: key, now: now)
            actions += advanceWake(of: key, now: now)
        }
        refreshHostDeadline()
        return actions
    }

    /// Brings the next step of the hosts changed since the last call up to date.
    mutating func refreshHostDeadline() {
        hosts.refreshSteps { links[$0] != nil }
    }

    /// The same for every host, after a change that concerns every host (a link served or not, a clock step).
    mutating func refreshAllHostDeadlines() {
        hosts.refreshAllSteps { links[$0] != nil }
    }
}

/// Where a held host is, as the administrator sees it.
public enum HostState: Hashable, Sendable {
    /// Its addresses are being probed before they are claimed.
    case takingOver
    /// Answered for, its addresses claimed.
    case held
    /// Magic packets are going out.
    case waking(reason: String, rounds: Int)
}
