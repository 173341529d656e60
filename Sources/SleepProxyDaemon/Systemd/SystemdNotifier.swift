// CPcap's headers bring in <sys/time.h> outside the Glibc module: in an optimized (whole-module) build, `timespec`
// and `timeval` then belong to CPcap, whose import their members need.
import CPcap
public import NetworkIO

#if canImport(Glibc)
    import Glibc
#endif

/// Tells the service manager how the daemon is doing: the `sd_notify(3)` protocol, spoken directly.
///
/// systemd starts a `Type=notify` service with `NOTIFY_SOCKET` naming a Unix datagram socket: a file system path
/// (`/run/systemd/notify`) or, with a leading `@`, a name in the abstract namespace. Each notification is one
/// datagram of newline-separated `NAME=value` assignments (`READY=1`, `STATUS=...`). Without `NOTIFY_SOCKET`
/// (the daemon runs in a terminal, a test, another supervisor) every call does nothing and returns `false`.
///
/// The watchdog: with `WatchdogSec=` the manager sets `WATCHDOG_USEC` (and `WATCHDOG_PID`, the process it
/// watches) and restarts the service when no `WATCHDOG=1` arrives within that time. ``watchdogInterval`` is half
/// of it, the conventional rate of pings; ping from the queue whose liveness matters, so that a stuck queue
/// stops the pings.
///
/// Each notification opens its own socket, sends one datagram and closes it, as `sd_notify` does: nothing stays
/// open, and the value is `Sendable` and may be used from any thread. A send waits at most a second for room in
/// the manager's queue. Failures are thrown, never fatal: a daemon logs them and carries on.
public struct SystemdNotifier: Sendable {
    /// Where notifications go, from `NOTIFY_SOCKET`.
    public enum SocketAddress: Sendable, Hashable, CustomStringConvertible {
        /// A socket file, by absolute path.
        case path(String)
        /// A name in the abstract namespace (without the leading `@` or NUL).
        case abstract(String)

        /// As `NOTIFY_SOCKET` spells it: `/run/systemd/notify` or `@name`.
        public var description: String {
            switch self {
            case .path(let path): path
            case .abstract(let name): "@\(name)"
            }
        }

        /// The bytes of `sun_path` and the length of the whole address: a path ends with a NUL, an abstract name
        /// starts with one and is exactly as long as its bytes.
        fileprivate var socketPath: (bytes: [UInt8], length: socklen_t) {
            let header = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
            switch self {
            case .path(let path):
                let bytes = Array(path.utf8) + [0]
                return (bytes, socklen_t(header + bytes.count))
            case .abstract(let name):
                let bytes = [0] + Array(name.utf8)
                return (bytes, socklen_t(header + bytes.count))
            }
        }
    }

