import CNetSupport
public import LeaseStore
public import Logging
public import NetworkAddresses
public import SleepProxyCore

/// The effects of the core's actions on one interface's wire and kernel state. `InterfaceShell` is the real one;
/// tests of `ActionPerformer` substitute a recorder, so that the rules of carrying out actions run without root.
public protocol InterfaceEffects: AnyObject {
    func sendReply(_ reply: RegistrationReply) throws
    func sendMDNS(_ transmission: MDNSTransmission) throws
    func inject(_ frame: [UInt8]) throws
    /// The capture watches these prefixes now (every held address on this interface falls in one of them).
    func watch(_ prefixes: [Link.Prefix]) throws
    /// The declared hosts on this interface are now exactly `sources`: the capture sees every frame they send.
    func watchSources(_ sources: [MACAddress]) throws
    func joinGroup(_ group: IPv6Address) throws
    func leaveGroup(_ group: IPv6Address) throws
    func setNeighbour(_ address: IPAddress, mac: MACAddress) throws
    func removeNeighbour(_ address: IPAddress) throws
}

/// Carries out the core's actions, in order, with one rule above the others: a reply goes out (and an event is
/// reported) only after every store change of the batch is committed, in one transaction; if the commit fails no
/// reply goes out (the client retransmits). Everything else (answers, take-over frames, magic packets,
/// neighbour entries) happens first, before the commit, whatever its outcome: it keeps the network consistent
/// with the core, which already changed, and a wake does not wait for the disk. Failed commits are logged
/// through `storeHealth`: once when they start and once a minute while they last, not once per datagram.
///
/// `perform` says what it did (`Report`), so that the daemon acts on that and never reads the actions again.
public struct ActionPerformer {
    public var store: any LeaseStoring
    public var logger: Logger
    /// The effects for an interface, or nil when it is not served (its actions are logged and dropped).
    public var effects: (InterfaceName) -> (any InterfaceEffects)?
    /// Whether commits fail, kept across batches by the daemon.
    public var storeHealth: StoreHealth
    /// Where wake latencies and commit times go; nil measures nothing.
    public var metrics: DaemonMetrics?
    /// When the input these actions answer reached the daemon (a frame's capture time), on `clock`'s scale: a
    /// wake's latency is measured from it. Nil: from when `perform` starts.
    public var inputTime: Duration?
    /// The wall clock, as a duration since the epoch (the scale of capture times); tests pass their own.
    public var clock: @Sendable () -> Duration

    public init(
        store: any LeaseStoring, logger: Logger, effects: @escaping (InterfaceName) -> (any InterfaceEffects)?,
        storeHealth: StoreHealth = StoreHealth(), metrics: DaemonMetrics? = nil, inputTime: Duration? = nil,
        clock: @escaping @Sendable () -> Duration = ActionPerformer.wallClock
    ) {
        self.store = store
        self.logger = logger
        self.effects = effects
        self.storeHealth = storeHealth
        self.metrics = metrics
        self.inputTime = inputTime
        self.clock = clock
    }

    /// `CLOCK_REALTIME`, the clock libpcap stamps frames with.
    @Sendable public static func wallClock() -> Duration {
        .nanoseconds(sp_wall_clock_ns())
    }

    /// What one `perform` did, for the daemon to follow up on.
    public struct Report: Sendable {
        /// Whether the store changes, if any, were committed (true when there were none). When false, no reply
        /// went out and no event is reported.
        public var committed = true
        /// The events committed, in order.
        public var events: [Event] = []
        /// The owners the actions saved, in order: the core holds them whether or not the commit succeeded.
        public var ownersSaved: [Owner] = []
        /// Whether what is held changed in a way the daemon's status line shows: an owner saved or removed, or a
        /// host (a declared one too, which the store never hears of) taken over or let go.
        public var heldChanged = false
        /// Interfaces removed from the configuration that have nothing left to serve, in order: the daemon closes
        /// them. No effect on one went out after its place among the actions.
        public var stoppedServing: [InterfaceName] = []

        public init() {}
    }

