import Foundation
import Logging
import NetworkAddresses
import SleepProxyControl
import SleepProxyDaemon
import Synchronization
import TestLab
import Testing

/// The page's routes on loopback, with real sockets: its files and their headers, and who may wake and forget.
@Suite struct PageServerTests {
    static let token = "0123456789abcdef0123"

    /// The actions that reached the daemon.
    final class Acts: Sendable {
        let asked = Mutex<[PageSource.Action]>([])
        var all: [PageSource.Action] { asked.withLock { $0 } }
    }

    static let state = PageState(
        generatedAt: Date(timeIntervalSince1970: 1_900_000_000), version: "1.2.3", serverName: "homeserver",
        interfaces: ["eth0"],
        hosts: [
            HostSummary(
                name: "sleepy.local", ownerMAC: "02:66:00:00:00:02", wakeMAC: "02:66:00:00:00:02", interface: "eth0",
                addresses: ["10.66.0.2"], services: ["sleepy._ssh._tcp.local."], state: "held", wakeReason: nil,
                recordCount: 4, registeredAt: Date(timeIntervalSince1970: 1_899_999_000),
                leaseExpiresAt: Date(timeIntervalSince1970: 1_900_007_000), lastWake: nil)
        ], seen: [], events: [], actionsEnabled: true)

    /// A page-only server on a free loopback port, answering; `token` nil leaves it read-only.
    static func server(token: String?, acts: Acts, limits: MetricsServer.Limits = MetricsServer.Limits()) throws
        -> MetricsServer
    {
        let page = PageSource(
            state: { reply in reply(state) },
            act: { action, reply in
                acts.asked.withLock { $0.append(action) }
                reply(PageActionResponse(ok: true, message: "waking \(action.host)"), 200)
            }, token: token.map { WebToken($0) }, serverName: "homeserver")
        let server = try MetricsServer(
            address: MetricsAddress(address: .v4(IPv4Address(127, 0, 0, 1)), port: 0), source: nil, page: page,
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, limits: limits)
        server.open()
        return server
    }

