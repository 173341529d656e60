import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A Debian 12 system booted under its own systemd with `systemd-nspawn --boot`, in a lab host's network
/// namespace: what a user's machine is when the package is installed on it, with systemd as PID 1, journald,
/// the unit's sandbox and dpkg's maintainer scripts.
///
/// The root is made once with `debootstrap` (`scripts/make-boot-root.sh`, cached in ``rootDirectory``) and booted
/// with `--volatile=overlay`: what the system writes goes to memory and is gone after it stops, so every boot
/// starts from the same clean system. The container shares the lab host's network namespace, so it sees that
/// host's `eth0`, and the lab's other hosts reach it as they reach that host.
///
/// Where PID 1 is not systemd (as on the test machines), nspawn can neither register the machine nor make a
/// scope for it: `--register=no --keep-unit`, and the container runs in a cgroup of its own that this type makes
/// and removes. nspawn drops `CAP_NET_ADMIN` and `CAP_NET_RAW` by default; the daemon needs both.
///
/// Commands run inside with `nsenter --all` into the container's PID 1, with a clean environment. Files go in
/// through ``shared``, a directory of the test's bound read-only at ``sharedMountPoint``. Never call anything
/// that stops the system from outside it: ``shutdown()`` powers the container off from inside.
public final class BootedSystem: Sendable {
    /// The cached root; `SLEEPPROXY_BOOT_ROOT` chooses another.
    public static var rootDirectory: String {
        ProcessInfo.processInfo.environment["SLEEPPROXY_BOOT_ROOT"]
            ?? "/var/cache/sleepproxy-tests/bookworm-root"
    }
    /// Where ``shared`` appears inside the container.
    public static let sharedMountPoint = "/srv/boot-test"

    /// The machine name, also the name of its cgroups.
    public let name: String
    /// A host directory the container sees read-only at ``sharedMountPoint``.
    public let shared: String
    /// nspawn's process (in the test's namespaces); its output is the container's console.
    public let nspawn: LabProcess
    /// The container's PID 1 (systemd), as the test's PID namespace numbers it.
    public let initPID: Int32
    private let cgroups: [String]

    /// Why a system cannot be booted here, or nil. Labs must be supported too (``Lab/unsupportedReason``).
    public static var unsupportedReason: String? {
        let missing = Lab.missingTools(["systemd-nspawn", "nsenter", "debootstrap"])
        if !missing.isEmpty {
            return
                "the boot test needs \(missing.joined(separator: ", ")) (apt-get install systemd-container debootstrap)"
        }
        if cgroupRoots().isEmpty {
            return "the boot test needs a cgroup2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified"
        }
        return nil
    }

