import CaptureStream
import Foundation
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The page as a user meets it: Debian's Chromium, headless, on the waker (a browser on the LAN), loads it from
/// the daemon while the sleeper registers, sleeps and is woken, and its Wake button wakes the sleeper with the
/// token, and not without it or from another site.
@Suite(.requiresLab(tools: [Lab.browser, "python3"]))
struct PageBrowserLabTests {
    static let port = 8080
    static let token = "lab-token-0123456789abcdef"

    /// The daemon with its page on the proxy's LAN address, and the token.
    func startDaemon(_ lab: Lab) throws -> LabProcess {
        let config = lab.workDirectory + "/web.toml"
        try """
        [web]
        listen = "\(lab.host(.proxy).ipv4):\(Self.port)"
        token = "\(Self.token)"
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return try RegistrationDaemonLabTests().startDaemon(
            lab, state: lab.workDirectory + "/state", extraArguments: ["--config", config])
    }

    func page(_ lab: Lab) -> String { "http://\(lab.host(.proxy).ipv4):\(Self.port)/" }

    /// Where screenshots go: `SLEEPPROXY_SCREENSHOTS` if set (to keep them), else the lab's directory.
    func screenshot(_ lab: Lab, _ name: String) -> String {
        let directory = ProcessInfo.processInfo.environment["SLEEPPROXY_SCREENSHOTS"] ?? lab.workDirectory
        return directory + "/" + name
    }

    /// The JavaScript that reads the sleeper's row's `data-state` (nil until it is shown).
    func rowState(_ lab: Lab) -> String {
        "(document.querySelector('tr.host[data-mac=\"\(lab.host(.sleeper).macString)\"]')?.dataset.state ?? null)"
    }

    @Test func aBrowserSeesTheSleeperHeldAndItsWakeButtonWakesItWithTheToken() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let mac = lab.host(.sleeper).macString

            // Loaded before anything is held: the page says so, and learns of the host by itself.
            let nic = try magicPackets(lab)
            defer { nic.close() }
            let loaded = lab.workDirectory + "/page-loaded"
            let held = lab.workDirectory + "/sleeper-held"
            async let visit = lab.browse(
                from: .waker,
                [
                    .navigate(page(lab)),
                    .evaluate("document.querySelectorAll('tr.host').length"),
                    .touch(loaded),
                    .waitForFile(held, seconds: 60),
                    // Held: the script's refresh shows the row without a reload.
                    .waitFor("\(rowState(lab)) === 'held'", seconds: 10),
                    .screenshot(path: screenshot(lab, "page-held.png"), fullPage: true),
                    // Wake without the token: refused, and the page says why.
                    .evaluate(
                        "document.querySelector('button[data-action=\"wake\"][data-host=\"\(mac)\"]').click(), true"),
                    .waitFor("document.getElementById('status').textContent.includes('token')", seconds: 10),
                    .evaluate("document.getElementById('status').textContent"),
                    // A wrong token: the daemon refuses it (401), and the page says so.
                    .evaluate(
                        """
                        (() => {
                          const field = document.getElementById('token');
                          field.value = 'not-the-token-0123456789';
                          field.dispatchEvent(new Event('input'));
                          document.querySelector('button[data-action="wake"][data-host="\(mac)"]').click();
                          return true;
                        })()
                        """),
                    .waitFor("document.getElementById('status').textContent.includes('wrong')", seconds: 10),
                ], timeout: .seconds(120))
            _ = try await eventually("the page loaded in the browser", within: .seconds(60)) {
                FileManager.default.fileExists(atPath: loaded) ? true : nil
            }
            try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon)
            _ = FileManager.default.createFile(atPath: held, contents: nil)
            let first = try await visit
            #expect(first[1] == "0", "hosts listed before the registration: \(first)")
            #expect(first[8]?.contains("token") == true, "\(first)")
            try await daemon.waitUntilLogged("page: refused wake", "the wrong token's refusal in the log")
            // Nothing went to the sleeper's NIC.
            let early = try await framesBeforeMarker(nic, Marker.wakeOnLAN, at: .sleeper, of: lab)
            #expect(early.isEmpty, "magic packets without the token or with a wrong one: \(early.count)")

            // With the token: the sleeper is woken, the row says so, and the event names the browser's address.
            let second = try await lab.browse(
                from: .waker,
                [
                    .navigate(page(lab)),
                    .evaluate(
                        """
                        (() => {
                          const field = document.getElementById('token');
                          field.value = '\(Self.token)';
                          field.dispatchEvent(new Event('input'));
                          document.querySelector('button[data-action="wake"][data-host="\(mac)"]').click();
                          return true;
                        })()
                        """),
                    // The daemon's answer, not the note shown while asking ("waking Sleeper.local…").
                    .waitFor(
                        "document.getElementById('status').textContent.includes('on eth0')", seconds: 10),
                    .waitFor("\(rowState(lab)) === 'waking'", seconds: 10),
                    .screenshot(path: screenshot(lab, "page-waking.png"), fullPage: true),
                    // The wake's event, with the browser's address, once the store has it.
                    .waitFor(
                        "Array.from(document.querySelectorAll('#events li.event[data-kind=\"wake\"]')).map(e => e.textContent).find(t => t.includes('\(lab.host(.waker).ipv4)')) ?? null",
                        seconds: 10),
                ], timeout: .seconds(120))
            try await expectMagicPacketForSleeper(lab, at: nic, "the magic packet of the page's Wake")
            #expect(second[5]?.contains("page") == true, "the wake's event: \(second[5] ?? "none")")
            try await daemon.waitUntilLogged(
                "page: waking", "the page's wake in the log", within: .seconds(5))
        }
    }

    /// With JavaScript off, a phone's screen and dark mode: the state as of loading, readable.
    @Test func withoutJavaScriptThePageShowsTheStateAsLoaded() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon)
            let values = try await lab.browse(
                from: .waker,
                [
                    .scriptsOff, .viewport(width: 390, height: 844, mobile: true), .darkMode(true),
                    .navigate(page(lab)),
                    .evaluate(rowState(lab)),
                    .evaluate("document.documentElement.scrollWidth <= window.innerWidth"),
                    .evaluate("getComputedStyle(document.body).backgroundColor"),
                    .screenshot(path: screenshot(lab, "page-phone-dark.png"), fullPage: true),
                ])
            #expect(values[4] == "\"held\"", "\(values)")
            #expect(values[5] == "true", "the page is wider than a phone's screen")
            // Dark: the background is dark (each channel below the middle).
            let channels = (values[6] ?? "").split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            #expect(channels.count >= 3 && channels.prefix(3).allSatisfy { $0 < 128 }, "background \(values[6] ?? "")")
        }
    }

    /// Another site, opened in the same browser on the LAN, cannot make it wake the sleeper, even knowing the
    /// token: its request is refused before it is made (no CORS), and one forged outside a browser is refused by
    /// its Origin.
    @Test func anotherSiteCannotWake() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon)
            let nic = try magicPackets(lab)
            defer { nic.close() }
            let site = lab.workDirectory + "/site"
            try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
            try """
            <!DOCTYPE html><html><head><title>another site</title></head><body>
            <script>
            fetch('\(page(lab))api/wake', {
              method: 'POST',
              headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer \(Self.token)'},
              body: JSON.stringify({host: '\(lab.host(.sleeper).macString)'})
            }).then(r => { document.body.dataset.result = 'answered ' + r.status; },
                    e => { document.body.dataset.result = 'blocked: ' + e; });
            </script></body></html>
            """.write(toFile: site + "/index.html", atomically: true, encoding: .utf8)
            let server = try lab.spawn(
                .waker, ["python3", "-m", "http.server", "8000", "--bind", lab.host(.waker).ipv4, "--directory", site])
            defer { _ = server.terminate() }
            _ = try await eventually("the other site's server", within: .seconds(10)) {
                (try? lab.withNamespace(.waker) { try httpGet(host: lab.host(.waker).ipv4, port: 8000, "/") })?.status
                    == 200 ? true : nil
            }
            let values = try await lab.browse(
                from: .waker,
                [
                    .navigate("http://\(lab.host(.waker).ipv4):8000/"),
                    .waitFor("document.body.dataset.result ?? null", seconds: 15),
                ])
            #expect(values[1]?.contains("blocked") == true, "\(values)")

            // The same request with the token, outside a browser, carrying the other site's Origin.
            let forged = try lab.withNamespace(.waker) {
                let body = "{\"host\":\"\(lab.host(.sleeper).macString)\"}"
                return try TCPConnection(host: lab.host(.proxy).ipv4, port: Self.port).exchange(
                    "POST /api/wake HTTP/1.1\r\nHost: \(lab.host(.proxy).ipv4):\(Self.port)\r\nOrigin: http://\(lab.host(.waker).ipv4):8000\r\nContent-Type: application/json\r\nAuthorization: Bearer \(Self.token)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                )
            }
            #expect(forged.status == 403, "\(forged)")
            let seen = try await framesBeforeMarker(nic, Marker.wakeOnLAN, at: .sleeper, of: lab)
            #expect(seen.isEmpty, "magic packets from another site's request: \(seen.count)")
        }
    }
}
