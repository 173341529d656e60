import CNetSupport
import Dispatch
import Frames
import LeaseStore
public import Logging
import NetworkAddresses
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

/// The daemon's lifecycle: it opens the lease store, restores what it held and opens one `InterfaceShell` per
/// served interface, then hands each input to the core and what the core decides to `ActionPerformer`, follows
/// signals and timers, reloads (`ReloadPlan`), and stops.
///
/// Everything runs on one serial queue, which owns the core, the store, the shells and the control server.
/// Datagrams that arrive together are handled as one batch: the core decides, the store commits every change of
/// the batch in one transaction, and only then do the replies go out (`ActionPerformer`). The control and metrics
/// answers are read from a snapshot taken on that queue (`ControlService`, `MetricsService`).
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
    /// The HTTP endpoints (metrics, the page), as `HTTPEndpoints` asks for them.
    var httpServers: [MetricsServer] = []
    /// Whether commits fail, and whether the store lags behind the core because they did.
    let storeHealth = StoreHealth()
    /// Writes what the store missed while commits failed.
    private let storeCatchUp: StoreCatchUp
    /// What `/metrics` shows; counted from the start whether or not it is served, and kept across reloads.
    public let metrics = DaemonMetrics(version: SleepProxyVersion.string)
    /// The newest wakes and the names of hosts seen, for the reports.
    var history = HostHistory()
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
        storeCatchUp = StoreCatchUp(store: store, health: storeHealth, metrics: metrics, logger: logger)
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
                for name in shells.keys.sorted() { KernelSettings.warn(interface: name.rawValue, logger: logger) }
            }
            if let path = configuration.controlSocket {
                control = try ControlServer(
                    path: path, group: configuration.controlGroup, queue: queue, logger: logger,
                    maximumConnections: configuration.controlConnections)
            }
            let endpoints = HTTPEndpoints(configuration)
            httpServers = try openHTTP(endpoints)
            if !endpoints.isEmpty { logger.info("\(endpoints.summary)") }
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
        if let stored = try? store.events(limit: configuration.eventHistoryLimit) {
            for event in stored.events { history.note(event.event) }
        }
        // What declared hosts announced before the restart: one asleep now cannot announce it again.
        let learned = try store.loadLearned()
        for problem in learned.problems {
            logger.error("lease store: \(problem)")
        }
        for owner in loaded.owners { history.remember(owner) }
        perform(core.restore(loaded.owners, wakes: loaded.wakes, now: now()))
        retireUnconfiguredInterfaces()
        perform(core.watchDeclaredHosts(now: now(), learned: learned.records))
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
                perform(core.captureOpened(on: name))
                logger.notice(
                    "restore: \(count) held host\(count == 1 ? "" : "s") on \(name), which the configuration no longer names: waking them there, then closing it"
                )
            } catch {
                logger.error(
                    "restore: \(count) held host\(count == 1 ? "" : "s") on \(name), which the configuration no longer names and which cannot be opened (\(error)): dropped without a wake"
                )
            }
            perform(core.removeLink(name, now: now(), reason: reason))
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

    /// Carries out `actions` through the shells, then follows up on what was done: interfaces with nothing left to
    /// serve close, committed events reach the history and the control server's followers, a store that fell
    /// behind catches up, and the service manager hears of a change in what is held. `inputTime` is when the
    /// input they answer was captured, for the wake latency.
    func perform(_ actions: [Action], inputTime: Duration? = nil) {
        let report = ActionPerformer(
            store: store, logger: logger, effects: { [shells] in shells[$0] }, storeHealth: storeHealth,
            metrics: metrics, inputTime: inputTime
        ).perform(actions)
        for interface in report.stoppedServing { closeShell(interface) }
        for event in report.events { history.note(event) }
        if report.committed, storeHealth.isBehind, !storeHealth.isFailing { storeCatchUp.run(holding: core) }
        if !report.events.isEmpty { sendEventsToFollowers() }
        for owner in report.ownersSaved { history.remember(owner) }
        if report.heldChanged { reportStatus() }
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
            for server in httpServers { server.open() }
            // Interface addresses change (DHCP, SLAAC): refresh what is on-link now and then.
            let refresh = DispatchSource.makeTimerSource(queue: queue)
            refresh.schedule(deadline: .now() + .seconds(10), repeating: .seconds(10))
            var ticks = 0
            refresh.setEventHandler { [weak self] in
                guard let self else { return }
                followClockSteps()
                refreshLinks()
                storeCatchUp.run(holding: core)
                // Once a minute, what the allocator keeps freed goes back to the system (see AllocatorTuning).
                ticks += 1
                if ticks % 6 == 0 { AllocatorTuning.returnFreeMemory() }
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
        if !core.retiring.contains(name) { startAdvertising(on: name) }
    }

    /// Announces the advertisement on an open interface, if there is one.
    private func startAdvertising(on name: InterfaceName) {
        guard let shell = shells[name], let advertisement = advertisement(on: shell) else { return }
        perform(
            core.startAdvertising(
                on: name, configuration: advertisement, port: configuration.registrationPort, now: now()))
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
        for server in httpServers { server.stop() }
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

    /// Reads the configuration again and carries out the `ReloadPlan` from the running one. A configuration that
    /// does not load is refused whole, and so is one whose new interfaces or metrics address cannot be opened:
    /// those are opened before anything changes.
    private func reload() {
        guard let reloadConfiguration, !stopped else { return }
        lifecycleObserver?(.reloading)
        defer {
            lifecycleObserver?(.reloaded(status: statusLine))
            scheduleExpiry()
        }
        let plan: ReloadPlan
        do {
            plan = try ReloadPlan(
                running: configuration, next: reloadConfiguration(), open: Set(shells.keys), retiring: core.retiring)
        } catch {
            logger.error("reload refused, the running configuration is kept: \(error)")
            return
        }
        for key in plan.startOnlyChanges {
            logger.warning("reload: \(key) changed; it takes effect at the next start")
        }
        // Open new interfaces first: if one fails, nothing has changed yet.
        var added: [InterfaceShell] = []
        for name in plan.open {
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
        // New HTTP endpoints are opened before anything changes: if they cannot be, nothing has.
        var reopened: [MetricsServer]?
        if case .reopen(let endpoints) = plan.endpoints {
            // The same port on another address of the same family may be taken by the running listener.
            for server in httpServers { server.stop() }
            httpServers = []
            do {
                reopened = try openHTTP(endpoints)
            } catch {
                for shell in added { shell.stop() }
                logger.error("reload refused, the running configuration is kept: \(error)")
                listenForHTTPAgain()
                return
            }
        }
        configuration = plan.configuration
        if let reopened, case .reopen(let endpoints) = plan.endpoints {
            httpServers = reopened
            for server in reopened { server.open() }
            logger.notice("reload: \(endpoints.isEmpty ? "no metrics endpoint or page" : endpoints.summary)")
        }
        for name in plan.retire {
            // The shell stays open for the wakes of its hosts; the core says when to close it (`closeShell`).
            logger.notice("reload: \(name) removed from the configuration; waking its hosts before closing it")
            perform(core.removeLink(name, now: now(), reason: "\(name) was removed from the configuration"))
        }
        for name in plan.serveAgain where core.restoreLink(name) {
            startAdvertising(on: name)
            logger.notice("reload: serving \(name) again")
        }
        for shell in added {
            shells[shell.name] = shell
            core.setLink(shell.link)
            // Hosts the lease store kept for this interface were held while nothing served it: its new capture
            // watches their addresses.
            perform(core.captureOpened(on: shell.name))
            if configuration.responder { KernelSettings.warn(interface: shell.name.rawValue, logger: logger) }
            startShell(shell.name)
            logger.notice("reload: serving \(shell.name)")
        }
        // After the links: declared hosts on an interface served from now on are watched there.
        perform(core.reconfigure(plan.configuration.core, now: now()))
        if plan.advertisementChanged {
            for name in plan.readvertise where shells[name] != nil {
                perform(core.stopAdvertising(on: name, now: now()))
                startAdvertising(on: name)
            }
            logger.notice("reload: advertisement changed; announcing again")
        }
        logger.notice("reloaded the configuration: \(statusLine)")
    }

    /// After a refused reload that closed the HTTP endpoints to open others: listens on the running addresses
    /// again. If one was taken meanwhile, the endpoints are off, and the running configuration says so, so that the
    /// next reload tries to open them again.
    private func listenForHTTPAgain() {
        let running = HTTPEndpoints(configuration)
        do {
            httpServers = try openHTTP(running)
            for server in httpServers { server.open() }
        } catch {
            configuration.metricsListen = nil
            configuration.webListen = nil
            logger.error("metrics and page: could not listen again, they are off: \(error)")
        }
    }

    /// Listens as `endpoints` asks (not answering until `open()`); throws, with none left open, if one cannot.
    private func openHTTP(_ endpoints: HTTPEndpoints) throws -> [MetricsServer] {
        var opened: [MetricsServer] = []
        do {
            for listener in endpoints.listeners {
                opened.append(
                    try MetricsServer(
                        address: listener.address, source: listener.metrics ? metricsService.source : nil,
                        page: listener.page ? pageSource(token: endpoints.token) : nil,
                        key: listener.metrics
                            ? (listener.page ? "metrics.listen and web.listen" : "metrics.listen")
                            : "web.listen", logger: logger))
            }
        } catch {
            for server in opened { server.stop() }
            throw error
        }
        return opened
    }

    // MARK: Control and metrics

    /// The state the control and metrics answers read, copied now (on the queue). Capture counts are read from
    /// each capture only when asked for.
    private func snapshot(withCaptureCounts: Bool) -> DaemonSnapshot {
        DaemonSnapshot(
            core: core, history: history,
            interfaces: shells.keys.sorted().compactMap { name in
                shells[name].map { shell in
                    DaemonSnapshot.Interface(
                        name: name, link: shell.link, captureCounts: withCaptureCounts ? shell.captureCounts : nil)
                }
            }, configuration: configuration, now: now(), startedAt: startedAt, storePath: store.path)
    }

    /// Answers a control request from a snapshot; a command (`wake`, `forget`) goes through the core first.
    private func answer(_ request: ControlRequest, on connection: ControlConnection) -> ControlResponse? {
        // The snapshot is let go before the command is carried out: while it is held, the core's first change
        // copies each table it shares with it whole (the held hosts', 150 KB at 300 hosts, for every wake or forget).
        let answer = ControlService(state: snapshot(withCaptureCounts: request.command == .status), store: store)
            .answer(request, on: connection)
        carryOut(answer.command)
        return answer.response
    }

    /// Carries out what the administrator asked for, through the core.
    private func carryOut(_ command: ControlService.Command?) {
        switch command {
        case .wake(let key, let reason, let source)?:
            perform(core.requestWake(key, now: now(), reason: reason, source: source))
            scheduleExpiry()
        case .forget(let key, let reason, let source)?:
            perform(core.forget(key, now: now(), reason: reason, source: source))
            scheduleExpiry()
        case nil:
            break
        }
    }

    /// Sends every follower of the event history the events committed since the last it saw.
    private func sendEventsToFollowers() {
        guard let control, !control.followers.isEmpty else { return }
        ControlService(state: snapshot(withCaptureCounts: false), store: store).sendEvents(to: control.followers)
    }

    /// What the page reads and asks for: its state and its commands, on this queue.
    private func pageSource(token: WebToken?) -> PageSource {
        PageSource(
            state: { [weak self] reply in
                guard let daemon = self else { return }
                daemon.queue.async { reply(daemon.pageState(actionsEnabled: token != nil)) }
            },
            act: { [weak self] action, reply in
                guard let daemon = self else { return }
                daemon.queue.async {
                    guard !daemon.stopped else { return }
                    let (response, status) = daemon.carryOut(action)
                    reply(response, status)
                }
            }, token: token, serverName: SettingsContext.systemHostName())
    }

    /// The page's state now: every host, the machines heard and not declared, the last 50 events.
    private func pageState(actionsEnabled: Bool) -> PageState {
        let state = snapshot(withCaptureCounts: false)
        let events = (try? store.events(limit: 50).events.map(state.report)) ?? []
        return PageState(
            generatedAt: DaemonSnapshot.date(state.now), version: SleepProxyVersion.string,
            serverName: SettingsContext.systemHostName(), interfaces: shells.keys.sorted().map(\.rawValue),
            hosts: state.hostSummaries(),
            seen: state.seenReports().filter { $0.role == "neither" }.map { SeenMachine($0) },
            events: events.reversed(), actionsEnabled: actionsEnabled)
    }

    /// A wake or a forget the page asked for (its token already checked), as the control socket's would be.
    private func carryOut(_ action: PageSource.Action) -> (PageActionResponse, Int) {
        let by = action.source.map { " by \($0.address)" } ?? ""
        // What the page sent, fit for one log line: at most 100 characters, control characters shown as "?".
        let asked = String(
            String.UnicodeScalarView(
                action.host.unicodeScalars.prefix(100).map { $0.properties.generalCategory == .control ? "?" : $0 }))
        let answer: ControlService.Answer
        do {
            // The snapshot goes before the command is carried out (see `answer(_:on:)`).
            let service = ControlService(state: snapshot(withCaptureCounts: false), store: store)
            answer = service.withHost(action.host, command: action.kind.rawValue) { key in
                switch action.kind {
                case .wake: service.wake(key, reason: "asked from the page\(by)", source: action.source)
                case .forget: service.forget(key, reason: "asked from the page\(by)", source: action.source)
                }
            }
        }
        carryOut(answer.command)
        if let error = answer.response.error {
            logger.notice("page: \(action.kind.rawValue) \(asked)\(by) refused: \(error.code)")
            return (PageActionResponse(ok: false, message: error.message), error.code == .unknownHost ? 404 : 400)
        }
        let message = answer.response.message ?? "done"
        logger.notice("page: \(message)\(by)")
        return (PageActionResponse(ok: true, message: message), 200)
    }

    /// What the metrics endpoint reads: snapshots taken on this queue.
    var metricsService: MetricsService {
        MetricsService(
            snapshot: { [weak self] withCaptureCounts, body in
                guard let daemon = self else { return }
                daemon.queue.async { body(daemon.snapshot(withCaptureCounts: withCaptureCounts)) }
            }, metrics: metrics)
    }
}
