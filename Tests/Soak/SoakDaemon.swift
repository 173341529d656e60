import Foundation
import SleepProxyControl
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon under soak in the lab's proxy host, started, reloaded, stopped and killed as the schedule says, with
/// its lease store kept across every start; and `sleepproxyctl` against it.
///
/// The state directory is a small tmpfs that the schedule fills to ENOSPC for a while. It is mounted in a mount
/// namespace of its own, held by a keeper process, and every start of the daemon enters it: the machine's own mount
/// table never sees it, and it outlives each daemon. The test reads it through `/proc/KEEPER/root`.
final class SoakDaemon {
    let lab: Lab
    let daemonPath: String
    let ctlPath: String
    let stateDirectory: String
    let socket: String
    let configPath: String
    private(set) var process: LabProcess?
    /// How many times it was started.
    private(set) var generation = 0
    /// When the current process answered `sleepproxyctl status` first (Unix time), nil while it is down.
    private(set) var upSince: Duration?
    private var configuration = 0
    /// The log of each run of the daemon that ended, with a line saying which.
    private(set) var logs: [String] = []
    /// The process whose mount namespace holds the state directory's tmpfs.
    let keeper: LabProcess
    /// The state directory as this process reaches it.
    let stateDirectoryHere: String

    /// The two configurations a reload alternates between: other limits, another wake policy, another log level,
    /// and the declared hosts' `declared` parts (one host fewer in the second).
    let configurations: [String]
    /// Which of them is in the file now.
    var configurationIndex: Int { configuration }

    /// Where the daemon serves its metrics, as a user with Prometheus on another machine has it: its address on
    /// the LAN.
    static let metricsEndpoint = "10.77.0.1:9187"

    /// The memory gauges of `/metrics`, scraped from the waker as Prometheus would (nil if the scrape failed). The
    /// request goes whole and the connection stays open both ways until the daemon closes it, as an HTTP client
    /// keeps it (`nc -N` would half-close it, and the endpoint closes a connection its client half-closed).
    func memoryGauges() async -> SoakSample.Memory? {
        let request = "GET /metrics HTTP/1.1\r\nHost: \(Self.metricsEndpoint)\r\nConnection: close\r\n\r\n"
        let parts = Self.metricsEndpoint.split(separator: ":").map(String.init)
        guard
            let scraped = try? await lab.run(
                .waker, ["sh", "-c", "printf '\(request)' | nc -w 5 \(parts[0]) \(parts[1])"],
                timeout: .seconds(10)),
            scraped.succeeded
        else { return nil }
        var values: [String: Double] = [:]
        for line in scraped.stdout.split(separator: "\n") where line.hasPrefix("sleepproxy_") {
            let words = line.split(separator: " ")
            if words.count == 2, let value = Double(words[1]) { values[String(words[0])] = value }
        }
        guard let allocated = values["sleepproxy_heap_allocated_bytes"],
            let held = values["sleepproxy_heap_held_bytes"],
            let store = values["sleepproxy_store_memory_bytes"]
        else { return nil }
        return SoakSample.Memory(
            allocatedKB: Int(allocated) / 1024, heldKB: Int(held) / 1024, storeKB: Int(store) / 1024)
    }

    static func configurations(declared: [String], neverWake: [String]) -> [String] {
        let names = neverWake.map { "\"\($0)\"" }.joined(separator: ", ")
        return [
            """
            log_level = "info"
            [limits]
            maximum_records_per_host = 1000
            [metrics]
            listen = "\(Self.metricsEndpoint)"

            """ + declared[0],
            """
            log_level = "notice"
            [limits]
            maximum_records_per_host = 500
            [metrics]
            listen = "\(Self.metricsEndpoint)"
            [wake]
            ignore_sources = ["10.77.0.250/32"]
            never_wake = [\(names)]

            """ + declared[1],
        ]
    }

