import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A service avahi-daemon publishes from a static service file (the `/etc/avahi/services/*.service` format).
public struct AvahiService: Sendable, Hashable {
    /// The instance name, such as `sleeper SSH`; published as `<name>.<type>.local`.
    public var name: String
    /// The service type, such as `_ssh._tcp`.
    public var type: String
    public var port: UInt16
    /// TXT strings in wire order, such as `u=test`.
    public var txt: [String]
    /// The SRV target, such as `host7.local`, when not avahi's own host name.
    public var hostName: String?

    public init(name: String, type: String, port: UInt16, txt: [String] = [], hostName: String? = nil) {
        self.name = name
        self.type = type
        self.port = port
        self.txt = txt
        self.hostName = hostName
    }

    /// The service file's XML.
    var serviceFile: String {
        let records =
            txt.map { "    <txt-record>\(xmlEscaped($0))</txt-record>\n" }.joined()
            + (hostName.map { "    <host-name>\(xmlEscaped($0))</host-name>\n" } ?? "")
        return """
            <?xml version="1.0" standalone="no"?>
            <!DOCTYPE service-group SYSTEM "avahi-service.dtd">
            <service-group>
              <name>\(xmlEscaped(name))</name>
              <service>
                <type>\(xmlEscaped(type))</type>
                <port>\(port)</port>
            \(records)  </service>
            </service-group>

            """
    }
}

/// An avahi-daemon running in one lab host, with its own configuration, its own `/run` and its own system
/// D-Bus; started by ``Lab/startAvahi(on:hostName:services:staticHosts:configuration:)``.
///
/// The avahi tools (`avahi-browse`, `avahi-resolve`) reach this daemon when run through ``run(_:timeout:)``
/// or the helpers built on it, which set `DBUS_SYSTEM_BUS_ADDRESS` to this instance's bus.
public final class AvahiInstance: Sendable {
    public let lab: Lab
    /// The lab host it runs in; nil for an extra host (``extraHost``).
    public var role: Lab.Role? {
        if case .role(let role) = place { role } else { nil }
    }
    /// The extra host it runs in, if it runs in one.
    public var extraHost: ExtraHost? {
        if case .extra(let host) = place { host } else { nil }
    }
    let place: AvahiPlace
    /// The host name asked for in the configuration, without `.local`.
    public let hostName: String
    /// The host name the daemon reported at startup, such as `sleeper.local`; differs from
    /// ``hostName`` plus `.local` only after a name conflict.
    public let announcedHostName: String
    /// Holds the configuration, service files, the bus socket; mounted over `/etc/avahi` for the daemon.
    public let directory: String
    /// `unix:path=<directory>/bus`.
    public let busAddress: String
    /// The avahi-daemon process; its stderr is the daemon's log.
    public let daemon: LabProcess
    /// The dbus-daemon process of the private bus.
    public let bus: LabProcess

    init(
        lab: Lab,
        place: AvahiPlace,
        hostName: String,
        announcedHostName: String,
        directory: String,
        busAddress: String,
        daemon: LabProcess,
        bus: LabProcess
    ) {
        self.lab = lab
        self.place = place
        self.hostName = hostName
        self.announcedHostName = announcedHostName
        self.directory = directory
        self.busAddress = busAddress
        self.daemon = daemon
        self.bus = bus
    }

    /// Everything the daemon has logged so far.
    public var log: String { daemon.stderr }

    /// Whether the daemon is still running.
    public var isRunning: Bool { !daemon.hasExited }

    /// Stops the daemon, then its bus. Graceful is SIGTERM: avahi sends goodbye packets (TTL 0) for everything
    /// it published. Not graceful is SIGKILL: no goodbyes, as when a host suspends. Waits for both to exit.
    public func stop(graceful: Bool) {
        if graceful {
            daemon.terminate(grace: .seconds(5))
        } else {
            daemon.signal(SIGKILL)
            daemon.wait(timeout: .seconds(5))
        }
        bus.terminate(grace: .seconds(2))
    }

