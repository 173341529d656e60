import Logging
import NetworkAddresses
import SleepProxyControl
import SleepProxyCore
import TOMLConfig

/// Why a value was refused, without the file and key (the reader adds those).
struct Problem: Error {
    var message: String
    /// The key inside the value that is wrong, for a table read whole (`mac` in `[hosts.imac]`).
    var key: [String]
    init(_ message: String, at key: [String] = []) {
        self.message = message
        self.key = key
    }
}

/// The keys of the config file: one row each (`ConfigKey`), in the order `--check-config` writes them.
/// `Config/sleepproxy.toml` and `man/sleepproxy.toml.5` document the same keys, with the same defaults; tests
/// check that the three agree.
enum Schema {
    /// How the reader finds a key: the rows of `keys`, as a tree of tables.
    enum Entry: Sendable {
        case value(@Sendable (TOMLValue, inout Settings) throws(Problem) -> Void)
        case table([String: Entry])
        /// A table whose keys are hosts (a MAC or a name), each with a value.
        case hostTable(@Sendable (String, TOMLValue, inout Settings) throws(Problem) -> Void)
        /// A table of tables, one per name (`[hosts.imac]`), each read whole.
        case namedTables(@Sendable (String, [String: TOMLValue], inout Settings) throws(Problem) -> Void)
    }

    static let logLevels = Logger.Level.allCases.map(\.rawValue)

    /// Where the defaults of the keys that configure the core and the daemon live.
    private static let core = CoreConfiguration()
    private static let daemon = DaemonConfiguration(interfaces: [], stateDirectory: Settings.defaultStateDirectory)

    // MARK: The keys

    static let interfaces = Setting(
        "interfaces", \.interfaces, default: [],
        doc: "The interfaces to serve; empty serves the interface of the IPv4 default route.",
        parse: { value throws(Problem) in
            let names = try strings(value, "an array of interface names, such as [\"eth0\", \"eth0.20\"]")
            for name in names {
                guard !name.isEmpty, name.utf8.count <= 15, !name.contains("/"),
                    !name.contains(where: { $0 == " " || $0 == "\t" || $0 == ":" })
                else {
                    throw Problem(
                        "\"\(name)\" is not an interface name (1 to 15 bytes, no spaces, slashes or colons)")
                }
            }
            if let duplicate = duplicate(in: names) { throw Problem("\"\(duplicate)\" is listed twice") }
            return names
        },
        render: { names, context in
            list(names)
                + note(
                    names.isEmpty, context.map { "the default route's: \($0.defaultRouteInterface ?? "none found")" })
        })
    /// Under systemd the default is `$STATE_DIRECTORY` (`Settings.init(environment:)`).
    static let stateDirectory = Setting(
        "state_directory", \.stateDirectory, default: Settings.defaultStateDirectory,
        doc: "Where the lease store lives.",
        parse: { value throws(Problem) in try absolutePath(value, allowEmpty: false) },
        render: { path, _ in quoted(path) })
    static let registrationPort = Setting(
        "registration_port", \.registrationPort, default: daemon.registrationPort,
        doc: "The UDP port registrations are sent to; clients learn it from the SRV record.",
        parse: { value throws(Problem) in UInt16(try integer(value, in: 1...65_535)) },
        render: { port, _ in "\(port)" })
    static let logLevel = Setting(
        "log_level", \.logLevel, default: Logger.Level.info,
        doc: "The lowest level logged: \(logLevels.joined(separator: ", ")).",
        parse: { value throws(Problem) in try choice(value, "one of \(logLevels.joined(separator: ", "))") },
        render: { level, _ in quoted(level.rawValue) })
    static let wakeAllOnExit = Setting(
        "wake_all_on_exit", \.wakeAllOnExit, default: daemon.wakeAllOnExit,
        doc: "On a clean stop, wake every held host instead of keeping the leases for the next start.")

