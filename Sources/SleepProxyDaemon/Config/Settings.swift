public import Logging
import NetworkAddresses
import NetworkIO
import SleepProxyControl
public import SleepProxyCore

#if canImport(Glibc)
    import Glibc
#endif

/// Everything an administrator can set, with its value in force: the defaults, then the config file, then the
/// command line (`ConfigFile`, `sleepproxyd`). Each key of the file is a row of `Schema`, which says where it lands
/// here, how it is read and written, and its default; the names here follow the file's keys.
public struct Settings: Equatable, Sendable {
    /// The numbers of the advertised name, `AA-BB-CC-DD[.F]` (PROTOCOL.md section 1): lower is preferred.
    public struct Metrics: Equatable, Sendable, CustomStringConvertible {
        public var intent: Int
        public var portability: Int
        public var marginalPower: Int
        public var totalPower: Int
        /// The feature digit; nil writes none.
        public var features: Int?

        public static let standard = Metrics(intent: 20, portability: 30, marginalPower: 50, totalPower: 73)

        public init(intent: Int, portability: Int, marginalPower: Int, totalPower: Int, features: Int? = nil) {
            self.intent = intent
            self.portability = portability
            self.marginalPower = marginalPower
            self.totalPower = totalPower
            self.features = features
        }

        /// `20-30-50-73` or `20-30-50-73.1`; nil for anything else. The ranges are checked by `validate`.
        public init?(_ text: String) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }
            let fields = parts[0].split(separator: "-", omittingEmptySubsequences: false)
            guard fields.count == 4, fields.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }) else {
                return nil
            }
            let numbers = fields.compactMap { Int($0) }
            guard numbers.count == 4 else { return nil }
            var features: Int?
            if parts.count == 2 {
                guard parts[1].count == 1, let digit = Int(parts[1]) else { return nil }
                features = digit
            }
            self.init(
                intent: numbers[0], portability: numbers[1], marginalPower: numbers[2], totalPower: numbers[3],
                features: features)
        }

        public var description: String {
            let numbers = [intent, portability, marginalPower, totalPower].map { String($0) }.joined(separator: "-")
            return features.map { "\(numbers).\($0)" } ?? numbers
        }
    }

    // Each default is the one of its key in `Schema`, which also says how the key is read and written.

    /// The interfaces served; empty serves the interface of the IPv4 default route.
    public var interfaces: [String] = Schema.interfaces.defaultValue
    /// Where the lease store lives.
    public var stateDirectory: String
    public var registrationPort: UInt16 = Schema.registrationPort.defaultValue
    public var logLevel: Logger.Level = Schema.logLevel.defaultValue
    public var wakeAllOnExit: Bool = Schema.wakeAllOnExit.defaultValue

    // [advertisement]
    public var advertise: Bool = Schema.advertise.defaultValue
    public var metrics: Metrics = Schema.metrics.defaultValue
    /// The name after the numbers; empty is this host's name.
    public var advertisedName: String = Schema.advertisedName.defaultValue
    /// The host name the proxy's SRV record points at; empty is `<this host's name>-sleepproxy`.
    public var advertisedHostName: String = Schema.advertisedHostName.defaultValue
    /// Keep sleeping hosts' TCP connections alive, and say so with the feature digit `.1` on every interface
    /// where the proxy can send its own frames.
    public var keepaliveOffload: Bool = Schema.keepaliveOffload.defaultValue

    // [limits]
    public var maximumLease: UInt32 = Schema.maximumLease.defaultValue
    public var maximumRecordsPerHost: Int = Schema.maximumRecordsPerHost.defaultValue
    public var maximumRecords: Int = Schema.maximumRecords.defaultValue
    public var eventHistory: Int = Schema.eventHistory.defaultValue
    public var maximumBatch: Int = Schema.maximumBatch.defaultValue
    public var maximumRegistrationBytes: Int = Schema.maximumRegistrationBytes.defaultValue
    public var maximumHostsPerInterface: Int = Schema.maximumHostsPerInterface.defaultValue
    public var registrationsPerSecond: Int = Schema.registrationsPerSecond.defaultValue
    public var registrationBurst: Int = Schema.registrationBurst.defaultValue
    public var controlConnections: Int = Schema.controlConnections.defaultValue
    public var queriesPerSecond: Int = Schema.queriesPerSecond.defaultValue
    public var queryBurst: Int = Schema.queryBurst.defaultValue
    public var maximumQuestionsPerQuery: Int = Schema.maximumQuestionsPerQuery.defaultValue
    public var maximumPendingResponses: Int = Schema.maximumPendingResponses.defaultValue

    // [control]
    /// The control socket's path; empty opens none.
    public var controlSocket: String
    /// The group that owns the control socket, by name or number; empty keeps the daemon's group.
    public var controlGroup: String = Schema.controlGroup.defaultValue

    // [metrics]
    /// Where the metrics endpoint listens (`ADDRESS:PORT`); empty serves none.
    public var metricsListen: String = Schema.metricsListen.defaultValue

    // [web]
    /// Where the page listens (`ADDRESS:PORT`); empty serves none. The metrics address serves both.
    public var webListen: String = Schema.webListen.defaultValue
    /// The token the page's actions need.
    public var webToken: String = Schema.webToken.defaultValue
    /// A file holding that token (relative: in `$CREDENTIALS_DIRECTORY`).
    public var webTokenFile: String = Schema.webTokenFile.defaultValue

    // [takeover]
    public var addressClaim: AddressClaim = Schema.addressClaim.defaultValue

    // [wake]
    public var dryRun: Bool = Schema.dryRun.defaultValue
    public var ignoreSources: [Link.Prefix] = Schema.ignoreSources.defaultValue
    public var neverWake: [WakePolicy.HostMatch] = Schema.neverWake.defaultValue
    /// `[wake.extra_ports]`: none unless the file has some.
    public var extraPorts: [WakePolicy.ExtraPorts] = []

    // [hosts.NAME]
    /// Hosts that never register, in the order of the file; an interface left out is "" until
    /// `daemonConfiguration` fills in the one served. None unless the file has some.
    public var declaredHosts: [DeclaredHost] = []
    /// Declared hosts at most: each is probed and filtered for on its own.
    public static let declaredHostLimit = 256

    /// The default state directory when systemd gives none.
    public static let defaultStateDirectory = "/var/lib/sleepproxy"
    /// Where `sleepproxyd` reads its configuration unless `--config` says otherwise.
    public static let defaultConfigPath = "/etc/sleepproxy/sleepproxy.toml"

    /// The defaults. Under systemd, `StateDirectory=` and `RuntimeDirectory=` reach the daemon as
    /// `$STATE_DIRECTORY` and `$RUNTIME_DIRECTORY`, and the defaults follow them.
    public init(environment: [String: String] = [:]) {
        func first(_ variable: String) -> String? {
            // systemd joins several directories with colons; the first is the one named first in the unit.
            guard let value = environment[variable], let path = value.split(separator: ":").first else { return nil }
            return String(path)
        }
        stateDirectory = first("STATE_DIRECTORY") ?? Schema.stateDirectory.defaultValue
        controlSocket = first("RUNTIME_DIRECTORY").map { $0 + "/control.sock" } ?? Schema.controlSocket.defaultValue
    }

    /// The process's environment, as `init(environment:)` and ``EnvironmentSettings`` read it.
    public static func processEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        for variable in ["STATE_DIRECTORY", "RUNTIME_DIRECTORY"] + EnvironmentSettings.names {
            if let value = getenv(variable) { environment[variable] = String(cString: value) }
        }
        return environment
    }

    /// The wake policy these settings describe.
    /// What is allowed but probably a mistake, one sentence each: a wake policy entry (`wake.never_wake`, a
    /// `wake.extra_ports` key) that is a name and names no declared host, by its table name or its `host_name`.
    /// It may still name a host that registers later under that host name, so it is a warning, not an error.
    public var warnings: [String] {
        func unmatched(_ match: WakePolicy.HostMatch) -> Bool {
            !match.isMAC && !declaredHosts.contains { match.names($0) }
        }
        let declared =
            declaredHosts.isEmpty
            ? "there are no [hosts.NAME] tables"
            : "declared: \(declaredHosts.map(\.name).joined(separator: ", "))"
        var warnings: [String] = []
        for match in neverWake where unmatched(match) {
            warnings.append(
                "wake.never_wake: \"\(match)\" names no declared host (\(declared)); it applies only to a host that registers under the host name \(match).local"
            )
        }
        for entry in extraPorts where unmatched(entry.host) {
            warnings.append(
                "wake.extra_ports: \"\(entry.host)\" names no declared host (\(declared)); it applies only to a host that registers under the host name \(entry.host).local"
            )
        }
        return warnings
    }

    public var wakePolicy: WakePolicy {
        WakePolicy(dryRun: dryRun, ignoredSources: ignoreSources, neverWake: neverWake, extraPorts: extraPorts)
    }
}

