import SleepProxyControl

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The client side of the control protocol: connects to the daemon's Unix stream socket, writes one request line
/// and reads the answer.
///
/// Each call opens its own connection, so a client can be shared freely. Calls block the calling thread: the
/// administrator's command has nothing else to do meanwhile.
struct ControlClient: Sendable {
    /// The daemon's control socket.
    var socketPath: String
    /// How long to wait for the connection and for the answer (for a `follow` stream: for its first line).
    var timeout: Duration

    /// A client of the daemon listening at `socketPath`.
    init(socketPath: String = ControlProtocol.defaultSocketPath, timeout: Duration = .seconds(10)) {
        self.socketPath = socketPath
        self.timeout = timeout
    }

    /// Sends `request` and returns the daemon's answer.
    ///
    /// Throws a `ControlClientError` of kind `daemon` when the daemon answers with `ok` false, and of the other
    /// kinds when there is no usable answer.
    func request(_ request: ControlRequest) throws(ControlClientError) -> ControlResponse {
        let connection = try Connection(path: socketPath, timeout: timeout)
        defer { connection.close() }
        try connection.send(try encode(request))
        guard let line = try connection.readLine() else {
            throw .closedWithoutAnswer(socketPath: socketPath)
        }
        return try decode(line)
    }

    /// Sends `request` and hands every answer line to `body`, in order, until the daemon closes the connection or
    /// `body` returns false.
    ///
    /// This is for `events` with `follow`: the first answer carries the history, each later one a new event. Only
    /// the first answer is bound by `timeout`; after it the stream may stay quiet for as long as nothing happens.
    /// A line with `ok` false ends the stream with a `daemon` error.
    func stream(
        _ request: ControlRequest, _ body: (ControlResponse) -> Bool
    ) throws(ControlClientError) {
        let connection = try Connection(path: socketPath, timeout: timeout)
        defer { connection.close() }
        try connection.send(try encode(request))
        guard let first = try connection.readLine() else {
            throw .closedWithoutAnswer(socketPath: socketPath)
        }
        guard body(try decode(first)) else { return }
        connection.setReceiveTimeout(nil)
        while let line = try connection.readLine() {
            guard body(try decode(line)) else { return }
        }
    }

    private func encode(_ request: ControlRequest) throws(ControlClientError) -> Data {
        do {
            return try ControlProtocol.line(request)
        } catch {
            throw .badRequest(socketPath: socketPath, detail: "\(error)")
        }
    }

    /// Decodes one answer line, checking its version first and turning `ok` false into the daemon's error.
    private func decode(_ line: Data) throws(ControlClientError) -> ControlResponse {
        let decoder = ControlProtocol.decoder()
        let probe: VersionProbe
        do {
            probe = try decoder.decode(VersionProbe.self, from: line)
        } catch {
            throw .badAnswer(socketPath: socketPath, detail: Self.excerpt(line))
        }
        guard probe.version == ControlProtocol.version else {
            throw .versionMismatch(socketPath: socketPath, daemonVersion: probe.version)
        }
        let response: ControlResponse
        do {
            response = try decoder.decode(ControlResponse.self, from: line)
        } catch {
            throw .badAnswer(socketPath: socketPath, detail: "\(Self.excerpt(line)) (\(error))")
        }
        guard response.ok else {
            throw .daemon(
                response.error ?? ControlError(.failed, "sleepproxyd refused the request without saying why"),
                socketPath: socketPath)
        }
        return response
    }

    /// The start of a line that is not a response, for the error message.
    private static func excerpt(_ line: Data) -> String {
        let text = String(decoding: line.prefix(120), as: UTF8.self)
        return line.count > 120 ? "\"\(text)...\"" : "\"\(text)\""
    }
}

/// Just enough of an answer to check its version before trusting the rest.
private struct VersionProbe: Decodable {
    var version: Int
}