    static let advertise = Setting(
        "advertisement.enabled", \.advertise, default: true,
        doc: "Advertise the proxy under _sleep-proxy._udp; without it no client finds it.")
    static let metrics = Setting(
        "advertisement.metrics", \.metrics, default: Settings.Metrics.standard,
        doc: "The numbers clients rank proxies by, AA-BB-CC-DD, lower first.",
        parse: { value throws(Problem) in
            let allowed = "\"AA-BB-CC-DD\", two digits from 10 to 99 each, such as \"20-30-50-73\""
            let text = try string(value, allowed)
            guard let metrics = Settings.Metrics(text) else {
                throw Problem("expected \(allowed), found \"\(text)\"")
            }
            guard metrics.features == nil else {
                throw Problem(
                    "give the four numbers only: the feature digit (.1, TCP keepalive offload) follows advertisement.keepalive_offload"
                )
            }
            try validate(metrics)
            return metrics
        },
        render: { metrics, _ in quoted(metrics.description) })
    static let keepaliveOffload = Setting(
        "advertisement.keepalive_offload", \.keepaliveOffload, default: core.keepaliveOffload,
        doc: "Keep sleeping hosts' TCP connections alive, and advertise it with the feature digit .1.")
    static let advertisedName = Setting(
        "advertisement.name", \.advertisedName, default: "",
        doc: "The name after the numbers; empty is this host's name.",
        parse: { value throws(Problem) in
            let text = try string(value, "a name, or \"\" for this host's name")
            guard text.utf8.count <= 50 else {
                throw Problem("at most 50 bytes (the numbers and the name share one 63-byte label)")
            }
            return text
        },
        render: { name, context in quoted(name) + note(name.isEmpty, context.map { "here: \($0.hostName)" }) })
    static let advertisedHostName = Setting(
        "advertisement.host_name", \.advertisedHostName, default: "",
        doc: "The host name the proxy's SRV record points at; empty is <this host's name>-sleepproxy.",
        parse: { value throws(Problem) in
            let text = try string(value, "one DNS label, or \"\" for <this host>-sleepproxy")
            guard text.utf8.count <= 63, !text.contains(".") else {
                throw Problem(
                    "expected one DNS label (at most 63 bytes, no dots; .local is added), found \"\(text)\"")
            }
            return text
        },
        render: { name, context in
            quoted(name) + note(name.isEmpty, context.map { "here: \($0.hostName)-sleepproxy" })
        })

    static let maximumLease = Setting(
        "limits.maximum_lease", \.maximumLease, default: core.maximumLease,
        doc: "The longest lease granted, in seconds.",
        parse: { value throws(Problem) in
            UInt32(try integer(value, in: 1...Int(CoreConfiguration.leaseCeiling)))
        },
        render: { seconds, _ in "\(seconds)" })
    static let maximumRecordsPerHost = Setting(
        "limits.maximum_records_per_host", \.maximumRecordsPerHost, default: core.maximumRecordsPerOwner,
        in: 1...100_000, doc: "Records one sleeping host may hold.")
    static let maximumRecords = Setting(
        "limits.maximum_records", \.maximumRecords, default: core.maximumRecordsTotal, in: 1...1_000_000,
        doc: "Records all sleeping hosts together may hold.")
    static let eventHistory = Setting(
        "limits.event_history", \.eventHistory, default: daemon.eventHistoryLimit, in: 1...1_000_000,
        doc: "Events kept in the history.")
    static let maximumBatch = Setting(
        "limits.maximum_batch", \.maximumBatch, default: daemon.maximumBatch, in: 1...4_096,
        doc: "Registrations committed to the lease store in one transaction at most.")
    static let maximumRegistrationBytes = Setting(
        "limits.maximum_registration_bytes", \.maximumRegistrationBytes, default: core.maximumRegistrationBytes,
        in: 512...65_535, doc: "The largest registration datagram accepted, in bytes.")
    static let maximumHostsPerInterface = Setting(
        "limits.maximum_hosts_per_interface", \.maximumHostsPerInterface, default: core.maximumHostsPerInterface,
        in: 1...1_000_000, doc: "Hosts one interface may hold.")
    static let registrationsPerSecond = Setting(
        "limits.registrations_per_second", \.registrationsPerSecond, default: Int(core.registrationRate.perSecond),
        in: 1...1_000_000, doc: "Registration datagrams one source address may send per second.")
    static let registrationBurst = Setting(
        "limits.registration_burst", \.registrationBurst, default: Int(core.registrationRate.burst),
        in: 1...1_000_000, doc: "Registration datagrams one source address may send in a burst.")
    static let controlConnections = Setting(
        "limits.control_connections", \.controlConnections, default: daemon.controlConnections, in: 1...1_024,
        doc: "sleepproxyctl connections open at once.")
    static let queriesPerSecond = Setting(
        "limits.queries_per_second", \.queriesPerSecond, default: Int(core.queryRate.perSecond),
        in: 1...10_000_000, doc: "mDNS queries one source address may have answered per second.")
    static let queryBurst = Setting(
        "limits.query_burst", \.queryBurst, default: Int(core.queryRate.burst), in: 1...10_000_000,
        doc: "mDNS queries one source address may have answered in a burst.")
    static let maximumQuestionsPerQuery = Setting(
        "limits.maximum_questions_per_query", \.maximumQuestionsPerQuery, default: core.maximumQuestionsPerQuery,
        in: 1...1_000, doc: "Questions of one mDNS query that are answered.")
    static let maximumPendingResponses = Setting(
        "limits.maximum_pending_responses", \.maximumPendingResponses, default: core.maximumPendingResponses,
        in: 16...1_000_000, doc: "Multicast answers waiting to go out.")