/// What resolving settings needs from the machine; tests give their own.
public struct SettingsContext: Sendable {
    /// This host's name, the first label only.
    public var hostName: String
    /// The interface of the IPv4 default route, if there is one.
    public var defaultRouteInterface: String?
    /// A group's number from its name; nil if there is no such group.
    public var groupID: @Sendable (String) -> UInt32?
    /// Where systemd put the unit's credentials (`$CREDENTIALS_DIRECTORY`, `LoadCredential=`), if it did.
    public var credentialsDirectory: String?
    /// Reads a whole file as UTF-8 text (by default from the disk).
    public var readFile: @Sendable (String) -> Result<String, any Error>

    public init(
        hostName: String, defaultRouteInterface: String?, groupID: @escaping @Sendable (String) -> UInt32?,
        credentialsDirectory: String? = nil,
        readFile: (@Sendable (String) -> Result<String, any Error>)? = nil
    ) {
        self.hostName = hostName
        self.defaultRouteInterface = defaultRouteInterface
        self.groupID = groupID
        self.credentialsDirectory = credentialsDirectory
        self.readFile = readFile ?? { path in readTextFile(path).mapError { $0 } }
    }

    /// This machine.
    public static func system() -> SettingsContext {
        SettingsContext(
            hostName: systemHostName(), defaultRouteInterface: defaultRouteInterface(),
            groupID: { name in
                guard let entry = getgrnam(name) else { return nil }
                return entry.pointee.gr_gid
            }, credentialsDirectory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
    }

    static func systemHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "linux" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(name.split(separator: ".").first ?? "linux")
    }

