import SleepProxyControl
import SleepProxyCore

/// What the metrics endpoint serves, each answer from one snapshot of the daemon (`DaemonSnapshot`): the figures
/// of a scrape and the hosts of `/hosts.json`, worked out on the daemon's queue where the snapshot is taken; the
/// exposition is rendered on the endpoint's own thread.
struct MetricsService: Sendable {
    /// Takes a snapshot on the daemon's queue (with capture counts, if asked) and hands it to the closure there.
    let snapshot: @Sendable (_ withCaptureCounts: Bool, _ body: @escaping @Sendable (DaemonSnapshot) -> Void) -> Void
    let metrics: DaemonMetrics

    var source: MetricsSource {
        MetricsSource(
            snapshot: { [snapshot] reply in snapshot(true) { reply(Self.figures(of: $0)) } },
            hosts: { [snapshot] reply in snapshot(false) { reply($0.hostSummaries()) } },
            exposition: { [metrics] in metrics.exposition($0) })
    }

    /// The figures of one scrape: the core's counts, what each interface holds, what each capture saw.
    static func figures(of state: DaemonSnapshot) -> MetricsSnapshot {
        var capture: [InterfaceName: CaptureCounts] = [:]
        for interface in state.interfaces {
            if let counts = interface.captureCounts { capture[interface.name] = counts }
        }
        return MetricsSnapshot(statistics: state.core.statistics, held: state.core.heldCounts, capture: capture)
    }
}
