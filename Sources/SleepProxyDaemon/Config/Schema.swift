import Logging
import NetworkAddresses
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

/// The keys of the config file and how each is read. `Config/sleepproxy.toml` documents the same keys; a test
/// checks that the two agree.
enum Schema {
    enum Entry: Sendable {
        case value(@Sendable (TOMLValue, inout Settings) throws(Problem) -> Void)
        case table([String: Entry])
        /// A table whose keys are hosts (a MAC or a name), each with a value.
        case hostTable(@Sendable (String, TOMLValue, inout Settings) throws(Problem) -> Void)
        /// A table of tables, one per name (`[hosts.imac]`), each read whole.
        case namedTables(@Sendable (String, [String: TOMLValue], inout Settings) throws(Problem) -> Void)
    }

    static let logLevels = Logger.Level.allCases.map(\.rawValue)

    static let root: [String: Entry] = [
        "interfaces": .value { value, settings throws(Problem) in
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
            settings.interfaces = names
        },
        "state_directory": .value { value, settings throws(Problem) in
            settings.stateDirectory = try absolutePath(value, allowEmpty: false)
        },
        "registration_port": .value { value, settings throws(Problem) in
            settings.registrationPort = UInt16(try integer(value, in: 1...65_535))
        },
        "log_level": .value { value, settings throws(Problem) in
            settings.logLevel = try choice(value, "one of \(logLevels.joined(separator: ", "))")
        },
        "wake_all_on_exit": .value { value, settings throws(Problem) in
            settings.wakeAllOnExit = try boolean(value)
        },
        "advertisement": .table([
            "enabled": .value { value, settings throws(Problem) in settings.advertise = try boolean(value) },
            "metrics": .value { value, settings throws(Problem) in
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
                settings.metrics = metrics
            },
            "name": .value { value, settings throws(Problem) in
                let text = try string(value, "a name, or \"\" for this host's name")
                guard text.utf8.count <= 50 else {
                    throw Problem("at most 50 bytes (the numbers and the name share one 63-byte label)")
                }
                settings.advertisedName = text
            },
            "keepalive_offload": .value { value, settings throws(Problem) in
                settings.keepaliveOffload = try boolean(value)
            },
            "host_name": .value { value, settings throws(Problem) in
                let text = try string(value, "one DNS label, or \"\" for <this host>-sleepproxy")
                guard text.utf8.count <= 63, !text.contains(".") else {
                    throw Problem(
                        "expected one DNS label (at most 63 bytes, no dots; .local is added), found \"\(text)\"")
                }
                settings.advertisedHostName = text
            },
        ]),
        "limits": .table([
            "maximum_lease": .value { value, settings throws(Problem) in
                settings.maximumLease = UInt32(try integer(value, in: 1...Int(CoreConfiguration.leaseCeiling)))
            },
            "maximum_records_per_host": .value { value, settings throws(Problem) in
                settings.maximumRecordsPerHost = try integer(value, in: 1...100_000)
            },
            "maximum_records": .value { value, settings throws(Problem) in
                settings.maximumRecords = try integer(value, in: 1...1_000_000)
            },
            "event_history": .value { value, settings throws(Problem) in
                settings.eventHistory = try integer(value, in: 1...1_000_000)
            },
            "maximum_batch": .value { value, settings throws(Problem) in
                settings.maximumBatch = try integer(value, in: 1...4_096)
            },
            "maximum_registration_bytes": .value { value, settings throws(Problem) in
                settings.maximumRegistrationBytes = try integer(value, in: 512...65_535)
            },
            "maximum_hosts_per_interface": .value { value, settings throws(Problem) in
                settings.maximumHostsPerInterface = try integer(value, in: 1...1_000_000)
            },
            "registrations_per_second": .value { value, settings throws(Problem) in
                settings.registrationsPerSecond = try integer(value, in: 1...1_000_000)
            },
            "registration_burst": .value { value, settings throws(Problem) in
                settings.registrationBurst = try integer(value, in: 1...1_000_000)
            },
            "control_connections": .value { value, settings throws(Problem) in
                settings.controlConnections = try integer(value, in: 1...1_024)
            },
            "queries_per_second": .value { value, settings throws(Problem) in
                settings.queriesPerSecond = try integer(value, in: 1...10_000_000)
            },
            "query_burst": .value { value, settings throws(Problem) in
                settings.queryBurst = try integer(value, in: 1...10_000_000)
            },
            "maximum_questions_per_query": .value { value, settings throws(Problem) in
                settings.maximumQuestionsPerQuery = try integer(value, in: 1...1_000)
            },
            "maximum_pending_responses": .value { value, settings throws(Problem) in
                settings.maximumPendingResponses = try integer(value, in: 16...1_000_000)
            },
        ]),
        "control": .table([
            "socket": .value { value, settings throws(Problem) in
                let path = try absolutePath(value, allowEmpty: true)
                // sockaddr_un.sun_path holds 108 bytes with the terminating zero.
                guard path.utf8.count <= 107 else { throw Problem("a socket path is at most 107 bytes") }
                settings.controlSocket = path
            },
            "group": .value { value, settings throws(Problem) in
                if let number = value.int {
                    guard (0...Int(UInt32.max - 1)).contains(number) else { throw Problem("not a group number") }
                    settings.controlGroup = String(number)
                } else {
                    settings.controlGroup = try string(value, "a group name or number, or \"\" for the daemon's group")
                }
            },
        ]),
        "metrics": .table([
            "listen": .value { value, settings throws(Problem) in
                let text = try string(value, "\"ADDRESS:PORT\", or \"\" for no metrics endpoint")
                if !text.isEmpty, case .failure(let error) = MetricsAddress.parse(text) {
                    throw Problem(error.description)
                }
                settings.metricsListen = text
            }
        ]),
        "takeover": .table([
            "claim": .value { value, settings throws(Problem) in
                settings.addressClaim = try choice(value, "\"announce\" or \"lazy\"")
            }
        ]),
        "hosts": .namedTables { name, table, settings throws(Problem) in
            try settings.declaredHosts.append(declaredHost(named: name, table))
            guard settings.declaredHosts.count <= Settings.declaredHostLimit else {
                throw Problem("at most \(Settings.declaredHostLimit) declared hosts")
            }
        },
        "wake": .table([
            "dry_run": .value { value, settings throws(Problem) in settings.dryRun = try boolean(value) },
            "ignore_sources": .value { value, settings throws(Problem) in
                let allowed = "an array of addresses or networks, such as [\"192.168.1.50\", \"fd00:1::/64\"]"
                var prefixes: [Link.Prefix] = []
                for text in try strings(value, allowed) {
                    guard let prefix = Link.Prefix(text) else {
                        throw Problem("\"\(text)\" is not an address or network; expected \(allowed)")
                    }
                    prefixes.append(prefix)
                }
                settings.ignoreSources = prefixes
            },
            "never_wake": .value { value, settings throws(Problem) in
                let allowed = "an array of host names or MACs, such as [\"imac\", \"aa:bb:cc:dd:ee:ff\"]"
                var hosts: [WakePolicy.HostMatch] = []
                for text in try strings(value, allowed) {
                    guard let host = WakePolicy.HostMatch(parsing: text) else {
                        throw Problem("\"\(text)\" is not a host name or MAC")
                    }
                    hosts.append(host)
                }
                settings.neverWake = hosts
            },
            "extra_ports": .hostTable { host, value, settings throws(Problem) in
                guard let match = WakePolicy.HostMatch(parsing: host) else {
                    throw Problem("\"\(host)\" is not a host name or MAC")
                }
                let ports = try ports(value)
                // Two keys for one host (`imac` and `iMac.local`) would be printed as the same key, which TOML
                // refuses; and the order of a table's keys means nothing, so the hosts are kept sorted, to give the
                // same settings whichever way the file spells and orders them.
                guard !settings.extraPorts.contains(where: { $0.host == match }) else {
                    throw Problem("another key of this table already names the host \(match)")
                }
                settings.extraPorts.append(WakePolicy.ExtraPorts(host: match, ports: ports))
                settings.extraPorts.sort { $0.host.description < $1.host.description }
            },
        ]),
    ]

