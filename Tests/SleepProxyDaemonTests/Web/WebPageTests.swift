import Foundation
import SleepProxyControl
import Testing

@testable import SleepProxyDaemon

/// The daemon's page, rendered from a fixed state: each host, machine and event is there with the ids, classes
/// and data attributes the script and browser tests use; state text is always escaped; nothing is loaded from
/// another server; the document passes `tidy`; and `/state.json` decodes back into the state.
@Suite struct WebPageTests {
    /// 2030-01-01T12:00:00Z, the moment every page here is rendered at.
    static let now = Date(timeIntervalSince1970: 1_893_499_200)

    static func at(_ seconds: Double) -> Date { now.addingTimeInterval(seconds) }

    /// A registered Mac, held, with a lease of 1 h 59 min left and a wake from an ssh client.
    static let heldHost = HostSummary(
        name: "imac.local", ownerMAC: "02:00:00:00:00:01", wakeMAC: "02:00:00:00:00:01", interface: "eth0",
        addresses: ["192.0.2.20", "fe80::20"], services: ["iMac._ssh._tcp", "iMac._smb._tcp"], state: "held",
        wakeReason: nil, recordCount: 9, registeredAt: at(-60), leaseExpiresAt: at(7_140),
        lastWake: WakeReport(
            time: at(-3_600), reason: "TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh)",
            sourceAddress: "192.0.2.7", sourcePort: 51_234))

    /// A machine the config file declares, asleep and held.
    static let declaredHost = HostSummary(
        name: "nas.local", ownerMAC: "02:00:00:00:00:02", wakeMAC: "02:00:00:00:00:02", interface: "eth0",
        addresses: ["192.0.2.30"], services: ["nas._smb._tcp"], state: "asleep: held", wakeReason: nil,
        recordCount: 4, registeredAt: at(-300), leaseExpiresAt: nil, lastWake: nil, declared: "nas",
        lastHeard: at(-400))

    /// A registered laptop on the second interface, being woken by a client on IPv6.
    static let wakingHost = HostSummary(
        name: "laptop.local", ownerMAC: "02:00:00:00:00:03", wakeMAC: "02:00:00:00:00:03", interface: "eth1",
        addresses: ["fe80::30"], services: [], state: "waking", wakeReason: "UDP to fe80::30 port 548 (afp)",
        recordCount: 3, registeredAt: at(-1_000), leaseExpiresAt: at(-5), lastWake: nil)

    static let seenMachine = SeenMachine(
        SeenReport(
            interface: "eth0", mac: "02:00:00:00:00:09", vendor: "Example Devices", addresses: ["192.0.2.40"],
            hostName: "Annas-iMac.local",
            services: [SeenReport.Service(name: "Anna's iMac", type: "_smb._tcp", port: 445)],
            firstHeard: at(-86_400 - 50), lastHeard: at(-20), role: "neither", declared: nil))

    static let events = [
        EventReport(
            id: 12, time: at(-10), kind: "wake", interface: "eth1", ownerMAC: "02:00:00:00:00:03",
            host: "laptop.local", sourceAddress: "fe80::7", sourcePort: 60_000, reason: nil,
            detail: "UDP to fe80::30 port 548 (afp)"),
        EventReport(
            id: 11, time: at(-60), kind: "registered", interface: "eth0", ownerMAC: "02:00:00:00:00:01",
            host: "imac.local", sourceAddress: "192.0.2.20", sourcePort: 5_353, reason: nil,
            detail: "9 records, lease 2 h"),
        EventReport(
            id: 10, time: at(-86_400), kind: "refused", interface: "eth0", ownerMAC: nil, host: nil,
            sourceAddress: nil, sourcePort: nil, reason: "no-owner", detail: "no OWNER option"),
    ]

    static func state(actions: Bool = false) -> PageState {
        PageState(
            generatedAt: now, version: "1.2.3", serverName: "homeserver", interfaces: ["eth0", "eth1"],
            hosts: [heldHost, declaredHost, wakingHost], seen: [seenMachine], events: events, actionsEnabled: actions)
    }

