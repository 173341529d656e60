public import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
public import SleepProxyControl
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// DESIGN: the HTTP server is swift-nio's HTTP/1 (NIOPosix, NIOHTTP1), chosen over Hummingbird and FlyingFox.
// Measured on the 2-core build machine with a minimal program serving /metrics from swift-prometheus in each (clean
// builds, static Swift runtime, mean of two runs; the difference from swift-prometheus alone):
//
//   option        packages  release build  debug build  stripped binary  idle RSS
//   swift-nio     +3        +45 s          +22 s        +4.7 MB          10 MB
//   Hummingbird   +22       +107 s         +59 s        +62.6 MB         26 MB
//   FlyingFox     +1        +12 s          +8 s         +52.9 MB         22 MB
//
// FlyingFox builds fastest but links all of Foundation (its proxy handler pulls in FoundationNetworking and
// libcurl), and it bounds neither the connections nor the request: headers are read with no size limit and no
// timeout, so a slowloris client holds its connections for good, with no hook to refuse the next one. Hummingbird
// brings a router, middleware, a service group and tracing this endpoint does not need, at twice swift-nio's build
// time and a binary bigger by 60 MB. swift-nio gives the parts the endpoint needs and no more: a maintained HTTP/1
// parser (llhttp, headers capped at 80 KiB), a pipeline where a handler in front of the parser counts a request's
// bytes and times it, and the accepted channels, counted per source as they come. It runs on one thread of its own:
// a client, however slow or hostile, only ever holds that thread's sockets, never the daemon's queue.

/// What the endpoint serves, read where the state lives (the daemon's queue): each function hands its value to
/// the callback, from any thread; the callback renders nothing there.
public struct MetricsSource: Sendable {
    /// The figures of one scrape.
    public var snapshot: @Sendable (@escaping @Sendable (MetricsSnapshot) -> Void) -> Void
    /// The hosts `sleepproxyctl hosts` lists.
    public var hosts: @Sendable (@escaping @Sendable ([HostSummary]) -> Void) -> Void
    /// The exposition of a snapshot (run on the server's thread).
    public var exposition: @Sendable (MetricsSnapshot) -> [UInt8]

    public init(
        snapshot: @escaping @Sendable (@escaping @Sendable (MetricsSnapshot) -> Void) -> Void,
        hosts: @escaping @Sendable (@escaping @Sendable ([HostSummary]) -> Void) -> Void,
        exposition: @escaping @Sendable (MetricsSnapshot) -> [UInt8]
    ) {
        self.snapshot = snapshot
        self.hosts = hosts
        self.exposition = exposition
    }
}

/// The HTTP endpoint of `metrics.listen`: `GET /metrics` (the Prometheus text format) and `GET /hosts.json` (the
/// objects of `sleepproxyctl hosts --json`, for Home Assistant's RESTful sensor and scripts); `HEAD` too. Anything
/// else is 404 (405 for another method on those paths).
///
/// Bounds, like the control socket's: `Limits.connections` open at once and `connectionsPerSource` from one
/// address (more are answered 503 and closed); a request (line, headers and any body) of at most `requestBytes`
/// (413 and closed beyond), sent whole within `requestTimeout` of its first byte (closed otherwise, which ends a
/// slowloris client); an idle kept-alive connection is closed after `idleTimeout`. What a scrape reads from the
/// daemon is taken at most every `snapshotInterval`, however many clients ask.
public final class MetricsServer: Sendable {
    public struct Limits: Sendable {
        public var connections = 32
        public var connectionsPerSource = 4
        public var requestBytes = 16 * 1024
        public var requestTimeout: Duration = .seconds(10)
        public var idleTimeout: Duration = .seconds(60)
        public var snapshotInterval: Duration = .milliseconds(100)

        public init() {}
    }

    /// The address it listens on (with the port the kernel chose, when asked for port 0).
    public let address: MetricsAddress
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// Cleared by `stop()`: an answer from the daemon that arrives later is dropped, not sent to a closed loop.
    private let running: Running

