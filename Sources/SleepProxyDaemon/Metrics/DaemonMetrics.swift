import LeaseStore
import Prometheus
public import SleepProxyCore
import Synchronization

/// What the daemon tells Prometheus: a registry (swift-prometheus) of the metrics in the README's Metrics section.
///
/// Three kinds of source feed it:
/// - the core's own counts (`CoreStatistics`) and what each interface holds and captured (`MetricsSnapshot`), read
///   on the daemon's queue when a scrape asks and written here with the exposition, so that the core pays nothing
///   per packet beyond incrementing an integer;
/// - what the shell measures as it carries out actions: the wake latency (`wakeStarted`) and the lease store's
///   commits (`storeCommitted`, `storeFailed`), recorded at once, from the daemon's queue;
/// - the process itself (`ProcessMetrics`), read from /proc at each scrape, and its memory by the allocator's and
///   SQLite's counts (`MemoryMetrics`).
///
/// Counters only grow while the daemon runs (a reload keeps this object and the core), and start at zero with a
/// new process, as Prometheus expects. Labels are bounded: interfaces served, and fixed sets of outcomes, reasons
/// and triggers, each present from the start at zero.
public final class DaemonMetrics: Sendable {
    /// The content type of the exposition (text format 0.0.4); Prometheus 3 refuses a scrape without it.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Wake latency buckets, seconds: a wake is expected well under a millisecond after its frame.
    static let wakeLatencyBuckets: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
    ]
    /// Commit time buckets, seconds: a WAL commit takes a fraction of a millisecond to tens of milliseconds.
    static let commitBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5]

    let registry = PrometheusCollectorRegistry()
    private let state: Mutex<ScrapeState>
    private let wakeLatency: ValueHistogram
    private let commitTime: ValueHistogram
    private let storeErrors: [StoreErrorKind: Counter]
    private let process: ProcessMetrics
    private let memory: MemoryMetrics

    /// Counters copied from the core at each scrape, with what they showed last time (they only grow by deltas).
    private struct ScrapeState: ~Copyable {
        var applied = CoreStatistics()
        var interfaces: [InterfaceName: InterfaceMetrics] = [:]
    }

    /// Where a lease store error is counted: a full disk, a damaged file, anything else.
    enum StoreErrorKind: String, CaseIterable {
        case diskFull = "disk-full"
        case damaged
        case other
    }

    public init(version: String) {
        process = ProcessMetrics(registry: registry)
        memory = MemoryMetrics(registry: registry)
        state = Mutex(ScrapeState())
        registry.makeGauge(
            descriptor: Self.name("build", unit: "info", "The running sleepproxyd: its version in a label, value 1."),
            labels: [("version", version)]
        ).set(to: 1.0)
        wakeLatency = registry.makeValueHistogram(
            descriptor: Self.name(
                "wake_latency", unit: "seconds",
                "From the input that started a wake (the captured frame, mDNS packet or request) to its first magic packets."
            ),
            buckets: Self.wakeLatencyBuckets)
        commitTime = registry.makeValueHistogram(
            descriptor: Self.name(
                "store_commit_duration", unit: "seconds", "Lease store transactions: time to commit each one."),
            buckets: Self.commitBuckets)
        var errors: [StoreErrorKind: Counter] = [:]
        for kind in StoreErrorKind.allCases {
            errors[kind] = registry.makeCounter(
                descriptor: Self.name(
                    "store_errors", unit: "total",
                    "Lease store errors: failed commits (disk-full, other) and a damaged file set aside at start."),
                labels: [("kind", kind.rawValue)])
        }
        storeErrors = errors
        // The core's counters, at zero until the first scrape copies them.
        state.withLock { state in
            self.copy(CoreStatistics(), over: &state.applied, force: true)
        }
    }

    /// `sleepproxy_NAME_UNIT`, with its help line.
    static func name(_ name: String, unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "sleepproxy", metricName: name, unitName: unit, helpText: help)
    }

    // MARK: Recorded as it happens (the daemon's queue)

    /// A wake's first magic packets went out `latency` after the input that started it.
    public func wakeStarted(latency: Duration) {
        wakeLatency.record(Self.seconds(max(latency, .zero)))
    }

    /// A lease store transaction committed in `duration`.
    public func storeCommitted(in duration: Duration) {
        commitTime.record(Self.seconds(duration))
    }

    /// A lease store commit failed, or the store found its file damaged at start.
    public func storeFailed(_ error: any Error) {
        let kind: StoreErrorKind
        switch (error as? LeaseStoreError)?.kind {
        case LeaseStoreError.Kind.diskFull?: kind = .diskFull
        case LeaseStoreError.Kind.damaged?: kind = .damaged
        default: kind = .other
        }
        storeErrors[kind]?.increment()
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    // MARK: At a scrape

    /// The exposition for `snapshot` (taken on the daemon's queue just before): every metric, in the text format.
    public func exposition(_ snapshot: MetricsSnapshot) -> [UInt8] {
        state.withLock { state in
            copy(snapshot.statistics, over: &state.applied, force: false)
            for (name, held) in snapshot.held {
                interface(name, in: &state).setHeld(held)
            }
            for (name, capture) in snapshot.capture {
                interface(name, in: &state).setCapture(capture)
            }
            // An interface no longer served leaves the exposition.
            for name in state.interfaces.keys where snapshot.held[name] == nil && snapshot.capture[name] == nil {
                state.interfaces.removeValue(forKey: name)?.unregister(from: registry)
            }
            process.update()
            memory.update()
            return registry.emitToBuffer()
        }
    }

    private func interface(_ name: InterfaceName, in state: inout ScrapeState) -> InterfaceMetrics {
        if let existing = state.interfaces[name] { return existing }
        let made = InterfaceMetrics(name, registry: registry)
        state.interfaces[name] = made
        return made
    }

    /// Brings the registry's copies of the core's counters up to `statistics` (by what each grew since `applied`).
    /// With `force`, makes every labelled counter, so that each shows from the start at zero.
    private func copy(_ statistics: CoreStatistics, over applied: inout CoreStatistics, force: Bool) {
        func add(_ name: String, _ labels: [(String, String)], _ help: String, _ now: Int, _ before: Int) {
            guard force || now > before else { return }
            let counter = registry.makeCounter(
                descriptor: Self.name(name, unit: "total", help), labels: labels)
            if now > before { counter.increment(by: Int64(now - before)) }
        }
        let registrations = "Registration datagrams by outcome: accepted, or the reason they were refused."
        add(
            "registrations", [("outcome", "accepted")], registrations,
            statistics.registrationsAccepted, applied.registrationsAccepted)
        for reason in RefusalReason.all {
            add(
                "registrations", [("outcome", reason.identifier)], registrations,
                statistics.registrationsRefused[reason] ?? 0, applied.registrationsRefused[reason] ?? 0)
        }
        for reason in ReleaseReason.all {
            add(
                "releases", [("reason", reason.identifier)], "Hosts let go, by reason.",
                statistics.releases[reason] ?? 0, applied.releases[reason] ?? 0)
        }
        add("lease_expiries", [], "Leases that ran out.", statistics.leaseExpiries, applied.leaseExpiries)
        for trigger in WakeTrigger.all {
            add(
                "wakes", [("trigger", trigger.identifier)], "Wakes started, by what started them.",
                statistics.wakes[trigger] ?? 0, applied.wakes[trigger] ?? 0)
        }
        add(
            "magic_packets_sent", [], "Wake-on-LAN frames sent (each frame of each round).",
            statistics.magicPackets, applied.magicPackets)
        add(
            "mdns_queries_received", [], "mDNS queries received with at least one question.",
            statistics.queriesReceived, applied.queriesReceived)
        add(
            "mdns_queries_rate_limited", [],
            "mDNS queries left unanswered because their source asked too fast (limits.queries_per_second).",
            statistics.queriesRateLimited, applied.queriesRateLimited)
        let answers = "mDNS messages answering queries, by destination."
        add(
            "mdns_answers_sent", [("destination", "multicast")], answers,
            statistics.answersMulticast, applied.answersMulticast)
        add(
            "mdns_answers_sent", [("destination", "unicast")], answers,
            statistics.answersUnicast, applied.answersUnicast)
        let cache = "Questions answered from the answer cache (hit) or worked out from the held records (miss)."
        add(
            "mdns_answer_cache_lookups", [("result", "hit")], cache, statistics.answerCacheHits,
            applied.answerCacheHits)
        add(
            "mdns_answer_cache_lookups", [("result", "miss")], cache, statistics.answerCacheMisses,
            applied.answerCacheMisses)
        applied = statistics
    }
}