    // MARK: Declared hosts

    static let declaredHostKeys = ["mac", "interface", "addresses", "wake_ports", "host_name", "services"]

    /// One `[hosts.NAME]` table. The interface may be left out when one is served (`Settings.daemonConfiguration`
    /// fills it in).
    static func declaredHost(named name: String, _ table: [String: TOMLValue]) throws(Problem) -> DeclaredHost {
        guard !name.isEmpty, name.utf8.count <= 63,
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else {
            throw Problem("\"\(name)\" is not a host's table name: 1 to 63 letters, digits, - or _")
        }
        for key in table.keys.sorted() where !declaredHostKeys.contains(key) {
            var message =
                "unknown key in [hosts.\(name)]; known keys: \(declaredHostKeys.sorted().joined(separator: ", "))"
            if let close = closest(to: key, among: declaredHostKeys) { message += " (did you mean \(close)?)" }
            throw Problem(message, at: [key])
        }
        func at<Value>(_ key: String, _ read: (TOMLValue) throws(Problem) -> Value) throws(Problem) -> Value? {
            guard let value = table[key] else { return nil }
            do {
                return try read(value)
            } catch let problem {
                throw Problem(problem.message, at: [key] + problem.key)
            }
        }
        guard
            let mac = try at(
                "mac",
                { value throws(Problem) in
                    let text = try string(value, "the host's MAC, such as \"aa:bb:cc:dd:ee:ff\"")
                    guard let mac = MACAddress(text) else {
                        throw Problem("\"\(text)\" is not a MAC; expected six hex bytes, such as \"aa:bb:cc:dd:ee:ff\"")
                    }
                    guard !mac.isZero, mac != .broadcast, !mac.isMulticast else {
                        throw Problem("\(mac) is not a host's MAC (zero, broadcast or multicast)")
                    }
                    return mac
                })
        else { throw Problem("the host's MAC is required: mac = \"aa:bb:cc:dd:ee:ff\"") }
        var host = DeclaredHost(name: name, interface: "", mac: mac, learnsAddresses: true)
        if let interface = try at("interface", { value throws(Problem) in try string(value, "an interface name") }) {
            guard !interface.isEmpty else { throw Problem("expected an interface name, found \"\"", at: ["interface"]) }
            host.interface = InterfaceName(interface)
        }
        if let (addresses, learns) = try at("addresses", declaredAddresses) {
            host.addresses = addresses
            host.learnsAddresses = learns
        }
        host.wakePorts = try at("wake_ports", { value throws(Problem) in try ports(value) }) ?? []
        host.hostName = try at(
            "host_name",
            { value throws(Problem) in
                let text = try string(value, "the host's mDNS name without .local, such as \"iMac\"")
                if let problem = DeclaredHost(name: name, interface: "", mac: mac, hostName: text).validate() {
                    throw Problem(problem)
                }
                return text
            })
        host.services = try at("services", declaredServices) ?? []
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
