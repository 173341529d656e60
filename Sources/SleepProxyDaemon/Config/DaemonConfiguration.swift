public import SleepProxyCore

/// How the daemon is set up: from the config file and the command line (`Settings`).
public struct DaemonConfiguration: Sendable {
    /// The registration port: any fixed UDP port works (clients learn it from the SRV record). 5354 sits next to
    /// mDNS and is registered to nothing a home network runs.
    public static let defaultRegistrationPort: UInt16 = 5354

    /// The interfaces served, each with its own sockets, capture and advertisement.
    public var interfaces: [String]
    public var stateDirectory: String
    public var registrationPort: UInt16
    public var core: CoreConfiguration
    /// Newest events kept in the history.
    public var eventHistoryLimit: Int
    /// How many datagrams one commit may cover (group commit); replies wait for that commit.
    public var maximumBatch: Int
    /// Answer mDNS for held hosts (sockets on the mDNS groups, a capture of UDP port 5353).
    public var responder: Bool
    /// How the proxy advertises itself under `_sleep-proxy._udp`; nil advertises nothing.
    public var advertisement: AdvertisementConfiguration?
    /// On a clean stop, wake every held host (so that it can find another proxy) instead of keeping the leases
    /// for the next start.
    public var wakeAllOnExit: Bool = false
    /// The control socket's path; nil opens none.
    public var controlSocket: String?
    /// The group that owns the control socket (its members may use `sleepproxyctl`); nil keeps the daemon's.
    public var controlGroup: UInt32?
    /// Control connections open at once.
    public var controlConnections = 16
    /// Where the metrics endpoint listens (`/metrics`, `/hosts.json`); nil serves none.
    public var metricsListen: MetricsAddress?
    /// Where the page listens (`/`, `/state.json`, `/api/wake`, `/api/forget`); nil serves none. The same address
    /// as `metricsListen` serves both from one listener.
    public var webListen: MetricsAddress?
    /// The token the page's actions need; without one the page is read-only.
    public var webToken: WebToken?

    public init(
        interfaces: [String], stateDirectory: String, registrationPort: UInt16 = Self.defaultRegistrationPort,
        core: CoreConfiguration = CoreConfiguration(), eventHistoryLimit: Int = 10_000, maximumBatch: Int = 256,
        responder: Bool = true, advertisement: AdvertisementConfiguration? = nil, controlSocket: String? = nil,
        controlGroup: UInt32? = nil
    ) {
        self.interfaces = interfaces
        self.stateDirectory = stateDirectory
        self.registrationPort = registrationPort
        self.core = core
        self.eventHistoryLimit = eventHistoryLimit
        self.maximumBatch = maximumBatch
        self.responder = responder
        self.advertisement = advertisement
        self.controlSocket = controlSocket
        self.controlGroup = controlGroup
    }
}

/// A failure that stops the daemon from starting, with what to do about it.
public struct DaemonError: Error, CustomStringConvertible {
    public let description: String
}