    /// Stops the daemon where it is, as the kernel's freezer stops every process for a suspend: it sends nothing
    /// (no goodbyes) and reads nothing until ``thaw()``, then goes on with what happened meanwhile (addresses
    /// gone and back).
    public func freeze() { daemon.signal(SIGSTOP) }

    /// Lets a frozen daemon run again, as at a resume.
    public func thaw() { daemon.signal(SIGCONT) }

    /// ``stop(graceful:)`` off the cooperative thread pool.
    public func stop(graceful: Bool) async {
        _ = try? await runOffCooperativePool { self.stop(graceful: graceful) }
    }

    /// Runs `arguments` in this instance's host with `DBUS_SYSTEM_BUS_ADDRESS` set to its bus.
    public func run(_ arguments: [String], timeout: Duration = .seconds(10)) async throws -> CommandResult {
        try await place.run(lab, ["env", "DBUS_SYSTEM_BUS_ADDRESS=\(busAddress)"] + arguments, timeout: timeout)
    }

    /// `avahi-browse -rptk <type>`: what the daemon knows of `type` (its cache, plus about a second of
    /// querying), resolved. Throws if the tool fails (for example when the daemon is gone).
    public func browse(_ type: String) async throws -> [AvahiBrowseEntry] {
        let result = try await run(["avahi-browse", "--resolve", "--parsable", "--terminate", "--no-db-lookup", type])
        guard result.succeeded else { throw LabError("avahi-browse \(type) in \(place.name) failed: \(result)") }
        return AvahiBrowseEntry.parse(result.stdout)
    }

    /// Browses `type` again and again until `condition` holds for the entries of one browse, at most `timeout`.
    /// Returns those entries.
    public func browse(
        _ type: String,
        within timeout: Duration = .seconds(10),
        until condition: ([AvahiBrowseEntry]) -> Bool
    ) async throws -> [AvahiBrowseEntry] {
        var last: [AvahiBrowseEntry] = []
        do {
            return try await eventually("avahi-browse \(type) in \(place.name)", within: timeout) {
                last = try await browse(type)
                return condition(last) ? last : nil
            }
        } catch let error as TimeoutError {
            throw TimeoutError("\(error); last entries: \(last)")
        }
    }

    /// Starts a continuous `avahi-browse -rpk <type>`, which also reports removals (goodbyes, expiry).
    public func startBrowsing(_ type: String) throws -> AvahiBrowser {
        let browse = ["avahi-browse", "--resolve", "--parsable", "--no-db-lookup", type]
        let process = try place.spawn(lab, ["env", "DBUS_SYSTEM_BUS_ADDRESS=\(busAddress)"] + browse)
        return AvahiBrowser(process: process)
    }

    /// `avahi-resolve -n <name>` (with `-4` or `-6` if `version` is given): the first address found, or `nil`
    /// if avahi reports a failure (a timeout after about 5 seconds when nobody answers).
    public func resolveHostName(_ name: String, version: Lab.IPVersion? = nil) async throws -> AvahiResolution? {
        let family = version.map { $0 == .v4 ? ["-4"] : ["-6"] } ?? []
        let result = try await run(["avahi-resolve"] + family + ["--name", name])
        return try resolution(result, asking: "host name \(name)")
    }

    /// `avahi-resolve -a <address>`: the host name for `address` (reverse lookup), or `nil` if avahi reports a
    /// failure. ``AvahiResolution/address`` is the address, ``AvahiResolution/name`` the host name found.
    public func resolveAddress(_ address: String) async throws -> AvahiResolution? {
        let result = try await run(["avahi-resolve", "--address", address])
        guard let pair = try resolution(result, asking: "address \(address)") else { return nil }
        return AvahiResolution(name: pair.address, address: pair.name)
    }

    /// Parses `first<TAB>second`; `nil` for avahi's own "Failed to resolve" reports.
    private func resolution(_ result: CommandResult, asking what: String) throws -> AvahiResolution? {
        if !result.succeeded || result.stdout.isEmpty {
            if result.stderr.contains("Failed to resolve") { return nil }
            throw LabError("avahi-resolve for \(what) in \(place.name) failed: \(result)")
        }
        let line = result.stdout.split(separator: "\n").first ?? ""
        let fields = line.split(separator: "\t", maxSplits: 1)
        guard fields.count == 2 else { throw LabError("unexpected avahi-resolve output: \(result)") }
        return AvahiResolution(name: String(fields[0]), address: String(fields[1]))
    }
}