    /// The cgroup hierarchies a container's cgroup is made in: on a hybrid layout (cgroup v1 with a named systemd
    /// hierarchy, as on the test machines) both the named one and the cgroup2 one; on a pure cgroup2 layout, that.
    private static func cgroupRoots() -> [String] {
        if access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0 {
            return ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"].filter {
                access($0 + "/cgroup.procs", F_OK) == 0
            }
        }
        return access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? ["/sys/fs/cgroup"] : []
    }

    /// Makes (or finds up to date) the cached root with the repository's script; minutes the first time.
    public static func prepareRoot(repository: String) async throws {
        let script = repository + "/scripts/make-boot-root.sh"
        let result = try await runOffCooperativePool {
            try Subprocess.run(["/bin/bash", script, rootDirectory], timeout: .seconds(900))
        }
        guard result.succeeded else { throw LabError("\(script) \(rootDirectory) failed: \(result)") }
    }

    private init(name: String, shared: String, nspawn: LabProcess, initPID: Int32, cgroups: [String]) {
        self.name = name
        self.shared = shared
        self.nspawn = nspawn
        self.initPID = initPID
        self.cgroups = cgroups
    }

    /// Boots the cached root in `role`'s network namespace of `lab`, runs `body` with the running system and
    /// powers it off on every path.
    public static func withBooted<Result>(
        in lab: Lab, role: Lab.Role = .proxy, isolation: isolated (any Actor)? = #isolation,
        _ body: (BootedSystem) async throws -> Result
    ) async throws -> Result {
        let system = try await boot(in: lab, role: role)
        do {
            let result = try await body(system)
            await system.shutdown()
            return result
        } catch {
            await system.shutdown()
            throw error
        }
    }

    private static func boot(in lab: Lab, role: Lab.Role) async throws -> BootedSystem {
        if let unsupportedReason { throw LabError(unsupportedReason) }
        let name = "sp-boot-\(getpid())-\(String(UInt32.random(in: 0..<0x10000), radix: 16))"
        let shared = lab.workDirectory + "/" + name
        guard mkdir(shared, 0o755) == 0 else {
            throw LabError("cannot create \(shared): \(String(cString: strerror(errno)))")
        }
        // A cgroup of its own in each hierarchy: nspawn without a systemd host puts itself and the container
        // below the cgroup it starts in, and two containers started from the same one would share it.
        let cgroups = cgroupRoots().map { $0 + "/" + name }
        for cgroup in cgroups where mkdir(cgroup, 0o755) != 0 {
            throw LabError("cannot create the cgroup \(cgroup): \(String(cString: strerror(errno)))")
        }
        let moveIntoCgroups = cgroups.map { "echo $$ > \($0)/cgroup.procs" }.joined(separator: " && ")
        let arguments = [
            "/bin/sh", "-c", "\(moveIntoCgroups) && exec \"$@\"", "sh",
            "/usr/bin/env", "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1", "systemd-nspawn", "--boot",
            "--directory=\(rootDirectory)", "--volatile=overlay", "--machine=\(name)",
            "--network-namespace-path=/run/netns/\(lab.host(role).namespace)", "--register=no", "--keep-unit",
            "--capability=CAP_NET_ADMIN,CAP_NET_RAW", "--console=passive", "--quiet", "--link-journal=no",
            "--setenv=SYSTEMD_COLORS=0", "--bind-ro=\(shared):\(sharedMountPoint)",
        ]
        let nspawn = try lab.spawnInTestNamespace(arguments, label: name)
        // The container's PID 1: nspawn's child whose innermost PID is 1 and which runs systemd.
        let found = try? await eventually("\(name)'s systemd", within: .seconds(20)) { () -> Int32? in
            if nspawn.hasExited { throw LabError("systemd-nspawn exited: \(nspawn.stdout)\(nspawn.stderr)") }
            return Self.containerInit(under: nspawn.pid)
        }
        guard let initPID = found else {
            nspawn.terminate(grace: .seconds(5))
            Self.removeCgroups(cgroups)
            throw LabError("\(name) did not start: \(nspawn.stdout)\(nspawn.stderr)")
        }
        let system = BootedSystem(name: name, shared: shared, nspawn: nspawn, initPID: initPID, cgroups: cgroups)
        do {
            // `is-system-running --wait` fails or says "offline" until the manager is up; then it waits for the
            // boot to finish.
            let state = try await eventually("\(name)'s boot", within: .seconds(60), every: .milliseconds(200)) {
                let state = try await system.run(["systemctl", "is-system-running", "--wait"], timeout: .seconds(60))
                let text = state.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                return ["running", "degraded"].contains(text) ? text : nil
            }
            if state == "degraded" {
                let failed = try await system.run(["systemctl", "--failed", "--no-legend"])
                throw LabError("\(name) booted degraded: \(failed.stdout)")
            }
        } catch {
            await system.shutdown()
            throw error
        }
        return system
    }

    /// The PID of the container's systemd among the children of `nspawn`, if it has started.
    private static func containerInit(under nspawn: Int32) -> Int32? {
        let children =
            (try? String(contentsOfFile: "/proc/\(nspawn)/task/\(nspawn)/children", encoding: .utf8)) ?? ""
        for child in children.split(separator: " ").compactMap({ Int32($0) }) {
            guard let status = try? String(contentsOfFile: "/proc/\(child)/status", encoding: .utf8) else { continue }
            let fields = Dictionary(
                status.split(separator: "\n").compactMap { line -> (String, String)? in
                    guard let colon = line.firstIndex(of: ":") else { return nil }
                    return (
                        String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                    )
                }, uniquingKeysWith: { first, _ in first })
            let innermost = fields["NSpid"]?.split(whereSeparator: { $0 == " " || $0 == "\t" }).last
            if fields["Name"] == "systemd", innermost == "1" { return child }
        }
        return nil
    }

    /// Runs `arguments` inside the container as root, or as `user` (through `runuser`), with a clean
    /// environment, and waits for it up to `timeout`.
    public func run(
        _ arguments: [String], user: String? = nil, timeout: Duration = .seconds(60)
    ) async throws -> CommandResult {
        let environment = [
            "/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
            "LANG=C.UTF-8", "TERM=dumb", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "DEBIAN_FRONTEND=noninteractive",
        ]
        let command = user.map { ["runuser", "-u", $0, "--"] + arguments } ?? arguments
        let argv = environment + ["nsenter", "--target", String(initPID), "--all"] + command
        guard let env = Subprocess.which(argv[0]) else { throw LabError("env is missing") }
        return try await runOffCooperativePool { try Subprocess.run([env] + argv.dropFirst(), timeout: timeout) }
    }

    /// Runs `arguments` inside and throws, with its output, unless it succeeds.
    @discardableResult
    public func runChecked(
        _ arguments: [String], user: String? = nil, timeout: Duration = .seconds(60)
    ) async throws -> CommandResult {
        let result = try await run(arguments, user: user, timeout: timeout)
        guard result.succeeded else {
            throw LabError("in \(name): \(arguments.joined(separator: " ")) failed: \(result)")
        }
        return result
    }

    /// Puts `contents` at `path` inside the container with `mode`, through ``shared``.
    public func write(_ contents: String, to path: String, mode: String = "0644") async throws {
        let staged = "file-\(UInt32.random(in: 0..<UInt32.max))"
        try contents.write(toFile: shared + "/" + staged, atomically: true, encoding: .utf8)
        try await runChecked([
            "install", "-D", "-m", mode, Self.sharedMountPoint + "/" + staged, path,
        ])
    }

    /// Powers the container off from inside (SIGRTMIN+4 to its systemd is `systemctl poweroff`), waits for
    /// nspawn, and removes what is left: if the system does not stop in time, nspawn is terminated and
    /// whatever remains in the container's cgroup is killed.
    public func shutdown() async {
        let nspawn = nspawn
        let initPID = initPID
        let cgroups = cgroups
        await runOffCooperativePool {
            if !nspawn.hasExited {
                _ = kill(initPID, __libc_current_sigrtmin() + 4)
                if nspawn.wait(timeout: .seconds(20)) == nil {
                    nspawn.terminate(grace: .seconds(5))
                }
            }
            Self.removeCgroups(cgroups)
        }
        // nspawn cannot remove its propagation directory where /run is not a tmpfs; it is empty.
        rmdir("/run/systemd/nspawn/propagate/\(name)")
    }

    /// Kills what is left in `cgroups` (cgroup2's `cgroup.kill`), then removes them, deepest first.
    private static func removeCgroups(_ cgroups: [String]) {
        for cgroup in cgroups where access(cgroup + "/cgroup.kill", W_OK) == 0 {
            _ = try? "1".write(toFile: cgroup + "/cgroup.kill", atomically: false, encoding: .utf8)
        }
        for cgroup in cgroups {
            let directories =
                (FileManager.default.subpaths(atPath: cgroup) ?? [])
                .map { cgroup + "/" + $0 }
                .filter { path in
                    var isDirectory: ObjCBool = false
                    return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
                        && isDirectory.boolValue
                }
                .sorted { $0.count > $1.count }
            for directory in directories + [cgroup] {
                for _ in 0..<50 where rmdir(directory) != 0 && errno == EBUSY { usleep(100_000) }
            }
        }
    }
}

/// Runs blocking `work` on a Dispatch thread.
private func runOffCooperativePool(_ work: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            work()
            continuation.resume()
        }
    }
}