    /// Carries out `actions` and says what it did.
    @discardableResult
    public func perform(_ actions: [Action]) -> Report {
        let started = metrics == nil ? nil : inputTime ?? clock()
        var report = Report()
        var changes: [StoreChange] = []
        var afterCommit = false
        // Each list of prefixes to watch is complete: of several for one interface in a batch, the last is enough
        // (each would rebuild the capture filter).
        var lastWatch: [InterfaceName: Int] = [:]
        for (index, action) in actions.enumerated() {
            if case .watchDestinations(let interface, _) = action { lastWatch[interface] = index }
        }
        for (index, action) in actions.enumerated() {
            switch action {
            case .watchDestinations(let interface, _) where lastWatch[interface] != index:
                continue
            case .store(let change):
                changes.append(change)
                afterCommit = true
                switch change {
                case .saveOwner(let owner):
                    report.ownersSaved.append(owner)
                    report.heldChanged = true
                case .removeOwner:
                    report.heldChanged = true
                case .appendEvent(let event):
                    if event.kind == .asleep || event.kind == .released { report.heldChanged = true }
                case .saveWake, .saveLearned:
                    break
                }
            case .reply:
                afterCommit = true
            case .wakeStarted:
                if let metrics, let started { metrics.wakeStarted(latency: clock() - started) }
            case .stopServing(let interface):
                report.stoppedServing.append(interface)
            default:
                carryOutNow(action, closed: report.stoppedServing)
            }
        }
        guard afterCommit else { return report }
        if !changes.isEmpty {
            let commitStarted = metrics == nil ? nil : clock()
            do {
                try store.apply(changes)
                if let metrics, let commitStarted { metrics.storeCommitted(in: clock() - commitStarted) }
                storeHealth.commitSucceeded(logger: logger)
            } catch {
                report.committed = false
                metrics?.storeFailed(error)
                storeHealth.commitFailed(error, logger: logger)
            }
        }
        guard report.committed else { return report }
        for action in actions {
            switch action {
            case .store(.appendEvent(let event)):
                report.events.append(event)
            case .reply(let reply):
                carryOut(reply.interface, closed: report.stoppedServing, "reply to \(reply.destination)") {
                    try $0.sendReply(reply)
                }
            default:
                continue
            }
        }
        return report
    }

    /// An action that does not wait for the commit.
    private func carryOutNow(_ action: Action, closed: [InterfaceName]) {
        switch action {
        case .store, .reply, .wakeStarted, .stopServing:
            return
        case .log(let level, let text):
            logger.log(level: Self.level(level), "\(text)")
        case .sendMDNS(let transmission):
            carryOut(transmission.interface, closed: closed, "mDNS to \(transmission.destination)") {
                try $0.sendMDNS(transmission)
            }
        case .injectFrame(let interface, let bytes):
            carryOut(interface, closed: closed, "inject") { try $0.inject(bytes) }
        case .watchDestinations(let interface, let prefixes):
            carryOut(interface, closed: closed, "capture filter") { try $0.watch(prefixes) }
        case .watchSources(let interface, let sources):
            carryOut(interface, closed: closed, "capture filter") { try $0.watchSources(sources) }

        case .joinMulticastGroup(let interface, let group):
            carryOut(interface, closed: closed, "join \(group)") { try $0.joinGroup(group) }
        case .leaveMulticastGroup(let interface, let group):
            carryOut(interface, closed: closed, "leave \(group)") { try $0.leaveGroup(group) }
        case .setNeighbour(let interface, let address, let mac):
            carryOut(interface, closed: closed, "neighbour \(address)") { try $0.setNeighbour(address, mac: mac) }
        case .removeNeighbour(let interface, let address):
            carryOut(interface, closed: closed, "neighbour \(address)") { try $0.removeNeighbour(address) }
        }
    }

    /// `what` names the effect in a log line; it is built only when one is written (this runs for every answer).
    /// An interface in `closed` stopped serving earlier in the actions: it is as good as gone.
    private func carryOut(
        _ interface: InterfaceName, closed: [InterfaceName], _ what: @autoclosure () -> String,
        _ body: (any InterfaceEffects) throws -> Void
    ) {
        guard !closed.contains(interface), let effects = effects(interface) else {
            logger.debug("\(what()) on \(interface): the interface is not served")
            return
        }
        do {
            try body(effects)
        } catch {
            logger.warning("\(what()) on \(interface): \(error)")
        }
    }

    static func level(_ level: LogLevel) -> Logger.Level {
        switch level {
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        default: .error
        }
    }
}
