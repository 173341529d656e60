import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A failure while building, using or tearing down a lab.
public struct LabError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// A three-host Ethernet made of Linux network namespaces: `proxy`, `sleeper` and `waker`, each with an `eth0`
/// veth into a Linux bridge that lives in a fourth namespace. See ``LabHost`` for the fixed addresses.
///
/// Names are unique per lab (`splab-<pid>-<random>-<host>`), so labs may run concurrently. Interfaces are
/// created directly inside the lab's namespaces; nothing touches the machine's own namespace.
///
/// Always tear a lab down: use ``withLab(isolation:_:)``, or call ``teardown()`` (safe to call twice).
/// Captures and sockets opened in a lab namespace must be closed too, or the namespace lives on unnamed.
public final class Lab: Sendable {
    /// The interface name inside each host.
    public static let interfaceName = "eth0"
    /// An IPv4 address on the lab's subnet that nobody owns; hosts use it as their default gateway.
    public static let gatewayIPv4 = "10.77.0.254"
    /// Prefix of every namespace name a lab creates.
    public static let namePrefix = "splab-"

    /// `splab-<pid>-<random>-`.
    public let prefix: String
    /// The namespace holding the bridge `br0`.
    public let bridgeNamespace: String
    /// Where spawned processes write their output; removed at teardown.
    public let workDirectory: String

    private let state = Locked(State())

    private struct State: Sendable {
        var namespaces: [String] = []
        var processes: [LabProcess] = []
        var tornDown = false
    }

    /// Serializes `ip netns add/delete` within this process: the first `add` sets up the `/run/netns` mount.
    private static let namespaceLock = NSLock()

    // MARK: Support

    /// Why labs cannot run here, or `nil` if they can.
    public static let unsupportedReason: String? = {
        let uid = geteuid()
        if uid != 0 {
            return "lab tests need root to create network namespaces; running as uid \(uid)"
        }
        if ipPath == nil {
            return "lab tests need the `ip` command from iproute2 (apt-get install iproute2)"
        }
        if access("/proc/thread-self/ns/net", R_OK) != 0 {
            return "lab tests need a kernel with network namespaces (/proc/thread-self/ns/net is missing)"
        }
        return nil
    }()

    /// Whether labs can be built here: root, `ip` present, network namespaces available.
    public static var isSupported: Bool { unsupportedReason == nil }

    /// Of `tools`, those not found in `PATH` or the sbin directories.
    public static func missingTools(_ tools: [String]) -> [String] {
        tools.filter { Subprocess.which($0) == nil }
    }

    private static let ipPath: String? = Subprocess.which("ip")

    // MARK: Life cycle

    private init(prefix: String) throws {
        self.prefix = prefix
        self.bridgeNamespace = prefix + "br"
        var template = Array("/tmp/\(prefix)XXXXXX".utf8CString)
        guard let directory = mkdtemp(&template) else {
            throw LabError("cannot create a work directory: \(String(cString: strerror(errno)))")
        }
        self.workDirectory = String(cString: directory)
    }

    deinit {
        teardown()
    }

    /// Builds a new lab. Removes what crashed earlier runs left behind first (namespaces whose process is gone).
    public static func create() throws -> Lab {
        if let unsupportedReason { throw LabError(unsupportedReason) }
        removeStaleLabs()
        let random = String(UInt32.random(in: 0..<0x100_0000), radix: 16)
        let lab = try Lab(prefix: "\(namePrefix)\(getpid())-\(random)-")
        do {
            try lab.build()
        } catch {
            lab.teardown()
            throw error
        }
        return lab
    }

