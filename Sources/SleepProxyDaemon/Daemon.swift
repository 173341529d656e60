import CNetSupport
import Dispatch
import Frames
import LeaseStore
public import Logging
public import NetworkAddresses
import SleepProxyControl
public import SleepProxyCore

#if canImport(Glibc)
    import Glibc
#endif

extension DaemonConfiguration {
    var shellOptions: InterfaceShell.Options {
        InterfaceShell.Options(registrationPort: registrationPort, responder: responder, maximumBatch: maximumBatch)
    }
}

/// The daemon: the core, the lease store, the control socket and the lifecycle, around one `InterfaceShell` per
/// served interface.
///
/// Everything runs on one serial queue, which owns the core, the store, the shells and the control server.
/// Datagrams that arrive together are handled as one batch: the core decides, the store commits every change of
/// the batch in one transaction, and only then do the replies go out (`ActionPerformer`).
public final class Daemon: @unchecked Sendable {
    private(set) var configuration: DaemonConfiguration
    let logger: Logger
    let queue = DispatchQueue(label: "sleepproxyd.core")
    var core: SleepProxyCore
    let store: LeaseStore
    var shells: [InterfaceName: InterfaceShell] = [:]
    private var unicastHolder: UnicastPortHolder?
    var clock = SteadyClock()
    let startedAt: UnixTime
    var control: ControlServer?
    /// The metrics endpoint, when `metricsListen` asks for one.
    var metricsServer: MetricsServer?
    /// Whether commits fail, and whether the store lags behind the core because they did.
    let storeHealth = StoreHealth()
    /// What `/metrics` shows; counted from the start whether or not it is served, and kept across reloads.
    public let metrics = DaemonMetrics(version: SleepProxyVersion.string)
    /// The newest wake of each owner (and its name), for `hosts`; filled from the history at start.
    var lastWakes: [OwnerKey: Event] = [:]
    /// Names of hosts held since the start, by OWNER primary MAC, so that events name hosts that have gone.
    var knownNames: [MACAddress: String] = [:]
    private var sources: [any DispatchSourceProtocol] = []
    private var expiryTimer: (any DispatchSourceTimer)?
    /// When the expiry timer fires next, if it is armed.
    private var armedDeadline: UnixTime?
    private var stopped = false
    private let finished = DispatchSemaphore(value: 0)
    /// Reads the configuration again, for SIGHUP; nil ignores the signal.
    public var reloadConfiguration: (@Sendable () throws -> DaemonConfiguration)?
    /// Told how the daemon is doing: "ready", "reloading", "stopping", and a one-line status.
    public var lifecycleObserver: (@Sendable (LifecycleEvent) -> Void)?
    /// How often `lifecycleObserver` hears `.watchdog`, from the daemon's queue; nil never (no watchdog).
    public var watchdogInterval: Duration?

    /// What the service manager hears.
    public enum LifecycleEvent: Sendable, Equatable {
        case ready(status: String)
        case reloading
        case reloaded(status: String)
        case status(String)
        case stopping
        case watchdog
    }