    /// Under systemd the default is `control.sock` in `$RUNTIME_DIRECTORY` (`Settings.init(environment:)`).
    static let controlSocket = Setting(
        "control.socket", \.controlSocket, default: ControlProtocol.defaultSocketPath,
        doc: "The Unix socket sleepproxyctl talks to; empty opens none.",
        parse: { value throws(Problem) in
            let path = try absolutePath(value, allowEmpty: true)
            // sockaddr_un.sun_path holds 108 bytes with the terminating zero.
            guard path.utf8.count <= 107 else { throw Problem("a socket path is at most 107 bytes") }
            return path
        },
        render: { path, _ in quoted(path) })
    static let controlGroup = Setting(
        "control.group", \.controlGroup, default: "",
        doc: "The group that owns the control socket, by name or number; empty keeps the daemon's group.",
        parse: { value throws(Problem) in
            if let number = value.int {
                guard (0...Int(UInt32.max - 1)).contains(number) else { throw Problem("not a group number") }
                return String(number)
            }
            return try string(value, "a group name or number, or \"\" for the daemon's group")
        },
        render: { group, _ in quoted(group) })

    static let metricsListen = Setting(
        "metrics.listen", \.metricsListen, default: "",
        doc: "Where the metrics endpoint listens, ADDRESS:PORT; empty serves none.",
        parse: { value throws(Problem) in
            let text = try string(value, "\"ADDRESS:PORT\", or \"\" for no metrics endpoint")
            if !text.isEmpty, case .failure(let error) = MetricsAddress.parse(text) {
                throw Problem(error.description)
            }
            return text
        },
        render: { address, _ in quoted(address) })

    static let webListen = Setting(
        "web.listen", \.webListen, default: "",
        doc: "Where the page listens, ADDRESS:PORT (the metrics address serves both); empty serves none.",
        parse: { value throws(Problem) in
            let text = try string(value, "\"ADDRESS:PORT\", or \"\" for no page")
            if !text.isEmpty, case .failure(let error) = MetricsAddress.parse(text) {
                throw Problem(error.description)
            }
            return text
        },
        render: { address, _ in quoted(address) })
    static let webToken = Setting(
        "web.token", \.webToken, default: "",
        doc: "The token the page's Wake and Forget need; empty (and no token_file) leaves the page read-only.",
        parse: { value throws(Problem) in
            let text = try string(value, "a token of at least \(WebToken.minimumLength) characters, or \"\"")
            if !text.isEmpty, let problem = WebToken.problem(text) { throw Problem(problem) }
            return text
        },
        render: { token, _ in quoted(token) })
    static let webTokenFile = Setting(
        "web.token_file", \.webTokenFile, default: "",
        doc: "A file holding the token; a relative name is looked up in $CREDENTIALS_DIRECTORY (LoadCredential=).",
        parse: { value throws(Problem) in
            let text = try string(value, "a file name, or \"\"")
            guard !text.contains("\0") else { throw Problem("a file name holds no NUL character") }
            return text
        },
        render: { path, _ in quoted(path) })

    static let addressClaim = Setting(
        "takeover.claim", \.addressClaim, default: core.addressClaim,
        doc: "How a sleeping host's address is claimed: announce or lazy.",
        parse: { value throws(Problem) in try choice(value, "\"announce\" or \"lazy\"") },
        render: { claim, _ in quoted(claim.rawValue) })

