import Foundation
import Logging
import NetworkAddresses
import SleepProxyCore
import SleepProxyDaemon
import TOMLConfig
import Testing

/// The config file: every key, bad values, unknown keys, the sample in Config/, and how options override it.
@Suite struct ConfigFileTests {
    static let path = "/etc/sleepproxy/sleepproxy.toml"
    static let defaults = Settings()

    static func parse(_ text: String) throws(ConfigError) -> Settings {
        try ConfigFile.parse(text, path: path, onto: defaults)
    }

    static func failure(_ text: String) -> ConfigError? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error
        }
    }

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }

    static let context = SettingsContext(
        hostName: "server", defaultRouteInterface: "enp1s0",
        groupID: { $0 == "admins" ? 1_234 : nil })

    @Test func anEmptyFileIsTheDefaults() throws {
        #expect(try Self.parse("") == Self.defaults)
        #expect(try Self.parse("# only a comment\n\n") == Self.defaults)
        #expect(Self.defaults.stateDirectory == "/var/lib/sleepproxy")
        #expect(Self.defaults.controlSocket == "/run/sleepproxy/control.sock")
        #expect(Self.defaults.registrationPort == 5354 && Self.defaults.maximumLease == 86_400)
    }

    @Test func everyKeyIsRead() throws {
        let settings = try Self.parse(
            """
            interfaces = ["eth0", "eth0.20"]
            state_directory = "/srv/sleepproxy"
            registration_port = 5400
            log_level = "debug"
            wake_all_on_exit = true

            [advertisement]
            enabled = false
            metrics = "30-35-55-75"
            keepalive_offload = false
            name = "Basement"
            host_name = "basement-proxy"

            [limits]
            maximum_lease = 7200
            maximum_records_per_host = 50
            maximum_records = 2000
            event_history = 500
            maximum_batch = 64
            maximum_registration_bytes = 4000
            maximum_hosts_per_interface = 30
            registrations_per_second = 5
            registration_burst = 40
            control_connections = 4

            [control]
            socket = "/run/sp/ctl.sock"
            group = "admins"

            [takeover]
            claim = "lazy"

            [wake]
            dry_run = true
            ignore_sources = ["192.168.1.50", "fd00:1::/64"]
            never_wake = ["nas", "aa:bb:cc:dd:ee:01"]

            [wake.extra_ports]
            imac = ["tcp/32400", "udp/9"]
            "aa:bb:cc:dd:ee:02" = [548]
            """)
        var expected = Self.defaults
        expected.interfaces = ["eth0", "eth0.20"]
        expected.stateDirectory = "/srv/sleepproxy"
        expected.registrationPort = 5400
        expected.logLevel = .debug
        expected.wakeAllOnExit = true
        expected.advertise = false
        expected.metrics = Settings.Metrics(intent: 30, portability: 35, marginalPower: 55, totalPower: 75)
        expected.keepaliveOffload = false
        expected.advertisedName = "Basement"
        expected.advertisedHostName = "basement-proxy"
        expected.maximumLease = 7_200
        expected.maximumRecordsPerHost = 50
        expected.maximumRecords = 2_000
        expected.eventHistory = 500
        expected.maximumBatch = 64
        expected.addressClaim = .lazy
        expected.maximumRegistrationBytes = 4_000
        expected.maximumHostsPerInterface = 30
        expected.registrationsPerSecond = 5
        expected.registrationBurst = 40
        expected.controlConnections = 4
        expected.controlSocket = "/run/sp/ctl.sock"
        expected.controlGroup = "admins"
        expected.dryRun = true
        expected.ignoreSources = [
            Link.Prefix(address: try #require(IPAddress("192.168.1.50")), length: 32),
            Link.Prefix(address: try #require(IPAddress("fd00:1::")), length: 64),
        ]
        expected.neverWake = [
            try #require(WakePolicy.HostMatch(parsing: "nas")),
            try #require(WakePolicy.HostMatch(parsing: "aa:bb:cc:dd:ee:01")),
        ]
        #expect(
            Set(settings.extraPorts.map { "\($0.host) \($0.ports)" }) == [
                "imac [tcp/32400, udp/9]", "aa:bb:cc:dd:ee:02 [tcp/548]",
            ])
        expected.extraPorts = settings.extraPorts
        #expect(settings == expected)

        let configuration = try settings.daemonConfiguration(context: Self.context)
        #expect(configuration.interfaces == ["eth0", "eth0.20"])
        #expect(configuration.controlGroup == 1_234)
        #expect(configuration.advertisement == nil)
        #expect(configuration.core.maximumLease == 7_200 && configuration.core.maximumRecordsTotal == 2_000)
        #expect(configuration.core.wakePolicy.dryRun && configuration.core.wakePolicy.neverWake.count == 2)
        #expect(!configuration.core.keepaliveOffload)
        #expect(
            configuration.core.maximumRegistrationBytes == 4_000 && configuration.core.maximumHostsPerInterface == 30)
        #expect(configuration.core.registrationRate == Rate(perSecond: 5, burst: 40))
        #expect(configuration.controlConnections == 4)
        #expect(configuration.eventHistoryLimit == 500 && configuration.maximumBatch == 64)
        #expect(configuration.wakeAllOnExit)
    }

    /// A bad value names the line, the key and what is allowed, and changes nothing.
    @Test(arguments: [
        (
            "registration_port = \"high\"", 1, "registration_port",
            "an integer from 1 to 65535, found the string \"high\""
        ),
        ("\nregistration_port = 0", 2, "registration_port", "from 1 to 65535, found 0"),
        ("registration_port = 70000", 1, "registration_port", "found 70000"),
        ("interfaces = \"eth0\"", 1, "interfaces", "an array of interface names"),
        ("interfaces = [\"eth0\", 3]", 1, "interfaces", "the integer 3 is not a string"),
        ("interfaces = [\"eth0\", \"eth0\"]", 1, "interfaces", "listed twice"),
        ("interfaces = [\"a very long interface name\"]", 1, "interfaces", "not an interface name"),
        ("state_directory = \"relative/path\"", 1, "state_directory", "an absolute path"),
        ("log_level = \"loud\"", 1, "log_level", "one of trace, debug, info, notice, warning, error, critical"),
        ("wake_all_on_exit = \"yes\"", 1, "wake_all_on_exit", "true or false"),
        ("[advertisement]\nmetrics = \"20-30-50\"", 2, "advertisement.metrics", "AA-BB-CC-DD"),
        ("[advertisement]\nmetrics = \"20-30-50-73.1\"", 2, "advertisement.metrics", "advertisement.keepalive_offload"),
        ("[advertisement]\nkeepalive_offload = \"yes\"", 2, "advertisement.keepalive_offload", "true or false"),
        ("[advertisement]\nmetrics = \"05-30-50-73\"", 2, "advertisement.metrics", "from 10 to 99"),
        ("[advertisement]\nhost_name = \"a.b\"", 2, "advertisement.host_name", "one DNS label"),
        ("[advertisement]\nenabled = 1", 2, "advertisement.enabled", "true or false, found the integer 1"),
        ("[limits]\n\nmaximum_lease = 90000", 3, "limits.maximum_lease", "from 1 to 86400"),
        ("[limits]\nmaximum_records = -1", 2, "limits.maximum_records", "found -1"),
        ("[limits]\nmaximum_batch = 1.5", 2, "limits.maximum_batch", "found the number 1.5"),
        ("[control]\nsocket = \"control.sock\"", 2, "control.socket", "an absolute path, or \"\" for none"),
        ("[wake]\nignore_sources = [\"192.168.1.0/33\"]", 2, "wake.ignore_sources", "not an address or network"),
        ("[wake]\nnever_wake = [\"\"]", 2, "wake.never_wake", "not a host name or MAC"),
        ("[wake.extra_ports]\nimac = [\"sctp/9\"]", 2, "wake.extra_ports.imac", "[\"tcp/32400\", \"udp/9\"]"),
        ("[wake.extra_ports]\nimac = [0]", 2, "wake.extra_ports.imac", "port 0 is out of range"),
        ("[wake.extra_ports]\nimac = \"tcp/22\"", 2, "wake.extra_ports.imac", "found the string"),
        ("wake = 3", 1, "wake", "expected a table"),
        ("[takeover]\nclaim = \"quiet\"", 2, "takeover.claim", "expected \"announce\" or \"lazy\", found \"quiet\""),
        ("[takeover]\nclaim = true", 2, "takeover.claim", "expected \"announce\" or \"lazy\", found true"),
    ])
    func badValues(text: String, line: Int, key: String, allowed: String) throws {
        let error = try #require(Self.failure(text), "\(text) should be refused")
        #expect(error.file == Self.path)
        #expect(error.line == line, "\(error)")
        #expect(error.key == key, "\(error)")
        #expect(error.message.contains(allowed), "\(error)")
        #expect(error.description.hasPrefix("\(Self.path):\(line): \(key): "), "\(error)")
    }

    @Test(arguments: [
        ("registraton_port = 5354", 1, "registraton_port", "at the top level", "did you mean registration_port?"),
        ("[limits]\nmaximum_leases = 60", 2, "limits.maximum_leases", "in [limits]", "did you mean maximum_lease?"),
        ("\n[advertisment]\nname = \"x\"", 2, "advertisment", "at the top level", "did you mean advertisement?"),
        ("[wake]\ncolour = \"blue\"", 2, "wake.colour", "in [wake]", "known keys: dry_run, extra_ports"),
        ("wake.dryrun = true", 1, "wake.dryrun", "in [wake]", "did you mean dry_run?"),
    ])
    func unknownKeys(text: String, line: Int, key: String, place: String, hint: String) throws {
        let error = try #require(Self.failure(text))
        #expect(error.line == line && error.key == key, "\(error)")
        #expect(error.message.contains("unknown key \(place)") && error.message.contains(hint), "\(error)")
    }

    @Test func theFirstProblemInTheFileIsTheOneReported() throws {
        let error = try #require(Self.failure("registration_port = \"high\"\n[limits]\nmaximum_lease = 0\n"))
        #expect(error.line == 1 && error.key == "registration_port", "\(error)")
    }

    @Test func notTOMLAtAll() throws {
        let error = try #require(Self.failure("interfaces = [\"eth0\"\nlog_level = \"info\"\n"))
        #expect(error.file == Self.path && error.line != nil && error.key == nil, "\(error)")
        #expect(error.message.hasPrefix("not valid TOML"), "\(error)")
        let duplicate = try #require(Self.failure("log_level = \"info\"\nlog_level = \"debug\"\n"))
        #expect(duplicate.line == 2, "\(duplicate)")
    }

    /// Config/sleepproxy.toml documents every key with its default: with every setting uncommented it reads
    /// as the defaults (plus its one example of extra ports), and each key the daemon knows is in it.
    @Test func theSampleFileShowsEveryKeyWithItsDefault() throws {
        let sample = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("Config/sleepproxy.toml"), encoding: .utf8)
        #expect(try Self.parse(sample) == Self.defaults, "the sample, as shipped, sets nothing")
        let uncommented = sample.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.wholeMatch(of: /# ([a-z_]+ = .*)/).map { String($0.1) } ?? String(line)
        }.joined(separator: "\n")
        let settings = try Self.parse(uncommented)
        var expected = Self.defaults
        expected.extraPorts = [
            WakePolicy.ExtraPorts(
                host: try #require(WakePolicy.HostMatch(parsing: "imac")), ports: [.init(.tcp, 32_400), .init(.udp, 9)])
        ]
        #expect(settings == expected)

        let documented = Set(
            uncommented.split(separator: "\n").compactMap { $0.firstMatch(of: /^([a-z_]+) =/)?.1 }.map(String.init))
        let known = Set(
            Self.defaults.toml().split(separator: "\n").compactMap { $0.firstMatch(of: /^([a-z_]+) =/)?.1 }.map(
                String.init))
        #expect(known.subtracting(documented).isEmpty, "keys missing from the sample: \(known.subtracting(documented))")
        #expect(documented.subtracting(known).subtracting(["imac"]).isEmpty)
    }

    /// man/sleepproxy.toml.5 (the manual page of the file) has an entry for each key the daemon knows, and none
    /// for a key it does not.
    @Test func theManualPageDescribesEveryKey() throws {
        let page = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("man/sleepproxy.toml.5"), encoding: .utf8)
        // Entries are `.It Cm key No = ...`, two keys sharing one entry `.It Cm a No = Ar x , Cm b No = ...`.
        let described = Set(
            page.split(separator: "\n").filter { $0.hasPrefix(".It Cm ") }.flatMap { line in
                line.matches(of: /Cm ([a-z_]+) No =/).map { String($0.1) }
            })
        // With a declared host, so that the keys of [hosts.NAME] count too.
        let declared = try Self.parse(DeclaredHostConfigTests.full)
        let known = Set(
            (Self.defaults.toml() + declared.toml()).split(separator: "\n").compactMap {
                $0.firstMatch(of: /^([a-z_]+) =/)?.1
            }.map(String.init))
        #expect(!known.isEmpty)
        #expect(known.subtracting(described).isEmpty, "keys missing from the page: \(known.subtracting(described))")
        #expect(described.subtracting(known).isEmpty, "keys the daemon does not know: \(described.subtracting(known))")
        for table in [
            "[advertisement]", "[limits]", "[control]", "[takeover]", "[wake]", "[wake.extra_ports]", "[web]",
        ] {
            #expect(page.contains(".Ss \(table)\n"), "\(table) has no section")
        }
        #expect(page.contains(".Ss [hosts. Ns Ar name Ns ]\n"))
    }

    /// What --check-config prints reads back as the same settings.
    @Test func theEffectiveConfigurationReadsBack() throws {
        let text = """
            interfaces = ["eth0"]
            log_level = "notice"
            [advertisement]
            metrics = "20-30-50-73"
            keepalive_offload = false
            name = "Quote \\" and tab\\t"
            [wake]
            ignore_sources = ["10.0.0.0/8"]
            never_wake = ["tv.local"]
            [wake.extra_ports]
            "aa:bb:cc:dd:ee:ff" = ["udp/9"]
            """
        let settings = try Self.parse(text)
        let printed = settings.toml(context: Self.context)
        #expect(try Self.parse(printed) == settings, "\(printed)")
        #expect(Self.defaults.toml(context: Self.context).contains("interfaces = []  # the default route's: enp1s0"))
    }

    @Test func optionsOverrideTheFileAndAreCheckedTheSameWay() throws {
        let settings = try Self.parse("registration_port = 5400\n")
        let overridden = try ConfigFile.apply(6000, at: ["registration_port"], onto: settings)
        #expect(overridden.registrationPort == 6_000)
        let nested = try ConfigFile.apply(false, at: ["advertisement", "enabled"], onto: settings)
        #expect(!nested.advertise && nested.registrationPort == 5_400)
        #expect(throws: ConfigError.self) { try ConfigFile.apply(0, at: ["registration_port"], onto: settings) }
        #expect(throws: ConfigError.self) { try ConfigFile.apply(1, at: ["limits"], onto: settings) }
    }

    @Test func systemdDirectoriesSetTheDefaults() {
        let settings = Settings(environment: [
            "STATE_DIRECTORY": "/var/lib/sleepproxy:/var/lib/other", "RUNTIME_DIRECTORY": "/run/sleepproxy",
        ])
        #expect(settings.stateDirectory == "/var/lib/sleepproxy")
        #expect(settings.controlSocket == "/run/sleepproxy/control.sock")
        #expect(Settings(environment: ["STATE_DIRECTORY": "/srv/x"]).stateDirectory == "/srv/x")
    }

    @Test func whatTheMachineDecides() throws {
        let defaults = try Self.defaults.daemonConfiguration(context: Self.context)
        #expect(defaults.interfaces == ["enp1s0"])
        #expect(defaults.advertisement?.name == "server" && defaults.advertisement?.hostName == "server-sleepproxy")
        #expect(defaults.controlGroup == nil && defaults.controlSocket == "/run/sleepproxy/control.sock")

        let noRoute = SettingsContext(hostName: "server", defaultRouteInterface: nil, groupID: { _ in nil })
        #expect(throws: ConfigError.self) { try Self.defaults.daemonConfiguration(context: noRoute) }
        var numbered = Self.defaults
        numbered.controlGroup = "120"
        #expect(try numbered.daemonConfiguration(context: noRoute.with(interface: "eth0")).controlGroup == 120)
        var unknownGroup = Self.defaults
        unknownGroup.controlGroup = "nosuchgroup"
        do {
            _ = try unknownGroup.daemonConfiguration(context: Self.context)
            Issue.record("an unknown group must be refused")
        } catch {
            #expect(error.key == "control.group" && error.message.contains("nosuchgroup"), "\(error)")
        }
        var noSocket = Self.defaults
        noSocket.controlSocket = ""
        #expect(try noSocket.daemonConfiguration(context: Self.context).controlSocket == nil)
    }

    @Test func aMissingFileIsTheDefaultsAndAnUnreadableOneIsAnError() throws {
        var settings = Self.defaults
        #expect(try ConfigFile.load(path: "/nonexistent/sleepproxy.toml", onto: &settings) == false)
        #expect(settings == Self.defaults)
        do {
            _ = try ConfigFile.load(path: "/tmp", onto: &settings)
            Issue.record("a directory is not a config file")
        } catch {
            #expect(error.file == "/tmp" && error.message.contains("cannot read"), "\(error)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("sleepproxy.toml").path
        try "interfaces = [\"eth1\"]\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try ConfigFile.load(path: file, onto: &settings))
        #expect(settings.interfaces == ["eth1"])
    }

    // MARK: Found by the config fuzz target (Fuzz/ConfigFileFuzzer.swift)

    /// Texts toml++ asserts on instead of reporting (which would end the test process, as it would the daemon):
    /// the parser refuses them first, naming the line and column.
    @Test(arguments: [
        ("[\u{1}", 1, 2, "a table header must start with a key"),
        ("log_level = \"info\"\n[=]\n", 2, 2, "a table header must start with a key"),
        ("[[[1]]]\n", 1, 3, "a table header must start with a key"),
        ("[wake]\ndry_run = true\n[\n", 3, 2, "a table header must start with a key"),
        ("\u{FEFF}  [ [ #\n", 1, 7, "a table header must start with a key"),
        ("[,]\r\nlog_level = \"info\"\r\n", 1, 2, "a table header must start with a key"),
        ("a=[}", 1, 4, "expected a value or ] in the array, found '}'"),
        ("[wake]\nnever_wake = [\"x\",\n  \u{2028}]\n", 3, 3, "expected a value or ] in the array, found U+2028"),
        ("interfaces = [[1, }]]\n", 1, 19, "expected a value or ] in the array"),
        ("registration_port = 1979-05-27 0\n", 1, 21, "a date followed by a space and a single digit"),
        ("interfaces = [1979-05-2_7 0]", 1, 15, "a date followed by a space and a single digit"),
        ("registration_port = 1979-05-27T_:00\n", 1, 32, "expected the time of a date-time"),
        ("log_level = \"debug\"\n\0registration_port = 0\n", 2, 1, "a NUL character"),
    ])
    func whatTheTOMLParserAssertsOnIsRefused(text: String, line: Int, column: Int, message: String) throws {
        let error = try #require(Self.failure(text))
        #expect(error.line == line && error.key == nil, "\(error)")
        #expect(error.message.hasPrefix("not valid TOML (column \(column)): \(message)"), "\(error)")
    }

    /// What looks like those inside strings, comments and multi-line arrays still reads.
    @Test func theirLookalikesStillRead() throws {
        let settings = try Self.parse(
            #"""
            interfaces = [
            "eth0",  # the first [}
              "eth1",
            ]
            [ wake ]
            ignore_sources = ["10.0.0.0/8"]  # 1979-05-27 0
            never_wake = ['''
            [=]''', "1979-05-27T_:"]
            [ "advertisement" ]
            enabled = false
            name = """
            [[[}"""
            """#)
        #expect(settings.interfaces == ["eth0", "eth1"] && settings.ignoreSources.count == 1 && !settings.advertise)
        #expect(settings.neverWake.map(\.description) == ["[=]", "1979-05-27t_:"] && settings.advertisedName == "[[[}")
    }

    /// Host names print folded; each must read back as the same host, whatever the file wrote.
    @Test(arguments: [
        "[wake.extra_ports]\n\"x.local.local\" = [1]\n",
        "[wake]\nnever_wake = [\"x..\", \"Y.Local.\"]\n",
        "[wake]\nnever_wake = [\"aa:bb:cc:dd:ee:ff.local\"]\n",
        "[wake.extra_ports]\nZ = [1]\na = [2]\n\"B.local\" = [\"udp/9\"]\n",
    ])
    func printedHostsReadBackAsTheSameSettings(text: String) throws {
        let settings = try Self.parse(text)
        let printed = settings.toml()
        #expect(try Self.parse(printed) == settings, "\(printed)")
    }

    @Test func aHostIsFoldedOnceForAll() throws {
        let settings = try Self.parse(
            """
            [wake]
            never_wake = ["x.local.local", "AA:BB:CC:DD:EE:FF.local"]
            [wake.extra_ports]
            Z = [1]
            a = [2]
            """)
        #expect(settings.neverWake.map(\.description) == ["x", "aa:bb:cc:dd:ee:ff"])
        #expect(settings.neverWake.last == WakePolicy.HostMatch.mac(MACAddress(0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF)))
        #expect(settings.extraPorts.map(\.host.description) == ["a", "z"])
    }

    @Test func twoKeysForOneHostAreRefused() throws {
        let error = try #require(Self.failure("[wake.extra_ports]\nimac = [1]\n\"iMac.local\" = [2]\n"))
        #expect(error.key?.hasPrefix("wake.extra_ports.") == true, "\(error)")
        #expect(error.message.contains("already names the host imac"), "\(error)")
    }
}

extension SettingsContext {
    fileprivate func with(interface: String) -> SettingsContext {
        SettingsContext(hostName: hostName, defaultRouteInterface: interface, groupID: groupID)
    }
}
