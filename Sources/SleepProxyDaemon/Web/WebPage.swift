public import SleepProxyControl

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// The daemon's web page: what sleeps, what woke it, and buttons to wake or forget a host.
///
/// Pure: it renders a `PageState` it is given, at a moment it is given; the HTTP server serves what it returns.
/// The page is complete without JavaScript (the state as of loading, rendered here). Its script (`script`, served
/// as `/page.js`) fetches `/state.json` (`json`) every 3 seconds and rebuilds the three sections with the same
/// markup, so the two renderings must be kept in step: each element, class and data attribute below exists in
/// both. The page loads nothing but `/page.css` and `/page.js` from its own server, and has no inline script or
/// style, so that a `Content-Security-Policy` of `default-src 'self'` holds.
///
/// What the page's script and tests rely on:
/// - `<body data-actions="on|off">`; `<p id="status">` for the script's messages; `<input id="token">` when
///   actions are on, `<p id="read-only">` when they are off;
/// - `<section id="hosts">` with one `<table class="hosts" data-interface="eth0">` per interface, one
///   `<tr class="host" data-mac="…" data-state="…">` per host, the state's text in its `<td class="state">`,
///   and buttons `<button type="button" data-action="wake|forget" data-host="MAC">`;
/// - `<section id="seen">` with one `<article class="machine" data-mac="…">` per machine, its declaration in
///   `<div class="declaration"><pre><code>`;
/// - `<section id="events">` with one `<li class="event" data-kind="…">` per event, newest first.
public enum WebPage {
    /// The page's media type.
    public static let htmlContentType = "text/html; charset=utf-8"
    /// The stylesheet's media type.
    public static let cssContentType = "text/css; charset=utf-8"
    /// The script's media type.
    public static let scriptContentType = "text/javascript; charset=utf-8"
    /// The state's media type.
    public static let jsonContentType = "application/json"

    /// The page for `state`, as one HTML5 document. Lease times count from `now`; clock times are shown in the zone
    /// `secondsFromUTC` east of UTC (the server's local time, as the daemon knows it; the script shows them again in
    /// the browser's own zone).
    public static func html(_ state: PageState, now: Date, secondsFromUTC: Int = 0) -> String {
        var renderer = PageRenderer(
            state: state, now: now, clock: PageClock(secondsFromUTC: secondsFromUTC, now: now))
        return renderer.document()
    }

    /// `state` as `/state.json`: the control protocol's JSON (sorted keys, RFC 3339 times), which the script
    /// reads. A `PageState` holds no value JSON cannot carry, so the empty fallback is never expected.
    public static func json(_ state: PageState) -> [UInt8] {
        guard let data = try? ControlProtocol.encoder().encode(state) else { return [] }
        return Array(data)
    }

    /// `text` safe in HTML text and in a quoted attribute value: `&`, `<`, `>`, `"` and `'` as character
    /// references, and control characters (other than tab, line feed and carriage return), which HTML forbids, as
    /// U+FFFD.
    public static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            case "\t", "\n", "\r": escaped.unicodeScalars.append(scalar)
            case "\u{0}"..."\u{1F}", "\u{7F}"..."\u{9F}": escaped += "\u{FFFD}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// The family of a host's state, which its badge's class names (`badge-asleep-held`): `awake`, `probing`,
    /// `asleep-held`, `taking-over`, `waking`, `not-held`, or `other` for a state this page does not know.
    /// Whether a host in `state` is held by the proxy (taken over, held, being woken): what Wake and Forget need.
    static func isHeld(_ state: String) -> Bool {
        ["asleep-held", "taking-over", "waking"].contains(stateFamily(state))
    }

    static func stateFamily(_ state: String) -> String {
        switch state {
        case "awake": "awake"
        case "probing": "probing"
        case "held", "asleep: held": "asleep-held"
        case "taking-over", "asleep: taking-over": "taking-over"
        case "waking": "waking"
        case _ where state.hasPrefix("asleep: not held"): "not-held"
        default: "other"
        }
    }

    /// The class for an event's kind, by what it means for the administrator: `good`, `notice`, `bad` or `plain`
    /// (the colours `sleepproxyctl events` uses).
    static func eventFamily(_ kind: String) -> String {
        switch kind {
        case "registered", "renewed": "good"
        case "wake", "would-wake", "takeover": "notice"
        case "refused", "conflict", "expired": "bad"
        default: "plain"
        }
    }