    static let dryRun = Setting(
        "wake.dry_run", \.dryRun, default: core.wakePolicy.dryRun,
        doc: "Log and record what would wake whom, but send no magic packet.")
    static let ignoreSources = Setting(
        "wake.ignore_sources", \.ignoreSources, default: core.wakePolicy.ignoredSources,
        doc: "Addresses or networks whose traffic never wakes anyone.",
        parse: { value throws(Problem) in
            let allowed = "an array of addresses or networks, such as [\"192.168.1.50\", \"fd00:1::/64\"]"
            var prefixes: [Link.Prefix] = []
            for text in try strings(value, allowed) {
                guard let prefix = Link.Prefix(text) else {
                    throw Problem("\"\(text)\" is not an address or network; expected \(allowed)")
                }
                prefixes.append(prefix)
            }
            return prefixes
        },
        render: { prefixes, _ in list(prefixes.map(\.description)) })
    static let neverWake = Setting(
        "wake.never_wake", \.neverWake, default: core.wakePolicy.neverWake,
        doc: "Hosts answered for but never woken by traffic, by MAC or name.",
        parse: { value throws(Problem) in
            let allowed = "an array of host names or MACs, such as [\"imac\", \"aa:bb:cc:dd:ee:ff\"]"
            var hosts: [WakePolicy.HostMatch] = []
            for text in try strings(value, allowed) {
                guard let host = WakePolicy.HostMatch(parsing: text) else {
                    throw Problem("\"\(text)\" is not a host name or MAC")
                }
                hosts.append(host)
            }
            return hosts
        },
        render: { hosts, _ in list(hosts.map(\.description)) })
    /// None by default (`Settings.extraPorts`).
    static let extraPorts = ConfigKey(
        path: ["wake", "extra_ports"],
        form: .hostTable(
            read: { host, value, settings throws(Problem) in
                guard let match = WakePolicy.HostMatch(parsing: host) else {
                    throw Problem("\"\(host)\" is not a host name or MAC")
                }
                let ports = try ports(value)
                // Two keys for one host (`imac` and `iMac.local`) would be printed as the same key, which TOML
                // refuses; and the order of a table's keys means nothing, so the hosts are kept sorted, to give
                // the same settings whichever way the file spells and orders them.
                guard !settings.extraPorts.contains(where: { $0.host == match }) else {
                    throw Problem("another key of this table already names the host \(match)")
                }
                settings.extraPorts.append(WakePolicy.ExtraPorts(host: match, ports: ports))
                settings.extraPorts.sort { $0.host.description < $1.host.description }
            },
            write: { settings in
                settings.extraPorts.map { "\(quoted($0.host.description)) = \(list($0.ports.map(\.description)))" }
            }),
        doc: "Ports that also wake a host, beyond the services it registered: host = [\"tcp/PORT\", \"udp/PORT\"].")

    /// None by default (`Settings.declaredHosts`).
    static let declaredHosts = ConfigKey(
        path: ["hosts"],
        form: .namedTables(
            keys: declaredHostKeys,
            read: { name, table, settings throws(Problem) in
                try settings.declaredHosts.append(declaredHost(named: name, table))
                guard settings.declaredHosts.count <= Settings.declaredHostLimit else {
                    throw Problem("at most \(Settings.declaredHostLimit) declared hosts")
                }
            },
            write: { settings in
                settings.declaredHosts.map { host in
                    (
                        host.name,
                        declaredHostKeys.compactMap { key in key.write(host).map { "\(key.name) = \($0)" } }
                    )
                }
            }),
        doc: "Hosts that never register, one table each: [hosts.NAME].")

    /// The keys whose value is a secret: never logged or printed (`Settings.toml(hidingSecrets:)`).
    static let secretKeys: Set<String> = [webToken.key.name]

    /// Every key, in the order the file is written.
    static let keys: [ConfigKey] = [
        interfaces.key, stateDirectory.key, registrationPort.key, logLevel.key, wakeAllOnExit.key,
        advertise.key, metrics.key, keepaliveOffload.key, advertisedName.key, advertisedHostName.key,
        maximumLease.key, maximumRecordsPerHost.key, maximumRecords.key, eventHistory.key, maximumBatch.key,
        maximumRegistrationBytes.key, maximumHostsPerInterface.key, registrationsPerSecond.key,
        registrationBurst.key, controlConnections.key, queriesPerSecond.key, queryBurst.key,
        maximumQuestionsPerQuery.key, maximumPendingResponses.key,
        controlSocket.key, controlGroup.key,
        metricsListen.key,
        webListen.key, webToken.key, webTokenFile.key,
        addressClaim.key,
        dryRun.key, ignoreSources.key, neverWake.key, extraPorts,
        declaredHosts,
    ]

