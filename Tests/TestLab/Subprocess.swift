import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What a finished command left behind.
public struct CommandResult: Sendable, Hashable, CustomStringConvertible {
    /// The exit status, or 128 + the signal number if a signal ended the process.
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    public var succeeded: Bool { status == 0 }

    public var description: String {
        "status \(status), stdout: \(stdout.debugDescription), stderr: \(stderr.debugDescription)"
    }
}

/// A long-running process started with ``Lab/spawn(_:_:)``. Its output goes to files; the lab kills it at
/// teardown if it is still running.
public final class LabProcess: Sendable {
    public let pid: Int32
    public let arguments: [String]
    public let stdoutPath: String
    public let stderrPath: String
    private let exitStatus = Locked<Int32?>(nil)

    init(pid: Int32, arguments: [String], stdoutPath: String, stderrPath: String) {
        self.pid = pid
        self.arguments = arguments
        self.stdoutPath = stdoutPath
        self.stderrPath = stderrPath
    }

    /// Everything the process has written to stdout so far.
    public var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    /// Everything the process has written to stderr so far.
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Whether the process has exited (and was reaped).
    public var hasExited: Bool { poll() != nil }

    /// Sends `signal` to the process and its process group.
    public func signal(_ signal: Int32) {
        guard exitStatus.withLock({ $0 }) == nil else { return }
        _ = kill(-pid, signal)
    }

    /// Waits up to `timeout` for the process to exit and returns its status, or `nil` if it is still running.
    @discardableResult
    public func wait(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = poll() { return status }
            if ContinuousClock.now >= deadline { return nil }
            usleep(10_000)
        }
    }

    /// Ends the process: SIGTERM, then SIGKILL after `grace`. Returns its exit status.
    @discardableResult
    public func terminate(grace: Duration = .seconds(1)) -> Int32 {
        signal(SIGTERM)
        if let status = wait(timeout: grace) { return status }
        signal(SIGKILL)
        return wait(timeout: .seconds(5)) ?? -1
    }

    private func poll() -> Int32? {
        exitStatus.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            if result == pid {
                status = Subprocess.decode(raw)
            } else if result < 0 && errno == ECHILD {
                status = -1
            }
            return status
        }
    }
}

/// Starts processes with `posix_spawn`, each in its own process group so a kill reaches its children too.
enum Subprocess {
    /// Runs `arguments` to completion, collecting stdout and stderr; kills it after `timeout`.
    static func run(_ arguments: [String], timeout: Duration) throws -> CommandResult {
        let stdoutPipe = try makePipe()
        let stderrPipe = try makePipe()
        let pid: pid_t
        do {
            pid = try spawn(arguments, stdout: .descriptor(stdoutPipe.write), stderr: .descriptor(stderrPipe.write))
        } catch {
            for fd in [stdoutPipe.read, stdoutPipe.write, stderrPipe.read, stderrPipe.write] { close(fd) }
            throw error
        }
        close(stdoutPipe.write)
        close(stderrPipe.write)

        var outputs: [[UInt8]] = [[], []]
        var descriptors = [
            pollfd(fd: stdoutPipe.read, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stderrPipe.read, events: Int16(POLLIN), revents: 0),
        ]
        let deadline = ContinuousClock.now + timeout
        var timedOut = false
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while descriptors.contains(where: { $0.fd >= 0 }) {
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero && !timedOut {
                timedOut = true
                _ = kill(-pid, SIGKILL)
            }
            let waitMilliseconds = timedOut ? 2000 : max(1, Int32(remaining.components.seconds * 1000) + 1)
            let ready = poll(&descriptors, nfds_t(descriptors.count), waitMilliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready == 0 && timedOut { break }
            for index in descriptors.indices where descriptors[index].fd >= 0 && descriptors[index].revents != 0 {
                let count = read(descriptors[index].fd, &buffer, buffer.count)
                if count > 0 {
                    outputs[index].append(contentsOf: buffer[0..<count])
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    close(descriptors[index].fd)
                    descriptors[index].fd = -1
                }
            }
        }
        for descriptor in descriptors where descriptor.fd >= 0 { close(descriptor.fd) }
        let status = reap(pid)
        let result = CommandResult(
            status: status,
            stdout: String(decoding: outputs[0], as: UTF8.self),
            stderr: String(decoding: outputs[1], as: UTF8.self)
        )
        if timedOut {
            throw LabError("command timed out after \(timeout): \(arguments.joined(separator: " ")) (\(result))")
        }
        return result
    }

    enum Output {
        case descriptor(Int32)
        case file(String)
    }

    /// Starts `arguments[0]` (an absolute path) with stdin from `/dev/null`.
    static func spawn(_ arguments: [String], stdout: Output, stderr: Output) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        for (target, output) in [(Int32(1), stdout), (Int32(2), stderr)] {
            switch output {
            case .descriptor(let fd):
                posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            }
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] { sigaddset(&defaultSignals, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes,
            Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        )

        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let environment = environmentWithSbinPath().map { strdup($0) } + [nil]
        defer { for pointer in environment { free(pointer) } }

        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, environment)
        guard result == 0 else {
            throw LabError("cannot start \(arguments.joined(separator: " ")): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// Waits for `pid` and returns its decoded status.
    static func reap(_ pid: pid_t) -> Int32 {
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        return decode(raw)
    }

    static func decode(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7F
        return signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
    }

    /// Finds an executable by name in `PATH` and the sbin directories.
    static func which(_ name: String) -> String? {
        if name.hasPrefix("/") { return access(name, X_OK) == 0 ? name : nil }
        for directory in searchPath() {
            let candidate = directory + "/" + name
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func searchPath() -> [String] {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        var directories = path.split(separator: ":").map(String.init)
        for sbin in ["/usr/local/sbin", "/usr/sbin", "/sbin"] where !directories.contains(sbin) {
            directories.append(sbin)
        }
        return directories
    }

    /// The environment with the sbin directories on `PATH`, so `ip netns exec` finds `arping` and friends.
    private static func environmentWithSbinPath() -> [String] {
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = searchPath().joined(separator: ":")
        return environment.map { "\($0.key)=\($0.value)" }
    }

    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe2Function(&fds, O_CLOEXEC) == 0 else {
            throw LabError("pipe2 failed: \(String(cString: strerror(errno)))")
        }
        return (fds[0], fds[1])
    }
}

/// `pipe2`, which glibc declares only under `_GNU_SOURCE`. Close-on-exec from the start matters: a pipe end
/// inherited by a concurrently spawned process would keep the reader from seeing end-of-file.
private let pipe2Function: @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32 = {
    guard let symbol = dlsym(nil, "pipe2") else {
        fatalError("glibc has no pipe2: \(String(cString: dlerror()))")
    }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)
}()

/// A value behind a lock.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