/// One line of `avahi-resolve`: a host name and one of its addresses.
public struct AvahiResolution: Sendable, Hashable {
    /// `sleeper.local`.
    public var name: String
    /// `10.77.0.2` or `fe80::77:ff:fe00:2` (link-local addresses come without a scope).
    public var address: String

    public init(name: String, address: String) {
        self.name = name
        self.address = address
    }
}

/// Where an avahi-daemon runs: one of the lab's three hosts or an extra one.
enum AvahiPlace: Sendable {
    case role(Lab.Role)
    case extra(ExtraHost)

    /// `sleeper`, or the extra host's name.
    var name: String {
        switch self {
        case .role(let role): role.rawValue
        case .extra(let host): host.name
        }
    }

    func namespace(_ lab: Lab) -> String {
        switch self {
        case .role(let role): lab.host(role).namespace
        case .extra(let host): host.namespace
        }
    }

    func spawn(_ lab: Lab, _ arguments: [String]) throws -> LabProcess {
        switch self {
        case .role(let role): try lab.spawn(role, arguments)
        case .extra(let host): try lab.spawn(in: host, arguments)
        }
    }

    func run(_ lab: Lab, _ arguments: [String], timeout: Duration) async throws -> CommandResult {
        switch self {
        case .role(let role): try await lab.run(role, arguments, timeout: timeout)
        case .extra(let host): try await host.run(arguments, timeout: timeout)
        }
    }

    func runBlocking(_ lab: Lab, _ arguments: [String], timeout: Duration) throws -> CommandResult {
        switch self {
        case .role(let role):
            return try lab.run(role, arguments, timeout: timeout)
        case .extra(let host):
            guard let ip = Subprocess.which("ip") else { throw LabError(Lab.unsupportedReason ?? "`ip` not found") }
            return try Subprocess.run([ip, "netns", "exec", host.namespace] + arguments, timeout: timeout)
        }
    }
}

extension Lab {
    /// ``startAvahi(on:hostName:services:staticHosts:configuration:startup:)`` in an extra host.
    public func startAvahi(
        on host: ExtraHost,
        hostName: String,
        services: [AvahiService] = [],
        staticHosts: [(name: String, address: String)] = [],
        configuration: [String: [String: String]] = [:],
        startup: Duration = .seconds(10)
    ) async throws -> AvahiInstance {
        try await startAvahi(
            at: .extra(host), hostName: hostName, services: services, staticHosts: staticHosts,
            configuration: configuration, startup: startup)
    }

    /// Starts avahi-daemon in `role`'s namespace as host `hostName` (without `.local`), publishing `services`,
    /// and waits (at most 10 seconds) until it has probed its host name and established every service.
    ///
    /// Each instance gets a directory in ``workDirectory`` with its configuration (mounted over `/etc/avahi` in
    /// a private mount namespace, since avahi reads services only from `/etc/avahi/services`), a fresh tmpfs on
    /// `/run` (so instances do not share `/run/avahi-daemon/pid` and `socket`), and a private dbus-daemon whose
    /// socket is in that directory. The daemon runs `--no-chroot --no-drop-root`, logging to stderr.
    ///
    /// `configuration` adds or overrides settings of `avahi-daemon.conf`: section name to key to value, such as
    /// `["publish": ["publish-aaaa-on-ipv4": "no"]]`. The lab tears everything down; ``AvahiInstance/stop(graceful:)``
    /// stops it earlier. `startup` bounds the wait for every service to be established (thousands take longer).
    public func startAvahi(
        on role: Role,
        hostName: String,
        services: [AvahiService] = [],
        staticHosts: [(name: String, address: String)] = [],
        configuration: [String: [String: String]] = [:],
        startup: Duration = .seconds(10)
    ) async throws -> AvahiInstance {
        try await startAvahi(
            at: .role(role), hostName: hostName, services: services, staticHosts: staticHosts,
            configuration: configuration, startup: startup)
    }

