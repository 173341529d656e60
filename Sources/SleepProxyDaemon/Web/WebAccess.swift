import NetworkAddresses

/// Whether a request that changes state (a wake, a forget) may go ahead: a token must be configured and presented
/// as `Authorization: Bearer TOKEN` (never in the URL), and a browser's request must come from the page itself, not
/// from another site. Pure: the server hands it the request's headers.
struct WebAccess: Sendable {
    var token: WebToken?
    /// This machine's name (its first label): the page answers to it (`homeserver`, `homeserver.local`,
    /// `homeserver.lan`) and to IP addresses (`Host`: `hostAllowed`).
    var serverName: String = "localhost"

    enum Decision: Equatable, Sendable {
        case allowed
        /// Refused with an HTTP status and the reason, as the page shows it.
        case refused(status: Int, message: String)
    }

    /// The headers that decide, as the request carried them (nil where absent).
    struct Request: Sendable {
        var host: String?
        var origin: String?
        /// `Sec-Fetch-Site`: browsers say where a request comes from.
        var fetchSite: String?
        var contentType: String?
        var authorization: String?
    }

    /// Whether a request's `Host` is one the page answers to: an IP address, `localhost`, or a name whose first
    /// label is this machine's. Another name is a site that made its own name point at this address (DNS
    /// rebinding) to read the page as its own: refused, for reading as for acting. No `Host` (HTTP/1.0) is allowed.
    func hostAllowed(_ host: String?) -> Bool {
        guard let host, !host.isEmpty else { return true }
        // Without the port: "[fd00::1]:8080", "10.0.0.2:8080", "homeserver.lan".
        var name = Substring(host)
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            return IPv6Address(String(name[name.index(after: name.startIndex)..<close])) != nil
        }
        if let colon = name.lastIndex(of: ":") { name = name[..<colon] }
        if IPv4Address(String(name)) != nil { return true }
        let first = name.split(separator: ".", maxSplits: 1).first.map { $0.lowercased() } ?? ""
        return first == "localhost" || first == serverName.lowercased()
    }

    func check(_ request: Request) -> Decision {
        guard let token else {
            return .refused(
                status: 403,
                message:
                    "the page is read-only: set token (or token_file) under [web] in the config file to wake and forget from it"
            )
        }
        // A cross-site page could make a browser send this request with the user's network position; it never
        // carries a matching Origin (Sec-Fetch-Site, which browsers send only to HTTPS and localhost, says so too).
        if let origin = request.origin {
            guard let host = request.host, origin == "http://" + host || origin == "https://" + host else {
                return .refused(status: 403, message: "a request from another site (Origin \(origin)) is refused")
            }
        }
        if let site = request.fetchSite?.lowercased(), site != "same-origin", site != "none" {
            return .refused(status: 403, message: "a request from another site (Sec-Fetch-Site \(site)) is refused")
        }
        // application/json, which a plain HTML form cannot send: another site would need CORS, which is not offered.
        let mediaType = request.contentType?.split(separator: ";").first.map { $0.filter { $0 != " " }.lowercased() }
        guard mediaType == "application/json" else {
            return .refused(status: 415, message: "the request's body must be JSON (Content-Type: application/json)")
        }
        guard let authorization = request.authorization else {
            return .refused(status: 401, message: "the token is missing: enter it on the page")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", token.matches(parts[1].utf8) else {
            return .refused(status: 401, message: "the token is wrong")
        }
        return .allowed
    }
}