    /// The largest `sun_path`, its terminating NUL included.
    static let socketPathCapacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)

    /// `NOTIFY_SOCKET`, if it is set and usable; nil makes every notification a no-op.
    public let socketAddress: SocketAddress?
    /// Set when `NOTIFY_SOCKET` is set but unusable: every notification throws it.
    private let addressError: SystemError?
    /// `WATCHDOG_USEC`, when the watchdog watches this process.
    public let watchdogTimeout: Duration?
    private let monotonicMicroseconds: @Sendable () -> UInt64

    /// How often to send ``watchdogPing()``: half of `WATCHDOG_USEC`. Nil when the manager runs no watchdog for
    /// this process (`WATCHDOG_USEC` unset, zero, infinite or not a number, or `WATCHDOG_PID` names another
    /// process).
    public var watchdogInterval: Duration? {
        watchdogTimeout.map { $0 / 2 }
    }

    /// Whether `NOTIFY_SOCKET` is set (when it is unusable, every notification throws).
    public var isEnabled: Bool {
        socketAddress != nil || addressError != nil
    }

    /// The notifier the process environment describes.
    public init() {
        self.init(environment: Self.processEnvironment())
    }

    /// A notifier for `environment` (`NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID`), as seen by the process
    /// `processID` (nil: this one). `monotonicMicroseconds` reads `CLOCK_MONOTONIC` for `MONOTONIC_USEC`; tests
    /// inject their own.
    public init(
        environment: [String: String],
        processID: Int32? = nil,
        monotonicMicroseconds: @escaping @Sendable () -> UInt64 = SystemdNotifier.monotonicNow
    ) {
        self.monotonicMicroseconds = monotonicMicroseconds
        switch Self.parseSocket(environment["NOTIFY_SOCKET"]) {
        case .success(let address):
            socketAddress = address
            addressError = nil
        case .failure(let error):
            socketAddress = nil
            addressError = error
        }
        watchdogTimeout = Self.parseWatchdog(
            microseconds: environment["WATCHDOG_USEC"], processID: environment["WATCHDOG_PID"],
            ownID: processID ?? getpid())
    }

    // MARK: Notifications

    /// Start-up is complete: `READY=1`, with a one-line status if given. Send it once the daemon serves (sockets,
    /// capture and store open): the manager starts dependent units and `systemctl start` returns on it.
    @discardableResult
    public func ready(status: String? = nil) throws(SystemError) -> Bool {
        try send(["READY=1"] + Self.statusLine(status))
    }

    /// A one-line status for `systemctl status`: `STATUS=...`.
    @discardableResult
    public func status(_ text: String) throws(SystemError) -> Bool {
        try send(Self.statusLine(text))
    }

    /// A reload has begun: `RELOADING=1` with `MONOTONIC_USEC=`, the time of this message on `CLOCK_MONOTONIC`
    /// (which lets the manager tell this reload cycle from an earlier one). Follow it with
    /// ``readyAfterReload(status:)``, whether the reload succeeded or was refused.
    @discardableResult
    public func reloading() throws(SystemError) -> Bool {
        try send(["RELOADING=1", "MONOTONIC_USEC=\(monotonicMicroseconds())"])
    }

    /// The reload is over and the daemon serves again: `READY=1`, with a status if given.
    @discardableResult
    public func readyAfterReload(status: String? = nil) throws(SystemError) -> Bool {
        try send(["READY=1"] + Self.statusLine(status))
    }

    /// The daemon is shutting down: `STOPPING=1`, with a status if given.
    @discardableResult
    public func stopping(status: String? = nil) throws(SystemError) -> Bool {
        try send(["STOPPING=1"] + Self.statusLine(status))
    }

    /// The daemon is alive: `WATCHDOG=1`. Send it every ``watchdogInterval``.
    @discardableResult
    public func watchdogPing() throws(SystemError) -> Bool {
        try send(["WATCHDOG=1"])
    }

    /// Sends one datagram of `assignments`, one per line. Returns whether it was sent (false: no
    /// `NOTIFY_SOCKET`).
    func send(_ assignments: [String]) throws(SystemError) -> Bool {
        if let addressError { throw addressError }
        guard let socketAddress else { return false }
        let message = assignments.joined(separator: "\n")
        try Self.sendDatagram(Array(message.utf8), to: socketAddress)
        return true
    }

    /// `STATUS=text` with line breaks turned into spaces (a line break would end the assignment), or nothing.
    private static func statusLine(_ text: String?) -> [String] {
        guard let text else { return [] }
        let line = String(text.map { $0.isNewline ? " " : $0 })
        return ["STATUS=\(line)"]
    }

    // MARK: Environment

    /// `NOTIFY_SOCKET` as an address; nil when unset or empty, an error when set to something unusable.
    static func parseSocket(_ value: String?) -> Result<SocketAddress?, SystemError> {
        guard let value, !value.isEmpty else { return .success(nil) }
        if value.hasPrefix("/") {
            guard value.utf8.count < socketPathCapacity else {
                return .failure(
                    .invalidSocket(
                        value,
                        reason: "the path is \(value.utf8.count) bytes; a Unix socket path has at most "
                            + "\(socketPathCapacity - 1)"))
            }
            return .success(.path(value))
        }
        if value.hasPrefix("@") {
            let name = String(value.dropFirst())
            guard !name.isEmpty, name.utf8.count < socketPathCapacity else {
                return .failure(
                    .invalidSocket(
                        value,
                        reason: "the abstract name is \(name.utf8.count) bytes; expected 1 to "
                            + "\(socketPathCapacity - 1)"))
            }
            return .success(.abstract(name))
        }
        return .failure(
            .invalidSocket(value, reason: "expected an absolute path or @name (other address kinds are not supported)"))
    }

    /// `WATCHDOG_USEC` when it is a positive, finite number of microseconds (systemd spells infinity as
    /// 2^64 - 1) and `WATCHDOG_PID`, if set, is `ownID`.
    static func parseWatchdog(microseconds: String?, processID: String?, ownID: Int32) -> Duration? {
        if let processID {
            guard let watched = Int32(processID), watched == ownID else { return nil }
        }
        guard let microseconds, let value = UInt64(microseconds), value > 0, value != .max else { return nil }
        return .microseconds(Int64(clamping: value))
    }

    /// The environment of this process, from `environ`.
    static func processEnvironment() -> [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return result
    }

    /// `CLOCK_MONOTONIC` in microseconds, as `MONOTONIC_USEC` wants it.
    public static func monotonicNow() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000 + UInt64(time.tv_nsec) / 1_000
    }

    // MARK: Socket

    /// How long a send may wait for room in the manager's queue, in seconds.
    static let sendTimeoutSeconds = 1

    private static func sendDatagram(_ message: [UInt8], to address: SocketAddress) throws(SystemError) {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw .sendFailed(address, operation: "socket", errno: errno)
        }
        defer { close(descriptor) }
        var timeout = timeval()
        timeout.tv_sec = sendTimeoutSeconds
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        let (path, length) = address.socketPath
        withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: path) }
        var sent: Int
        repeat {
            sent = message.withUnsafeBytes { bytes in
                withUnsafePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, length)
                    }
                }
            }
        } while sent < 0 && errno == EINTR
        guard sent >= 0 else {
            throw .sendFailed(address, operation: "sendto", errno: errno)
        }
        guard sent == message.count else {
            throw .sendFailed(address, operation: "sendto", reason: "sent \(sent) of \(message.count) bytes")
        }
    }
}

/// The errors of a ``SystemdNotifier``: a notification that could not be sent, or a `NOTIFY_SOCKET` that cannot
/// be used.
extension SystemError {
    static func invalidSocket(_ value: String, reason: String) -> SystemError {
        SystemError(.invalidSocket, "NOTIFY_SOCKET=\(value): \(reason)")
    }

    static func sendFailed(
        _ address: SystemdNotifier.SocketAddress, operation: String, errno number: Int32
    ) -> SystemError {
        let call = SystemCallError("notify the service manager at \(address): \(operation)", code: number)
        return SystemError(.sendFailed, call)
    }

    static func sendFailed(
        _ address: SystemdNotifier.SocketAddress, operation: String, reason: String
    ) -> SystemError {
        SystemError(.sendFailed, "notify the service manager at \(address): \(operation): \(reason)")
    }
}