    /// Opens the lease store, restores what it held, opens every interface and the control socket.
    public init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        guard !configuration.interfaces.isEmpty else {
            throw DaemonError(description: "no interface to serve: give one with --interface or in the config file")
        }
        try Privileges.check(configuration)
        startedAt = UnixTime(nanoseconds: sp_wall_clock_ns())
        core = SleepProxyCore(configuration: configuration.core, seed: UInt64(truncatingIfNeeded: sp_wall_clock_ns()))
        do {
            // A damaged leases.sqlite (not a database, or corrupt) is renamed beside itself and the daemon starts
            // with an empty store, loudly. What it held are leases: each Mac registers again at its next
            // maintenance wake, within its lease, so an empty store costs a few hosts unproxied for a while.
            // Refusing to start would cost every host on the LAN its proxy until someone intervenes (and under
            // systemd, a restart loop). A sound database that is not a lease store, or one a newer sleepproxyd
            // wrote, is not damaged: it is refused untouched, since moving it would break its program or lose the
            // newer version's leases (LeaseStore checks before it writes anything).
            store = try LeaseStore(
                directory: configuration.stateDirectory,
                configuration: LeaseStore.Configuration(
                    eventHistoryLimit: configuration.eventHistoryLimit, damagedFile: .setAside))
        } catch {
            throw DaemonError(description: "\(error)")
        }
        if let setAside = store.setAside {
            metrics.storeFailed(setAside.problem)
            logger.error(
                "lease store: \(store.path) was damaged (\(setAside.problem.operation): \(setAside.problem.reason)); kept it as \(setAside.keptAs) and started with an empty store: the hosts it held are proxied again when they next register"
            )
        }
        do {
            if configuration.responder {
                // The unicast port first: the shells' group sockets share the port, which would make it look
                // taken. One for the host, whatever the number of interfaces.
                unicastHolder = UnicastPortHolder(port: MulticastDNS.port)
                if let holder = unicastHolder {
                    logger.info(
                        "holding UDP port \(MulticastDNS.port) for unicast (\(holder.families)); no other mDNS stack runs here"
                    )
                } else {
                    logger.info(
                        "another mDNS stack holds UDP port \(MulticastDNS.port); unicast to it is seen by the capture")
                }
            }
            for interface in configuration.interfaces {
                let shell = try InterfaceShell(
                    interface: interface, options: configuration.shellOptions, queue: queue, logger: logger)
                shells[shell.name] = shell
                core.setLink(shell.link)
            }
            if configuration.responder {
                for name in shells.keys.sorted() { warnAboutKernelSettings(interface: name.rawValue) }
            }
            if let path = configuration.controlSocket {
                control = try ControlServer(
                    path: path, group: configuration.controlGroup, queue: queue, logger: logger,
                    maximumConnections: configuration.controlConnections)
            }
            if let address = configuration.metricsListen {
                metricsServer = try MetricsServer(address: address, source: metricsSource, logger: logger)
                logger.info("metrics on http://\(address)/metrics")
            }
        } catch {
            control?.stop()
            for shell in shells.values { shell.stop() }
            unicastHolder?.close()
            store.close()
            throw error
        }