    private func startAvahi(
        at place: AvahiPlace,
        hostName: String,
        services: [AvahiService],
        staticHosts: [(name: String, address: String)],
        configuration: [String: [String: String]],
        startup: Duration
    ) async throws -> AvahiInstance {
        // It waits for the daemon's output, blocking: off the cooperative thread pool.
        try await runOffCooperativePool { [self] in
            let namespace = try place.runBlocking(self, ["ip", "netns", "identify"], timeout: .seconds(5))
            guard namespace.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == place.namespace(self) else {
                throw LabError("refusing to start avahi-daemon: not inside \(place.namespace(self)): \(namespace)")
            }

            let directory = try makeDirectory(prefix: "avahi-\(place.name)-")
            func write(_ text: String, to name: String) throws {
                try text.write(toFile: directory + "/" + name, atomically: false, encoding: .utf8)
            }
            try FileManager.default.createDirectory(atPath: directory + "/services", withIntermediateDirectories: false)
            try write(Self.avahiConfiguration(hostName: hostName, overrides: configuration), to: "avahi-daemon.conf")
            // `/etc/avahi/hosts`: an address and a name per line, published as A (or AAAA) and reverse PTR.
            try write(staticHosts.map { "\($0.address) \($0.name)\n" }.joined(), to: "hosts")
            for (index, service) in services.enumerated() {
                try write(service.serviceFile, to: "services/\(index).service")
            }
            try write(Self.busConfiguration, to: "bus.conf")

            var started: [LabProcess] = []
            do {
                return try launchAvahi(
                    at: place, hostName: hostName, directory: directory, services: services.count,
                    staticHosts: staticHosts.count, startup: startup
                ) {
                    started.append($0)
                }
            } catch {
                for process in started { process.terminate(grace: .zero) }
                throw error
            }
        }
    }

    /// Starts the bus and the daemon for the files in `directory`; `started` learns each process at once, so the
    /// caller can stop them if a later step fails.
    private func launchAvahi(
        at place: AvahiPlace,
        hostName: String,
        directory: String,
        services expectedServices: Int,
        staticHosts expectedHosts: Int = 0,
        startup: Duration = .seconds(10),
        started: (LabProcess) -> Void
    ) throws -> AvahiInstance {
        let deadline = ContinuousClock.now + startup
        let socket = directory + "/bus"
        let bus = try place.spawn(
            self,
            [
                "dbus-daemon", "--config-file=\(directory)/bus.conf", "--nofork", "--nopidfile",
                "--address=unix:path=\(socket)", "--print-address=1",
            ]
        )
        started(bus)
        try Self.waitForOutput(of: bus, "the private D-Bus in \(place.name)", deadline: deadline) {
            $0.stdout.contains("unix:path=")
        }
        let busAddress = "unix:path=\(socket)"

        // Everything after `unshare` runs in a mount namespace of its own, which ends with the daemon.
        let script = """
            set -e
            mount -t tmpfs -o mode=0755,size=1m avahi-run /run
            mkdir /run/avahi-daemon
            mount --bind "$1" /etc/avahi
            exec avahi-daemon --no-chroot --no-drop-root --no-rlimits --no-proc-title -f "$1/avahi-daemon.conf"
            """
        let daemon = try place.spawn(
            self,
            [
                "env", "DBUS_SYSTEM_BUS_ADDRESS=\(busAddress)", "unshare", "--mount", "--propagation", "private",
                "sh", "-c", script, "avahi-daemon", directory,
            ]
        )
        started(daemon)
        var announced = ""
        let startup = "avahi-daemon in \(place.name) to start up"
        try Self.waitForOutput(of: daemon, startup, deadline: deadline) { process in
            let log = process.stderr
            guard let name = Self.announcedHostName(in: log) else { return false }
            announced = name
            return log.components(separatedBy: ") successfully established.").count - 1 >= expectedServices
                && (expectedHosts == 0
                    || log.components(separatedBy: "\" successfully established.").count - 1 >= expectedHosts)
        }
        return AvahiInstance(
            lab: self,
            place: place,
            hostName: hostName,
            announcedHostName: announced,
            directory: directory,
            busAddress: busAddress,
            daemon: daemon,
            bus: bus
        )
    }