    /// A length of time in its two largest units, the smaller left out when zero: `45 s`, `1 min 30 s`,
    /// `1 h 59 min`, `2 d 4 h`. Whole seconds, rounded.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "—" }
        let total = Int64(min(max(0, seconds.rounded()), 1e15))
        let units: [(name: String, seconds: Int64)] = [("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)]
        for (index, unit) in units.enumerated() where total >= unit.seconds {
            var text = "\(total / unit.seconds) \(unit.name)"
            if index + 1 < units.count {
                let next = units[index + 1]
                let minor = total % unit.seconds / next.seconds
                if minor > 0 { text += " \(minor) \(next.name)" }
            }
            return text
        }
        return "0 s"
    }

    /// What is left of a lease at `now`: a duration, `expired`, or `—` for a declared host or one without a lease.
    static func leaseLeft(_ host: HostSummary, now: Date) -> String {
        guard host.declared == nil, let expiry = host.leaseExpiresAt else { return "—" }
        let left = expiry.timeIntervalSince(now)
        return left > 0 ? duration(left) : "expired"
    }

    /// `192.0.2.7:51234`, `[fe80::1]:51234`, the address alone without a port, nil without an address.
    static func source(address: String?, port: Int?) -> String? {
        guard let address else { return nil }
        guard let port else { return address }
        return address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }

    /// The interfaces to show hosts under: those served, in order, then any other a host is on.
    static func interfaceOrder(_ state: PageState) -> [String] {
        var order = state.interfaces
        for host in state.hosts where !order.contains(host.interface) {
            order.append(host.interface)
        }
        return order
    }
}

/// Clock times for the page: `HH:MM:SS` on the day of `now`, else `YYYY-MM-DD HH:MM:SS`, in a fixed zone.
struct PageClock {
    var secondsFromUTC: Int
    var now: Date

    /// The civil date and time of `date`, `offset` seconds east of UTC (whole seconds, rounded down).
    static func fields(_ date: Date, offset: Int) -> (year: Int, month: Int, day: Int, seconds: Int) {
        let clamped = min(max(date.timeIntervalSince1970.rounded(.down), -1e13), 1e13)
        let local = Int(clamped) + offset
        let (days, seconds) = local.quotientAndRemainder(dividingBy: 86_400)
        let (dayNumber, secondOfDay) = seconds < 0 ? (days - 1, seconds + 86_400) : (days, seconds)
        // Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's `civil_from_days`).
        let z = dayNumber + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day, secondOfDay)
    }

    /// `date` as the clock shows it.
    func time(_ date: Date) -> String {
        let fields = Self.fields(date, offset: secondsFromUTC)
        let today = Self.fields(now, offset: secondsFromUTC)
        let seconds = fields.seconds
        let time = "\(Self.pad(seconds / 3_600, 2)):\(Self.pad(seconds / 60 % 60, 2)):\(Self.pad(seconds % 60, 2))"
        if (fields.year, fields.month, fields.day) == (today.year, today.month, today.day) { return time }
        return "\(Self.pad(fields.year, 4))-\(Self.pad(fields.month, 2))-\(Self.pad(fields.day, 2)) \(time)"
    }