        let loaded = try store.loadOwners()
        for problem in loaded.problems {
            logger.error("lease store: \(problem)")
        }
        loadWakeHistory()
        for owner in loaded.owners { remember(owner) }
        performer().perform(core.restore(loaded.owners, wakes: loaded.wakes, now: now()))
        retireUnconfiguredInterfaces()
        performer().perform(core.watchDeclaredHosts(now: now()))
        logger.info(
            "sleepproxyd \(SleepProxyVersion.string) on \(configuration.interfaces.joined(separator: ", ")), registrations on UDP port \(configuration.registrationPort), state in \(configuration.stateDirectory)\(configuration.controlSocket.map { ", control socket \($0)" } ?? "")"
        )
    }

    /// Hosts the lease store kept on interfaces the configuration no longer names (it was edited while the daemon
    /// was stopped) are treated as a reload that removes those interfaces treats them: each interface is opened
    /// for their wakes alone, and closes when those are over. One that cannot be opened (it is gone) cannot wake
    /// them: they are dropped. The log says which.
    private func retireUnconfiguredInterfaces() {
        for name in core.unservedInterfaces {
            let count = core.owners.keys.filter { $0.interface == name }.count
            let reason = "\(name) is no longer in the configuration"
            do {
                let shell = try InterfaceShell(
                    interface: name.rawValue, options: configuration.shellOptions, queue: queue, logger: logger)
                shells[name] = shell
                core.setLink(shell.link)
                performer().perform(core.captureOpened(on: name))
                logger.notice(
                    "restore: \(count) held host\(count == 1 ? "" : "s") on \(name), which the configuration no longer names: waking them there, then closing it"
                )
            } catch {
                logger.error(
                    "restore: \(count) held host\(count == 1 ? "" : "s") on \(name), which the configuration no longer names and which cannot be opened (\(error)): dropped without a wake"
                )
            }
            performer().perform(core.removeLink(name, now: now(), reason: reason))
        }
    }

    /// Closes an interface the core no longer serves (removed from the configuration, its hosts' wakes over).
    private func closeShell(_ name: InterfaceName) {
        guard let shell = shells.removeValue(forKey: name) else { return }
        shell.stop()
        logger.notice("stopped serving \(name)")
        reportStatus()
    }

    /// The wall clock, as the lease store and other processes read it.
    public static func now() -> UnixTime {
        UnixTime(nanoseconds: sp_wall_clock_ns())
    }

    /// The core's time: the wall clock when the daemon started, advancing steadily (see `SteadyClock`).
    func now() -> UnixTime { clock.now() }

    /// Carries out actions through the shells; committed events reach the control server. `inputTime` is when
    /// the input they answer was captured, for the wake latency.
    func performer(inputTime: Duration? = nil) -> ActionPerformer {
        ActionPerformer(
            store: store, logger: logger, effects: { [shells] in shells[$0] },
            onEvent: { [weak self] event in self?.noteEvent(event) },
            onStopServing: { [weak self] interface in self?.closeShell(interface) }, storeHealth: storeHealth,
            metrics: metrics,
            inputTime: inputTime)
    }

    /// Carries out `actions`, then tells followers of new events and re-arms the timer.
    func perform(_ actions: [Action], inputTime: Duration? = nil) {
        let committed = performer(inputTime: inputTime).perform(actions)
        if committed, storeHealth.isBehind, !storeHealth.isFailing { catchUpStore() }
        if committed, actions.contains(where: { if case .store(.appendEvent) = $0 { true } else { false } }) {
            sendEventsToFollowers()
        }
        if actions.contains(where: { if case .store(.saveOwner) = $0 { true } else { false } }) {
            for case .store(.saveOwner(let owner)) in actions { remember(owner) }
            reportStatus()
        } else if actions.contains(where: Self.changesWhatIsHeld) {
            reportStatus()
        }
    }

    /// A host let go, or a declared host taken over or let go (which the store never hears of).
    static func changesWhatIsHeld(_ action: Action) -> Bool {
        switch action {
        case .store(.removeOwner): true
        case .store(.appendEvent(let event)): event.kind == .asleep || event.kind == .released
        default: false
        }
    }

    private func noteEvent(_ event: Event) {
        guard event.kind == .wake || event.kind == .wouldWake, let owner = event.owner else { return }
        lastWakes[OwnerKey(interface: event.interface, primaryMAC: owner)] = event
    }

    func remember(_ owner: Owner) {
        if let name = owner.firstHostName { knownNames[owner.key.primaryMAC] = name }
    }

    /// After failed commits the store lacks what the core changed meanwhile (registrations held but not
    /// acknowledged, renewals, hosts let go). Writes the difference, so that a restart restores what the daemon
    /// holds. Runs after the first commit that succeeds again, and from the refresh timer while commits fail,
    /// which also notices that space has returned when no registration arrives.
    private func catchUpStore() {
        guard storeHealth.isBehind else { return }
        do {
            let loaded = try store.loadOwners()
            let stored = Dictionary(loaded.owners.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
            // Declared hosts are held but never stored.
            let held = Dictionary(core.storedOwners.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
            let saved = held.values.filter { stored[$0.key] != $0 }.sorted { $0.key < $1.key }
            let removed = stored.keys.filter { held[$0] == nil }.sorted()
            let wakes = core.storedWakes
            let changedWakes = held.keys.filter { wakes[$0] != loaded.wakes[$0] }.sorted()
            guard !saved.isEmpty || !removed.isEmpty || !changedWakes.isEmpty else {
                storeHealth.caughtUp()
                return
            }
            let started = ContinuousClock.now
            try store.apply(
                saved.map { .saveOwner($0) } + removed.map { .removeOwner($0) }
                    + changedWakes.map { .saveWake($0, wakes[$0]) })
            metrics.storeCommitted(in: ContinuousClock.now - started)
            storeHealth.commitSucceeded(logger: logger)
            storeHealth.caughtUp()
            logger.notice(
                "lease store: caught up with what is held: \(saved.count) hosts written, \(removed.count) removed")
        } catch {
            metrics.storeFailed(error)
            storeHealth.commitFailed(error, logger: logger)
        }
    }

    private func loadWakeHistory() {
        guard let loaded = try? store.events(limit: configuration.eventHistoryLimit) else { return }
        for stored in loaded.events { noteEvent(stored.event) }
    }

    /// Follows a step of the system clock: everything held moves with it, so no lease ends early or late.
    private func followClockSteps() {
        guard let step = clock.step() else { return }
        perform(core.clockStepped(by: step))
    }

    /// Runs until SIGTERM, SIGINT or `requestStop()`. Leases stay in the store for the next start.
    public func run() {
        queue.sync {
            for signalNumber in [SIGTERM, SIGINT] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                source.setEventHandler { [weak self] in
                    self?.logger.notice("received signal \(signalNumber), stopping; leases are kept")
                    self?.stop()
                }
                source.activate()
                sources.append(source)
            }
            signal(SIGHUP, SIG_IGN)
            let hangUp = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
            hangUp.setEventHandler { [weak self] in self?.reload() }
            hangUp.activate()
            sources.append(hangUp)
            for name in shells.keys.sorted() {
                startShell(name)
            }
            control?.start { [weak self] request, connection in
                self?.answer(request, on: connection)
            }
            // Listening since init (a bad address failed the start); answering from now, when the state it reads
            // is the queue's.
            metricsServer?.open()
            // Interface addresses change (DHCP, SLAAC): refresh what is on-link now and then.
            let refresh = DispatchSource.makeTimerSource(queue: queue)
            refresh.schedule(deadline: .now() + .seconds(10), repeating: .seconds(10))
            refresh.setEventHandler { [weak self] in
                self?.followClockSteps()
                self?.refreshLinks()
                self?.catchUpStore()
            }
            refresh.activate()
            sources.append(refresh)
            if let interval = watchdogInterval, interval > .zero {
                // From the queue that does all the work: a stuck queue stops the pings.
                let nanoseconds =
                    Int(interval.components.seconds) * 1_000_000_000
                    + Int(interval.components.attoseconds / 1_000_000_000)
                let watchdog = DispatchSource.makeTimerSource(queue: queue)
                watchdog.schedule(
                    deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
                watchdog.setEventHandler { [weak self] in self?.lifecycleObserver?(.watchdog) }
                watchdog.activate()
                sources.append(watchdog)
            }
            scheduleExpiry()
            lifecycleObserver?(.ready(status: statusLine))
        }
        finished.wait()
    }

    /// Starts reading an interface and advertising on it.
    private func startShell(_ name: InterfaceName) {
        guard let shell = shells[name] else { return }
        shell.start { [weak self] input in self?.handle(input) }
        if !core.retiring.contains(name), let advertisement = advertisement(on: shell) {
            perform(
                core.startAdvertising(
                    on: name, configuration: advertisement, port: configuration.registrationPort, now: now()))
        }
    }

    /// The advertisement on one interface: the feature digit `.1` only where keepalive offload can work (it is on,
    /// and frames of our own can go out there). Macs prefer a proxy that offers it over any that does not.
    func advertisement(on shell: InterfaceShell) -> AdvertisementConfiguration? {
        guard var advertisement = configuration.advertisement else { return nil }
        advertisement.features = configuration.core.keepaliveOffload && shell.canSendFrames ? 1 : nil
        return advertisement
    }

    /// Stops a running daemon from any thread; `run()` returns once the sockets and the store are closed.
    public func requestStop() {
        queue.async { [self] in
            logger.notice("stopping; leases are kept")
            stop()
        }
    }

    private func stop() {
        guard !stopped else { return }
        stopped = true
        lifecycleObserver?(.stopping)
        // Goodbyes for the advertisement (and magic packets, if asked) go out while the sockets are still open.
        if configuration.wakeAllOnExit {
            perform(core.wakeEveryone(now: now(), reason: "the proxy is stopping"))
        }
        perform(core.stopAdvertising(now: now()))
        perform(core.actionsOnStop())
        for source in sources { source.cancel() }
        expiryTimer?.cancel()
        control?.stop()
        metricsServer?.stop()
        for shell in shells.values { shell.stop() }
        unicastHolder?.close()
        store.close()
        finished.signal()
    }

    /// "holding 3 hosts on eth0, eth0.20": the one-line summary the service manager shows.
    var statusLine: String {
        let count = core.owners.count
        let served = shells.keys.filter { !core.retiring.contains($0) }.sorted().map(\.rawValue)
        let retiring = core.retiring.sorted().map(\.rawValue)
        let line = "holding \(count) host\(count == 1 ? "" : "s") on \(served.joined(separator: ", "))"
        guard !retiring.isEmpty else { return line }
        return line + " (waking the hosts of \(retiring.joined(separator: ", ")) before closing it)"
    }

    private func reportStatus() {
        lifecycleObserver?(.status(statusLine))
    }

    private func refreshLinks() {
        for shell in shells.values {
            guard let link = shell.refreshLink() else {
                logger.warning("interface \(shell.name) is gone; registrations wait for it")
                continue
            }
            core.setLink(link)
        }
    }

    private func handle(_ input: ShellInput) {
        guard !stopped else { return }
        switch input {
        case .registrations(let batch):
            perform(core.handleRegistrations(batch, now: now()))
        case .mdns(let packet, let captured):
            perform(core.handleMDNS(packet, now: now()), inputTime: captured)
        case .frame(let frame, let interface, let captured):
            perform(core.handleFrame(frame, on: interface, now: now()), inputTime: captured)
        }
        scheduleExpiry()
    }

    private func expire() {
        armedDeadline = nil
        perform(core.tick(now: now()))
        scheduleExpiry()
    }

    /// Arms the one expiry timer for the core's next deadline, but only when that deadline is earlier than the
    /// one the timer is armed for: re-arming costs a wake-up of Dispatch's timer thread, and this runs after every
    /// packet. A timer that fires when nothing is due (what it was armed for went away) costs one empty tick.
    func scheduleExpiry() {
        guard !stopped, let deadline = core.nextDeadline else { return }
        if let armed = armedDeadline, armed <= deadline { return }
        let timer: any DispatchSourceTimer
        if let expiryTimer {
            timer = expiryTimer
        } else {
            timer = DispatchSource.makeTimerSource(queue: queue)
            timer.setEventHandler { [weak self] in self?.expire() }
            timer.activate()
            expiryTimer = timer
        }
        let delay = max(0, deadline.nanoseconds - now().nanoseconds)
        timer.schedule(deadline: .now() + .nanoseconds(Int(min(delay, Int64(Int32.max) * 1_000_000))))
        armedDeadline = deadline
    }

    // MARK: Reload

    /// Reads the configuration again and applies what changed, keeping every held host: interfaces added start
    /// serving, interfaces removed stop (their hosts are woken first), a changed advertisement is announced
    /// again, limits and the wake policy apply from now on. A configuration that does not load is refused whole.
    private func reload() {
        guard let reloadConfiguration, !stopped else { return }
        lifecycleObserver?(.reloading)
        defer {
            lifecycleObserver?(.reloaded(status: statusLine))
            scheduleExpiry()
        }
        let next: DaemonConfiguration
        do {
            next = try reloadConfiguration()
        } catch {
            logger.error("reload refused, the running configuration is kept: \(error)")
            return
        }
        guard !next.interfaces.isEmpty else {
            logger.error("reload refused, the running configuration is kept: no interface to serve")
            return
        }
        for (what, changed) in [
            ("registration_port", next.registrationPort != configuration.registrationPort),
            ("state_directory", next.stateDirectory != configuration.stateDirectory),
            ("control.socket", next.controlSocket != configuration.controlSocket),
            ("control.group", next.controlGroup != configuration.controlGroup),
        ] where changed {
            logger.warning("reload: \(what) changed; it takes effect at the next start")
        }
        // Interfaces being removed still have a shell, open for the wakes of their hosts: one wanted again is
        // served again as it is, not opened a second time.
        let current = Set(shells.keys).subtracting(core.retiring)
        let wanted = Set(next.interfaces.map { InterfaceName($0) })
        let servedAgain = wanted.intersection(core.retiring).sorted()
        // Open new interfaces first: if one fails, nothing has changed yet.
        var added: [InterfaceShell] = []
        for name in wanted.subtracting(shells.keys).sorted() {
            do {
                added.append(
                    try InterfaceShell(
                        interface: name.rawValue, options: configuration.shellOptions, queue: queue, logger: logger))
            } catch {
                for shell in added { shell.stop() }
                logger.error("reload refused, the running configuration is kept: \(error)")
                return
            }
        }
        // A new metrics address is opened before anything changes: if it cannot be, nothing has.
        var newMetricsServer: MetricsServer?
        if next.metricsListen != configuration.metricsListen, let address = next.metricsListen {
            // The same port on another address of the same family may be taken by the running listener.
            metricsServer?.stop()
            metricsServer = nil
            do {
                newMetricsServer = try MetricsServer(address: address, source: metricsSource, logger: logger)
            } catch {
                for shell in added { shell.stop() }
                logger.error("reload refused, the running configuration is kept: \(error)")
                if let running = configuration.metricsListen {
                    do {
                        metricsServer = try MetricsServer(address: running, source: metricsSource, logger: logger)
                        metricsServer?.open()
                    } catch {
                        // Taken meanwhile: the endpoint is off, and the running configuration says so, so that the
                        // next reload tries to open it again.
                        configuration.metricsListen = nil
                        logger.error("metrics: could not listen on \(running) again, the endpoint is off: \(error)")
                    }
                }
                return
            }
        }
        let advertisementChanged =
            next.advertisement != configuration.advertisement
            || next.core.keepaliveOffload != configuration.core.keepaliveOffload
        let registrationPort = configuration.registrationPort
        var applied = next
        applied.registrationPort = registrationPort
        applied.stateDirectory = configuration.stateDirectory
        applied.controlSocket = configuration.controlSocket
        applied.controlGroup = configuration.controlGroup
        applied.responder = configuration.responder
        configuration = applied
        if let newMetricsServer {
            metricsServer = newMetricsServer
            newMetricsServer.open()
            logger.notice("reload: metrics on http://\(newMetricsServer.address)/metrics")
        } else if applied.metricsListen == nil, let running = metricsServer {
            running.stop()
            metricsServer = nil
            logger.notice("reload: metrics endpoint closed")
        }

        for name in current.subtracting(wanted).sorted() {
            // The shell stays open for the wakes of its hosts; the core says when to close it (`closeShell`).
            logger.notice("reload: \(name) removed from the configuration; waking its hosts before closing it")
            perform(core.removeLink(name, now: now(), reason: "\(name) was removed from the configuration"))
        }
        for name in servedAgain where core.restoreLink(name) {
            if let shell = shells[name], let advertisement = advertisement(on: shell) {
                perform(
                    core.startAdvertising(
                        on: name, configuration: advertisement, port: registrationPort, now: now()))
            }
            logger.notice("reload: serving \(name) again")
        }
        for shell in added {
            shells[shell.name] = shell
            core.setLink(shell.link)
            // Hosts the lease store kept for this interface were held while nothing served it: its new capture
            // watches their addresses.
            perform(core.captureOpened(on: shell.name))
            if configuration.responder { warnAboutKernelSettings(interface: shell.name.rawValue) }
            startShell(shell.name)
            logger.notice("reload: serving \(shell.name)")
        }
        // After the links: declared hosts on an interface served from now on are watched there.
        perform(core.reconfigure(next.core, now: now()))
        if advertisementChanged {
            let addedNames = Set(added.map(\.name)).union(servedAgain)
            for name in shells.keys.sorted() where !addedNames.contains(name) && !core.retiring.contains(name) {
                perform(core.stopAdvertising(on: name, now: now()))
                if let shell = shells[name], let advertisement = advertisement(on: shell) {
                    perform(
                        core.startAdvertising(
                            on: name, configuration: advertisement, port: registrationPort, now: now()))
                }
            }
            logger.notice("reload: advertisement changed; announcing again")
        }
        logger.notice("reloaded the configuration: \(statusLine)")
    }

    // MARK: Metrics

    /// What the metrics endpoint reads, on this queue: counts and copies only; it renders on its own thread.
    var metricsSource: MetricsSource {
        MetricsSource(
            snapshot: { [weak self] reply in
                guard let daemon = self else { return }
                daemon.queue.async { reply(daemon.metricsSnapshot()) }
            },
            hosts: { [weak self] reply in
                guard let daemon = self else { return }
                daemon.queue.async { reply(daemon.hostSummaries()) }
            },
            exposition: { [metrics] in metrics.exposition($0) })
    }

    /// The figures of one scrape.
    func metricsSnapshot() -> MetricsSnapshot {
        MetricsSnapshot(
            statistics: core.statistics, held: core.heldCounts,
            capture: shells.compactMapValues(\.captureCounts))
    }

    // MARK: Kernel settings

    /// The triggering SYN must only be observed: a forwarding or redirecting kernel would answer or pass it on
    /// (PROTOCOL.md section 6 item 8), and proxy ARP/ND would answer for the sleeper alongside the proxy.
    private func warnAboutKernelSettings(interface name: String) {
        for warning in Self.kernelSettingWarnings(interface: name, read: Self.readSysctl) {
            logger.warning("\(warning)")
        }
    }

    /// The warnings the kernel's settings for `name` deserve, from `read` (a sysctl's path to its value): IP
    /// forwarding and proxy ARP/NDP, on the interface or for all; ICMP redirects only where IPv4 forwards, since
    /// the kernel sends them only for packets it forwards (Debian's `send_redirects = 1` alone is harmless).
    static func kernelSettingWarnings(interface name: String, read: (String) -> String?) -> [String] {
        // The sysctl's name and its file: an interface name may hold dots (a VLAN, `eth0.20`), so one is not
        // made from the other.
        func setting(_ sysctl: String, _ path: String) -> (sysctl: String, value: String)? {
            guard let value = read(path), value != "0" else { return nil }
            return (sysctl, value)
        }
        func warning(_ found: (sysctl: String, value: String)) -> String {
            "\(found.sysctl) is \(found.value): this host may answer or forward traffic for sleeping hosts; set \(found.sysctl)=0"
        }
        let forwarding = [
            setting("net.ipv4.ip_forward", "/proc/sys/net/ipv4/ip_forward"),
            setting("net.ipv4.conf.\(name).forwarding", "/proc/sys/net/ipv4/conf/\(name)/forwarding"),
        ].compactMap(\.self)
        var warnings = forwarding.map(warning)
        if let found = setting("net.ipv4.conf.\(name).proxy_arp", "/proc/sys/net/ipv4/conf/\(name)/proxy_arp") {
            warnings.append(warning(found))
        }
        if !forwarding.isEmpty {
            let redirects = [
                setting("net.ipv4.conf.all.send_redirects", "/proc/sys/net/ipv4/conf/all/send_redirects"),
                setting("net.ipv4.conf.\(name).send_redirects", "/proc/sys/net/ipv4/conf/\(name)/send_redirects"),
            ].compactMap(\.self)
            warnings += redirects.map { found in
                "\(found.sysctl) is \(found.value) and IPv4 forwarding is on: this host may redirect connections meant for sleeping hosts; set \(found.sysctl)=0"
            }
        }
        warnings += [
            setting("net.ipv6.conf.\(name).forwarding", "/proc/sys/net/ipv6/conf/\(name)/forwarding"),
            setting("net.ipv6.conf.\(name).proxy_ndp", "/proc/sys/net/ipv6/conf/\(name)/proxy_ndp"),
        ].compactMap(\.self).map(warning)
        return warnings
    }

    static func readSysctl(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].filter { $0 > 0x20 }, as: UTF8.self)
    }

    /// The capture filter's `dst host` or `dst net` terms for `addresses`, at most `limit`, folded as the core
    /// folds them.
    public static func destinationTerms(for addresses: [IPAddress], limit: Int) -> [String] {
        WatchedPrefixes(addresses).prefixes(limit: limit).map(InterfaceShell.destinationTerm)
    }
}