/// What the daemon's queue hands a scrape: the core's counts, what each interface holds, what each capture saw.
public struct MetricsSnapshot: Sendable {
    public var statistics: CoreStatistics
    public var held: [InterfaceName: HeldCounts]
    public var capture: [InterfaceName: CaptureCounts]

    public init(
        statistics: CoreStatistics, held: [InterfaceName: HeldCounts], capture: [InterfaceName: CaptureCounts]
    ) {
        self.statistics = statistics
        self.held = held
        self.capture = capture
    }
}

/// Frames one interface's capture received and dropped since it was opened.
public struct CaptureCounts: Hashable, Sendable {
    /// Frames that passed the filter (libpcap's `ps_recv`).
    public var received: UInt64
    /// Dropped because the kernel's capture buffer was full (`ps_drop`).
    public var droppedByKernel: UInt64
    /// Dropped by the interface or its driver (`ps_ifdrop`).
    public var droppedByInterface: UInt64
    /// Read by the daemon and dropped: not a frame it could parse.
    public var droppedByDaemon: UInt64

    public init(received: UInt64, droppedByKernel: UInt64, droppedByInterface: UInt64, droppedByDaemon: UInt64) {
        self.received = received
        self.droppedByKernel = droppedByKernel
        self.droppedByInterface = droppedByInterface
        self.droppedByDaemon = droppedByDaemon
    }
}

