import ArgumentParser
import Logging
import SleepProxyCore
import SleepProxyDaemon

@main
struct SleepProxyd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleepproxyd",
        abstract: "Bonjour Sleep Proxy server: holds the mDNS records of sleeping hosts and wakes them on demand.",
        version: SleepProxyVersion.string
    )

    @Option(name: .long, help: "The network interface to serve (e.g. eth0).")
    var interface: String

    @Option(name: .long, help: "Where the lease store lives; created if missing.")
    var stateDir: String

    @Option(name: .long, help: "UDP port for registrations (clients learn it from the SRV record).")
    var registrationPort: UInt16 = DaemonConfiguration.defaultRegistrationPort

    @Option(name: .long, help: "The longest lease granted, in seconds (at most 86400).")
    var maximumLease: UInt32 = 86_400

    @Option(name: .long, help: "Records all sleeping hosts together may hold.")
    var maximumRecords: Int = 10_000

    @Option(name: .long, help: "Records one sleeping host may hold.")
    var maximumRecordsPerHost: Int = 1_000

    @Option(name: .long, help: "Log level: debug, info, notice, warning or error.")
    var logLevel: String = "info"

    func validate() throws {
        guard registrationPort != 0 else { throw ValidationError("--registration-port must not be 0") }
        guard maximumLease > 0, maximumLease <= CoreConfiguration.leaseCeiling else {
            throw ValidationError("--maximum-lease must be between 1 and \(CoreConfiguration.leaseCeiling) seconds")
        }
        guard maximumRecords > 0, maximumRecordsPerHost > 0 else {
            throw ValidationError("--maximum-records and --maximum-records-per-host must be positive")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let logger = Logger(label: "sleepproxyd") { StderrLogHandler(label: $0, level: level) }
        let configuration = DaemonConfiguration(
            interface: interface, stateDirectory: stateDir, registrationPort: registrationPort,
            core: CoreConfiguration(
                maximumLease: maximumLease, maximumRecordsPerOwner: maximumRecordsPerHost,
                maximumRecordsTotal: maximumRecords))
        do {
            let daemon = try Daemon(configuration: configuration, logger: logger)
            daemon.run()
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
    }
}