    init(
        lab: Lab, daemonPath: String, ctlPath: String, stateMegabytes: Int, declared: [String], neverWake: [String]
    ) async throws {
        self.lab = lab
        configurations = Self.configurations(declared: declared, neverWake: neverWake)
        self.daemonPath = daemonPath
        self.ctlPath = ctlPath
        let stateDirectory = lab.workDirectory + "/soak-state"
        self.stateDirectory = stateDirectory
        socket = lab.workDirectory + "/soak-control.sock"
        configPath = lab.workDirectory + "/soak.toml"
        try configurations[0].write(toFile: configPath, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: false)
        let keeper = try lab.spawn(
            .proxy,
            [
                "unshare", "--mount", "--propagation", "private", "sh", "-c",
                "mount -t tmpfs -o size=\(stateMegabytes)m,mode=0700 soak-state \"$0\" && exec sleep infinity",
                stateDirectory,
            ])
        self.keeper = keeper
        stateDirectoryHere = "/proc/\(keeper.pid)/root" + stateDirectory
        _ = try await eventually("the state directory's tmpfs", within: .seconds(10)) { () -> Bool? in
            if keeper.hasExited { throw LabError("the state directory's tmpfs: \(keeper.stderr)") }
            let mounted = try Lab.runInTestNamespace(
                ["nsenter", "-t", String(keeper.pid), "-m", "--", "findmnt", "-n", "-o", "FSTYPE", stateDirectory])
            return mounted.stdout == "tmpfs\n" ? true : nil
        }
    }

    /// Fills the state directory's file system until it has no space left.
    func fillDisk() throws {
        let fill = try Lab.runInTestNamespace(
            [
                "nsenter", "-t", String(keeper.pid), "-m", "--", "dd", "if=/dev/zero", "of=\(stateDirectory)/filler",
                "bs=64k",
            ], timeout: .seconds(60))
        guard fill.stderr.contains("No space left on device") else { throw LabError("filling the disk: \(fill)") }
    }

    /// Frees what ``fillDisk()`` took.
    func freeDisk() throws {
        let removed = try Lab.runInTestNamespace(
            ["nsenter", "-t", String(keeper.pid), "-m", "--", "rm", "-f", "\(stateDirectory)/filler"])
        guard removed.succeeded else { throw LabError("freeing the disk: \(removed)") }
    }

    /// Starts it and waits until `sleepproxyctl status` answers.
    func start() async throws {
        generation += 1
        let started = try lab.spawn(
            .proxy,
            [
                "nsenter", "-t", String(keeper.pid), "-m", "--", daemonPath, "--interface", "eth0", "--state-dir",
                stateDirectory, "--control-socket", socket, "--config", configPath,
            ])
        process = started
        _ = try await eventually("sleepproxyd start \(generation)", within: .seconds(20)) { () -> Bool? in
            if started.hasExited { throw LabError("sleepproxyd exited at start: \(started.stderr)") }
            return (try? self.ctl(["status"]))?.succeeded == true ? true : nil
        }
        upSince = soakNow()
    }

    /// SIGHUP with the other configuration in the file; waits for the daemon to say it reloaded.
    func reload() async throws {
        guard let process else { return }
        configuration = 1 - configuration
        try configurations[configuration].write(toFile: configPath, atomically: true, encoding: .utf8)
        let before = Self.count("reloaded the configuration", in: process.stderr)
        process.signal(SIGHUP)
        _ = try await eventually("the reload logged", within: .seconds(10)) { () -> Bool? in
            SoakDaemon.count("reloaded the configuration", in: process.stderr) > before ? true : nil
        }
    }

    /// Sends `signal` (SIGTERM: a stop; SIGKILL: a crash) and waits for the process to end; returns how long that
    /// took.
    func stop(_ signal: Int32) async throws -> Duration {
        guard let process else { return .zero }
        upSince = nil
        let started = ContinuousClock.now
        process.signal(signal)
        _ = try await eventually("sleepproxyd to end on signal \(signal)", within: .seconds(15)) { () -> Bool? in
            process.hasExited ? true : nil
        }
        logs.append("--- run \(generation) of sleepproxyd, ended by signal \(signal)\n" + process.stderr)
        self.process = nil
        return ContinuousClock.now - started
    }

