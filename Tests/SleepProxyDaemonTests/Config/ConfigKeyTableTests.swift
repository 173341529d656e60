import Foundation
import NetworkAddresses
import SleepProxyCore
import TOMLConfig
import Testing

@testable import SleepProxyDaemon

/// The table of keys (`Schema.keys`): each key reads back as written, each setting is one key, the defaults are
/// those of the configurations the keys land in, and the manual page and the sample file list exactly its keys.
@Suite struct ConfigKeyTableTests {
    /// A value other than the default for each key, as a file writes it.
    static let samples: [String: String] = [
        "interfaces": #"["eth1", "eth1.30"]"#,
        "state_directory": #""/srv/sleepproxy""#,
        "registration_port": "5400",
        "log_level": #""debug""#,
        "wake_all_on_exit": "true",
        "advertisement.enabled": "false",
        "advertisement.metrics": #""30-35-55-75""#,
        "advertisement.keepalive_offload": "false",
        "advertisement.name": #""Quote \" and tab\t""#,
        "advertisement.host_name": #""basement-proxy""#,
        "limits.maximum_lease": "7200",
        "limits.maximum_records_per_host": "50",
        "limits.maximum_records": "2000",
        "limits.event_history": "500",
        "limits.maximum_batch": "64",
        "limits.maximum_registration_bytes": "4000",
        "limits.maximum_hosts_per_interface": "30",
        "limits.registrations_per_second": "5",
        "limits.registration_burst": "40",
        "limits.control_connections": "4",
        "limits.queries_per_second": "20",
        "limits.query_burst": "30",
        "limits.maximum_questions_per_query": "8",
        "limits.maximum_pending_responses": "100",
        "control.socket": #""/run/sp/ctl.sock""#,
        "control.group": "120",
        "metrics.listen": #""127.0.0.1:9187""#,
        "web.listen": #""192.168.1.10:8080""#,
        "web.token": #""0123456789abcdef0123""#,
        "web.token_file": #""web-token""#,
        "takeover.claim": #""lazy""#,
        "wake.dry_run": "true",
        "wake.ignore_sources": #"["192.168.1.50", "fd00:1::/64"]"#,
        "wake.never_wake": #"["nas", "aa:bb:cc:dd:ee:01"]"#,
        "wake.extra_ports": #"imac = ["tcp/32400", "udp/9"]"#,
        "hosts": #"mac = "3c:22:fb:10:20:30""#,
    ]

    /// A value for each key of `[hosts.NAME]`, on top of its MAC, other than what leaving the key out means.
    static let hostSamples: [String: String] = [
        "mac": #""00:11:32:aa:bb:cc""#,
        "interface": #""eth0""#,
        "addresses": #"["192.168.1.20", "fd00::20"]"#,
        "wake_ports": #"["tcp/22", "udp/9"]"#,
        "host_name": #""iMac""#,
        "services": #"[{ name = "iMac", type = "_smb._tcp", port = 445, txt = ["model=iMac20,1"] }]"#,
        "records": #""declared""#,
    ]

    static var keyNames: [String] { Schema.keys.map(\.name) }

    /// A file that sets the key `name` (a row of the table) to `value`.
    static func file(setting name: String, to value: String) throws -> String {
        let key = try #require(Schema.keys.first { $0.name == name })
        switch key.form {
        case .value:
            let table = key.path.dropLast()
            let line = "\(key.path[key.path.count - 1]) = \(value)\n"
            return table.isEmpty ? line : "[\(table.joined(separator: "."))]\n" + line
        case .hostTable, .namedTables:
            // A table of tables is given one table, `NAME`.
            let header = key.path + (key.name == "hosts" ? ["pc"] : [])
            return "[\(header.joined(separator: "."))]\n\(value)\n"
        }
    }

    @Test func everyKeyHasASample() {
        #expect(Set(Self.samples.keys) == Set(Self.keyNames))
        #expect(Self.keyNames.count == Set(Self.keyNames).count, "a key is listed twice")
        #expect(Set(Self.hostSamples.keys) == Set(Schema.declaredHostKeys.map(\.name)))
    }

