import NetworkAddresses
import SleepProxyCore

/// The daemon's state at one moment, copied on its queue: what the control and metrics answers read, so that an
/// answer never mixes two moments and never reaches into the daemon.
struct DaemonSnapshot: Sendable {
    /// One open interface: its link, and what its capture counted if that was asked for and it captures.
    struct Interface: Sendable {
        var name: InterfaceName
        var link: Link
        var captureCounts: CaptureCounts?
    }

    var core: SleepProxyCore
    var history: HostHistory
    /// Every open interface (those being retired too), by name.
    var interfaces: [Interface]
    var configuration: DaemonConfiguration
    /// The core's time when the snapshot was taken.
    var now: UnixTime
    var startedAt: UnixTime
    /// The lease store's file.
    var storePath: String
}