    /// `sleepproxyctl --socket S --json ARGUMENTS`.
    func ctl(_ arguments: [String]) throws -> CommandResult {
        // A Unix socket: no traffic leaves the machine.
        try Lab.runInTestNamespace([ctlPath, "--socket", socket, "--json"] + arguments, timeout: .seconds(15))
    }

    /// The held hosts, nil when the daemon does not answer.
    func hosts() -> [HostSummary]? {
        guard let listed = try? ctl(["hosts"]), listed.succeeded else { return nil }
        return try? ControlProtocol.decoder().decode([HostSummary].self, from: Data(listed.stdout.utf8))
    }

    static func count(_ text: String, in log: String) -> Int {
        log.components(separatedBy: text).count - 1
    }
}

/// The Unix time now, as captured frames carry it.
func soakNow() -> Duration {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
}

/// One sample of the daemon's resources.
struct SoakSample: Sendable {
    var time: Duration
    var generation: Int
    var rssAnonKB: Int
    var rssKB: Int
    var fds: Int
    var threads: Int
    var cpuSeconds: Double
    var storeBytes: Int
    /// The daemon's own memory gauges from `/metrics`, when the scrape answered.
    var memory: Memory?

    struct Memory: Sendable {
        /// `sleepproxy_heap_allocated_bytes`, `sleepproxy_heap_held_bytes`, `sleepproxy_store_memory_bytes`.
        var allocatedKB: Int
        var heldKB: Int
        var storeKB: Int
    }

    /// `/proc/PID` of the running daemon, and the size of its store's files.
    static func take(pid: Int32, generation: Int, stateDirectory: String) -> SoakSample? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let statLine = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        else { return nil }
        func field(_ name: String) -> Int {
            for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
                let words = line.dropFirst(name.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" })
                return Int(words.first ?? "") ?? 0
            }
            return 0
        }
        // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
        let afterName = statLine.split(separator: ")").last.map { $0.split(separator: " ") } ?? []
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let cpu =
            afterName.count > 13
            ? (Double(afterName[11]) ?? 0) / ticks + (Double(afterName[12]) ?? 0) / ticks : 0
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
        var store = 0
        for suffix in ["", "-wal", "-shm"] {
            var info = stat()
            if lstat(stateDirectory + "/leases.sqlite" + suffix, &info) == 0 { store += Int(info.st_size) }
        }
        return SoakSample(
            time: soakNow(), generation: generation, rssAnonKB: field("RssAnon"), rssKB: field("VmRSS"), fds: fds,
            threads: field("Threads"), cpuSeconds: cpu, storeBytes: store)
    }
}

/// The lease store as another process sees it while the daemon runs: opened read-only by Python's sqlite3 in the
/// state directory's mount namespace, for what the daemon has committed. (SQLite resolves symbolic links in a
/// database's path, so `/proc/KEEPER/root/...` would lead it back to this namespace's empty directory.)
enum SoakStore {
    /// The primary MACs of the owners held, lower-case `aa:bb:...`, and the number of events kept; nil if the
    /// store cannot be read (it is being created, say).
    static func read(keeper: Int32, directory: String) -> (owners: Set<String>, events: Int)? {
        let script = """
            import sqlite3, sys
            database = sqlite3.connect("file:" + sys.argv[1] + "/leases.sqlite?mode=ro", uri=True, timeout=2)
            for (mac,) in database.execute("SELECT primary_mac FROM owners"):
                print("owner", ":".join("%02x" % byte for byte in mac))
            print("events", database.execute("SELECT count(*) FROM events").fetchone()[0])
            """
        guard
            let result = try? Lab.runInTestNamespace(
                ["nsenter", "-t", String(keeper), "-m", "--", "python3", "-c", script, directory],
                timeout: .seconds(15)),
            result.succeeded
        else { return nil }
        var owners = Set<String>()
        var events: Int?
        for line in result.stdout.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard words.count == 2 else { continue }
            if words[0] == "owner" { owners.insert(String(words[1])) }
            if words[0] == "events" { events = Int(words[1]) }
        }
        guard let events else { return nil }
        return (owners, events)
    }
}