    /// `POST path` with `body`, and `headers` (a line each) on top of Host and Content-Length.
    static func post(_ path: String, port: Int, headers: [String], body: String = #"{"host":"sleepy.local"}"#) throws
        -> HTTPReply
    {
        let lines =
            ["POST \(path) HTTP/1.1", "Host: 127.0.0.1:\(port)", "Content-Length: \(body.utf8.count)"] + headers + [
                "Connection: close"
            ]
        return try TCPConnection(host: "127.0.0.1", port: port).exchange(
            lines.joined(separator: "\r\n") + "\r\n\r\n" + body)
    }

    /// The headers the page's script sends, from the page at `port`.
    static func fromThePage(port: Int, token: String = token) -> [String] {
        [
            "Origin: http://127.0.0.1:\(port)", "Sec-Fetch-Site: same-origin", "Content-Type: application/json",
            "Authorization: Bearer \(token)",
        ]
    }

    @Test func thePageAndItsFilesComeWithTheirTypesAndASelfOnlyPolicy() throws {
        let server = try Self.server(token: nil, acts: Acts())
        defer { server.stop() }
        let port = server.address.port
        for (path, type) in [
            ("/", "text/html; charset=utf-8"), ("/page.css", "text/css; charset=utf-8"),
            ("/page.js", "text/javascript; charset=utf-8"), ("/state.json", "application/json"),
        ] {
            let reply = try httpGet(host: "127.0.0.1", port: port, path)
            #expect(reply.status == 200 && reply.headers["content-type"] == type, "\(path): \(reply)")
            #expect(reply.headers["content-security-policy"]?.hasPrefix("default-src 'self'") == true, "\(path)")
            #expect(reply.headers["x-frame-options"] == "DENY" && reply.headers["x-content-type-options"] == "nosniff")
            #expect(reply.headers["access-control-allow-origin"] == nil)
        }
        let json = try httpGet(host: "127.0.0.1", port: port, "/state.json")
        #expect(try ControlProtocol.decoder().decode(PageState.self, from: Data(json.body)) == Self.state)
        // A listener of the page alone serves no metrics.
        let metrics = try httpGet(host: "127.0.0.1", port: port, "/metrics")
        #expect(metrics.status == 404 && !metrics.text.contains("/metrics"), "\(metrics)")
    }

    @Test func theTokenFromThePageWakesWithTheClientsAddress() throws {
        let acts = Acts()
        let server = try Self.server(token: Self.token, acts: acts)
        defer { server.stop() }
        let port = server.address.port
        let wake = try Self.post("/api/wake", port: port, headers: Self.fromThePage(port: port))
        #expect(wake.status == 200, "\(wake)")
        #expect(try JSONDecoder().decode(PageActionResponse.self, from: Data(wake.body)).ok)
        let forget = try Self.post("/api/forget", port: port, headers: Self.fromThePage(port: port))
        #expect(forget.status == 200, "\(forget)")
        let asked = acts.all
        #expect(asked.map(\.kind) == [.wake, .forget])
        #expect(asked.allSatisfy { $0.host == "sleepy.local" && $0.source?.address == .v4(IPv4Address(127, 0, 0, 1)) })
        #expect(asked.allSatisfy { ($0.source?.port ?? 0) != 0 })
    }

    @Test func refusedRequestsReachNothing() throws {
        let acts = Acts()
        let readOnly = try Self.server(token: nil, acts: acts)
        defer { readOnly.stop() }
        let noToken = try Self.post(
            "/api/wake", port: readOnly.address.port, headers: Self.fromThePage(port: readOnly.address.port))
        #expect(noToken.status == 403 && noToken.text.contains("read-only"), "\(noToken)")

        let server = try Self.server(token: Self.token, acts: acts)
        defer { server.stop() }
        let port = server.address.port
        let page = Self.fromThePage(port: port)
        let wrong = try Self.post(
            "/api/wake", port: port, headers: Self.fromThePage(port: port, token: "fedcba9876543210fedc"))
        #expect(wrong.status == 401 && wrong.headers["www-authenticate"] == "Bearer", "\(wrong)")
        let elsewhere = try Self.post(
            "/api/wake", port: port, headers: ["Origin: http://evil.example"] + page.dropFirst())
        #expect(elsewhere.status == 403, "\(elsewhere)")
        let form = try Self.post(
            "/api/wake", port: port,
            headers: [page[0], page[1], "Content-Type: application/x-www-form-urlencoded", page[3]],
            body: "host=sleepy.local")
        #expect(form.status == 415, "\(form)")
        // A browser's preflight for another site: no CORS, so the browser sends nothing after it.
        let preflight = try TCPConnection(host: "127.0.0.1", port: port).exchange(
            "OPTIONS /api/wake HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"
        )
        #expect(preflight.status == 405 && preflight.headers["access-control-allow-origin"] == nil, "\(preflight)")
        let get = try httpGet(host: "127.0.0.1", port: port, "/api/wake")
        #expect(get.status == 405 && get.headers["allow"] == "POST")
        let notJSON = try Self.post("/api/wake", port: port, headers: page, body: "sleepy.local")
        #expect(notJSON.status == 400, "\(notJSON)")
        #expect(acts.all.isEmpty)
    }

    /// A name the machine does not go by is a site that pointed its own name at the page's address (DNS
    /// rebinding): refused, so that its script cannot read the page as its own.
    @Test func thePageAnswersToItsAddressAndTheMachinesNameOnly() throws {
        let acts = Acts()
        let server = try Self.server(token: Self.token, acts: acts)
        defer { server.stop() }
        let port = server.address.port
        func get(_ path: String, host: String, origin: String? = nil) throws -> HTTPReply {
            try TCPConnection(host: "127.0.0.1", port: port).exchange(
                "GET \(path) HTTP/1.1\r\nHost: \(host)\r\n\(origin.map { "Origin: \($0)\r\n" } ?? "")Connection: close\r\n\r\n"
            )
        }
        for host in [
            "homeserver:\(port)", "HomeServer.local:\(port)", "homeserver.lan", "127.0.0.1:\(port)", "[::1]:\(port)",
        ] {
            #expect(try get("/state.json", host: host).status == 200, "\(host)")
        }
        for host in ["evil.example:\(port)", "homeserver-evil.example", "attacker.homeserver.example"] {
            let reply = try get("/state.json", host: host)
            #expect(reply.status == 421, "\(host): \(reply)")
            #expect(try get("/", host: host).status == 421)
        }
        let rebound = try Self.post(
            "/api/wake", port: port,
            headers: ["Origin: http://evil.example:\(port)"] + Self.fromThePage(port: port).dropFirst())
        #expect(rebound.status == 403, "\(rebound)")
        // Another site's Origin on a read: no CORS header lets its script see the answer.
        let read = try get("/state.json", host: "127.0.0.1:\(port)", origin: "http://evil.example")
        #expect(read.status == 200 && read.headers["access-control-allow-origin"] == nil, "\(read)")
    }

    /// Ten wrong tokens in a minute from one address, and its actions are refused for the rest of it, even with
    /// the right token.
    @Test func aClientGuessingTokensIsTurnedAway() throws {
        let acts = Acts()
        let server = try Self.server(token: Self.token, acts: acts)
        defer { server.stop() }
        let port = server.address.port
        for guess in 0..<10 {
            let wrong = try Self.post(
                "/api/wake", port: port, headers: Self.fromThePage(port: port, token: "guess-\(guess)-0123456789abcdef")
            )
            #expect(wrong.status == 401, "guess \(guess): \(wrong)")
        }
        let right = try Self.post("/api/wake", port: port, headers: Self.fromThePage(port: port))
        #expect(right.status == 429 && right.headers["retry-after"] == "60", "\(right)")
        #expect(acts.all.isEmpty)
    }

    @Test func theEndpointsBoundsApplyToActions() throws {
        var limits = MetricsServer.Limits()
        limits.requestBytes = 2_048
        let acts = Acts()
        let server = try Self.server(token: Self.token, acts: acts, limits: limits)
        defer { server.stop() }
        let port = server.address.port
        let large = #"{"host":""# + String(repeating: "x", count: 4_096) + #""}"#
        let reply = try Self.post("/api/wake", port: port, headers: Self.fromThePage(port: port), body: large)
        #expect(reply.status == 413, "\(reply)")
        #expect(acts.all.isEmpty)
    }
}