/// Why a control request got no usable answer, or the daemon's own refusal.
///
/// `kind` says which: the daemon could not be reached, did not answer in time, broke the protocol, or answered
/// with an error. `description` is a sentence for the administrator that names the socket and the likely cause.
struct ControlClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The broad reason, for deciding an exit status.
    struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case unreachable
            case timedOut
            case protocolViolation
            case daemon
        }

        private let base: Base

        /// `connect()` failed: no socket, nobody listening, no permission.
        static let unreachable = Kind(base: .unreachable)
        /// The daemon took the connection but gave no answer in time.
        static let timedOut = Kind(base: .timedOut)
        /// The answer was missing, not JSON, of another protocol version, or lacked what the command needs.
        static let protocolViolation = Kind(base: .protocolViolation)
        /// The daemon answered with `ok` false; `daemonError` says why.
        static let daemon = Kind(base: .daemon)

        var description: String {
            switch base {
            case .unreachable: "unreachable"
            case .timedOut: "timed out"
            case .protocolViolation: "protocol violation"
            case .daemon: "daemon error"
            }
        }
    }

    var kind: Kind
    /// The socket the client talked to.
    var socketPath: String
    /// The system error behind an `unreachable` or `timedOut` error.
    var errno: Int32?
    /// The daemon's error, for kind `daemon`.
    var daemonError: ControlError?
    /// What went wrong and what to do about it, without a program name in front.
    var reason: String

    var description: String { reason }

    /// The error as the protocol's error value: the daemon's own for kind `daemon`, else one with a client-side
    /// code (`unreachable`, `timed-out`, `bad-answer`). This is what `--json` prints on failure.
    var controlError: ControlError {
        if let daemonError { return daemonError }
        switch kind {
        case .unreachable: return ControlError(.unreachable, reason)
        case .timedOut: return ControlError(.timedOut, reason)
        default: return ControlError(.badAnswer, reason)
        }
    }

    private init(
        kind: Kind, socketPath: String, reason: String, errno: Int32? = nil, daemonError: ControlError? = nil
    ) {
        self.kind = kind
        self.socketPath = socketPath
        self.reason = reason
        self.errno = errno
        self.daemonError = daemonError
    }

    /// `connect()` (or `socket()`) failed with `errno`.
    static func unreachable(socketPath: String, errno code: Int32) -> ControlClientError {
        let cause: String
        switch code {
        case ENOENT:
            cause = "the daemon is not running (no such socket)"
        case ECONNREFUSED:
            cause =
                Self.isSocket(socketPath)
                ? "the daemon is not running (the socket is left over; nothing listens on it)"
                : "that is not a socket: check --socket"
        case EACCES, EPERM:
            cause =
                "permission denied: join the group that owns the socket (usermod -aG sleepproxy $USER, then log in "
                + "again) or run as root"
        case ENOTSOCK:
            cause = "that is not a socket: check --socket"
        case ENOTDIR:
            cause = "a directory on the path is not a directory: check --socket"
        case ENAMETOOLONG:
            cause = "the path is longer than a Unix socket path may be (\(Self.maximumPathBytes) bytes)"
        case EAGAIN:
            cause = "the daemon accepts no more connections (its backlog is full)"
        default:
            cause = Self.systemMessage(code)
        }
        return ControlClientError(
            kind: .unreachable, socketPath: socketPath, reason: "cannot reach sleepproxyd at \(socketPath): \(cause)",
            errno: code)
    }

    /// No answer arrived within `timeout`.
    static func timedOut(socketPath: String, timeout: Duration) -> ControlClientError {
        ControlClientError(
            kind: .timedOut, socketPath: socketPath,
            reason: "sleepproxyd at \(socketPath) gave no answer within \(Self.describe(timeout))", errno: EAGAIN)
    }

    /// The daemon closed the connection before answering.
    static func closedWithoutAnswer(socketPath: String) -> ControlClientError {
        ControlClientError(
            kind: .protocolViolation, socketPath: socketPath,
            reason: "sleepproxyd at \(socketPath) closed the connection without an answer")
    }

    /// Sending the request or reading the answer failed with `errno`.
    static func connectionLost(socketPath: String, errno code: Int32) -> ControlClientError {
        ControlClientError(
            kind: .protocolViolation, socketPath: socketPath,
            reason: "lost the connection to sleepproxyd at \(socketPath): \(Self.systemMessage(code))", errno: code)
    }

    /// The answer line is not a control response.
    static func badAnswer(socketPath: String, detail: String) -> ControlClientError {
        ControlClientError(
            kind: .protocolViolation, socketPath: socketPath,
            reason: "sleepproxyd at \(socketPath) sent something that is not a control response: \(detail)")
    }

    /// The request could not be encoded.
    static func badRequest(socketPath: String, detail: String) -> ControlClientError {
        ControlClientError(
            kind: .protocolViolation, socketPath: socketPath, reason: "could not encode the request: \(detail)")
    }

    /// The daemon speaks another version of the protocol.
    static func versionMismatch(socketPath: String, daemonVersion: Int) -> ControlClientError {
        ControlClientError(
            kind: .protocolViolation, socketPath: socketPath,
            reason: "sleepproxyd at \(socketPath) speaks control protocol version \(daemonVersion), but this "
                + "sleepproxyctl speaks version \(ControlProtocol.version): use the sleepproxyctl installed with "
                + "the daemon")
    }

    /// The daemon closed a `follow` stream.
    static func streamEnded(socketPath: String) -> ControlClientError {
        ControlClientError(
            kind: .protocolViolation, socketPath: socketPath,
            reason: "sleepproxyd at \(socketPath) ended the event stream (it stopped or restarted)")
    }

    /// The daemon answered `ok` but without the `field` the command asked for.
    static func missingPayload(socketPath: String, field: String) -> ControlClientError {
        ControlClientError(
            kind: .protocolViolation, socketPath: socketPath,
            reason: "sleepproxyd at \(socketPath) answered without the \"\(field)\" the command asked for")
    }

    /// The daemon answered with `error`.
    static func daemon(_ error: ControlError, socketPath: String) -> ControlClientError {
        ControlClientError(kind: .daemon, socketPath: socketPath, reason: error.message, daemonError: error)
    }

    /// The longest path `sockaddr_un` holds, without its terminating zero.
    static var maximumPathBytes: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    private static func isSocket(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return true }
        return info.st_mode & S_IFMT == S_IFSOCK
    }

    private static func systemMessage(_ code: Int32) -> String {
        String(cString: strerror(code)).lowercased()
    }

    /// `10 s`, `1.5 s` or `200 ms`.
    private static func describe(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000) s" }
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        return "\(Double(milliseconds) / 1000) s"
    }
}