    /// The keys as the reader looks them up, table by table.
    static let root: [String: Entry] = tree(of: keys)

    static func tree(of keys: [ConfigKey]) -> [String: Entry] {
        var root: [String: Entry] = [:]
        func insert(_ entry: Entry, at path: ArraySlice<String>, into table: inout [String: Entry]) {
            guard let first = path.first else { return }
            if path.count == 1 {
                table[first] = entry
                return
            }
            var inner: [String: Entry] = [:]
            if case .table(let existing) = table[first] { inner = existing }
            insert(entry, at: path.dropFirst(), into: &inner)
            table[first] = .table(inner)
        }
        for key in keys {
            let entry: Entry
            switch key.form {
            case .value(let read, _): entry = .value(read)
            case .hostTable(let read, _): entry = .hostTable(read)
            case .namedTables(_, let read, _): entry = .namedTables(read)
            }
            insert(entry, at: key.path[...], into: &root)
        }
        return root
    }

    // MARK: Declared hosts

    /// The keys of `[hosts.NAME]`, in the order they are read and written.
    static let declaredHostKeys: [HostKey] = [
        HostKey(
            name: "mac",
            read: { value, host throws(Problem) in
                let text = try string(value, "the host's MAC, such as \"aa:bb:cc:dd:ee:ff\"")
                guard let mac = MACAddress(text) else {
                    throw Problem("\"\(text)\" is not a MAC; expected six hex bytes, such as \"aa:bb:cc:dd:ee:ff\"")
                }
                guard !mac.isZero, mac != .broadcast, !mac.isMulticast else {
                    throw Problem("\(mac) is not a host's MAC (zero, broadcast or multicast)")
                }
                host.mac = mac
            },
            write: { host in quoted(host.mac.description) },
            doc: "The MAC the host wakes on; required."),
        HostKey(
            name: "interface",
            read: { value, host throws(Problem) in
                let interface = try string(value, "an interface name")
                guard !interface.isEmpty else { throw Problem("expected an interface name, found \"\"") }
                host.interface = InterfaceName(interface)
            },
            write: { host in host.interface.rawValue.isEmpty ? nil : quoted(host.interface.rawValue) },
            doc: "The served interface the host is on; may be left out when one interface is served."),
        HostKey(
            name: "addresses",
            read: { value, host throws(Problem) in
                (host.addresses, host.learnsAddresses) = try declaredAddresses(value)
            },
            write: { host in list(host.addresses.map(\.description) + (host.learnsAddresses ? ["learn"] : [])) },
            doc: "Its addresses, with \"learn\" to add those it is seen using (the default)."),
        HostKey(
            name: "wake_ports",
            read: { value, host throws(Problem) in host.wakePorts = try ports(value) },
            write: { host in host.wakePorts.isEmpty ? nil : list(host.wakePorts.map(\.description)) },
            doc: "Ports whose traffic wakes it, besides those of its services."),
        HostKey(
            name: "host_name",
            read: { value, host throws(Problem) in
                let text = try string(value, "the host's mDNS name without .local, such as \"iMac\"")
                let probe = DeclaredHost(name: host.name, interface: "", mac: host.mac, hostName: text)
                if let problem = probe.validate() { throw Problem(problem) }
                host.hostName = text
            },
            write: { host in host.hostName.map(quoted) },
            doc: "Its mDNS host name without .local, answered while it sleeps."),
        HostKey(
            name: "services",
            read: { value, host throws(Problem) in host.services = try declaredServices(value) },
            write: { host in
                guard !host.services.isEmpty else { return nil }
                let services = host.services.map { service in
                    "{ name = \(quoted(service.name)), type = \(quoted(service.type)), port = \(service.port), txt = \(list(service.txt)) }"
                }
                return "[\(services.joined(separator: ", "))]"
            },
            doc: "Services answered while it sleeps; their ports wake it. Needs host_name."),
        HostKey(
            name: "records",
            read: { value, host throws(Problem) in
                host.recordSource = try choice(value, "\"learn\" or \"declared\"")
            },
            write: { host in host.learnsRecords ? nil : quoted(host.recordSource.rawValue) },
            doc:
                "learn (the default): also answer the records it announces while awake; declared: only its declared ones."
        ),
    ]

    /// A declared host as its table starts: what each key it leaves out stands for.
    static func undeclared(name: String, mac: MACAddress) -> DeclaredHost {
        DeclaredHost(name: name, interface: "", mac: mac, learnsAddresses: true)
    }

