public import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
public import NetworkAddresses
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

/// What the page serves (`web.listen`): the daemon's state for the page, and the two things it may ask for.
public struct PageSource: Sendable {
    /// A wake or a forget, asked from the page by the client at `source`.
    public struct Action: Sendable {
        public enum Kind: String, Sendable {
            case wake, forget
        }
        public var kind: Kind
        public var host: String
        /// The client's address and port, for the event.
        public var source: Endpoint?
    }

    /// The state the page shows, read on the daemon's queue and handed to the callback from any thread.
    public var state: @Sendable (@escaping @Sendable (PageState) -> Void) -> Void
    /// Carries out an action on the daemon's queue; the answer and its HTTP status go to the callback.
    public var act: @Sendable (Action, @escaping @Sendable (PageActionResponse, Int) -> Void) -> Void
    /// Who may act.
    var access: WebAccess

    /// `serverName` is this machine's name: the page answers to it and to IP addresses (`WebAccess.hostAllowed`).
    public init(
        state: @escaping @Sendable (@escaping @Sendable (PageState) -> Void) -> Void,
        act: @escaping @Sendable (Action, @escaping @Sendable (PageActionResponse, Int) -> Void) -> Void,
        token: WebToken?, serverName: String
    ) {
        self.state = state
        self.act = act
        self.access = WebAccess(token: token, serverName: serverName)
    }
}

/// The HTTP endpoint of `metrics.listen`: `GET /metrics` (the Prometheus text format) and `GET /hosts.json` (the
/// objects of `sleepproxyctl hosts --json`, for Home Assistant's RESTful sensor and scripts); `HEAD` too. Anything
/// else is 404 (405 for another method on those paths). With a `PageSource` (`web.listen`, alone or on the same
/// address) it also serves the page: `GET /` (rendered with the state as of the request, so that it reads without
/// JavaScript), `/page.css`, `/page.js`, `/state.json` (what the page's script polls), and `POST /api/wake` and
/// `/api/forget` (JSON `{"host": ...}`), which `WebAccess` guards: a configured token as `Authorization: Bearer`, no
/// request from another site, no CORS.
///
/// Bounds, like the control socket's: `Limits.connections` open at once and `connectionsPerSource` from one
/// address (more are answered 503 and closed); a request (line, headers and any body) of at most `requestBytes`
/// (413 and closed beyond), sent whole within `requestTimeout` of its first byte (closed otherwise, which ends a
/// slowloris client); an idle kept-alive connection is closed after `idleTimeout`; a client that asks again before
/// it has read most of the last answer (more than `unreadBytes` of it left) is closed, so that answers never pile
/// up for one that does not read. What a scrape reads from the daemon (metrics or hosts) is taken at most every
/// `snapshotInterval`, however many clients ask, and rendered once for all of them on the server's thread.
///
/// It listens from `init` (so that a bad address fails the start) but answers 503 until `open()`: the daemon's
/// state is read on its queue, which is only its own once it runs.
public final class MetricsServer: Sendable {
    public struct Limits: Sendable {
        public var connections = 32
        public var connectionsPerSource = 4
        public var requestBytes = 16 * 1024
        public var requestTimeout: Duration = .seconds(10)
        public var idleTimeout: Duration = .seconds(60)
        public var snapshotInterval: Duration = .milliseconds(100)
        public var unreadBytes = 64 * 1024

        public init() {}
    }

    /// The address it listens on (with the port the kernel chose, when asked for port 0).
    public let address: MetricsAddress
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    /// Starting until `open()`, stopped by `stop()`: an answer from the daemon that arrives later is dropped, not
    /// sent to a closed loop.
    private let phase: Phase