    /// The interface of the first IPv4 default route in `/proc/net/route` (destination and mask 0).
    static func defaultRouteInterface() -> String? {
        guard case .success(let text) = readTextFile("/proc/net/route") else { return nil }
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.count > 7, fields[1] == "00000000", fields[7] == "00000000" { return String(fields[0]) }
        }
        return nil
    }
}

extension Settings {
    /// The declared hosts with their interfaces: the one given, which must be served, or the only one served.
    func declaredHostsWithInterfaces(servedOn served: [String]) throws(ConfigError) -> [DeclaredHost] {
        var hosts: [DeclaredHost] = []
        for var host in declaredHosts {
            let key = "hosts.\(host.name).interface"
            if host.interface.rawValue.isEmpty {
                guard served.count == 1 else {
                    throw ConfigError(
                        key: key,
                        "the proxy serves \(served.joined(separator: ", ")): name the interface the host is on")
                }
                host.interface = InterfaceName(served[0])
            } else if !served.contains(host.interface.rawValue) {
                throw ConfigError(
                    key: key,
                    "\(host.interface) is not served (interfaces: \(served.joined(separator: ", "))); the proxy takes over addresses only where the host is on-link"
                )
            }
            if let other = hosts.first(where: { $0.key == host.key }) {
                throw ConfigError(
                    key: "hosts.\(host.name).mac",
                    "\(host.mac) on \(host.interface) is declared already, as \(other.name)")
            }
            hosts.append(host)
        }
        return hosts
    }

    /// The page's token: `web.token`, or what `web.token_file` holds (one line; a relative name is a credential
    /// systemd passes in `$CREDENTIALS_DIRECTORY`); nil when neither is set.
    func webTokenValue(context: SettingsContext) throws(ConfigError) -> WebToken? {
        if !webToken.isEmpty {
            guard webTokenFile.isEmpty else {
                throw ConfigError(key: "web.token_file", "give web.token or web.token_file, not both")
            }
            return WebToken(webToken)
        }
        guard !webTokenFile.isEmpty else { return nil }
        var path = webTokenFile
        if !path.hasPrefix("/") {
            guard let directory = context.credentialsDirectory else {
                throw ConfigError(
                    key: "web.token_file",
                    "\"\(webTokenFile)\" is a credential name, but $CREDENTIALS_DIRECTORY is not set (LoadCredential=\(webTokenFile):PATH in the unit); give an absolute path otherwise"
                )
            }
            path = directory + "/" + path
        }
        let text: String
        switch context.readFile(path) {
        case .success(let contents): text = contents
        case .failure(let error): throw ConfigError(key: "web.token_file", "cannot read \(path): \(error)")
        }
        // A line break is "\n" or "\r\n" (one Character).
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        if lines.last == "" { lines.removeLast() }
        guard lines.count == 1 else {
            throw ConfigError(key: "web.token_file", "\(path) must hold the token on one line")
        }
        let token = String(lines[0])
        if let problem = WebToken.problem(token) { throw ConfigError(key: "web.token_file", "\(path): \(problem)") }
        return WebToken(token)
    }