    /// Listens on `address` at once; throws a `DaemonError` naming `metrics.listen` when the address cannot be
    /// bound (in use, not an address of this host).
    public init(
        address: MetricsAddress, source: MetricsSource, logger: Logger, limits: Limits = Limits()
    ) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let connections = ConnectionCount(limits: limits, logger: logger)
        let cache = ScrapeCache(source: source, interval: limits.snapshotInterval)
        let running = Running()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let source = channel.remoteAddress?.ipAddress ?? "?"
                    let admitted = connections.admit(source)
                    try channel.pipeline.syncOperations.addHandler(
                        RequestBounds(limits: limits, admitted: admitted, release: { connections.release(source) }))
                    guard admitted else { return }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(EndpointHandler(cache: cache, running: running))
                }
            }
        do {
            channel = try bootstrap.bind(host: address.host, port: address.port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw DaemonError(description: "metrics.listen \(address): cannot listen there: \(error)")
        }
        self.group = group
        self.running = running
        var bound = address
        if let port = channel.localAddress?.port { bound.port = port }
        self.address = bound
    }

    /// Closes the listener and every connection.
    public func stop() {
        running.flag.store(false, ordering: .sequentiallyConsistent)
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// Whether the server still runs (its event loop takes tasks).
private final class Running: Sendable {
    let flag = Atomic(true)
    var isRunning: Bool { flag.load(ordering: .sequentiallyConsistent) }
}

/// Connections open now, in all and per source address.
private final class ConnectionCount: Sendable {
    private let limits: MetricsServer.Limits
    private let logger: Logger
    private let state = Mutex<(total: Int, bySource: [String: Int], lastLog: ContinuousClock.Instant?)>(
        (0, [:], nil))

    init(limits: MetricsServer.Limits, logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    /// Counts a new connection if it is within the limits; one that is not is refused (and not counted).
    func admit(_ source: String) -> Bool {
        let (admitted, log) = state.withLock { state -> (Bool, Bool) in
            let fromSource = state.bySource[source] ?? 0
            if state.total < limits.connections, fromSource < limits.connectionsPerSource {
                state.total += 1
                state.bySource[source] = fromSource + 1
                return (true, false)
            }
            let now = ContinuousClock.now
            if let last = state.lastLog, now - last < .seconds(60) { return (false, false) }
            state.lastLog = now
            return (false, true)
        }
        if log {
            logger.warning(
                "metrics: refused a connection from \(source): \(limits.connections) connections at most, \(limits.connectionsPerSource) from one address (logged at most once a minute)"
            )
        }
        return admitted
    }

    func release(_ source: String) {
        state.withLock { state in
            state.total -= 1
            let left = (state.bySource[source] ?? 1) - 1
            state.bySource[source] = left > 0 ? left : nil
        }
    }
}

/// In front of the HTTP parser: counts each request's bytes and times it, closes an idle connection, and answers
/// a connection over the limits 503. A request is over when the endpoint says so (`RequestBounds.Answered`).
private final class RequestBounds: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Sent by the endpoint (as an outbound user event) once a request is answered.
    struct Answered {}

    private let limits: MetricsServer.Limits
    private let admitted: Bool
    private let release: () -> Void
    /// Bytes of the request under way (0: none started).
    private var received = 0
    private var deadline: Scheduled<Void>?
    private var refused = false

    init(limits: MetricsServer.Limits, admitted: Bool, release: @escaping () -> Void) {
        self.limits = limits
        self.admitted = admitted
        self.release = release
    }

    func channelActive(context: ChannelHandlerContext) {
        if !admitted {
            refuse(context, "503 Service Unavailable", "too many connections; try again later\n")
            return
        }
        // The first request must start within the idle time, like any later one.
        schedule(context, after: limits.idleTimeout)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if admitted { release() }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard admitted, !refused else { return }
        let bytes = unwrapInboundIn(data).readableBytes
        if received == 0, bytes > 0 { schedule(context, after: limits.requestTimeout) }
        received += bytes
        guard received <= limits.requestBytes else {
            refuse(context, "413 Content Too Large", "a request is at most \(limits.requestBytes) bytes\n")
            return
        }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if event is Answered {
            received = 0
            schedule(context, after: limits.idleTimeout)
            promise?.succeed(())
            return
        }
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    /// Closes the connection at `delay` from now unless something reschedules it first.
    private func schedule(_ context: ChannelHandlerContext, after delay: Duration) {
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: TimeAmount(delay)) { channel.close(promise: nil) }
    }

    /// Answers with `status` straight on the socket (the HTTP parser is not reached) and closes.
    private func refuse(_ context: ChannelHandlerContext, _ status: String, _ text: String) {
        refused = true
        deadline?.cancel()
        let response =
            "HTTP/1.1 \(status)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(text.utf8.count)\r\nConnection: close\r\n\r\n\(text)"
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: response))).whenComplete {
            _ in channel.close(promise: nil)
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

/// Takes what a scrape reads from the daemon at most every `interval`, and once for all who ask meanwhile.
private final class ScrapeCache: Sendable {
    let source: MetricsSource
    private let interval: Duration
    private let state = Mutex<State>(State())

    private struct State {
        var last: (at: ContinuousClock.Instant, snapshot: MetricsSnapshot)?
        var waiting: [@Sendable (MetricsSnapshot) -> Void] = []
    }

    init(source: MetricsSource, interval: Duration) {
        self.source = source
        self.interval = interval
    }

    /// Hands `body` a snapshot no older than the interval, from any thread.
    func snapshot(_ body: @escaping @Sendable (MetricsSnapshot) -> Void) {
        enum Next {
            case use(MetricsSnapshot)
            case wait, ask
        }
        let next = state.withLock { state -> Next in
            if let last = state.last, ContinuousClock.now - last.at < interval { return .use(last.snapshot) }
            state.waiting.append(body)
            return state.waiting.count == 1 ? .ask : .wait
        }
        switch next {
        case .use(let snapshot): body(snapshot)
        case .wait: return
        case .ask:
            source.snapshot { [self] snapshot in
                let waiting = state.withLock { state in
                    state.last = (ContinuousClock.now, snapshot)
                    defer { state.waiting = [] }
                    return state.waiting
                }
                for body in waiting { body(snapshot) }
            }
        }
    }
}

/// Answers the requests the HTTP parser decoded, one at a time (the pipeline handler holds pipelined ones back).
private final class EndpointHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let cache: ScrapeCache
    private let running: Running
    private var head: HTTPRequestHead?

    init(cache: ScrapeCache, running: Running) {
        self.cache = cache
        self.running = running
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            // A body is not wanted; RequestBounds bounds its size.
            break
        case .end:
            guard let head else { return }
            self.head = nil
            route(head, context: context)
        }
    }

    private func route(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let known = path == "/metrics" || path == "/hosts.json"
        guard known else {
            respond(
                context, head, .notFound, "text/plain; charset=utf-8",
                Array("not found: /metrics or /hosts.json\n".utf8))
            return
        }
        guard head.method == .GET || head.method == .HEAD else {
            respond(
                context, head, .methodNotAllowed, "text/plain; charset=utf-8", Array("only GET and HEAD\n".utf8),
                extra: [("Allow", "GET, HEAD")])
            return
        }
        let loop = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let cache = self.cache
        let running = self.running
        if path == "/metrics" {
            cache.snapshot { snapshot in
                guard running.isRunning else { return }
                eventLoop.execute {
                    let (handler, context) = loop.value
                    handler.respond(
                        context, head, .ok, DaemonMetrics.contentType, cache.source.exposition(snapshot))
                }
            }
        } else {
            cache.source.hosts { hosts in
                guard running.isRunning else { return }
                eventLoop.execute {
                    let (handler, context) = loop.value
                    let encoder = ControlProtocol.encoder()
                    encoder.outputFormatting.insert(.prettyPrinted)
                    let body = ((try? encoder.encode(hosts)).map(Array.init) ?? Array("[]".utf8)) + [0x0A]
                    handler.respond(context, head, .ok, "application/json", body)
                }
            }
        }
    }

    private func respond(
        _ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ status: HTTPResponseStatus,
        _ contentType: String, _ body: [UInt8], extra: [(String, String)] = []
    ) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.count))
        for (name, value) in extra { headers.add(name: name, value: value) }
        let keepAlive = request.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
            promise: nil)
        if request.method != .HEAD {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let channel = context.channel
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        context.triggerUserOutboundEvent(RequestBounds.Answered(), promise: nil)
        if !keepAlive { written.whenComplete { _ in channel.close(promise: nil) } }
    }
}
