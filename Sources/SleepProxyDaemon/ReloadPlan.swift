import SleepProxyCore

/// What a reload changes, decided from the running configuration, the one read again, and the interfaces open:
/// a pure value that `Daemon.reload` carries out. Every held host is kept: interfaces added start serving,
/// interfaces removed stop (their hosts are woken first), one removed and named again before its wakes are over is
/// served again as it is, a changed advertisement is announced again, limits and the wake policy apply from now
/// on. Keys read only at start keep their running values, with a warning.
struct ReloadPlan {
    /// What becomes of the HTTP endpoints (metrics and the page).
    enum EndpointsChange: Equatable {
        /// They stay as they are: the same addresses and token, or none.
        case keep
        /// They close and these open (none: they only close).
        case reopen(HTTPEndpoints)
    }

    /// The keys changed in the file that take effect only at the next start.
    var startOnlyChanges: [String]
    /// Interfaces to open, then serve.
    var open: [InterfaceName]
    /// Interfaces served until now that the configuration no longer names: their hosts are woken, then they close.
    var retire: [InterfaceName]
    /// Interfaces being retired that the configuration names again: served again, their shells as they are.
    var serveAgain: [InterfaceName]
    /// Whether the advertisement changed (keepalive offload changes its feature digit).
    var advertisementChanged: Bool
    /// Interfaces served before and after whose advertisement is withdrawn and announced again: those served
    /// anew announce it as they start.
    var readvertise: [InterfaceName]
    var endpoints: EndpointsChange
    /// The configuration from now on: the new one, with the running values of the keys read only at start.
    var configuration: DaemonConfiguration

    /// The plan for going from `running` to `next`, with `open` the interfaces that have a shell and `retiring`
    /// those of them being retired. Throws when `next` cannot be served at all (it names no interface).
    init(
        running: DaemonConfiguration, next: DaemonConfiguration, open: Set<InterfaceName>,
        retiring: Set<InterfaceName>
    ) throws {
        guard !next.interfaces.isEmpty else { throw DaemonError(description: "no interface to serve") }
        startOnlyChanges = [
            ("registration_port", next.registrationPort != running.registrationPort),
            ("state_directory", next.stateDirectory != running.stateDirectory),
            ("control.socket", next.controlSocket != running.controlSocket),
            ("control.group", next.controlGroup != running.controlGroup),
        ].filter(\.1).map(\.0)
        // Interfaces being removed still have a shell, open for the wakes of their hosts: one wanted again is
        // served again as it is, not opened a second time.
        let served = open.subtracting(retiring)
        let wanted = Set(next.interfaces.map { InterfaceName($0) })
        self.open = wanted.subtracting(open).sorted()
        retire = served.subtracting(wanted).sorted()
        serveAgain = wanted.intersection(retiring).sorted()
        advertisementChanged =
            next.advertisement != running.advertisement || next.core.keepaliveOffload != running.core.keepaliveOffload
        readvertise = advertisementChanged ? served.intersection(wanted).sorted() : []
        let listeners = HTTPEndpoints(next)
        endpoints = listeners == HTTPEndpoints(running) ? .keep : .reopen(listeners)
        var applied = next
        applied.registrationPort = running.registrationPort
        applied.stateDirectory = running.stateDirectory
        applied.controlSocket = running.controlSocket
        applied.controlGroup = running.controlGroup
        applied.responder = running.responder
        configuration = applied
    }
}
