import NetworkAddresses
import Testing

@testable import SleepProxyDaemon

/// Who may wake and forget from the page: the token, the site the request comes from, and the body's type.
@Suite struct WebAccessTests {
    static let token = "0123456789abcdef0123"
    static let access = WebAccess(token: WebToken(token))

    /// A request as the page's script sends it, from the page at `host`.
    static func fromThePage(host: String = "192.168.1.10:8080") -> WebAccess.Request {
        WebAccess.Request(
            host: host, origin: "http://" + host, fetchSite: "same-origin", contentType: "application/json",
            authorization: "Bearer " + token)
    }

    @Test func thePageWithItsTokenMayAct() {
        #expect(Self.access.check(Self.fromThePage()) == .allowed)
        // A script or curl sends no Origin and no Sec-Fetch-Site: the token is what counts.
        var script = Self.fromThePage()
        script.origin = nil
        script.fetchSite = nil
        script.contentType = "application/json; charset=utf-8"
        script.authorization = "bearer " + Self.token
        #expect(Self.access.check(script) == .allowed)
        var https = Self.fromThePage(host: "homeserver.lan")
        https.origin = "https://homeserver.lan"
        #expect(Self.access.check(https) == .allowed)
    }

    @Test func withoutAConfiguredTokenThePageIsReadOnly() {
        guard case .refused(403, let message) = WebAccess(token: nil).check(Self.fromThePage()) else {
            Issue.record("allowed without a token")
            return
        }
        #expect(message.contains("[web]") && message.contains("token"))
    }

    /// One header of the page's request changed (nil: left out), and the status it gets.
    static let refusals: [(header: String, value: String?, status: Int)] = [
        ("Origin", "http://evil.example", 403),
        ("Origin", "http://192.168.1.10:9000", 403),
        ("Origin", "null", 403),
        ("Host", nil, 403),
        ("Sec-Fetch-Site", "cross-site", 403),
        ("Sec-Fetch-Site", "same-site", 403),
        ("Content-Type", "application/x-www-form-urlencoded", 415),
        ("Content-Type", "text/plain", 415),
        ("Content-Type", nil, 415),
        ("Authorization", nil, 401),
        ("Authorization", "Bearer 0123456789abcdef0124", 401),
        ("Authorization", "Bearer 0123456789abcdef012", 401),
        ("Authorization", "Bearer 0123456789abcdef01234", 401),
        ("Authorization", "Basic 0123456789abcdef0123", 401),
        ("Authorization", "0123456789abcdef0123", 401),
    ]

    @Test(arguments: refusals)
    func refuses(_ refusal: (header: String, value: String?, status: Int)) {
        var request = Self.fromThePage()
        switch refusal.header {
        case "Origin": request.origin = refusal.value
        case "Host": request.host = refusal.value
        case "Sec-Fetch-Site": request.fetchSite = refusal.value
        case "Content-Type": request.contentType = refusal.value
        default: request.authorization = refusal.value
        }
        guard case .refused(let status, _) = Self.access.check(request) else {
            Issue.record("\(refusal.header): \(refusal.value ?? "none") allowed")
            return
        }
        #expect(status == refusal.status, "\(refusal.header): \(refusal.value ?? "none")")
    }

    @Test func thePageAnswersToAddressesAndTheMachinesName() {
        let access = WebAccess(token: nil, serverName: "HomeServer")
        for host in [
            "192.168.1.10:8080", "192.168.1.10", "[fd00::10]:8080", "homeserver",
            "homeserver.local:8080", "HOMESERVER.lan", "localhost:8080", "",
        ] {
            #expect(access.hostAllowed(host), "\(host)")
        }
        #expect(access.hostAllowed(nil))
        for host in [
            "evil.example", "evil.example:8080", "homeserver-x.example", "x.homeserver.example", "[nonsense]:80",
            "[::1",
        ] {
            #expect(!access.hostAllowed(host), "\(host)")
        }
    }

    @Test func tokensTooShortOrUnfitForAHeaderAreRefused() {
        #expect(WebToken.problem("0123456789abcdef") == nil)
        #expect(WebToken.problem("0123456789abcde")?.contains("at least 16") == true)
        #expect(WebToken.problem("0123456789 abcdef")?.contains("printable ASCII") == true)
        #expect(WebToken.problem("0123456789abcdéf0")?.contains("printable ASCII") == true)
        // Never printed.
        #expect(!"\(WebToken(Self.token))".contains(Self.token))
    }

    @Test func oneListenerServesBothWhenTheAddressesAreTheSame() throws {
        let lan = MetricsAddress(address: .v4(IPv4Address(192, 168, 1, 10)), port: 8080)
        let local = MetricsAddress(address: .v4(IPv4Address(127, 0, 0, 1)), port: 9187)
        var configuration = DaemonConfiguration(interfaces: ["eth0"], stateDirectory: "/tmp")
        #expect(HTTPEndpoints(configuration).isEmpty)
        configuration.metricsListen = local
        configuration.webToken = WebToken(Self.token)
        #expect(
            HTTPEndpoints(configuration).listeners == [.init(address: local, metrics: true, page: false)])
        // A token without a page opens nothing more, and gives nothing to act with.
        #expect(HTTPEndpoints(configuration).token == nil)
        configuration.webListen = lan
        #expect(
            HTTPEndpoints(configuration).listeners == [
                .init(address: local, metrics: true, page: false), .init(address: lan, metrics: false, page: true),
            ])
        #expect(HTTPEndpoints(configuration).token == WebToken(Self.token))
        configuration.metricsListen = lan
        #expect(HTTPEndpoints(configuration).listeners == [.init(address: lan, metrics: true, page: true)])
    }
}