    /// The configuration file: one interface, both IP versions, D-Bus required, nothing published but the host's
    /// addresses and the given services, no wide-area DNS-SD.
    private static func avahiConfiguration(hostName: String, overrides: [String: [String: String]]) -> String {
        let defaults: [(section: String, settings: [(key: String, value: String)])] = [
            (
                "server",
                [
                    ("host-name", hostName), ("domain-name", "local"), ("use-ipv4", "yes"), ("use-ipv6", "yes"),
                    ("allow-interfaces", Lab.interfaceName), ("enable-dbus", "yes"), ("disallow-other-stacks", "no"),
                    ("ratelimit-interval-usec", "1000000"), ("ratelimit-burst", "1000"),
                ]
            ),
            ("wide-area", [("enable-wide-area", "no")]),
            (
                "publish",
                [
                    ("publish-addresses", "yes"), ("publish-hinfo", "no"), ("publish-workstation", "no"),
                    ("publish-domain", "no"), ("publish-aaaa-on-ipv4", "yes"), ("publish-a-on-ipv6", "no"),
                ]
            ),
            ("reflector", [("enable-reflector", "no")]),
            ("rlimits", []),
        ]
        var text = ""
        var sections = defaults.map(\.section)
        sections += overrides.keys.filter { !sections.contains($0) }.sorted()
        for section in sections {
            var overriding = overrides[section] ?? [:]
            text += "[\(section)]\n"
            for (key, value) in defaults.first(where: { $0.section == section })?.settings ?? [] {
                text += "\(key)=\(overriding.removeValue(forKey: key) ?? value)\n"
            }
            for key in overriding.keys.sorted() {
                text += "\(key)=\(overriding[key]!)\n"
            }
        }
        return text
    }

    /// A system-type bus that lets root own and call anything; only avahi and its tools use it.
    private static let busConfiguration = """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
          "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <auth>EXTERNAL</auth>
          <listen>unix:tmpdir=/tmp</listen>
          <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_destination="*"/>
            <allow receive_sender="*"/>
          </policy>
        </busconfig>

        """

    /// `sleeper.local` from `Server startup complete. Host name is sleeper.local. Local service cookie is …`.
    private static func announcedHostName(in log: String) -> String? {
        let marker = "Server startup complete. Host name is "
        guard let start = log.range(of: marker)?.upperBound else { return nil }
        guard let end = log[start...].range(of: ". Local service cookie")?.lowerBound else { return nil }
        return String(log[start..<end])
    }

    /// Polls `process` until `condition` holds; throws if it exits first or `deadline` passes.
    private static func waitForOutput(
        of process: LabProcess,
        _ what: String,
        deadline: ContinuousClock.Instant,
        until condition: (LabProcess) -> Bool
    ) throws {
        while !condition(process) {
            if process.hasExited {
                throw LabError("\(what): it exited. stdout: \(process.stdout) stderr: \(process.stderr)")
            }
            if ContinuousClock.now >= deadline {
                throw TimeoutError("timed out waiting for \(what). stdout: \(process.stdout) stderr: \(process.stderr)")
            }
            usleep(20_000)
        }
    }

    /// A new directory `<workDirectory>/<prefix>XXXXXX`.
    private func makeDirectory(prefix: String) throws -> String {
        var template = Array("\(workDirectory)/\(prefix)XXXXXX".utf8CString)
        guard let directory = mkdtemp(&template) else {
            throw LabError("cannot create a directory in \(workDirectory): \(String(cString: strerror(errno)))")
        }
        return String(cString: directory)
    }
}

private func xmlEscaped(_ text: String) -> String {
    var escaped = ""
    for character in text {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&apos;"
        default: escaped.append(character)
        }
    }
    return escaped
}
