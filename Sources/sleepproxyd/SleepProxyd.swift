import ArgumentParser
import Logging
import SleepProxyControl
import SleepProxyDaemon
import TOMLConfig

#if canImport(Glibc)
    import Glibc
#endif

@main
struct SleepProxyd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleepproxyd",
        abstract: "Bonjour Sleep Proxy server: holds the mDNS records of sleeping hosts and wakes them on demand.",
        discussion: """
            Settings come from the config file (every key optional; a missing file means the defaults), and the \
            options below override it. SIGHUP reads the file again without dropping held hosts. \
            `sleepproxyd --check-config` prints the configuration that would run. sleepproxy.toml(5) and the \
            sample configuration (Config/sleepproxy.toml in the sources) list every key with its default.

            Environment variables set the common keys between the file and the options (for containers; an empty \
            one counts as unset): \(EnvironmentSettings.variables.map { "\($0.name) sets \(EnvironmentSettings.keyName($0)), \($0.meaning)." }.joined(separator: " "))
            """,
        version: SleepProxyVersion.string
    )

    @Option(name: .long, help: "The config file (TOML); a missing file means the defaults.")
    var config: String = Settings.defaultConfigPath

    @Flag(name: .long, help: "Check the config file and the options, print the configuration in force, and exit.")
    var checkConfig = false

    @Option(
        name: .customLong("interface"),
        help: "An interface to serve (e.g. eth0); repeat for several. Replaces the file's interfaces.")
    var interfaces: [String] = []

    @Option(name: .long, help: "Where the lease store lives; created if missing. (state_directory)")
    var stateDir: String?

    @Option(name: .long, help: "UDP port for registrations (clients learn it from the SRV record). (registration_port)")
    var registrationPort: Int?

    @Option(name: .long, help: "The longest lease granted, in seconds (at most 86400). (limits.maximum_lease)")
    var maximumLease: Int?

    @Option(name: .long, help: "Records all sleeping hosts together may hold. (limits.maximum_records)")
    var maximumRecords: Int?

    @Option(name: .long, help: "Records one sleeping host may hold. (limits.maximum_records_per_host)")
    var maximumRecordsPerHost: Int?

    @Option(
        name: .long,
        help:
            "The numbers clients rank sleep proxies by, AA-BB-CC-DD[.F]: intent, portability, marginal and total power; lower is preferred. (advertisement.metrics)"
    )
    var advertiseMetrics: String?

    @Option(name: .long, help: "The name shown after the numbers (default: this host's name). (advertisement.name)")
    var advertiseName: String?

    @Option(
        name: .long,
        help: "The host name the proxy's SRV record points at (default: HOSTNAME-sleepproxy). (advertisement.host_name)"
    )
    var advertiseHostName: String?

    @Flag(name: .long, help: "Do not advertise the proxy under _sleep-proxy._udp. (advertisement.enabled = false)")
    var noAdvertise = false

    @Flag(
        name: .long,
        help:
            "On a clean stop, wake every held host instead of keeping the leases for the next start. (wake_all_on_exit)"
    )
    var wakeAllOnExit = false

    @Flag(name: .long, help: "Log and record what would wake whom, but send no magic packet. (wake.dry_run)")
    var dryRun = false

    @Option(name: .long, help: "The control socket sleepproxyctl talks to; \"\" opens none. (control.socket)")
    var controlSocket: String?

    @Option(name: .long, help: "The group that owns the control socket, by name or number. (control.group)")
    var controlGroup: String?

    @Option(
        name: .long,
        help: "Serve /metrics and /hosts.json on ADDRESS:PORT (\"[::]:9187\"); \"\" serves none. (metrics.listen)")
    var metricsListen: String?

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error or critical. (log_level)")
    var logLevel: String?

    /// The options given, as the config file's keys, with the option each came from.
    func overrides() -> [(key: [String], option: String, value: TOMLValue)] {
        var overrides: [(key: [String], option: String, value: TOMLValue)] = []
        func add(_ key: [String], _ option: String, _ value: TOMLValue?) {
            if let value { overrides.append((key, option, value)) }
        }
        add(["interfaces"], "--interface", interfaces.isEmpty ? nil : .array(interfaces.map(TOMLValue.string)))
        add(["state_directory"], "--state-dir", stateDir.map(TOMLValue.string))
        add(["registration_port"], "--registration-port", registrationPort.map(TOMLValue.integer))
        add(["limits", "maximum_lease"], "--maximum-lease", maximumLease.map(TOMLValue.integer))
        add(["limits", "maximum_records"], "--maximum-records", maximumRecords.map(TOMLValue.integer))
        add(
            ["limits", "maximum_records_per_host"], "--maximum-records-per-host",
            maximumRecordsPerHost.map(TOMLValue.integer))
        add(["advertisement", "metrics"], "--advertise-metrics", advertiseMetrics.map(TOMLValue.string))
        add(["advertisement", "name"], "--advertise-name", advertiseName.map(TOMLValue.string))
        add(["advertisement", "host_name"], "--advertise-host-name", advertiseHostName.map(TOMLValue.string))
        add(["advertisement", "enabled"], "--no-advertise", noAdvertise ? false : nil)
        add(["wake_all_on_exit"], "--wake-all-on-exit", wakeAllOnExit ? true : nil)
        add(["wake", "dry_run"], "--dry-run", dryRun ? true : nil)
        add(["control", "socket"], "--control-socket", controlSocket.map(TOMLValue.string))
        add(["control", "group"], "--control-group", controlGroup.map(TOMLValue.string))
        add(["metrics", "listen"], "--metrics-listen", metricsListen.map(TOMLValue.string))
        add(["log_level"], "--log-level", logLevel.map(TOMLValue.string))
        return overrides
    }

    /// The defaults, then the file, then the environment's `SLEEPPROXY_*` variables, then the options. Throws a
    /// `ConfigError` naming the file and line, the variable or the option, and what is allowed.
    func settings() throws(ConfigError) -> (settings: Settings, fileFound: Bool) {
        let environment = Settings.processEnvironment()
        var settings = Settings(environment: environment)
        let found = try ConfigFile.load(path: config, onto: &settings)
        for override in EnvironmentSettings.overrides(environment) {
            do {
                settings = try ConfigFile.apply(override.value, at: override.key, onto: settings)
            } catch {
                throw ConfigError(key: override.variable, error.message)
            }
        }
        for override in overrides() {
            do {
                settings = try ConfigFile.apply(override.value, at: override.key, onto: settings)
            } catch {
                throw ConfigError(key: override.option, error.message)
            }
        }
        return (settings, found)
    }

    func validate() throws {
        // Usage errors exit with 64 before anything starts; the rest is checked where the file is read.
        do {
            _ = try settings()
        } catch {
            if error.file == nil { throw ValidationError(error.description) }
        }
    }

    func run() throws {
        // Before any thread starts.
        let arenas = AllocatorTuning.limitArenas()
        let context = SettingsContext.system()
        let loaded: (settings: Settings, fileFound: Bool)
        let configuration: DaemonConfiguration
        do {
            loaded = try settings()
            configuration = try loaded.settings.daemonConfiguration(context: context)
        } catch {
            printError("sleepproxyd: \(error)")
            throw ExitCode(1)
        }
        let source = loaded.fileFound ? config : "\(config) (not found: the defaults)"
        let variables = EnvironmentSettings.describe(Settings.processEnvironment())
        if checkConfig {
            for warning in loaded.settings.warnings { printError("sleepproxyd: \(config): warning: \(warning)") }
            let environment = variables.isEmpty ? "" : ", the environment (\(variables.joined(separator: " ")))"
            print(
                "# sleepproxyd \(SleepProxyVersion.string): the configuration in force, from \(source)\(environment) and the options"
            )
            print(loaded.settings.toml(context: context, hidingSecrets: true), terminator: "")
            return
        }

        let level = StderrLogHandler.SharedLevel(loaded.settings.logLevel)
        let logger = Logger(label: "sleepproxyd") { StderrLogHandler(label: $0, sharedLevel: level) }
        logger.info("configuration from \(source)")
        logger.info("memory: \(arenas)")
        if !variables.isEmpty { logger.info("configuration from the environment: \(variables.joined(separator: " "))") }
        for line in loaded.settings.logLines() { logger.info("\(line)") }
        for warning in loaded.settings.warnings { logger.warning("configuration: \(warning)") }
        let notifier = SystemdNotifier()
        do {
            if let container = ContainerNetwork.runtime() {
                // A container on a bridge sees none of the LAN: say so, and refuse, rather than serve nobody.
                logger.info(
                    "in a container (\(container)): the proxy needs the host's network (--network host, network_mode: host) and CAP_NET_RAW, CAP_NET_ADMIN"
                )
                try ContainerNetwork.check(interfaces: configuration.interfaces, container: container)
            }
            let daemon = try Daemon(configuration: configuration, logger: logger)
            daemon.reloadConfiguration = { [self] in
                let reloaded = try settings()
                let next = try reloaded.settings.daemonConfiguration(context: SettingsContext.system())
                for warning in reloaded.settings.warnings { logger.warning("reload: configuration: \(warning)") }
                if reloaded.settings.logLevel != level.level {
                    logger.notice("reload: log level \(reloaded.settings.logLevel)")
                    level.level = reloaded.settings.logLevel
                }
                return next
            }
            daemon.watchdogInterval = notifier.watchdogInterval
            daemon.lifecycleObserver = { event in
                do {
                    try notifier.notify(event)
                } catch {
                    logger.warning("cannot tell systemd: \(error)")
                }
            }
            daemon.run()
        } catch {
            logger.critical("cannot start: \(error)")
            _ = try? notifier.status("cannot start: \(error)")
            throw ExitCode(1)
        }
    }

    private func printError(_ text: String) {
        var bytes = Array((text + "\n").utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}