    /// Listens on `address` at once; throws a `DaemonError` naming `metrics.listen` when the address cannot be
    /// bound (in use, not an address of this host).
    /// `key` names the setting the address comes from, for the error when it cannot be listened on.
    public init(
        address: MetricsAddress, source: MetricsSource?, page: PageSource? = nil, key: String = "metrics.listen",
        logger: Logger, limits: Limits = Limits()
    ) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let connections = ConnectionCount(limits: limits, logger: logger)
        let phase = Phase()
        let answers = Answers(
            metrics: source.map { source in
                Coalesced(interval: limits.snapshotInterval) { deliver in
                    source.snapshot { snapshot in
                        guard phase.current == .serving else { return }
                        // Rendered on the server's thread, not the daemon's.
                        loop.execute { deliver(ByteBuffer(bytes: source.exposition(snapshot))) }
                    }
                }
            },
            hosts: source.map { source in
                Coalesced(interval: limits.snapshotInterval) { deliver in
                    source.hosts { hosts in
                        guard phase.current == .serving else { return }
                        loop.execute {
                            let encoder = ControlProtocol.encoder()
                            encoder.outputFormatting.insert(.prettyPrinted)
                            let body = ((try? encoder.encode(hosts)).map(Array.init) ?? Array("[]".utf8)) + [0x0A]
                            deliver(ByteBuffer(bytes: body))
                        }
                    }
                }
            },
            page: page.map { page in
                Coalesced(interval: limits.snapshotInterval) { deliver in
                    page.state { state in
                        guard phase.current == .serving else { return }
                        loop.execute { deliver(ByteBuffer(bytes: WebPage.json(state))) }
                    }
                }
            },
            pageHTML: page.map { page in
                Coalesced(interval: limits.snapshotInterval) { deliver in
                    page.state { state in
                        guard phase.current == .serving else { return }
                        loop.execute {
                            let now = Date()
                            let offset = TimeZone.current.secondsFromGMT(for: now)
                            deliver(ByteBuffer(string: WebPage.html(state, now: now, secondsFromUTC: offset)))
                        }
                    }
                }
            },
            pageSource: page, logger: logger)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(
                ChannelOptions.writeBufferWaterMark,
                value: ChannelOptions.Types.WriteBufferWaterMark(
                    low: limits.unreadBytes / 2, high: limits.unreadBytes)
            )
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let source = channel.remoteAddress?.ipAddress ?? "?"
                    let admitted = connections.admit(source)
                    // Whatever happens to the channel from here on, its slot is given back when it closes.
                    if admitted { channel.closeFuture.whenComplete { _ in connections.release(source) } }
                    try channel.pipeline.syncOperations.addHandler(RequestBounds(limits: limits, admitted: admitted))
                    guard admitted else { return }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(EndpointHandler(answers: answers, phase: phase))
                }
            }
        do {
            channel = try bootstrap.bind(host: address.host, port: address.port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw DaemonError(description: "\(key) \(address): cannot listen there: \(error)")
        }
        self.group = group
        self.phase = phase
        var bound = address
        if let port = channel.localAddress?.port { bound.port = port }
        self.address = bound
    }

    /// Starts answering (until now, requests were told 503): call it where the daemon's state is read safely.
    public func open() {
        phase.set(.serving)
    }

    /// Closes the listener and every connection.
    public func stop() {
        phase.set(.stopped)
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// Where the server is in its life: listening but not answering yet, answering, or stopped (its event loop takes
/// no more tasks).
private final class Phase: Sendable {
    enum Value: Int {
        case starting = 0
        case serving, stopped
    }
    private let value = Atomic(Value.starting.rawValue)

    var current: Value { Value(rawValue: value.load(ordering: .acquiring)) ?? .stopped }

    func set(_ next: Value) {
        value.store(next.rawValue, ordering: .releasing)
    }
}

/// The answers that read the daemon, each taken and rendered once per interval for every client; nil where the
/// server does not serve them.
private struct Answers: Sendable {
    let metrics: Coalesced?
    let hosts: Coalesced?
    /// The page's state, as JSON (`/state.json`) and as the page itself.
    let page: Coalesced?
    let pageHTML: Coalesced?
    let pageSource: PageSource?
    let logger: Logger
    /// Refused actions are logged at most once a minute: a client guessing tokens does not fill the journal.
    let refusals = OncePerMinute()
    /// Wrong tokens per client, to turn a guesser away.
    let wrongTokens = WrongTokens()
}

/// The wrong tokens each client address presented lately: after `limit` in a minute, its actions are refused (429)
/// until the minute is over, whatever token they carry. The table forgets finished minutes once it holds 4,096
/// addresses, and starts over if they are all recent.
private final class WrongTokens: Sendable {
    static let limit = 10
    private let table = Mutex<[String: (count: Int, since: ContinuousClock.Instant)]>([:])

    /// Whether `source` has presented too many wrong tokens this minute.
    func blocked(_ source: String) -> Bool {
        table.withLock { table in
            guard let entry = table[source], ContinuousClock.now - entry.since < .seconds(60) else { return false }
            return entry.count >= Self.limit
        }
    }

    func note(_ source: String) {
        table.withLock { table in
            let now = ContinuousClock.now
            if table.count >= 4_096 {
                table = table.filter { now - $0.value.since < .seconds(60) }
                if table.count >= 4_096 { table = [:] }
            }
            if let entry = table[source], now - entry.since < .seconds(60) {
                table[source] = (entry.count + 1, entry.since)
            } else {
                table[source] = (1, now)
            }
        }
    }
}

/// Says yes at most once a minute.
private final class OncePerMinute: Sendable {
    private let last = Mutex<ContinuousClock.Instant?>(nil)

    func allow() -> Bool {
        last.withLock { last in
            let now = ContinuousClock.now
            if let previous = last, now - previous < .seconds(60) { return false }
            last = now
            return true
        }
    }
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
    /// Bytes of the request under way (0: none started).
    private var received = 0
    private var deadline: Scheduled<Void>?
    private var refused = false

    init(limits: MetricsServer.Limits, admitted: Bool) {
        self.limits = limits
        self.admitted = admitted
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

/// One answer read from the daemon at most every `interval`, and once for all who ask meanwhile: the rendered
/// bytes, shared by every response (a `ByteBuffer` is copied on write only).
private final class Coalesced: Sendable {
    private let interval: Duration
    /// Reads the daemon and hands the rendered answer over on the server's thread.
    private let fetch: @Sendable (@escaping @Sendable (ByteBuffer) -> Void) -> Void
    private let state = Mutex<State>(State())

    private struct State {
        var last: (at: ContinuousClock.Instant, body: ByteBuffer)?
        var waiting: [@Sendable (ByteBuffer) -> Void] = []
    }

    init(interval: Duration, fetch: @escaping @Sendable (@escaping @Sendable (ByteBuffer) -> Void) -> Void) {
        self.interval = interval
        self.fetch = fetch
    }

    /// Hands `body` an answer no older than the interval.
    func answer(_ body: @escaping @Sendable (ByteBuffer) -> Void) {
        enum Next {
            case use(ByteBuffer)
            case wait, ask
        }
        let next = state.withLock { state -> Next in
            if let last = state.last, ContinuousClock.now - last.at < interval { return .use(last.body) }
            state.waiting.append(body)
            return state.waiting.count == 1 ? .ask : .wait
        }
        switch next {
        case .use(let answer): body(answer)
        case .wait: return
        case .ask:
            fetch { [self] answer in
                let waiting = state.withLock { state in
                    state.last = (ContinuousClock.now, answer)
                    defer { state.waiting = [] }
                    return state.waiting
                }
                for body in waiting { body(answer) }
            }
        }
    }
}

/// Answers the requests the HTTP parser decoded, one at a time (the pipeline handler holds pipelined ones back).
private final class EndpointHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answers: Answers
    private let phase: Phase
    private var head: HTTPRequestHead?
    /// The body of the request under way (`RequestBounds` bounds its size).
    private var body = ByteBuffer()

    init(answers: Answers, phase: Phase) {
        self.answers = answers
        self.phase = phase
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
        case .body(var part):
            // Only the page's actions read a body.
            if answers.pageSource != nil { body.writeBuffer(&part) }
        case .end:
            guard let head else { return }
            self.head = nil
            route(head, context: context)
        }
    }

    /// The paths served, and what a 404 lists.
    private var paths: [String] {
        (answers.metrics == nil ? [] : ["/metrics", "/hosts.json"])
            + (answers.pageSource == nil ? [] : Self.pagePaths.sorted())
    }

    private func route(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        // A client that asks again while most of the last answer waits unread is not reading: closed, rather
        // than have answers pile up for it.
        guard context.channel.isWritable else {
            context.close(promise: nil)
            return
        }
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        if let page = answers.pageSource, Self.pagePaths.contains(String(path)) {
            routePage(String(path), head, page: page, context: context)
            return
        }
        let known = answers.metrics != nil && (path == "/metrics" || path == "/hosts.json")
        guard known else {
            respond(
                context, head, .notFound, "text/plain; charset=utf-8",
                ByteBuffer(string: "not found: \(paths.joined(separator: ", "))\n"))
            return
        }
        guard head.method == .GET || head.method == .HEAD else {
            respond(
                context, head, .methodNotAllowed, "text/plain; charset=utf-8",
                ByteBuffer(string: "only GET and HEAD\n"),
                extra: [("Allow", "GET, HEAD")])
            return
        }
        guard phase.current == .serving else {
            respond(
                context, head, .serviceUnavailable, "text/plain; charset=utf-8", ByteBuffer(string: "starting\n"),
                extra: [("Retry-After", "1")])
            return
        }
        let loop = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        guard let metrics = answers.metrics, let hosts = answers.hosts else { return }
        let (answer, contentType) =
            path == "/metrics" ? (metrics, DaemonMetrics.contentType) : (hosts, "application/json")
        answer.answer { body in
            eventLoop.execute {
                let (handler, context) = loop.value
                handler.respond(context, head, .ok, contentType, body)
            }
        }
    }

    /// The page's paths.
    static let pagePaths: Set<String> = [
        "/", "/index.html", "/page.css", "/page.js", "/state.json", "/api/wake", "/api/forget",
    ]

    /// What every response of the page carries: nothing but the daemon's own resources, no framing by another
    /// site, no referrer, no guessing of types.
    static let pageHeaders: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"),
    ]

    private func routePage(
        _ path: String, _ head: HTTPRequestHead, page: PageSource, context: ChannelHandlerContext
    ) {
        let host = head.headers.first(name: "Host")
        guard page.access.hostAllowed(host) else {
            respond(
                context, head, .misdirectedRequest, "text/plain; charset=utf-8",
                ByteBuffer(
                    string:
                        "this page answers to its IP address or to the machine's name, not to \(host ?? "")\n"),
                extra: Self.pageHeaders)
            return
        }
        let isAction = path.hasPrefix("/api/")
        let allowed: [HTTPMethod] = isAction ? [.POST] : [.GET, .HEAD]
        guard allowed.contains(head.method) else {
            // No CORS: an OPTIONS preflight gets this too, without any Access-Control header.
            respond(
                context, head, .methodNotAllowed, "text/plain; charset=utf-8",
                ByteBuffer(string: "only \(allowed.map(\.rawValue).joined(separator: " and "))\n"),
                extra: [("Allow", allowed.map(\.rawValue).joined(separator: ", "))] + Self.pageHeaders)
            return
        }
        guard phase.current == .serving else {
            respond(
                context, head, .serviceUnavailable, "text/plain; charset=utf-8", ByteBuffer(string: "starting\n"),
                extra: [("Retry-After", "1")] + Self.pageHeaders)
            return
        }
        switch path {
        case "/page.css":
            respond(
                context, head, .ok, "text/css; charset=utf-8", ByteBuffer(string: WebPage.css), extra: Self.pageHeaders)
        case "/page.js":
            respond(
                context, head, .ok, "text/javascript; charset=utf-8", ByteBuffer(string: WebPage.script),
                extra: Self.pageHeaders)
        case "/state.json", "/", "/index.html":
            let asJSON = path == "/state.json"
            guard let answer = asJSON ? answers.page : answers.pageHTML else { return }
            let loop = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            let contentType = asJSON ? "application/json" : "text/html; charset=utf-8"
            answer.answer { body in
                eventLoop.execute {
                    let (handler, context) = loop.value
                    handler.respond(context, head, .ok, contentType, body, extra: Self.pageHeaders)
                }
            }
        default:
            act(path == "/api/wake" ? .wake : .forget, head, page: page, context: context)
        }
    }

    /// A wake or a forget from the page: allowed by `WebAccess`, then carried out by the daemon.
    private func act(
        _ kind: PageSource.Action.Kind, _ head: HTTPRequestHead, page: PageSource, context: ChannelHandlerContext
    ) {
        let request = WebAccess.Request(
            host: head.headers.first(name: "Host"), origin: head.headers.first(name: "Origin"),
            fetchSite: head.headers.first(name: "Sec-Fetch-Site"),
            contentType: head.headers.first(name: "Content-Type"),
            authorization: head.headers.first(name: "Authorization"))
        let remote = context.channel.remoteAddress
        let source = remote.flatMap { address in
            address.ipAddress.flatMap { IPAddress($0) }.map { Endpoint(address: $0, port: UInt16(address.port ?? 0)) }
        }
        let client = source.map { "\($0.address)" } ?? "?"
        if answers.wrongTokens.blocked(client) {
            respondJSON(
                context, head, .tooManyRequests,
                PageActionResponse(
                    ok: false,
                    message: "too many wrong tokens from \(client): try again in a minute"),
                extra: [("Retry-After", "60")])
            return
        }
        if case .refused(let status, let message) = page.access.check(request) {
            if status == 401, request.authorization != nil { answers.wrongTokens.note(client) }
            if answers.refusals.allow() {
                answers.logger.warning(
                    "page: refused \(kind.rawValue) from \(source.map { "\($0)" } ?? "an unknown address"): \(message) (logged at most once a minute)"
                )
            }
            respondJSON(
                context, head, HTTPResponseStatus(statusCode: status), PageActionResponse(ok: false, message: message),
                extra: status == 401 ? [("WWW-Authenticate", "Bearer")] : [])
            return
        }
        guard let asked = try? JSONDecoder().decode(PageActionRequest.self, from: Data(body.readableBytesView)) else {
            respondJSON(
                context, head, .badRequest,
                PageActionResponse(ok: false, message: "the body must be JSON: {\"host\": \"NAME, ADDRESS OR MAC\"}"))
            return
        }
        let loop = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        page.act(PageSource.Action(kind: kind, host: asked.host, source: source)) { response, status in
            eventLoop.execute {
                let (handler, context) = loop.value
                handler.respondJSON(context, head, HTTPResponseStatus(statusCode: status), response)
            }
        }
    }

    private func respondJSON(
        _ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ status: HTTPResponseStatus,
        _ response: PageActionResponse, extra: [(String, String)] = []
    ) {
        let body = ((try? JSONEncoder().encode(response)).map(Array.init) ?? []) + [0x0A]
        respond(context, request, status, "application/json", ByteBuffer(bytes: body), extra: extra + Self.pageHeaders)
    }

    private func respond(
        _ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ status: HTTPResponseStatus,
        _ contentType: String, _ body: ByteBuffer, extra: [(String, String)] = []
    ) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: contentType)
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        for (name, value) in extra { headers.add(name: name, value: value) }
        let keepAlive = request.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
            promise: nil)
        if request.method != .HEAD {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        let channel = context.channel
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        context.triggerUserOutboundEvent(RequestBounds.Answered(), promise: nil)
        if !keepAlive { written.whenComplete { _ in channel.close(promise: nil) } }
    }
}