    /// A value other than the default, written by `--check-config`'s writer, reads back as the same settings.
    @Test(arguments: Self.keyNames)
    func aKeyReadsBackAsWritten(name: String) throws {
        let value = try #require(Self.samples[name])
        let settings = try ConfigFileTests.parse(try Self.file(setting: name, to: value))
        #expect(settings != ConfigFileTests.defaults, "\(name) = \(value) is the default")
        let written = settings.toml(context: ConfigFileTests.context)
        #expect(try ConfigFileTests.parse(written) == settings, "\(written)")
    }

    /// A host declared with a MAC and a host name (which services need), that each sample changes.
    static let hostBase = ["mac": #""3c:22:fb:10:20:30""#, "host_name": #""pc""#]

    static func hostFile(_ keys: [String: String]) -> String {
        "[hosts.pc]\n" + keys.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)\n" }.joined()
    }

    @Test(arguments: Self.hostSamples.keys.sorted())
    func aDeclaredHostsKeyReadsBackAsWritten(name: String) throws {
        let value = try #require(Self.hostSamples[name])
        let base = try ConfigFileTests.parse(Self.hostFile(Self.hostBase))
        let settings = try ConfigFileTests.parse(
            Self.hostFile(Self.hostBase.merging([name: value]) { $1 }))
        #expect(settings.declaredHosts.count == 1)
        #expect(settings != base, "\(name) = \(value) changes nothing")
        let written = settings.toml()
        #expect(written.contains("\n\(name) = "), "\(written)")
        #expect(try ConfigFileTests.parse(written) == settings, "\(written)")
    }

    /// Each property of `Settings` is set by exactly one key, and every key sets one.
    @Test func everySettingIsOneKey() throws {
        func properties(_ settings: Settings) -> [String: String] {
            Dictionary(
                uniqueKeysWithValues: Mirror(reflecting: settings).children.map {
                    ($0.label ?? "?", String(reflecting: $0.value))
                })
        }
        let defaults = properties(ConfigFileTests.defaults)
        var setBy: [String: [String]] = [:]
        for name in Self.keyNames {
            let value = try #require(Self.samples[name])
            let changed = properties(try ConfigFileTests.parse(try Self.file(setting: name, to: value))).filter {
                defaults[$0.key] != $0.value
            }
            #expect(changed.count == 1, "\(name) sets \(changed.keys.sorted())")
            for property in changed.keys { setBy[property, default: []].append(name) }
        }
        #expect(Set(setBy.keys) == Set(defaults.keys), "set by no key: \(Set(defaults.keys).subtracting(setBy.keys))")
        #expect(setBy.values.allSatisfy { $0.count == 1 }, "\(setBy.filter { $0.value.count > 1 })")
    }

    /// The defaults of the file are those of the configurations the keys land in: the settings of an empty file
    /// make the core's and the daemon's default configuration.
    @Test func theDefaultsAreTheConfigurations() throws {
        let configuration = try ConfigFileTests.defaults.daemonConfiguration(context: ConfigFileTests.context)
        #expect(configuration.core == CoreConfiguration())
        let daemon = DaemonConfiguration(interfaces: [], stateDirectory: Settings.defaultStateDirectory)
        #expect(configuration.registrationPort == daemon.registrationPort)
        #expect(configuration.eventHistoryLimit == daemon.eventHistoryLimit)
        #expect(configuration.maximumBatch == daemon.maximumBatch)
        #expect(configuration.controlConnections == daemon.controlConnections)
        #expect(configuration.wakeAllOnExit == daemon.wakeAllOnExit)
        #expect(configuration.stateDirectory == daemon.stateDirectory)
    }

    /// A key's default as the file writes it, for a machine without systemd's directories.
    static func writtenDefault(_ key: ConfigKey) -> String? {
        guard case .value(_, let write) = key.form else { return nil }
        return write(Settings(), nil)
    }

    /// The tables the file has, as headers: `["advertisement"]`, `["wake", "extra_ports"]`, `["hosts", "NAME"]`.
    static var tables: Set<[String]> {
        Set(
            Schema.keys.map { key in
                switch key.form {
                case .value: Array(key.path.dropLast())
                case .hostTable: key.path
                case .namedTables: key.path + ["NAME"]
                }
            }
        ).subtracting([[]])
    }