    /// One `[hosts.NAME]` table. The interface may be left out when one is served (`Settings.daemonConfiguration`
    /// fills it in).
    static func declaredHost(named name: String, _ table: [String: TOMLValue]) throws(Problem) -> DeclaredHost {
        guard !name.isEmpty, name.utf8.count <= 63,
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else {
            throw Problem("\"\(name)\" is not a host's table name: 1 to 63 letters, digits, - or _")
        }
        let names = declaredHostKeys.map(\.name)
        for key in table.keys.sorted() where !names.contains(key) {
            var message = "unknown key in [hosts.\(name)]; known keys: \(names.sorted().joined(separator: ", "))"
            if let close = closest(to: key, among: names) { message += " (did you mean \(close)?)" }
            throw Problem(message, at: [key])
        }
        guard table["mac"] != nil else { throw Problem("the host's MAC is required: mac = \"aa:bb:cc:dd:ee:ff\"") }
        var host = undeclared(name: name, mac: .zero)
        for key in declaredHostKeys {
            guard let value = table[key.name] else { continue }
            do {
                try key.read(value, &host)
            } catch let problem {
                throw Problem(problem.message, at: [key.name] + problem.key)
            }
        }
        if let problem = host.validate() { throw Problem(problem) }
        return host
    }

    /// `["192.168.1.20", "fd00::20"]`, with `"learn"` among them or alone (`addresses = "learn"`, the default) to
    /// also take the addresses the host is seen using.
    static func declaredAddresses(_ value: TOMLValue) throws(Problem) -> ([IPAddress], Bool) {
        let allowed =
            "an array of addresses, such as [\"192.168.1.20\", \"fd00::20\"], with \"learn\" to add those the host is seen using, or \"learn\""
        if let text = value.string {
            guard text == "learn" else { throw Problem("expected \(allowed), found \"\(text)\"") }
            return ([], true)
        }
        var addresses: [IPAddress] = []
        var learns = false
        for text in try strings(value, allowed) {
            if text == "learn" {
                learns = true
            } else if let address = IPAddress(text) {
                guard !address.isUnspecifiedOrMulticast else { throw Problem("\(address) is not a host's address") }
                guard !addresses.contains(address) else { throw Problem("\(address) is listed twice") }
                addresses.append(address)
            } else {
                throw Problem("\"\(text)\" is not an address; expected \(allowed)")
            }
        }
        guard learns || !addresses.isEmpty else { throw Problem("expected \(allowed), found an empty array") }
        return (addresses, learns)
    }

    /// `[{ name = "iMac", type = "_smb._tcp", port = 445, txt = ["model=iMac"] }]`.
    static func declaredServices(_ value: TOMLValue) throws(Problem) -> [DeclaredHost.Service] {
        let allowed = "an array of tables such as { name = \"iMac\", type = \"_smb._tcp\", port = 445 }"
        guard let array = value.array else { throw Problem("expected \(allowed), found \(value.summary)") }
        var services: [DeclaredHost.Service] = []
        for (index, element) in array.enumerated() {
            guard let table = element.table else {
                throw Problem("expected \(allowed); item \(index + 1) is \(element.summary)")
            }
            let keys = ["name", "type", "port", "txt"]
            if let unknown = table.keys.sorted().first(where: { !keys.contains($0) }) {
                throw Problem(
                    "service \(index + 1): unknown key \(unknown); known keys: \(keys.joined(separator: ", "))")
            }
            guard let name = table["name"], let type = table["type"], let port = table["port"] else {
                throw Problem("service \(index + 1): name, type and port are required")
            }
            let service = DeclaredHost.Service(
                name: try string(name, "an instance name"), type: try string(type, "a type such as \"_smb._tcp\""),
                port: UInt16(try integer(port, in: 1...65_535)),
                txt: try table["txt"].map { value throws(Problem) in
                    try strings(value, "an array of \"key=value\" strings")
                } ?? [])
            if let problem = DeclaredHost.problem(with: service) { throw Problem("service \(index + 1): \(problem)") }
            services.append(service)
        }
        return services
    }