    /// A state whose every free text is hostile.
    static func hostileState(actions: Bool) -> PageState {
        var host = heldHost
        host.name = "<script>alert(1)</script>"
        host.interface = #"eth0" onclick="x"#
        host.services = ["<b>bold</b> & 'quoted'._http._tcp"]
        var event = events[0]
        event.detail = #"detail "&<> end"#
        event.host = "<img src=x onerror=alert(2)>"
        var seen = seenMachine
        seen.machine.hostName = "</pre><script>alert(3)</script>"
        seen.declaration = "[hosts.x]\n# </code></pre><script>alert(4)</script>\n"
        return PageState(
            generatedAt: now, version: "1.2.3<i>", serverName: "home<server>", interfaces: [#"eth0" onclick="x"#],
            hosts: [host], seen: [seen], events: [event], actionsEnabled: actions)
    }

    static func page(_ state: PageState) -> String { WebPage.html(state, now: now) }

    /// The markup of one host's row, from its `<tr>` to its `</tr>`.
    static func row(_ html: String, mac: String) throws -> Substring {
        let start = try #require(html.range(of: "<tr class=\"host\" data-mac=\"\(mac)\""))
        let end = try #require(html.range(of: "</tr>", range: start.upperBound..<html.endIndex))
        return html[start.lowerBound..<end.upperBound]
    }

    /// The text between `<td class="CLASS"` and the next `</td>` (tags included), from `row`.
    static func cell(_ row: Substring, _ className: String) throws -> Substring {
        let start = try #require(row.range(of: "<td class=\"\(className)\""))
        let end = try #require(row.range(of: "</td>", range: start.upperBound..<row.endIndex))
        return row[start.lowerBound..<end.upperBound]
    }

    // MARK: Content

    @Test func theDocumentHasItsHeadAndHeader() {
        let html = Self.page(Self.state())
        #expect(html.hasPrefix("<!DOCTYPE html>\n<html lang=\"en\">"))
        #expect(html.contains(#"<meta charset="utf-8">"#))
        #expect(html.contains(#"<meta name="viewport" content="width=device-width, initial-scale=1">"#))
        #expect(html.contains(#"<meta name="color-scheme" content="light dark">"#))
        #expect(html.contains("<title>sleepproxy on homeserver</title>"))
        #expect(html.contains(#"<link rel="stylesheet" href="/page.css">"#))
        #expect(html.contains(#"<script src="/page.js" defer></script>"#))
        #expect(html.contains(#"<span id="version">1.2.3</span>"#))
        #expect(html.contains(#"<span id="interfaces">eth0, eth1</span>"#))
        #expect(html.contains(#"updated <time id="updated" datetime="2030-01-01T12:00:00Z">12:00:00</time>"#))
        for id in ["status", "hosts", "seen", "events"] {
            #expect(html.contains("id=\"\(id)\""), "no element with id \(id)")
        }
    }

    @Test func eachHostHasARowWithItsState() throws {
        let html = Self.page(Self.state())

        let held = try Self.row(html, mac: "02:00:00:00:00:01")
        #expect(held.contains(#"data-state="held""#))
        #expect(try Self.cell(held, "state").contains(#"<span class="badge badge-asleep-held">held</span>"#))
        #expect(try Self.cell(held, "name").contains("imac.local"))
        #expect(try Self.cell(held, "addresses").contains("<li>192.0.2.20</li><li>fe80::20</li>"))
        #expect(try Self.cell(held, "services").contains("<li>iMac._ssh._tcp</li>"))
        #expect(try Self.cell(held, "lease").contains(">1 h 59 min</td>"))
        let wake = try Self.cell(held, "wake")
        #expect(wake.contains(#"<time datetime="2030-01-01T11:00:00Z">11:00:00</time>"#))
        #expect(wake.contains("TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh)"))
        #expect(wake.contains("from 192.0.2.7:51234"))

        let declared = try Self.row(html, mac: "02:00:00:00:00:02")
        #expect(declared.contains(#"data-state="asleep: held""#))
        #expect(try Self.cell(declared, "state").contains(">asleep: held</span>"))
        #expect(try Self.cell(declared, "name").contains("[hosts.nas]"))
        #expect(try Self.cell(declared, "lease").contains(">—</td>"))
        #expect(try Self.cell(declared, "wake").contains(">never</td>"))

        let waking = try Self.row(html, mac: "02:00:00:00:00:03")
        #expect(waking.contains(#"data-state="waking""#))
        let state = try Self.cell(waking, "state")
        #expect(state.contains(#"<span class="badge badge-waking">waking</span>"#))
        #expect(state.contains("UDP to fe80::30 port 548 (afp)"))
        #expect(try Self.cell(waking, "lease").contains(">expired</td>"))
    }

    @Test func hostsAreGroupedByInterface() throws {
        let html = Self.page(Self.state())
        let eth0 = try #require(html.range(of: #"<table class="hosts" data-interface="eth0">"#))
        let eth1 = try #require(html.range(of: #"<table class="hosts" data-interface="eth1">"#))
        #expect(eth0.lowerBound < eth1.lowerBound)
        let laptop = try #require(html.range(of: #"data-mac="02:00:00:00:00:03""#))
        let nas = try #require(html.range(of: #"data-mac="02:00:00:00:00:02""#))
        #expect(nas.lowerBound < eth1.lowerBound && eth1.lowerBound < laptop.lowerBound)
    }

    @Test func theSeenMachineShowsItsDeclaration() throws {
        let html = Self.page(Self.state())
        let start = try #require(html.range(of: #"<article class="machine" data-mac="02:00:00:00:00:09">"#))
        let end = try #require(html.range(of: "</article>", range: start.upperBound..<html.endIndex))
        let machine = html[start.lowerBound..<end.upperBound]
        #expect(machine.contains("<h3>Annas-iMac.local</h3>"))
        #expect(machine.contains(#"<dd class="vendor">Example Devices</dd>"#))
        #expect(machine.contains("<li>192.0.2.40</li>"))
        #expect(machine.contains("<li>Anna&#39;s iMac (_smb._tcp, port 445)</li>"))
        #expect(machine.contains(#"<time datetime="2030-01-01T11:59:40Z">11:59:40</time>"#))
        let declaration = Self.seenMachine.declaration
        #expect(declaration.contains("[hosts.annas-imac]"))
        #expect(machine.contains("<pre><code>\(WebPage.escape(declaration))</code></pre>"))
    }

    @Test func eventsAreListedNewestFirst() throws {
        let html = Self.page(Self.state())
        let wake = try #require(html.range(of: #"<li class="event" data-kind="wake">"#))
        let registered = try #require(html.range(of: #"<li class="event" data-kind="registered">"#))
        let refused = try #require(html.range(of: #"<li class="event" data-kind="refused">"#))
        #expect(wake.lowerBound < registered.lowerBound && registered.lowerBound < refused.lowerBound)
        #expect(html.contains(#"<span class="kind kind-notice">wake</span>"#))
        #expect(
            html.contains(#"<span class="host">laptop.local</span> <span class="source">from [fe80::7]:60000</span>"#))
        // An event of another day shows its date; its stable reason is added to the detail.
        #expect(html.contains(#"<time datetime="2029-12-31T12:00:00Z">2029-12-31 12:00:00</time>"#))
        #expect(html.contains(#"<span class="detail">no OWNER option (no-owner)</span>"#))
    }

    @Test func anEmptyStateSaysSo() {
        var state = Self.state()
        state.hosts = []
        state.seen = []
        state.events = []
        let html = Self.page(state)
        #expect(html.contains("No hosts held or declared."))
        #expect(html.contains("No undeclared machines heard."))
        #expect(html.contains("No events recorded."))
        #expect(!html.contains("<table"))
    }

    @Test func clockTimesFollowTheGivenZone() {
        var state = Self.state()
        state.events = []
        state.hosts = [Self.heldHost]
        let html = WebPage.html(state, now: Self.now, secondsFromUTC: 2 * 3_600)
        #expect(html.contains(#"<time id="updated" datetime="2030-01-01T12:00:00Z">14:00:00</time>"#))
        #expect(html.contains(#"<time datetime="2030-01-01T11:00:00Z">13:00:00</time>"#))
        // Eleven hours west, both fall on the first of January, at 01:00 and midnight.
        let west = WebPage.html(state, now: Self.now, secondsFromUTC: -11 * 3_600)
        #expect(west.contains(#"<time id="updated" datetime="2030-01-01T12:00:00Z">01:00:00</time>"#))
        #expect(west.contains(#"<time datetime="2030-01-01T11:00:00Z">00:00:00</time>"#))
    }

    @Test func civilDatesAcrossYearsAndLeapDays() {
        let cases: [(Double, Int, Int, Int, Int)] = [
            (0, 1970, 1, 1, 0),
            (951_782_400, 2000, 2, 29, 0),
            (4_107_542_399, 2100, 2, 28, 86_399),
            (-1, 1969, 12, 31, 86_399),
        ]
        for (seconds, year, month, day, second) in cases {
            let fields = PageClock.fields(Date(timeIntervalSince1970: seconds), offset: 0)
            #expect(fields.year == year && fields.month == month && fields.day == day && fields.seconds == second)
        }
    }

    @Test func durationsUseTheirTwoLargestUnits() {
        #expect(WebPage.duration(45) == "45 s")
        #expect(WebPage.duration(90) == "1 min 30 s")
        #expect(WebPage.duration(7_140) == "1 h 59 min")
        #expect(WebPage.duration(7_200) == "2 h")
        #expect(WebPage.duration(187_200) == "2 d 4 h")
        #expect(WebPage.duration(0.2) == "0 s")
    }

    // MARK: Escaping

    @Test func hostileTextAppearsOnlyEscaped() {
        for actions in [false, true] {
            let html = Self.page(Self.hostileState(actions: actions))
            #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
            #expect(html.contains("detail &quot;&amp;&lt;&gt; end"))
            #expect(html.contains("&lt;img src=x onerror=alert(2)&gt;"))
            #expect(html.contains("&lt;/pre&gt;&lt;script&gt;alert(3)&lt;/script&gt;"))
            #expect(html.contains("# &lt;/code&gt;&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;"))
            #expect(html.contains("<title>sleepproxy on home&lt;server&gt;</title>"))
            #expect(html.contains("&lt;b&gt;bold&lt;/b&gt; &amp; &#39;quoted&#39;._http._tcp"))
            #expect(html.contains(#"data-interface="eth0&quot; onclick=&quot;x""#))
            for raw in ["alert(1)</script>", "<img", "</pre><script>", "<b>", #"" onclick=""#, "1.2.3<i>"] {
                #expect(!html.contains(raw), "\(raw) is not escaped")
            }
            // The only script element is the page's own.
            #expect(html.components(separatedBy: "<script").count == 2)
        }
    }

    @Test func escapingCoversMarkupQuotesAndControlCharacters() {
        #expect(WebPage.escape(#"a<b>&"c"'d'"#) == "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;")
        #expect(
            WebPage.escape("tab\tline\nnul\u{0}bell\u{7}del\u{7F}c1\u{85}")
                == "tab\tline\nnul\u{FFFD}bell\u{FFFD}del\u{FFFD}c1\u{FFFD}")
        #expect(WebPage.escape("Anna’s iMac — ✓") == "Anna’s iMac — ✓")
    }

    // MARK: Actions

    @Test func withoutATokenThePageIsReadOnly() {
        let html = Self.page(Self.state(actions: false))
        #expect(html.contains(#"<body data-actions="off">"#))
        #expect(!html.contains("<button"))
        #expect(!html.contains("data-action="))
        #expect(!html.contains(#"id="token""#))
        #expect(!html.contains("<th scope=\"col\">Actions</th>"))
        #expect(html.contains(#"<p id="read-only" class="note">This page is read-only."#))
        #expect(html.contains("<code>token</code> (or <code>token_file</code>) under <code>[web]</code>"))
    }

    @Test func withATokenEachHostHasItsButtons() throws {
        let html = Self.page(Self.state(actions: true))
        #expect(html.contains(#"<body data-actions="on">"#))
        #expect(html.contains(#"<input type="password" id="token" autocomplete="off">"#))
        #expect(!html.contains(#"id="read-only""#))

        let held = try Self.row(html, mac: "02:00:00:00:00:01")
        let actions = try Self.cell(held, "actions")
        #expect(
            actions.contains(#"<button type="button" data-action="wake" data-host="02:00:00:00:00:01">Wake</button>"#))
        #expect(
            actions.contains(
                #"<button type="button" data-action="forget" data-host="02:00:00:00:00:01">Forget</button>"#))

        // A declared host can be woken, not forgotten: it never registered.
        let declared = try Self.cell(try Self.row(html, mac: "02:00:00:00:00:02"), "actions")
        #expect(declared.contains(#"data-action="wake" data-host="02:00:00:00:00:02""#))
        #expect(!declared.contains(#"data-action="forget""#))

        #expect(html.components(separatedBy: #"data-action="wake""#).count == 4)
        #expect(html.components(separatedBy: #"data-action="forget""#).count == 3)
    }

    /// A declared host the proxy does not hold (awake, probing, or asleep and not held) cannot be woken or forgotten
    /// from the page, as with sleepproxyctl: no buttons.
    @Test(arguments: ["awake", "probing", "asleep: not held (its address answers)"])
    func aHostNotHeldHasNoButtons(_ state: String) throws {
        var host = Self.declaredHost
        host.state = state
        var page = Self.state(actions: true)
        page.hosts = [host]
        let actions = try Self.cell(try Self.row(WebPage.html(page, now: Self.now), mac: host.ownerMAC), "actions")
        #expect(!actions.contains("<button"), "\(state): \(actions)")
    }

    // MARK: Self-contained

    /// Every `src`, `href`, `url(...)` and `@import` in the page and the stylesheet names a path on the same server.
    @Test func nothingIsLoadedFromElsewhere() throws {
        let page = Self.page(Self.state(actions: true))
        let references = try Self.matches(#"(?:src|href)\s*=\s*["']?([^"'\s>]*)"#, in: page)
        #expect(Set(references) == ["/page.css", "/page.js"])
        for reference in references + (try Self.matches(#"url\(\s*["']?([^"')]*)"#, in: page + WebPage.css)) {
            #expect(Self.isLocal(reference), "\(reference) is not on the same server")
        }
        #expect(!WebPage.css.contains("@import"))
        #expect(!page.contains("@import"))
        // No inline script or style, so that `default-src 'self'` holds.
        #expect(!page.contains("<style"))
        #expect(!page.contains(" style="))
        #expect(try Self.matches(#"\s(on[a-z]+)\s*="#, in: page).isEmpty)
    }

    @Test func theScriptTalksOnlyToItsOwnServer() throws {
        let script = WebPage.script
        for scheme in ["http:", "https:", "ws:", "wss:"] {
            #expect(!script.contains(scheme), "the script names \(scheme)")
        }
        #expect(try Self.matches(#"["'`](//[^"'`]*)"#, in: script).isEmpty)
        let fetched = try Self.matches(#"fetch\(\s*"([^"]*)""#, in: script)
        #expect(Set(fetched) == ["/state.json", "/api/"])
        #expect(fetched.allSatisfy(Self.isLocal))
        #expect(!script.contains("innerHTML"))
        #expect(!script.contains("outerHTML"))
        #expect(!script.contains("insertAdjacentHTML"))
        #expect(!script.contains("document.write"))
        #expect(!script.contains("eval("))
        #expect(script.contains(#""Authorization": "Bearer " + token"#))
        #expect(script.contains("sessionStorage"))
        #expect(script.contains("\"disconnected, retrying"))
    }

    /// The script rebuilds the sections with the server's markup: each id it looks up is on the page, and each
    /// class and data attribute the page uses in its three sections appears in the script.
    @Test func theScriptKnowsThePagesMarkup() throws {
        let script = WebPage.script
        let page = Self.page(Self.state(actions: true))
        for id in try Self.matches(#"getElementById\("([^"]+)"\)"#, in: script) {
            #expect(page.contains("id=\"\(id)\""), "the script looks up #\(id), which the page lacks")
        }
        let start = try #require(page.range(of: #"<section id="hosts">"#))
        let sections = String(page[start.lowerBound...])
        for classes in try Self.matches(#"class="([^"]+)""#, in: sections) {
            for name in classes.split(separator: " ") {
                let bare = name.replacing(/^(badge|kind)-/, with: "")
                let named = ["\"\(bare)\"", "\"\(bare) ", " \(bare)\"", "\"\(bare)-"].contains { script.contains($0) }
                #expect(named, "the page uses class \(name), which the script never builds")
            }
        }
        for attribute in Set(try Self.matches(#"\s(data-[a-z-]+)="#, in: sections)) {
            #expect(script.contains("\"\(attribute)\""), "the page uses \(attribute), which the script never sets")
        }
    }

    static let node: String? = ["/usr/bin/node", "/usr/local/bin/node"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Node.js parses the script (`node --check`), where it is installed; a headless browser runs it elsewhere.
    @Test(.enabled(if: Self.node != nil, "needs node (apt-get install nodejs)"))
    func theScriptParses() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sleepproxy-page-\(UUID().uuidString).js")
        try Data(WebPage.script.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, said) = try Self.run(try #require(Self.node), ["--check", file.path])
        #expect(status == 0, "node: \(said)")
    }

    static func isLocal(_ reference: String) -> Bool {
        (reference.hasPrefix("/") && !reference.hasPrefix("//")) || reference.hasPrefix("#")
    }

    /// The first capture group of each match of `pattern` in `text`.
    static func matches(_ pattern: String, in text: String) throws -> [String] {
        let regex = try Regex(pattern)
        return text.matches(of: regex).compactMap { match in
            match.output[1].substring.map(String.init)
        }
    }

    // MARK: tidy

    static let tidy: String? = ["/usr/bin/tidy", "/usr/local/bin/tidy"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// HTML Tidy (Debian's `tidy`) finds neither an error nor a warning in the page, with or without actions, and
    /// with hostile text.
    @Test(arguments: [
        ("read-only", Self.state(actions: false)), ("actions", Self.state(actions: true)),
        ("hostile", Self.hostileState(actions: true)),
    ])
    func tidyAcceptsThePage(_ name: String, _ state: PageState) throws {
        guard let tidy = Self.tidy else {
            Issue.record("tidy is not installed: apt-get install tidy")
            return
        }
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("sleepproxy-page-\(name)-\(UUID().uuidString).html")
        try Data(Self.page(state).utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        // `#status` starts empty, for the script's messages: tidy would otherwise warn that it trims it.
        let (status, said) = try Self.run(tidy, ["-q", "-e", "--drop-empty-elements", "no", file.path])
        #expect(status == 0, "tidy (\(name)): \(said)")
        #expect(said.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "tidy (\(name)): \(said)")
    }

    /// Runs `executable` to its end: its exit status, and what it wrote to standard output and error.
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, said)
    }

    // MARK: JSON

    @Test func theJSONDecodesBackIntoTheState() throws {
        for state in [Self.state(actions: true), Self.hostileState(actions: false)] {
            let bytes = WebPage.json(state)
            let decoded = try ControlProtocol.decoder().decode(PageState.self, from: Data(bytes))
            #expect(decoded == state)
        }
        let text = String(decoding: WebPage.json(Self.state()), as: UTF8.self)
        #expect(text.contains(#""generatedAt":"2030-01-01T12:00:00Z""#))
    }
}