    /// Builds a lab, runs `body` with it and tears it down on every path.
    public static func withLab<Result>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Lab) async throws -> Result
    ) async throws -> Result {
        // Labs run real daemons with real timeouts; too many at once on a small machine and they miss them.
        await LabSlots.shared.acquire()
        // Building and tearing down block for a few hundred milliseconds; keep that off the cooperative pool.
        let lab: Lab
        do {
            lab = try await offloaded { try create() }
        } catch {
            await LabSlots.shared.release()
            throw error
        }
        do {
            let result = try await body(lab)
            await offloaded { lab.teardown() }
            await LabSlots.shared.release()
            return result
        } catch {
            await offloaded { lab.teardown() }
            await LabSlots.shared.release()
            throw error
        }
    }

    /// Kills spawned processes (and anything else left in the lab's namespaces), deletes the namespaces (which
    /// removes the bridge and veths) and the work directory. Safe to call more than once.
    public func teardown() {
        let (namespaces, processes) = state.withLock { state -> ([String], [LabProcess]) in
            guard !state.tornDown else { return ([], []) }
            state.tornDown = true
            return (state.namespaces, state.processes)
        }
        for process in processes { process.signal(SIGTERM) }
        for process in processes where process.wait(timeout: .seconds(1)) == nil {
            process.terminate(grace: .zero)
        }
        for namespace in namespaces {
            Self.killProcesses(inNamespace: namespace)
        }
        Self.namespaceLock.withLock {
            for namespace in namespaces.reversed() {
                _ = try? Self.ip(["netns", "delete", namespace])
            }
        }
        try? FileManager.default.removeItem(atPath: workDirectory)
    }

    /// Records a namespace made outside `build()`, so that teardown deletes it.
    func adopt(namespace: String) {
        state.withLock { $0.namespaces.append(namespace) }
    }

    static func withNamespaceLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        try namespaceLock.withLock(body)
    }

    // MARK: Hosts

    /// The host playing `role`.
    public func host(_ role: Role) -> LabHost {
        LabHost(role: role, namespace: prefix + role.rawValue)
    }

    /// All three hosts.
    public var hosts: [LabHost] { Role.allCases.map(host) }

    /// Puts `role` to sleep as far as the network can tell: removes all of its addresses (link-local too) while
    /// its link stays up, so its kernel answers neither ARP nor ND. Its routes go with the addresses.
    public func sleep(_ role: Role) throws {
        let host = host(role)
        try Self.ip(["-n", host.namespace, "address", "flush", "dev", host.interfaceName])
        try Self.ip(["-n", host.namespace, "neighbour", "flush", "dev", host.interfaceName])
    }

    /// Wakes `role`: adds its addresses again (`nodad`, so they are usable at once), the multicast route and
    /// the default route. Also used to configure hosts when the lab is built.
    public func wake(_ role: Role) throws {
        let host = host(role)
        let namespace = host.namespace
        let device = host.interfaceName
        try Self.ip(["-n", namespace, "address", "replace", "\(host.ipv4)/\(host.ipv4PrefixLength)", "dev", device])
        for address in [host.ipv6LinkLocal, host.ula] {
            try Self.ip([
                "-n", namespace, "address", "replace", "\(address)/\(host.ipv6PrefixLength)", "dev", device, "nodad",
            ])
        }
        try Self.ip(["-n", namespace, "route", "replace", "224.0.0.0/4", "dev", device])
        try Self.ip(["-n", namespace, "route", "replace", "default", "via", Self.gatewayIPv4, "dev", device])
    }

    // MARK: Running things inside hosts

    /// Runs `arguments` inside `role`'s namespace (`ip netns exec`) and waits for it, up to `timeout`.
    ///
    /// Blocks the calling thread; from async code the `async` overload is chosen, which runs it off the
    /// cooperative thread pool.
    public func run(_ role: Role, _ arguments: [String], timeout: Duration = .seconds(20)) throws -> CommandResult {
        try Subprocess.run(try execArguments(role, arguments), timeout: timeout)
    }

    /// Runs `arguments` inside `role`'s namespace and waits for it, up to `timeout`, without blocking the
    /// cooperative thread pool.
    public func run(
        _ role: Role,
        _ arguments: [String],
        timeout: Duration = .seconds(20)
    ) async throws -> CommandResult {
        let argv = try execArguments(role, arguments)
        return try await offloaded { try Subprocess.run(argv, timeout: timeout) }
    }

    /// Runs `arguments` in the test process's own namespaces, not in a lab host; for inspecting or managing
    /// namespaces (`ip netns list`). Never use it to send traffic.
    public static func runInTestNamespace(
        _ arguments: [String],
        timeout: Duration = .seconds(20)
    ) throws -> CommandResult {
        guard let executable = arguments.first.flatMap(Subprocess.which) else {
            throw LabError("command not found: \(arguments.first ?? "(none)")")
        }
        return try Subprocess.run([executable] + arguments.dropFirst(), timeout: timeout)
    }

    /// Starts a long-running `arguments` inside `role`'s namespace. Its output goes to files in
    /// ``workDirectory``; the lab kills it (and its process group) at teardown.
    public func spawn(_ role: Role, _ arguments: [String]) throws -> LabProcess {
        try track(try execArguments(role, arguments), as: arguments) { "\($0)-\(role.rawValue)" }
    }

    /// Starts a long-running `arguments` inside the added host `host`, as ``spawn(_:_:)`` does in a lab host.
    public func spawn(in host: ExtraHost, _ arguments: [String]) throws -> LabProcess {
        guard let ip = Self.ipPath else { throw LabError(Self.unsupportedReason ?? "`ip` not found") }
        guard !arguments.isEmpty else { throw LabError("no command given to run in \(host.name)") }
        return try track([ip, "netns", "exec", host.namespace] + arguments, as: arguments) { "\($0)-\(host.name)" }
    }

    /// Starts a long-running `arguments` in the test process's own namespaces rather than in a lab host, for a
    /// program that must start there and is pointed at a lab host itself (`systemd-nspawn
    /// --network-namespace-path=`). Its output goes to `label.out` and `label.err` in ``workDirectory``; the lab
    /// kills it (and its process group) at teardown. Never use it to send traffic.
    public func spawnInTestNamespace(_ arguments: [String], label: String) throws -> LabProcess {
        guard let executable = arguments.first.flatMap(Subprocess.which) else {
            throw LabError("command not found: \(arguments.first ?? "(none)")")
        }
        return try track([executable] + arguments.dropFirst(), as: arguments) { _ in label }
    }

    /// Starts `argv`, its output in files of ``workDirectory`` named by `name` (given the number of processes
    /// started so far), and keeps it for teardown.
    private func track(_ argv: [String], as arguments: [String], name: (Int) -> String) throws -> LabProcess {
        try state.withLock { state in
            guard !state.tornDown else { throw LabError("cannot spawn \(arguments): the lab is torn down") }
            let base = "\(workDirectory)/\(name(state.processes.count))"
            let process = LabProcess(
                pid: try Subprocess.spawn(argv, stdout: .file(base + ".out"), stderr: .file(base + ".err")),
                arguments: arguments,
                stdoutPath: base + ".out",
                stderrPath: base + ".err"
            )
            state.processes.append(process)
            return process
        }
    }

    /// Runs `body` with the calling thread switched into `role`'s network namespace, then switches back.
    ///
    /// Sockets and capture handles created inside stay in that namespace for their whole life. `body` must
    /// not hand work to other threads and expect them to be in the namespace.
    public func withNamespace<Result>(_ role: Role, _ body: () throws -> Result) throws -> Result {
        try Self.withNamespace(named: host(role).namespace, body)
    }

    /// Runs `body` with the calling thread switched into the network namespace `name` (from `/run/netns`).
    public static func withNamespace<Result>(named name: String, _ body: () throws -> Result) throws -> Result {
        let target = open("/run/netns/\(name)", O_RDONLY | O_CLOEXEC)
        guard target >= 0 else {
            throw LabError("cannot open network namespace \(name): \(String(cString: strerror(errno)))")
        }
        defer { close(target) }
        let original = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        guard original >= 0 else {
            throw LabError("cannot open this thread's network namespace: \(String(cString: strerror(errno)))")
        }
        defer { close(original) }
        guard setNetworkNamespace(target) == 0 else {
            throw LabError("cannot enter network namespace \(name): \(String(cString: strerror(errno)))")
        }
        defer {
            if setNetworkNamespace(original) != 0 {
                // Leaving the thread in the lab's namespace would misplace everything it runs later.
                fatalError("cannot return to the original network namespace: \(String(cString: strerror(errno)))")
            }
        }
        return try body()
    }

    // MARK: Building

    private func build() throws {
        let hostNamespaces = Role.allCases.map { host($0).namespace }
        try Self.namespaceLock.withLock {
            for namespace in [bridgeNamespace] + hostNamespaces {
                try Self.ip(["netns", "add", namespace])
                state.withLock { $0.namespaces.append(namespace) }
            }
        }
        let bridge = bridgeNamespace
        try Self.ip(["-n", bridge, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])
        // One `ip link set` applies `up` before `addrgenmode`, so the kernel would still make a link-local
        // address: set the mode first, on its own.
        try Self.ip(["-n", bridge, "link", "set", "br0", "addrgenmode", "none"])
        try Self.ip(["-n", bridge, "link", "set", "br0", "up"])
        for role in Role.allCases {
            let host = host(role)
            let port = "p-\(role.rawValue)"
            try Self.ip([
                "-n", bridge, "link", "add", port, "type", "veth",
                "peer", "name", host.interfaceName, "netns", host.namespace,
            ])
            try Self.ip(["-n", bridge, "link", "set", port, "addrgenmode", "none"])
            try Self.ip(["-n", bridge, "link", "set", port, "master", "br0", "up"])
            try Self.ip(["-n", host.namespace, "link", "set", "lo", "up"])
            try Self.ip([
                "-n", host.namespace, "link", "set", host.interfaceName,
                "address", host.macString, "addrgenmode", "none",
            ])
            // No router solicitations (nobody answers them) and no DAD, so addresses are usable at once even
            // when a test adds them without `nodad`.
            try withNamespace(role) {
                try Self.writeSysctl("net/ipv6/conf/\(host.interfaceName)/accept_ra", "0")
                try Self.writeSysctl("net/ipv6/conf/\(host.interfaceName)/accept_dad", "0")
            }
            try Self.ip(["-n", host.namespace, "link", "set", host.interfaceName, "up"])
            try wake(role)
        }
    }

    /// Writes `/proc/sys/<key>` for the calling thread's network namespace.
    static func writeSysctl(_ key: String, _ value: String) throws {
        let path = "/proc/sys/" + key
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LabError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array((value + "\n").utf8)
        guard write(fd, bytes, bytes.count) == bytes.count else {
            throw LabError("cannot write \(value) to \(path): \(String(cString: strerror(errno)))")
        }
    }

    private func execArguments(_ role: Role, _ arguments: [String]) throws -> [String] {
        guard let ip = Self.ipPath else { throw LabError(Self.unsupportedReason ?? "`ip` not found") }
        guard !arguments.isEmpty else { throw LabError("no command given to run in \(role.rawValue)") }
        return [ip, "netns", "exec", host(role).namespace] + arguments
    }

    @discardableResult
    static func ip(_ arguments: [String]) throws -> CommandResult {
        guard let ip = ipPath else { throw LabError(unsupportedReason ?? "`ip` not found") }
        let result = try Subprocess.run([ip] + arguments, timeout: .seconds(20))
        guard result.succeeded else {
            throw LabError("ip \(arguments.joined(separator: " ")) failed: \(result)")
        }
        return result
    }

    // MARK: Clean-up

    /// Kills every process still inside `namespace`.
    private static func killProcesses(inNamespace namespace: String) {
        guard let result = try? ip(["netns", "pids", namespace]) else { return }
        for pid in result.stdout.split(whereSeparator: \.isWhitespace).compactMap({ pid_t($0) }) {
            _ = kill(pid, SIGKILL)
        }
    }

    /// Deletes namespaces and work directories of labs whose process no longer exists.
    static func removeStaleLabs() {
        let namespaces = (try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? []
        let directories = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        namespaceLock.withLock {
            for namespace in namespaces where isStale(namespace) {
                killProcesses(inNamespace: namespace)
                _ = try? ip(["netns", "delete", namespace])
            }
        }
        for directory in directories where isStale(directory) {
            try? FileManager.default.removeItem(atPath: "/tmp/" + directory)
        }
    }

    /// Whether `name` is `splab-<pid>-…` for a pid that is not running.
    private static func isStale(_ name: String) -> Bool {
        guard name.hasPrefix(namePrefix) else { return false }
        let digits = name.dropFirst(namePrefix.count).prefix(while: \.isNumber)
        guard let pid = pid_t(digits), pid > 0 else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}

/// `setns(fd, CLONE_NEWNET)`; glibc declares `setns` only under `_GNU_SOURCE`, which the Glibc module lacks.
private func setNetworkNamespace(_ descriptor: Int32) -> Int32 {
    setnsFunction(descriptor, cloneNewNet)
}

private let cloneNewNet: Int32 = 0x4000_0000

private let setnsFunction: @convention(c) (Int32, Int32) -> Int32 = {
    guard let symbol = dlsym(nil, "setns") else {
        fatalError("glibc has no setns: \(String(cString: dlerror()))")
    }
    return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
}()

/// Runs blocking `work` on a Dispatch thread, so the cooperative pool stays free for the tests' own tasks.
private func offloaded<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

private func offloaded(_ work: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            work()
            continuation.resume()
        }
    }
}
