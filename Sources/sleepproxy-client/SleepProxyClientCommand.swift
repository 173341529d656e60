import ArgumentParser
import SleepProxyClient
import SleepProxyClientCore
import SleepProxyControl

#if canImport(Glibc)
    import Glibc
#endif

/// `sleepproxy-client`: registers this host with a Bonjour Sleep Proxy before it sleeps, and tells the proxies it
/// is back after it wakes, as a Mac does. systemd runs `register` and `return` around every suspend through
/// `sleepproxy-client.service`.
@main
struct SleepProxyClientCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleepproxy-client",
        abstract: "Let this host sleep behind a Bonjour Sleep Proxy, as a Mac does.",
        discussion: """
            Before a suspend, register finds the sleep proxies on each wired interface (mDNS browse for \
            _sleep-proxy._udp), learns this host's records as the LAN sees them (its services, host name and \
            addresses, from its own mDNS responder, which also answers its one-shot queries directly, so that a \
            proxy still answering for the host cannot hide them), and registers them with the best proxy as a Mac \
            ranks them. \
            The proxy then answers for the host, takes over its addresses, and wakes it with a magic packet when \
            someone connects to one of its services. After the wake, return announces the host's records with a \
            new sequence number, and every proxy lets go of it at once.

            The settings come from \(ClientConfig.defaultPath) (see sleepproxy-client.toml(5)); the options \
            below override it.
            """,
        version: SleepProxyVersion.string,
        subcommands: [Register.self, Return.self, Status.self]
    )
}

/// Options every command takes.
struct ClientOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The config file.", valueName: "path"))
    var config: String?

    @Option(
        name: .customLong("interface"),
        help: ArgumentHelp("An interface to work on, instead of the config's (repeatable).", valueName: "name"))
    var interfaces: [String] = []

    @Option(name: .long, help: ArgumentHelp("Where the sequence number and registrations are kept.", valueName: "path"))
    var stateDirectory: String?

    @Flag(
        name: .long,
        help: "Do not check Wake-on-LAN (virtual machines whose host wakes them, tests): wake_on_lan = \"skip\".")
    var skipWakeOnLANCheck = false

    @Flag(name: .long, help: "Log each proxy tried and each problem sending.")
    var verbose = false

    func load() throws -> ClientConfig {
        var settings: ClientConfig
        do {
            settings = try ClientConfig.load(path: config ?? ClientConfig.defaultPath, required: config != nil)
        } catch {
            // A config error is not a usage error: no usage text after it.
            ClientLog.error(error.description)
            throw ExitCode(ClientError.Kind.usage.status)
        }
        if !interfaces.isEmpty { settings.interfaces = interfaces }
        if let stateDirectory {
            guard stateDirectory.hasPrefix("/") else {
                throw ValidationError("--state-directory must be an absolute path, not \"\(stateDirectory)\"")
            }
            settings.stateDirectory = stateDirectory
        }
        if skipWakeOnLANCheck { settings.wakeOnLAN = .skip }
        ClientLog.verbose = verbose
        return settings
    }
}

extension SleepProxyClientCommand {
    struct Register: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register this host with the best sleep proxy on each interface (before a suspend).",
            discussion: """
                Exit status: 0 registered (on at least one interface); 2 no sleep proxy seen; 3 every proxy \
                tried was silent or refused, or the time ran out (on one interface at least, and none \
                registered); 4 Wake-on-LAN is off, asks for a SecureOn password, or is missing; 5 nothing to \
                register (no mDNS responder on this host answered, or it publishes no service of this host); 64 \
                usage or config error; 69 no usable interface; 71 a socket could not be opened; 73 the state \
                directory could not be used. Each interface's outcome is one log line.
                """)

        @OptionGroup var options: ClientOptions

        func run() throws {
            let status = SleepClient(config: try options.load()).register()
            if status != 0 { throw ExitCode(status) }
        }
    }

    struct Return: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Tell the proxies this host is back (after a resume): they let go of it at once.",
            discussion: """
                Advances the sequence number and announces the records registered before the sleep on mDNS with \
                the OWNER option, twice, a second apart, each time with a gratuitous ARP and an unsolicited Neighbour \
                Advertisement for each of the interface's addresses (they need CAP_NET_RAW; without it a warning \
                says they did not go). Exit status: 0 done (or nothing was registered); \
                69 an interface has no carrier or no address 10 s after the wake; 71 or 73 as for register.
                """)

        @OptionGroup var options: ClientOptions

        func run() throws {
            let status = SleepClient(config: try options.load()).returnFromSleep()
            if status != 0 { throw ExitCode(status) }
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the proxies seen, the one register would choose, the records, and Wake-on-LAN.",
            discussion: """
                Changes nothing. --json prints an object with sequence, stateDirectory and interfaces, each with \
                name, mac, addresses, wakeOnLAN (on, off, enable, skip or unavailable), wakeOnLANDetail, \
                hostName, proxies (name, metric, features, address, port, choice, excluded; in the order register \
                tries them, then the others, the excluded ones last), records (name, \
                type, ttl, unique, data), services, and lastRegistration (proxy, address, port, lease, \
                registeredAt, expiresAt, sequence, messages).
                """)

        @OptionGroup var options: ClientOptions

        @Flag(name: .long, help: "Print the report as JSON.")
        var json = false

        func run() throws {
            switch SleepClient(config: try options.load()).status() {
            case .success(let report):
                print(json ? report.json() : report.text, terminator: json ? "\n" : "")
            case .failure(let error):
                if json { print(ClientStatusReport.errorJSON(error.description)) }
                ClientLog.error(error.description)
                throw ExitCode(error.kind.status)
            }
        }
    }
}