    /// The keys of the file as `man/sleepproxy.toml.5` and the sample file name them: `limits.maximum_lease`,
    /// `hosts.NAME.mac`.
    static var documentedKeys: Set<String> {
        Set(
            Schema.keys.flatMap { key -> [String] in
                switch key.form {
                case .value: [key.name]
                case .hostTable: []
                case .namedTables(let keys, _, _): keys.map { "\(key.name).NAME.\($0.name)" }
                }
            })
    }

    static func contents(_ path: String) throws -> String {
        try String(contentsOf: ConfigFileTests.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// man/sleepproxy.toml.5 has a section for each table and an entry for each key of the table, no other, each
    /// in the section of its table and naming its default.
    @Test func theManualPageListsExactlyTheKeys() throws {
        let page = try Self.contents("man/sleepproxy.toml.5")
        var table: [String]?
        var sections: Set<[String]> = []
        var entries: [String: String] = [:]
        var entry: [String] = []
        var text = ""
        func finish() {
            for name in entry { entries[name, default: ""] += text }
            entry = []
            text = ""
        }
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(".Sh ") || line.hasPrefix(".Ss ") || line.hasPrefix(".It ") || line == ".El" {
                finish()
            }
            if line.hasPrefix(".Sh ") {
                table = nil
            } else if line == ".Ss Top-level keys" {
                table = []
            } else if line == ".Ss [hosts. Ns Ar name Ns ]" {
                table = ["hosts", "NAME"]
            } else if let match = line.wholeMatch(of: /\.Ss \[([a-z_.]+)\]/) {
                table = match.1.split(separator: ".").map(String.init)
            }
            if line.hasPrefix(".Ss "), let table, !table.isEmpty { sections.insert(table) }
            if line.hasPrefix(".It Cm "), let table {
                entry = line.matches(of: /Cm ([a-z_]+) No =/).map { (table + [String($0.1)]).joined(separator: ".") }
            }
            text += line + "\n"
        }
        finish()
        #expect(sections == Self.tables)
        #expect(Set(entries.keys) == Self.documentedKeys)

        for key in Schema.keys {
            guard let value = Self.writtenDefault(key), let described = entries[key.name] else { continue }
            let words = described.split(whereSeparator: \.isWhitespace).map {
                $0.trimmingCharacters(in: .init(charactersIn: ".,;:"))
            }
            let bare = value.trimmingCharacters(in: .init(charactersIn: "\"[]"))
            if bare.isEmpty {
                #expect(described.lowercased().contains("default"), "\(key.name): the default, \(value), is not named")
            } else {
                #expect(words.contains(bare), "\(key.name): the default, \(value), is not named")
            }
        }
    }

    /// Config/sleepproxy.toml has each table and each key of the table, no other, commented out with its default;
    /// its example of a declared host has each key of `[hosts.NAME]`.
    @Test func theSampleFileListsExactlyTheKeys() throws {
        let sample = try Self.contents("Config/sleepproxy.toml")
        var table: [String] = []
        var tables: Set<[String]> = []
        var values: [String: String] = [:]
        var examples: [String] = []
        for line in sample.split(separator: "\n") {
            if let match = line.wholeMatch(of: /\[([a-z_.]+)\]/) {
                table = match.1.split(separator: ".").map(String.init)
                tables.insert(table)
            } else if line.firstMatch(of: /^#\s+\[hosts\.[a-z_]+\]/) != nil {
                table = ["hosts", "NAME"]
                tables.insert(table)
            } else if table == ["hosts", "NAME"], let match = line.firstMatch(of: /^#   ([a-z_]+) =/) {
                values[(table + [String(match.1)]).joined(separator: "."), default: ""] += "example"
            } else if let match = line.wholeMatch(of: /# ([a-z_]+) = (.*)/) {
                let name = (table + [String(match.1)]).joined(separator: ".")
                if Schema.keys.contains(where: { $0.path == table }) {
                    examples.append(name)
                } else {
                    let value = String(match.2).replacing(/\s+#.*/, with: "")
                    #expect(values.updateValue(value, forKey: name) == nil, "\(name) is given twice")
                }
            }
        }
        #expect(tables == Self.tables)
        #expect(Set(values.keys) == Self.documentedKeys)
        #expect(!examples.isEmpty, "no example of [wake.extra_ports]")
        for key in Schema.keys {
            guard let value = Self.writtenDefault(key) else { continue }
            #expect(values[key.name] == value, "\(key.name): the sample gives \(values[key.name] ?? "nothing")")
        }
    }
}

/// sleepproxyd's options set the keys its `--help` names, checked as the file's keys are.
@Suite struct DaemonOptionTests {
    /// Each option with a value other than the default, and the key and value it stands for.
    static let options: [(arguments: [String], key: String, value: String)] = [
        (["--interface", "eth9", "--interface", "eth8"], "interfaces", #"["eth9", "eth8"]"#),
        (["--state-dir", "/srv/sp"], "state_directory", #""/srv/sp""#),
        (["--registration-port", "5400"], "registration_port", "5400"),
        (["--maximum-lease", "7200"], "limits.maximum_lease", "7200"),
        (["--maximum-records", "2000"], "limits.maximum_records", "2000"),
        (["--maximum-records-per-host", "50"], "limits.maximum_records_per_host", "50"),
        (["--advertise-metrics", "30-35-55-75"], "advertisement.metrics", #""30-35-55-75""#),
        (["--advertise-name", "Basement"], "advertisement.name", #""Basement""#),
        (["--advertise-host-name", "basement-proxy"], "advertisement.host_name", #""basement-proxy""#),
        (["--no-advertise"], "advertisement.enabled", "false"),
        (["--wake-all-on-exit"], "wake_all_on_exit", "true"),
        (["--dry-run"], "wake.dry_run", "true"),
        (["--control-socket", "/run/sp/ctl.sock"], "control.socket", #""/run/sp/ctl.sock""#),
        (["--control-group", "120"], "control.group", #""120""#),
        (["--metrics-listen", "127.0.0.1:9187"], "metrics.listen", #""127.0.0.1:9187""#),
        (["--log-level", "debug"], "log_level", #""debug""#),
    ]

    static func run(_ arguments: [String]) throws -> (status: Int32, stdout: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try RegistrationDaemonLabTests.daemonPath())
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The keys `--help` names in parentheses are keys of the file, and each option here is one of them.
    @Test func theHelpNamesKeysOfTheFile() throws {
        let help = try Self.run(["--help"])
        #expect(help.status == 0)
        let named = Set(help.stdout.matches(of: /\(([a-z_.]+)(?:\s+=\s+[a-z]+)?\)/).map { String($0.1) })
        let keys = Set(Schema.keys.map(\.name))
        #expect(!named.isEmpty && named.isSubset(of: keys), "not keys: \(named.subtracting(keys))")
        #expect(Set(Self.options.map(\.key)).subtracting(["interfaces"]) == named)
    }

    /// `--check-config` with every option prints the settings of a file that sets their keys.
    @Test func everyOptionSetsItsKey() throws {
        let result = try Self.run(
            ["--config", "/nonexistent/sleepproxy.toml", "--check-config"] + Self.options.flatMap(\.arguments))
        #expect(result.status == 0, "\(result.stdout)")
        var file = ""
        for (table, entries) in Dictionary(grouping: Self.options, by: { $0.key.split(separator: ".").dropLast() })
            .sorted(by: { $0.key.count < $1.key.count })
        {
            if !table.isEmpty { file += "[\(table.joined(separator: "."))]\n" }
            for entry in entries { file += "\(entry.key.split(separator: ".").last ?? "") = \(entry.value)\n" }
        }
        let expected = try ConfigFile.parse(file, path: "options.toml", onto: Settings())
        #expect(expected != Settings())
        #expect(try ConfigFile.parse(result.stdout, path: "stdout", onto: Settings()) == expected, "\(result.stdout)")
    }
}
