public import Dispatch
public import Logging
import NetworkIO
public import SleepProxyControl
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The control socket: a Unix stream socket speaking newline-delimited JSON (`ControlProtocol`). Each connection
/// sends one request line; the answer is one line, or for `events` with `follow` a line per event until the
/// client goes. A line longer than `ControlProtocol.maximumRequestBytes` or not a valid request gets an error line
/// and the connection is closed; the daemon is never affected.
///
/// Everything runs on the daemon's queue; writes never block it (a client that does not read is dropped once
/// a megabyte is waiting for it).
public final class ControlServer: @unchecked Sendable {
    /// What the daemon does with a request: an answer, and whether the connection stays open to follow events.
    public typealias Handler = (ControlRequest, ControlConnection) -> ControlResponse?

    public let path: String
    private let logger: Logger
    private let queue: DispatchQueue
    private var listener: Int32 = -1
    private var acceptSource: (any DispatchSourceRead)?
    private var connections: [ObjectIdentifier: ControlConnection] = [:]
    private var handler: Handler?
    /// Connections open at once; more are told so and closed.
    private let maximumConnections: Int
    private var lastBusyLog: ContinuousClock.Instant?

    /// Creates the socket at `path` with mode 0660 and, if given, group `group`. A stale socket file (nobody
    /// listening) is replaced; a live one means another daemon runs, which is an error.
    public init(
        path: String, group: UInt32?, queue: DispatchQueue, logger: Logger, maximumConnections: Int = 16
    ) throws {
        self.maximumConnections = maximumConnections
        self.path = path
        self.queue = queue
        self.logger = logger
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw DaemonError(description: "control socket \(path): the path is too long for a Unix socket")
        }
        // The directory part of the path, as dirname(1) has it ("" for a bare name).
        let directory =
            path.lastIndex(of: "/").map { slash in slash == path.startIndex ? "/" : String(path[..<slash]) } ?? ""
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            } catch {
                throw DaemonError(description: "control socket \(path): cannot create \(directory): \(error)")
            }
        }
        if Self.someoneListens(at: path) {
            throw DaemonError(
                description: "control socket \(path): another sleepproxyd is listening there; stop it first")
        }
        unlink(path)
        // Without systemd's RuntimeDirectory= the directory may not exist yet (/run is a tmpfs): make it, open to
        // the socket's group only.
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            let directory = String(path[..<slash])
            if access(directory, F_OK) != 0, mkdir(directory, 0o750) == 0, let group, group != getegid() {
                _ = chown(directory, uid_t.max, group)
            }
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw DaemonError(description: "\(SystemCallError("control socket \(path): socket"))")
        }
        // Created with no permissions for others at all, then opened up to the group: never briefly world-open.
        let previous = umask(0o177)
        let bound = Self.withAddress(path) { bind(descriptor, $0, $1) }
        umask(previous)
        guard bound == 0 else {
            let failure = SystemCallError("control socket \(path): bind")
            close(descriptor)
            throw DaemonError(description: "\(failure)")
        }
        // A socket is created with the process's group already; chown only to change it (the systemd unit's
        // system call filter refuses chown, and needs none with the default group).
        if let group, group != getegid(), chown(path, uid_t.max, group) != 0 {
            let failure = SystemCallError("control socket \(path): cannot give it to group \(group)")
            close(descriptor)
            unlink(path)
            throw DaemonError(description: "\(failure)")
        }
        chmod(path, 0o660)
        guard listen(descriptor, 16) == 0 else {
            let failure = SystemCallError("control socket \(path): listen")
            close(descriptor)
            unlink(path)
            throw DaemonError(description: "\(failure)")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        listener = descriptor
    }

    /// Whether a process accepts connections at `path`.
    static func someoneListens(at path: String) -> Bool {
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        return withAddress(path) { connect(probe, $0, $1) } == 0
    }

    static func withAddress<Result>(
        _ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result
    ) -> Result {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            let bytes = Array(path.utf8.prefix(buffer.count - 1))
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    /// Starts accepting; requests go to `handler` on the daemon's queue.
    public func start(handler: @escaping Handler) {
        self.handler = handler
        let source = DispatchSource.makeReadSource(fileDescriptor: listener, queue: queue)
        source.setEventHandler { [weak self] in self?.acceptAll() }
        source.activate()
        acceptSource = source
    }

    private func acceptAll() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            guard connections.count < maximumConnections else {
                refuseBusy(client)
                continue
            }
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let connection = ControlConnection(descriptor: client, queue: queue, logger: logger)
            connections[ObjectIdentifier(connection)] = connection
            connection.start(
                onLine: { [weak self, weak connection] (line: ControlConnection.Line) in
                    guard let self, let connection else { return }
                    self.handle(line, on: connection)
                },
                onClose: { [weak self, weak connection] in
                    guard let self, let connection else { return }
                    self.connections[ObjectIdentifier(connection)] = nil
                })
        }
    }

    /// One connection too many: an error line if the socket takes it at once, then closed. Logged once a minute.
    private func refuseBusy(_ client: Int32) {
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        let response = ControlResponse.failure(
            ControlError(
                .busy,
                "\(connections.count) control connections are open, the limit (limits.control_connections); try again"))
        if let line = try? ControlProtocol.line(response) {
            _ = line.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        close(client)
        let now = ContinuousClock.now
        if lastBusyLog.map({ now - $0 >= .seconds(60) }) ?? true {
            lastBusyLog = now
            logger.warning(
                "control socket: \(connections.count) connections open, the limit; refusing more (logged once a minute)"
            )
        }
    }

    private func handle(_ line: ControlConnection.Line, on connection: ControlConnection) {
        let request: ControlRequest
        switch line {
        case .tooLong:
            connection.finish(
                with: .failure(
                    ControlError(
                        .requestTooLarge,
                        "the request is longer than \(ControlProtocol.maximumRequestBytes) bytes; closing")))
            return
        case .complete(let bytes):
            do {
                request = try ControlProtocol.decoder().decode(ControlRequest.self, from: Data(bytes))
            } catch {
                connection.finish(
                    with: .failure(
                        ControlError(.badRequest, "the request is not a valid control request: \(Self.describe(error))")
                    ))
                return
            }
        }
        guard request.version == ControlProtocol.version else {
            connection.finish(
                with: .failure(
                    ControlError(
                        .unsupportedVersion,
                        "protocol version \(request.version) is not supported; this daemon speaks version \(ControlProtocol.version)"
                    )))
            return
        }
        guard let response = handler?(request, connection) else { return }
        if connection.isFollowing {
            connection.send(response)
        } else {
            connection.finish(with: response)
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): "\(context.debugDescription)"
        case DecodingError.keyNotFound(let key, _): "the field \"\(key.stringValue)\" is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "the field \"\(context.codingPath.map(\.stringValue).joined(separator: "."))\" has the wrong type"
        default: "\(error)"
        }
    }

    /// Connections following events.
    /// Connections open now (on the server's queue).
    public var openConnections: Int { connections.count }

    public var followers: [ControlConnection] {
        connections.values.filter(\.isFollowing)
    }

    /// Stops listening, closes every connection and removes the socket file.
    public func stop() {
        acceptSource?.cancel()
        acceptSource = nil
        for connection in connections.values { connection.close() }
        connections = [:]
        if listener >= 0 {
            close(listener)
            listener = -1
            unlink(path)
        }
    }
}

