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

/// Carries out the core's actions, in order, with one rule above the others: a reply (and the notice of an
/// event) goes out only after every store change of the batch is committed, in one transaction; if the commit
/// fails no reply goes out (the client retransmits). Everything else (answers, take-over frames, magic packets,
/// neighbour entries) happens first, before the commit, whatever its outcome: it keeps the network consistent
/// with the core, which already changed, and a wake does not wait for the disk. Failed commits are logged
/// through `storeHealth`: once when they start and once a minute while they last, not once per datagram.
public struct ActionPerformer {
    public var store: any LeaseStoring
    public var logger: Logger
    /// The effects for an interface, or nil when it is not served (its actions are logged and dropped).
    public var effects: (InterfaceName) -> (any InterfaceEffects)?
    /// Sees each committed event, for the control server's followers and its record of wakes.
    public var onEvent: (Event) -> Void
    /// Told, in its place among the actions, that an interface removed from the configuration has nothing left to
    /// serve: the daemon closes it.
    public var onStopServing: (InterfaceName) -> Void
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
        onEvent: @escaping (Event) -> Void = { _ in },
        onStopServing: @escaping (InterfaceName) -> Void = { _ in }, storeHealth: StoreHealth = StoreHealth(),
        metrics: DaemonMetrics? = nil, inputTime: Duration? = nil,
        clock: @escaping @Sendable () -> Duration = ActionPerformer.wallClock
    ) {
        self.store = store
        self.logger = logger
        self.effects = effects
        self.onEvent = onEvent
        self.onStopServing = onStopServing
        self.storeHealth = storeHealth
        self.metrics = metrics
        self.inputTime = inputTime
        self.clock = clock
    }

    /// `CLOCK_REALTIME`, the clock libpcap stamps frames with.
    @Sendable public static func wallClock() -> Duration {
        .nanoseconds(sp_wall_clock_ns())
    }

    /// Carries out `actions`; returns whether the store changes (if any) were committed.
    @discardableResult
    public func perform(_ actions: [Action]) -> Bool {
        let started = metrics == nil ? nil : inputTime ?? clock()
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
            case .reply:
                afterCommit = true
            case .wakeStarted:
                if let metrics, let started { metrics.wakeStarted(latency: clock() - started) }
            case .stopServing(let interface):
                onStopServing(interface)
            default:
                carryOutNow(action)
            }
        }
        guard afterCommit else { return true }
        var committed = true
        if !changes.isEmpty {
            let commitStarted = metrics == nil ? nil : clock()
            do {
                try store.apply(changes)
                if let metrics, let commitStarted { metrics.storeCommitted(in: clock() - commitStarted) }
                storeHealth.commitSucceeded(logger: logger)
            } catch {
                committed = false
                metrics?.storeFailed(error)
                storeHealth.commitFailed(error, logger: logger)
            }
        }
        guard committed else { return false }
        for action in actions {
            switch action {
            case .store(.appendEvent(let event)):
                onEvent(event)
            case .reply(let reply):
                carryOut(reply.interface, "reply to \(reply.destination)") { try $0.sendReply(reply) }
            default:
                continue
            }
        }
        return true
    }

    /// An action that does not wait for the commit.
    private func carryOutNow(_ action: Action) {
        switch action {
        case .store, .reply, .wakeStarted, .stopServing:
            return
        case .log(let level, let text):
            logger.log(level: Self.level(level), "\(text)")
        case .sendMDNS(let transmission):
            carryOut(transmission.interface, "mDNS to \(transmission.destination)") {
                try $0.sendMDNS(transmission)
            }
        case .injectFrame(let interface, let bytes):
            carryOut(interface, "inject") { try $0.inject(bytes) }
        case .watchDestinations(let interface, let prefixes):
            carryOut(interface, "capture filter") { try $0.watch(prefixes) }
        case .watchSources(let interface, let sources):
            carryOut(interface, "capture filter") { try $0.watchSources(sources) }

        case .joinMulticastGroup(let interface, let group):
            carryOut(interface, "join \(group)") { try $0.joinGroup(group) }
        case .leaveMulticastGroup(let interface, let group):
            carryOut(interface, "leave \(group)") { try $0.leaveGroup(group) }
        case .setNeighbour(let interface, let address, let mac):
            carryOut(interface, "neighbour \(address)") { try $0.setNeighbour(address, mac: mac) }
        case .removeNeighbour(let interface, let address):
            carryOut(interface, "neighbour \(address)") { try $0.removeNeighbour(address) }
        }
    }

    /// `what` names the effect in a log line; it is built only when one is written (this runs for every answer).
    private func carryOut(
        _ interface: InterfaceName, _ what: @autoclosure () -> String, _ body: (any InterfaceEffects) throws -> Void
    ) {
        guard let effects = effects(interface) else {
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
