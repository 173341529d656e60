public import NetworkIO

extension SystemdNotifier {
    /// Passes a lifecycle event of the daemon on to the service manager: for `Daemon.lifecycleObserver`.
    ///
    /// Returns whether a notification was sent (false: no `NOTIFY_SOCKET`).
    @discardableResult
    public func notify(_ event: Daemon.LifecycleEvent) throws(SystemError) -> Bool {
        switch event {
        case .ready(let text): try ready(status: text)
        case .reloading: try reloading()
        case .reloaded(let text): try readyAfterReload(status: text)
        case .status(let text): try status(text)
        case .stopping: try stopping()
        case .watchdog: try watchdogPing()
        }
    }
}