    /// The daemon's configuration from these settings; throws when something the file cannot check alone is
    /// wrong (no interface at all, an unknown group, numbers clients would ignore).
    public func daemonConfiguration(context: SettingsContext) throws(ConfigError) -> DaemonConfiguration {
        var served = interfaces
        if served.isEmpty {
            guard let interface = context.defaultRouteInterface else {
                throw ConfigError(
                    key: "interfaces",
                    "no interface to serve and no default route to take one from: set interfaces or give --interface"
                )
            }
            served = [interface]
        }
        var group: UInt32?
        if !controlGroup.isEmpty {
            if let number = UInt32(controlGroup) {
                group = number
            } else if let number = context.groupID(controlGroup) {
                group = number
            } else {
                throw ConfigError(key: "control.group", "there is no group named \"\(controlGroup)\" on this host")
            }
        }
        var advertisement: AdvertisementConfiguration?
        if advertise {
            let name = advertisedName.isEmpty ? context.hostName : advertisedName
            let hostName = advertisedHostName.isEmpty ? "\(context.hostName)-sleepproxy" : advertisedHostName
            let configuration = AdvertisementConfiguration(
                intent: metrics.intent, portability: metrics.portability, marginalPower: metrics.marginalPower,
                totalPower: metrics.totalPower, features: nil, name: name, hostName: hostName)
            do {
                try configuration.validate()
            } catch {
                throw ConfigError(key: "advertisement", error.description)
            }
            advertisement = configuration
        }
        var configuration = DaemonConfiguration(
            interfaces: served, stateDirectory: stateDirectory, registrationPort: registrationPort,
            core: CoreConfiguration(
                maximumLease: maximumLease, maximumRecordsPerOwner: maximumRecordsPerHost,
                maximumRecordsTotal: maximumRecords, wakePolicy: wakePolicy, keepaliveOffload: keepaliveOffload),
            eventHistoryLimit: eventHistory, maximumBatch: maximumBatch, advertisement: advertisement,
            controlSocket: controlSocket.isEmpty ? nil : controlSocket, controlGroup: group)
        configuration.wakeAllOnExit = wakeAllOnExit
        configuration.core.maximumRegistrationBytes = maximumRegistrationBytes
        configuration.core.maximumHostsPerInterface = maximumHostsPerInterface
        configuration.core.addressClaim = addressClaim
        configuration.core.registrationRate = Rate(
            perSecond: Double(registrationsPerSecond), burst: Double(registrationBurst))
        configuration.controlConnections = controlConnections
        configuration.core.maximumQuestionsPerQuery = maximumQuestionsPerQuery
        configuration.core.queryRate = Rate(perSecond: Double(queriesPerSecond), burst: Double(queryBurst))
        configuration.core.maximumPendingResponses = maximumPendingResponses
        configuration.core.declaredHosts = try declaredHostsWithInterfaces(servedOn: served)
        if !metricsListen.isEmpty {
            switch MetricsAddress.parse(metricsListen) {
            case .success(let address): configuration.metricsListen = address
            case .failure(let error): throw ConfigError(key: "metrics.listen", error.description)
            }
        }
        if !webListen.isEmpty {
            switch MetricsAddress.parse(webListen) {
            case .success(let address): configuration.webListen = address
            case .failure(let error): throw ConfigError(key: "web.listen", error.description)
            }
        }
        // Read only for a page: an unreadable token file does not stop a daemon that serves none.
        configuration.webToken = webListen.isEmpty ? nil : try webTokenValue(context: context)
        return configuration
    }
}