    /// `["tcp/32400", "udp/9", 22]` (a bare number is TCP), not empty.
    static func ports(_ value: TOMLValue) throws(Problem) -> [WakePolicy.Port] {
        let allowed = "an array of ports such as [\"tcp/32400\", \"udp/9\"] (a bare number is TCP)"
        guard let array = value.array else { throw Problem("expected \(allowed), found \(value.summary)") }
        var ports: [WakePolicy.Port] = []
        for element in array {
            if let number = element.int {
                guard (1...65_535).contains(number) else {
                    throw Problem("port \(number) is out of range; expected 1 to 65535")
                }
                ports.append(WakePolicy.Port(.tcp, UInt16(number)))
            } else if let text = element.string, let port = WakePolicy.Port(text) {
                ports.append(port)
            } else {
                throw Problem("expected \(allowed), found \(element.summary)")
            }
        }
        guard !ports.isEmpty else { throw Problem("expected \(allowed), found an empty array") }
        return ports
    }

    // MARK: Value readers

    static func integer(_ value: TOMLValue, in range: ClosedRange<Int>) throws(Problem) -> Int {
        let allowed = "an integer from \(range.lowerBound) to \(range.upperBound)"
        guard let number = value.int else { throw Problem("expected \(allowed), found \(value.summary)") }
        guard range.contains(number) else { throw Problem("expected \(allowed), found \(number)") }
        return number
    }

    static func boolean(_ value: TOMLValue) throws(Problem) -> Bool {
        guard let flag = value.bool else { throw Problem("expected true or false, found \(value.summary)") }
        return flag
    }

    static func string(_ value: TOMLValue, _ allowed: String) throws(Problem) -> String {
        guard let text = value.string else { throw Problem("expected \(allowed), found \(value.summary)") }
        return text
    }

    /// One of the names of `Choice`, which `allowed` lists.
    static func choice<Choice: RawRepresentable<String>>(_ value: TOMLValue, _ allowed: String) throws(Problem)
        -> Choice
    {
        let text = try string(value, allowed)
        guard let chosen = Choice(rawValue: text) else { throw Problem("expected \(allowed), found \"\(text)\"") }
        return chosen
    }

    static func strings(_ value: TOMLValue, _ allowed: String) throws(Problem) -> [String] {
        guard let array = value.array else { throw Problem("expected \(allowed), found \(value.summary)") }
        var texts: [String] = []
        for element in array {
            guard let text = element.string else {
                throw Problem("expected \(allowed); \(element.summary) is not a string")
            }
            texts.append(text)
        }
        return texts
    }

    static func absolutePath(_ value: TOMLValue, allowEmpty: Bool) throws(Problem) -> String {
        let allowed = allowEmpty ? "an absolute path, or \"\" for none" : "an absolute path"
        let path = try string(value, allowed)
        guard path.hasPrefix("/") || (allowEmpty && path.isEmpty) else {
            throw Problem("expected \(allowed), found \"\(path)\"")
        }
        return path
    }

    // MARK: Value writers

    /// `text` as a TOML basic string.
    static func quoted(_ text: String) -> String {
        var escaped = ""
        for character in text.unicodeScalars {
            switch character {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\t": escaped += "\\t"
            default:
                if character.value < 0x20 || character.value == 0x7F {
                    let hex = String(character.value, radix: 16)
                    escaped += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    escaped.unicodeScalars.append(character)
                }
            }
        }
        return "\"\(escaped)\""
    }

    static func list(_ items: [String]) -> String { "[" + items.map(quoted).joined(separator: ", ") + "]" }

    /// A comment after the value, when `condition` holds and there is something to say.
    static func note(_ condition: Bool, _ text: @autoclosure () -> String?) -> String {
        guard condition, let text = text() else { return "" }
        return "  # \(text)"
    }

    static func validate(_ metrics: Settings.Metrics) throws(Problem) {
        let probe = AdvertisementConfiguration(
            intent: metrics.intent, portability: metrics.portability, marginalPower: metrics.marginalPower,
            totalPower: metrics.totalPower, features: metrics.features, name: "x", hostName: "x")
        do {
            try probe.validate()
        } catch {
            throw Problem(error.description)
        }
    }

    static func duplicate(in names: [String]) -> String? {
        var seen: Set<String> = []
        for name in names where !seen.insert(name).inserted { return name }
        return nil
    }

    /// The known key nearest to `key` by edit distance, when it is a likely typo (at most two edits).
    static func closest(to key: String, among known: [String]) -> String? {
        let scored = known.map { ($0, distance(key, $0)) }.filter { $0.1 <= 2 }
        return scored.min { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }?.0
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