extension ControlError.Code {
    /// Client side only: the daemon's socket could not be reached.
    static let unreachable = ControlError.Code(rawValue: "unreachable")
    /// Client side only: the daemon did not answer in time.
    static let timedOut = ControlError.Code(rawValue: "timed-out")
    /// Client side only: the daemon's answer was missing or unusable.
    static let badAnswer = ControlError.Code(rawValue: "bad-answer")
}

/// One connected control socket: a blocking descriptor and the bytes read past the last line.
private final class Connection {
    /// An answer line longer than this is taken for garbage rather than buffered further.
    static let maximumLineBytes = 64 * 1024 * 1024

    private let path: String
    private let timeout: Duration
    private var descriptor: Int32
    private var buffer = Data()

    init(path: String, timeout: Duration) throws(ControlClientError) {
        self.path = path
        self.timeout = timeout
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, !bytes.contains(0), bytes.count <= ControlClientError.maximumPathBytes else {
            throw .unreachable(socketPath: path, errno: bytes.isEmpty ? ENOENT : ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        #if canImport(Glibc)
            let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
            let type = SOCK_STREAM
        #endif
        descriptor = socket(AF_UNIX, type, 0)
        guard descriptor >= 0 else { throw .unreachable(socketPath: path, errno: errno) }
        // A blocking connect() on a Unix socket waits under the send timeout when the listener's backlog is full.
        setTimeout(SO_SNDTIMEO, timeout)
        setTimeout(SO_RCVTIMEO, timeout)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                connect(descriptor, generic, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result != 0 {
            let code = errno
            close()
            throw .unreachable(socketPath: path, errno: code)
        }
    }

    deinit { close() }

    func close() {
        guard descriptor >= 0 else { return }
        #if canImport(Glibc)
            _ = Glibc.close(descriptor)
        #else
            _ = Darwin.close(descriptor)
        #endif
        descriptor = -1
    }

    /// Changes how long a read may wait; nil waits for ever.
    func setReceiveTimeout(_ timeout: Duration?) {
        setTimeout(SO_RCVTIMEO, timeout ?? .zero)
    }

    private func setTimeout(_ option: Int32, _ duration: Duration) {
        let components = duration.components
        var value = timeval()
        value.tv_sec = .init(components.seconds)
        value.tv_usec = .init(components.attoseconds / 1_000_000_000_000)
        if duration > .zero, value.tv_sec == 0, value.tv_usec == 0 { value.tv_usec = 1 }
        _ = setsockopt(descriptor, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes all of `data`, without dying of SIGPIPE when the daemon has gone.
    func send(_ data: Data) throws(ControlClientError) {
        var offset = 0
        while offset < data.count {
            let sent = data.withUnsafeBytes { raw in
                sendBytes(raw.baseAddress! + offset, raw.count - offset)
            }
            if sent < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { throw .timedOut(socketPath: path, timeout: timeout) }
                throw .connectionLost(socketPath: path, errno: code)
            }
            offset += sent
        }
    }

    private func sendBytes(_ pointer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.send(descriptor, pointer, count, Int32(MSG_NOSIGNAL))
        #else
            Darwin.send(descriptor, pointer, count, 0)
        #endif
    }

    /// The next line without its newline, or nil when the daemon closed the connection. A last line without a
    /// newline still counts.
    func readLine() throws(ControlClientError) -> Data? {
        var searchFrom = buffer.startIndex
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if let newline = buffer[searchFrom...].firstIndex(of: 0x0A) {
                let line = Data(buffer[buffer.startIndex..<newline])
                buffer = Data(buffer[(newline + 1)...])
                return line
            }
            searchFrom = buffer.endIndex
            guard buffer.count <= Self.maximumLineBytes else {
                throw .badAnswer(socketPath: path, detail: "a line longer than \(Self.maximumLineBytes) bytes")
            }
            let count = chunk.withUnsafeMutableBytes { raw in recv(descriptor, raw.baseAddress, raw.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[0..<count])
                continue
            }
            let code = count == 0 ? 0 : errno
            switch code {
            case 0, ECONNRESET:
                // The daemon closed the connection (a reset is how a close with unread input arrives).
                guard !buffer.isEmpty else { return nil }
                let line = buffer
                buffer = Data()
                return line
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: throw .timedOut(socketPath: path, timeout: timeout)
            default: throw .connectionLost(socketPath: path, errno: code)
            }
        }
    }
}
