import ArgumentParser
import Logging
import SleepProxyCore
import SleepProxyDaemon

#if canImport(Glibc)
    import Glibc
#endif

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

    @Option(
        name: .long,
        help:
            "The numbers clients rank sleep proxies by, AA-BB-CC-DD[.F] (intent, portability, marginal and total power; lower is better)."
    )
    var advertiseMetrics: String = "20-30-50-73"

    @Option(name: .long, help: "The name shown after the numbers (default: this host's name).")
    var advertiseName: String?

    @Option(name: .long, help: "The host name the proxy's SRV record points at (default: HOSTNAME-sleepproxy).")
    var advertiseHostName: String?

    @Flag(name: .long, help: "Do not advertise the proxy under _sleep-proxy._udp.")
    var noAdvertise = false

    @Flag(name: .long, help: "On a clean stop, wake every held host instead of keeping the leases for the next start.")
    var wakeAllOnExit = false

    @Option(name: .long, help: "The control socket sleepproxyctl talks to.")
    var controlSocket: String = "/run/sleepproxy/control.sock"

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
        _ = try advertisement()
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    /// The advertisement from the options; throws a `ValidationError` naming what is wrong.
    func advertisement() throws -> AdvertisementConfiguration? {
        guard !noAdvertise else { return nil }
        let usage = "--advertise-metrics must look like 20-30-50-73 or 20-30-50-73.1, not \(advertiseMetrics)"
        let parts = advertiseMetrics.split(separator: ".", omittingEmptySubsequences: false)
        let numbers = parts[0].split(separator: "-", omittingEmptySubsequences: false).compactMap { Int($0) }
        guard parts.count <= 2, numbers.count == 4, parts[0].split(separator: "-").count == 4 else {
            throw ValidationError(usage)
        }
        var features: Int?
        if parts.count == 2 {
            guard let digit = Int(parts[1]) else { throw ValidationError(usage) }
            features = digit
        }
        let host = Self.systemHostName()
        let configuration = AdvertisementConfiguration(
            intent: numbers[0], portability: numbers[1], marginalPower: numbers[2], totalPower: numbers[3],
            features: features, name: advertiseName ?? host, hostName: advertiseHostName ?? "\(host)-sleepproxy")
        do {
            try configuration.validate()
        } catch {
            throw ValidationError(error.description)
        }
        return configuration
    }

    static func systemHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "linux" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(name.split(separator: ".").first ?? "linux")
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let logger = Logger(label: "sleepproxyd") { StderrLogHandler(label: $0, level: level) }
        var configuration = DaemonConfiguration(
            interfaces: [interface], stateDirectory: stateDir, registrationPort: registrationPort,
            core: CoreConfiguration(
                maximumLease: maximumLease, maximumRecordsPerOwner: maximumRecordsPerHost,
                maximumRecordsTotal: maximumRecords),
            advertisement: try advertisement(), controlSocket: controlSocket)
        configuration.wakeAllOnExit = wakeAllOnExit
        do {
            let daemon = try Daemon(configuration: configuration, logger: logger)
            daemon.run()
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
    }
}