/// One client of the control socket.
public final class ControlConnection: @unchecked Sendable {
    enum Line {
        case complete([UInt8])
        case tooLong
    }

    /// The newest event id this follower has been sent.
    public var lastEventID: Int64 = 0
    /// For a follower: only events of this owner MAC (lower-case text), if set.
    public var ownerFilter: String?
    public private(set) var isFollowing = false
    private let descriptor: Int32
    private let queue: DispatchQueue
    private let logger: Logger
    private var input: [UInt8] = []
    private var output: [UInt8] = []
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var writeSuspended = true
    private var closeAfterWrite = false
    private var drained = 0
    private var closed = false
    private var onClose: () -> Void = {}
    /// Bytes of earlier answers a client may leave unread before its connection is closed.
    static let maximumPendingOutput = 1 << 20

    init(descriptor: Int32, queue: DispatchQueue, logger: Logger) {
        self.descriptor = descriptor
        self.queue = queue
        self.logger = logger
    }

    func start(onLine: @escaping (Line) -> Void, onClose: @escaping () -> Void) {
        self.onClose = onClose
        let read = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        read.setEventHandler { [weak self] in self?.readAvailable(onLine) }
        read.activate()
        readSource = read
        let write = DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue)
        write.setEventHandler { [weak self] in self?.flush() }
        writeSource = write
    }

    /// Keeps the connection open after the answer: events follow.
    public func follow(from id: Int64, owner: String?) {
        isFollowing = true
        lastEventID = id
        ownerFilter = owner
    }

    private func readAvailable(_ onLine: (Line) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !closed {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 {
                close()
                return
            }
            guard count > 0 else {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                close()
                return
            }
            // A follower only reads to notice the client going; anything it sends is ignored. After the last
            // answer the rest of a request is read and dropped (closing with unread data would reset the
            // connection and lose the answer), up to a limit.
            if isFollowing { continue }
            if closeAfterWrite {
                drained += count
                if drained > Self.maximumPendingOutput { close() }
                continue
            }
            input += buffer[0..<count]
            if let newline = input.firstIndex(of: 0x0A) {
                let line = Array(input[..<newline])
                input = []
                onLine(line.count > ControlProtocol.maximumRequestBytes ? .tooLong : .complete(line))
            } else if input.count > ControlProtocol.maximumRequestBytes {
                input = []
                onLine(.tooLong)
            }
        }
    }

    /// Sends one response line.
    public func send(_ response: ControlResponse) {
        guard !closed else { return }
        guard let line = try? ControlProtocol.line(response) else { return }
        // The bound is on what a client leaves unread (a `follow` that stopped reading), not on one answer: the
        // host list of a large network is several megabytes and goes out whole.
        if output.count > Self.maximumPendingOutput {
            logger.warning("control: a client is not reading its answers; closing its connection")
            close()
            return
        }
        output += line
        flush()
    }

    /// Sends the last response line, then ends the connection: our side at once, the client's when it closes
    /// (or after five seconds).
    func finish(with response: ControlResponse) {
        send(response)
        closeAfterWrite = true
        input = []
        if output.isEmpty { shutdownWriting() }
        queue.asyncAfter(deadline: .now() + .seconds(5)) { [weak self] in self?.close() }
    }

    private func shutdownWriting() {
        guard !closed else { return }
        shutdown(descriptor, Int32(SHUT_WR))
    }

    private func flush() {
        while !output.isEmpty, !closed {
            let count = output.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                output.removeFirst(count)
                continue
            }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                if writeSuspended {
                    writeSuspended = false
                    writeSource?.activate()
                }
                return
            }
            close()
            return
        }
        if output.isEmpty, closeAfterWrite { shutdownWriting() }
    }

    func close() {
        guard !closed else { return }
        closed = true
        // The descriptor is closed once both sources on it are cancelled, as Dispatch requires.
        let closer = DescriptorCloser(descriptor: descriptor, sources: 2)
        readSource?.setCancelHandler { closer.sourceCancelled() }
        writeSource?.setCancelHandler { closer.sourceCancelled() }
        readSource?.cancel()
        if writeSuspended {
            // A source never activated must still be activated before it can be cancelled and released.
            writeSource?.activate()
        }
        writeSource?.cancel()
        onClose()
    }
}

/// Closes a descriptor when the last dispatch source on it has been cancelled.
private final class DescriptorCloser: Sendable {
    private let descriptor: Int32
    /// Sources not cancelled yet.
    private let remaining: Mutex<Int>

    init(descriptor: Int32, sources: Int) {
        self.descriptor = descriptor
        remaining = Mutex(sources)
    }

    func sourceCancelled() {
        let last = remaining.withLock { remaining in
            remaining -= 1
            return remaining == 0
        }
        if last { Glibc.close(descriptor) }
    }
}