/// One interface's gauges and capture counters.
final class InterfaceMetrics: Sendable {
    let hosts: Gauge
    let records: Gauge
    let addresses: Gauge
    let keepalives: Gauge
    let received: Counter
    let dropped: [(String, Counter)]
    private let seen: Mutex<CaptureCounts>

    init(_ name: InterfaceName, registry: PrometheusCollectorRegistry) {
        let label = [("interface", name.rawValue)]
        func gauge(_ metric: String, _ help: String) -> Gauge {
            registry.makeGauge(descriptor: DaemonMetrics.name(metric, unit: "", help), labels: label)
        }
        hosts = gauge("hosts_held", "Hosts held (registered or declared), being woken included.")
        records = gauge("records_held", "Records held for them.")
        addresses = gauge("addresses_taken_over", "Addresses the proxy answers ARP or Neighbour Discovery for.")
        keepalives = gauge("keepalive_connections", "TCP connections kept alive for sleeping hosts.")
        received = registry.makeCounter(
            descriptor: DaemonMetrics.name(
                "capture_frames_received", unit: "total", "Frames the capture received (libpcap ps_recv)."),
            labels: label)
        dropped = ["kernel", "interface", "daemon"].map { stage in
            (
                stage,
                registry.makeCounter(
                    descriptor: DaemonMetrics.name(
                        "capture_frames_dropped", unit: "total",
                        "Frames dropped: by the kernel (capture buffer full), the interface, or the daemon (unparsable)."
                    ),
                    labels: label + [("by", stage)])
            )
        }
        seen = Mutex(CaptureCounts(received: 0, droppedByKernel: 0, droppedByInterface: 0, droppedByDaemon: 0))
    }

    func setHeld(_ held: HeldCounts) {
        hosts.set(Double(held.hosts))
        records.set(Double(held.records))
        addresses.set(Double(held.addresses))
        keepalives.set(Double(held.keepalives))
    }

    /// Adds what the capture counted since last time. A count that went back started over (a capture opened
    /// anew, or libpcap's 32-bit count wrapped): what it holds now is new. Each count is taken on its own, so that
    /// one going back never adds the others again.
    func setCapture(_ counts: CaptureCounts) {
        seen.withLock { seen in
            func grow(_ counter: Counter, _ now: UInt64, _ before: UInt64) {
                let added = now >= before ? now - before : now
                if added > 0 { counter.increment(by: Int64(clamping: added)) }
            }
            grow(received, counts.received, seen.received)
            let values = [
                (counts.droppedByKernel, seen.droppedByKernel), (counts.droppedByInterface, seen.droppedByInterface),
                (counts.droppedByDaemon, seen.droppedByDaemon),
            ]
            for ((_, counter), (now, before)) in zip(dropped, values) { grow(counter, now, before) }
            seen = counts
        }
    }

    func unregister(from registry: PrometheusCollectorRegistry) {
        for gauge in [hosts, records, addresses, keepalives] { registry.unregisterGauge(gauge) }
        registry.unregisterCounter(received)
        for (_, counter) in dropped { registry.unregisterCounter(counter) }
    }
}