    /// `date` for a `<time datetime>`: `YYYY-MM-DDTHH:MM:SSZ`.
    static func machineTime(_ date: Date) -> String {
        let fields = fields(date, offset: 0)
        let seconds = fields.seconds
        return "\(pad(fields.year, 4))-\(pad(fields.month, 2))-\(pad(fields.day, 2))T"
            + "\(pad(seconds / 3_600, 2)):\(pad(seconds / 60 % 60, 2)):\(pad(seconds % 60, 2))Z"
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

/// Builds the page's markup. Every string from the state goes through `WebPage.escape`, by way of `text` and
/// `attribute`; nothing else is interpolated into the markup but this file's own constants.
private struct PageRenderer {
    let state: PageState
    let now: Date
    let clock: PageClock
    var out = ""

    init(state: PageState, now: Date, clock: PageClock) {
        self.state = state
        self.now = now
        self.clock = clock
    }

    mutating func document() -> String {
        let actions = state.actionsEnabled ? "on" : "off"
        out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        out += "<meta name=\"color-scheme\" content=\"light dark\">\n"
        out += "<title>sleepproxy on \(text(state.serverName))</title>\n"
        out += "<link rel=\"stylesheet\" href=\"/page.css\">\n"
        out += "<script src=\"/page.js\" defer></script>\n"
        out += "</head>\n<body data-actions=\"\(actions)\">\n"
        header()
        out += "<main>\n<p id=\"status\" role=\"status\" aria-live=\"polite\"></p>\n"
        access()
        hosts()
        seen()
        events()
        out += "</main>\n</body>\n</html>\n"
        return out
    }

    private func text(_ value: String) -> String { WebPage.escape(value) }
    private func attribute(_ value: String) -> String { "\"" + WebPage.escape(value) + "\"" }

    private func time(_ date: Date, id: String? = nil) -> String {
        let idAttribute = id.map { " id=\"\($0)\"" } ?? ""
        return "<time\(idAttribute) datetime=\"\(PageClock.machineTime(date))\">\(text(clock.time(date)))</time>"
    }

    /// A list of items, or a dash when there are none.
    private func list(_ items: [String]) -> String {
        guard !items.isEmpty else { return "—" }
        return "<ul>" + items.map { "<li>\(text($0))</li>" }.joined() + "</ul>"
    }

    private mutating func header() {
        out += "<header>\n<h1>sleepproxy on <span id=\"server\">\(text(state.serverName))</span></h1>\n"
        out += "<p class=\"meta\">sleepproxyd <span id=\"version\">\(text(state.version))</span>"
        out += ", serving <span id=\"interfaces\">\(text(state.interfaces.joined(separator: ", ")))</span>"
        out += "; updated \(time(state.generatedAt, id: "updated"))</p>\n</header>\n"
    }

    /// The token field when actions are enabled; else how to enable them.
    private mutating func access() {
        if state.actionsEnabled {
            out += "<form id=\"token-form\" class=\"token\">"
            out += "<label for=\"token\">Token</label> "
            out += "<input type=\"password\" id=\"token\" autocomplete=\"off\"> "
            out += "<span class=\"hint\">needed to wake and forget; kept in this tab only</span></form>\n"
        } else {
            out += "<p id=\"read-only\" class=\"note\">This page is read-only. To wake and forget hosts from it, set "
            out += "<code>token</code> (or <code>token_file</code>) under <code>[web]</code> in the config file.</p>\n"
        }
    }

    private mutating func hosts() {
        out += "<section id=\"hosts\">\n<h2>Hosts</h2>\n"
        if state.hosts.isEmpty {
            out += "<p class=\"empty\">No hosts held or declared.</p>\n"
        }
        for interface in WebPage.interfaceOrder(state) {
            let hosts = state.hosts.filter { $0.interface == interface }
            guard !hosts.isEmpty else { continue }
            out += "<h3 class=\"interface\">\(text(interface))</h3>\n"
            out += "<table class=\"hosts\" data-interface=\(attribute(interface))>\n<thead><tr>"
            var headings = ["Host", "State", "Addresses", "Services", "Lease left", "Last wake"]
            if state.actionsEnabled { headings.append("Actions") }
            out += headings.map { "<th scope=\"col\">\($0)</th>" }.joined()
            out += "</tr></thead>\n<tbody>\n"
            for host in hosts {
                row(host)
            }
            out += "</tbody>\n</table>\n"
        }
        out += "</section>\n"
    }

    private mutating func row(_ host: HostSummary) {
        out += "<tr class=\"host\" data-mac=\(attribute(host.ownerMAC)) data-state=\(attribute(host.state))>\n"

        out +=
            "<td class=\"name\" data-label=\"Host\"><span class=\"hostname\">\(text(host.name ?? host.ownerMAC))</span>"
        if host.name != nil { out += " <span class=\"mac\">\(text(host.ownerMAC))</span>" }
        if let declared = host.declared { out += " <span class=\"declared\">[hosts.\(text(declared))]</span>" }
        out += "</td>\n"

        let family = WebPage.stateFamily(host.state)
        out +=
            "<td class=\"state\" data-label=\"State\"><span class=\"badge badge-\(family)\">\(text(host.state))</span>"
        // The reason once: in the last wake when that is the wake under way.
        if host.state == "waking", let reason = host.wakeReason, reason != host.lastWake?.reason {
            out += " <span class=\"reason\">\(text(reason))</span>"
        }
        out += "</td>\n"

        out += "<td class=\"addresses\" data-label=\"Addresses\">\(list(host.addresses))</td>\n"
        out += "<td class=\"services\" data-label=\"Services\">\(list(host.services))</td>\n"
        out += "<td class=\"lease\" data-label=\"Lease left\">\(text(WebPage.leaseLeft(host, now: now)))</td>\n"

        out += "<td class=\"wake\" data-label=\"Last wake\">"
        if let wake = host.lastWake {
            out += time(wake.time) + " <span class=\"reason\">\(text(wake.reason))</span>"
            if let source = WebPage.source(address: wake.sourceAddress, port: wake.sourcePort) {
                out += " <span class=\"source\">from \(text(source))</span>"
            }
        } else {
            out += "never"
        }
        out += "</td>\n"

        if state.actionsEnabled {
            let mac = attribute(host.ownerMAC)
            out += "<td class=\"actions\" data-label=\"Actions\">"
            // Only a host the proxy holds can be woken or forgotten (as with sleepproxyctl): a declared host that is
            // awake, probing or not held has no buttons.
            if WebPage.isHeld(host.state) {
                out += "<button type=\"button\" data-action=\"wake\" data-host=\(mac)>Wake</button>"
                if host.declared == nil {
                    out += " <button type=\"button\" data-action=\"forget\" data-host=\(mac)>Forget</button>"
                }
            }
            out += "</td>\n"
        }
        out += "</tr>\n"
    }

    private mutating func seen() {
        out += "<section id=\"seen\">\n<h2>Machines seen, not declared</h2>\n"
        if state.seen.isEmpty {
            out += "<p class=\"empty\">No undeclared machines heard.</p>\n"
        } else {
            out += "<p class=\"hint\">To have the proxy answer for one of these and wake it, add its table to the "
            out += "config file.</p>\n"
        }
        for seen in state.seen {
            let machine = seen.machine
            out += "<article class=\"machine\" data-mac=\(attribute(machine.mac))>\n"
            out += "<h3>\(text(machine.hostName ?? machine.mac))</h3>\n<dl>\n"
            out += "<dt>MAC</dt><dd class=\"mac\">\(text(machine.mac))</dd>\n"
            if let vendor = machine.vendor { out += "<dt>Vendor</dt><dd class=\"vendor\">\(text(vendor))</dd>\n" }
            out += "<dt>Interface</dt><dd class=\"interface\">\(text(machine.interface))</dd>\n"
            out += "<dt>Addresses</dt><dd class=\"addresses\">\(list(machine.addresses))</dd>\n"
            let services = machine.services.map { "\($0.name) (\($0.type), port \($0.port))" }
            out += "<dt>Services</dt><dd class=\"services\">\(list(services))</dd>\n"
            out += "<dt>Last heard</dt><dd class=\"heard\">\(time(machine.lastHeard))</dd>\n</dl>\n"
            out += "<div class=\"declaration\"><pre><code>\(text(seen.declaration))</code></pre></div>\n"
            out += "</article>\n"
        }
        out += "</section>\n"
    }

    private mutating func events() {
        out += "<section id=\"events\">\n<h2>Recent events</h2>\n"
        if state.events.isEmpty {
            out += "<p class=\"empty\">No events recorded.</p>\n"
        } else {
            out += "<ol class=\"events\">\n"
            for event in state.events {
                out += "<li class=\"event\" data-kind=\(attribute(event.kind))>\(time(event.time)) "
                out += "<span class=\"kind kind-\(WebPage.eventFamily(event.kind))\">\(text(event.kind))</span> "
                out += "<span class=\"interface\">\(text(event.interface))</span> "
                out += "<span class=\"host\">\(text(event.host ?? event.ownerMAC ?? "—"))</span> "
                if let source = WebPage.source(address: event.sourceAddress, port: event.sourcePort) {
                    out += "<span class=\"source\">from \(text(source))</span> "
                }
                out += "<span class=\"detail\">\(text(Self.detail(event)))</span></li>\n"
            }
            out += "</ol>\n"
        }
        out += "</section>\n"
    }

    /// The event's detail, with its stable reason when the detail does not already say it.
    static func detail(_ event: EventReport) -> String {
        guard let reason = event.reason, !event.detail.contains(reason) else { return event.detail }
        return "\(event.detail) (\(reason))"
    }
}
