import CaptureStream
import DNSWire
import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import NetworkIO
import SleepProxyControl
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The Debian package as an administrator meets it: installed with apt in a Debian 12 system booted under systemd
/// (in a container in the lab's proxy host), configured, serving a Mac-style sleeper, reloaded, restarted (during a
/// wake too), restarted by the watchdog, used by root, a member of the `sleepproxy` group and someone else, and
/// purged; and the previous release's package upgraded to this one.
///
/// It needs root, systemd-nspawn and debootstrap (the Debian 12 root is made once and cached, see
/// `scripts/make-boot-root.sh`), and the package: `make deb` builds it in `dist/` (`make test` does, as root), or
/// `SLEEPPROXY_DEB` names one. The upgrade needs the previous release's package too, built from its git tag by
/// `scripts/build-previous-deb.sh` (`make test` does, as root), or named by `SLEEPPROXY_PREVIOUS_DEB`.
@Suite(
    .requiresLab(tools: ["arping", "nc", "dpkg-deb"]),
    .enabled(if: BootedSystem.unsupportedReason == nil, Comment(rawValue: BootedSystem.unsupportedReason ?? "")),
    .enabled(if: BootTestPackage.path != nil, Comment(rawValue: BootTestPackage.missing)))
struct PackageBootLabTests {
    /// The journal's lines from the daemon, without metadata.
    func journal(_ system: BootedSystem, _ extra: [String] = []) async throws -> String {
        try await system.runChecked(
            ["journalctl", "_SYSTEMD_UNIT=sleepproxyd.service", "--no-pager", "-o", "cat"] + extra
        )
        .stdout
    }

    /// The unit's properties, by name.
    func unit(_ system: BootedSystem) async throws -> [String: String] {
        let shown = try await system.runChecked([
            "systemctl", "show", "sleepproxyd", "-p", "ActiveState,SubState,MainPID,StatusText,NRestarts,Result",
        ])
        return Dictionary(
            shown.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let equals = line.firstIndex(of: "=") else { return nil }
                return (String(line[..<equals]), String(line[line.index(after: equals)...]))
            }, uniquingKeysWith: { first, _ in first })
    }

    /// Waits until the service is active (READY=1 came: the unit is `Type=notify`) with a main PID other than
    /// `previous`; returns its properties.
    func activeService(
        _ system: BootedSystem, otherThan previous: String? = nil, within timeout: Duration = .seconds(30)
    )
        async throws -> [String: String]
    {
        try await eventually("sleepproxyd active (main PID other than \(previous ?? "none"))", within: timeout) {
            let properties = try await unit(system)
            guard properties["ActiveState"] == "active", properties["SubState"] == "running",
                let pid = properties["MainPID"], pid != "0", pid != previous
            else { return nil }
            return properties
        }
    }

    /// The held hosts, as `sleepproxyctl hosts --json` lists them.
    func hosts(_ system: BootedSystem) async throws -> [HostSummary] {
        let listed = try await system.runChecked(["sleepproxyctl", "hosts", "--json"])
        return try ControlProtocol.decoder().decode([HostSummary].self, from: Data(listed.stdout.utf8))
    }

    /// Waits until the sleeper is listed in `state`.
    @discardableResult
    func sleeperListed(_ system: BootedSystem, in state: String, within timeout: Duration = .seconds(30)) async throws
        -> HostSummary
    {
        try await eventually("Sleeper.local \(state)", within: timeout) {
            try await hosts(system).first { $0.name == "Sleeper.local" && $0.state == state }
        }
    }

    /// Installs `package` (a path in the container) with apt, names the interface in the configuration as the
    /// README says, and restarts the daemon; returns the unit's properties once it runs again.
    func installAndConfigure(_ system: BootedSystem, _ package: String) async throws -> [String: String] {
        // No network in the container: its dependencies are there.
        try await system.runChecked(["apt-get", "install", "-y", package], timeout: .seconds(120))
        #expect(try await system.run(["systemctl", "is-enabled", "sleepproxyd"]).stdout.hasPrefix("enabled"))
        _ = try await activeService(system)
        try await system.runChecked([
            "sed", "-i", "s/^# interfaces = \\[\\]$/interfaces = [\"eth0\"]/", "/etc/sleepproxy/sleepproxy.toml",
        ])
        try await system.runChecked([
            "grep", "-qx", "interfaces = \\[\"eth0\"\\]", "/etc/sleepproxy/sleepproxy.toml",
        ])
        try await system.runChecked(["systemctl", "restart", "sleepproxyd"])
        let service = try await activeService(system)
        #expect(service["StatusText"] == "holding 0 hosts on eth0", "\(service)")
        #expect(try await journal(system).contains("configuration from /etc/sleepproxy/sleepproxy.toml"))
        return service
    }

    /// A Mac-style registration from the sleeper is answered; the sleeper is answered for and taken over while it
    /// sleeps.
    func registerHeldSleeper(_ system: BootedSystem, _ lab: Lab) async throws {
        try await MacSleeper.registerAndSleep(lab)
        let sleeper = lab.host(.sleeper)
        try await sleeperListed(system, in: "held")
        let answer = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: "Sleeper.local", type: "A")
        #expect(answer.answers.contains { $0.type == "A" && $0.data == sleeper.ipv4 }, "\(answer)")
        let arping = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", sleeper.ipv4])
        #expect(arping.stdout.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(arping)")
        let service = try await unit(system)
        #expect(service["StatusText"] == "holding 1 host on eth0", "\(service)")
        Self.say(
            "Mac-style registration answered; Sleeper.local held, A \(sleeper.ipv4) answered, ARP answered with \(lab.host(.proxy).macString); \"\(service["StatusText"] ?? "")\""
        )
    }

    /// The files the unit's Documentation= names are installed.
    func expectDocumentationInstalled(_ system: BootedSystem) async throws {
        let documentation = try await system.runChecked(["systemctl", "show", "-p", "Documentation", "sleepproxyd"])
        let files = documentation.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "=" })
            .filter { $0.hasPrefix("file:") }.map { String($0.dropFirst(5)) }
        #expect(!files.isEmpty, "\(documentation)")
        for file in files {
            #expect(try await system.run(["test", "-f", file]).status == 0, "\(file) is not installed")
        }
    }

    /// A reload keeps the process (`mainPID`) and the held sleeper, and opens the metrics endpoint the administrator
    /// turns on: the unit's sandbox lets the unprivileged daemon listen there (no capability for it).
    func reloadWithMetrics(_ system: BootedSystem, _ lab: Lab, mainPID: String) async throws {
        let metricsAddress = "\(lab.host(.proxy).ipv4):9187"
        // The first `# listen = ""` is [metrics]'s ([web] has one too).
        try await system.runChecked([
            "sed", "-i", "0,/^# listen = \"\"$/s//listen = \"\(metricsAddress)\"/", "/etc/sleepproxy/sleepproxy.toml",
        ])
        try await system.runChecked(["systemctl", "reload", "sleepproxyd"])
        _ = try await eventually("the reload in the journal") {
            try await journal(system).contains("reloaded the configuration") ? true : nil
        }
        #expect(try await unit(system)["MainPID"] == mainPID)
        try await sleeperListed(system, in: "held")
        let scrape = try await eventually("the metrics endpoint on \(metricsAddress)", within: .seconds(10)) {
            try? lab.withNamespace(.waker) {
                try httpGet(host: lab.host(.proxy).ipv4, port: 9187, "/metrics")
            }
        }
        #expect(scrape.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
        #expect(scrape.text.contains("sleepproxy_hosts_held{interface=\"eth0\"} 1"), "\(scrape)")
        Self.say("reload: main PID \(mainPID) kept, Sleeper.local held, /metrics served on \(metricsAddress)")
    }

    /// The page, on the metrics address, with its token from a file only root reads, handed to the unprivileged
    /// daemon as a systemd credential (`LoadCredential=` in a drop-in, `token_file` naming it): applied by `restart`.
    func configurePageWithCredential(_ system: BootedSystem, _ lab: Lab, token: String) async throws {
        try await system.runChecked(["mkdir", "-p", "-m", "0700", "/etc/credstore"])
        try await system.write(token + "\n", to: "/etc/credstore/sleepproxy-web-token", mode: "0600")
        try await system.write(
            "[Service]\nLoadCredential=web-token:/etc/credstore/sleepproxy-web-token\n",
            to: "/etc/systemd/system/sleepproxyd.service.d/web-token.conf")
        try await system.runChecked(["systemctl", "daemon-reload"])
        let address = "\(lab.host(.proxy).ipv4):9187"
        // [web]'s `# listen = ""` is the one left commented out; its token_file follows.
        try await system.runChecked([
            "sed", "-i",
            "-e", "0,/^# listen = \"\"$/s//listen = \"\(address)\"/",
            "-e", "s/^# token_file = \"\"$/token_file = \"web-token\"/", "/etc/sleepproxy/sleepproxy.toml",
        ])
    }

    /// The page answers on the metrics address, and its actions take the credential's token and no other: a
    /// wake for a host nobody holds is refused as such (404) with it, and as unauthorized (401) without it.
    func expectPageWithCredential(_ system: BootedSystem, _ lab: Lab, token: String) async throws {
        let proxy = lab.host(.proxy).ipv4
        let page = try lab.withNamespace(.waker) { try httpGet(host: proxy, port: 9187, "/") }
        #expect(page.status == 200 && page.text.contains("data-actions=\"on\""), "\(page.status)")
        func wake(_ presented: String) throws -> HTTPReply {
            let body = #"{"host":"02:99:00:00:00:99"}"#
            return try lab.withNamespace(.waker) {
                try TCPConnection(host: proxy, port: 9187).exchange(
                    "POST /api/wake HTTP/1.1\r\nHost: \(proxy):9187\r\nContent-Type: application/json\r\nAuthorization: Bearer \(presented)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                )
            }
        }
        let accepted = try wake(token)
        #expect(accepted.status == 404, "\(accepted)")
        let refused = try wake(String(token.reversed()))
        #expect(refused.status == 401, "\(refused)")
        let mode = try await system.runChecked(["stat", "-c", "%a %U", "/etc/credstore/sleepproxy-web-token"]).stdout
        Self.say(
            "page: served with the metrics, token from LoadCredential (file \(mode.trimmingCharacters(in: .whitespacesAndNewlines))): 404 for an unknown host with it, 401 without"
        )
    }

    /// A file of a package (`./etc/...`), or nil when it has none by that path.
    static func file(_ path: String, of package: String) throws -> String? {
        let result = try Lab.runInTestNamespace(
            ["sh", "-c", "dpkg-deb --fsys-tarfile \"$0\" | tar -xO \"$1\"", package, path], timeout: .seconds(60))
        return result.succeeded ? result.stdout : nil
    }

    /// The MD5 sum the package records for `path` (`usr/sbin/sleepproxyd`).
    static func md5(of path: String, in package: String) throws -> String? {
        try run(["dpkg-deb", "--info", package, "md5sums"]).stdout.split(separator: "\n")
            .first { $0.hasSuffix("  " + path) }.map { String($0.prefix(32)) }
    }

    @discardableResult
    static func run(_ arguments: [String]) throws -> CommandResult {
        let result = try Lab.runInTestNamespace(arguments, timeout: .seconds(120))
        guard result.succeeded else { throw LabError("\(arguments.joined(separator: " ")): \(result)") }
        return result
    }

    /// A registration an administrator sees refused in the journal as a warning: an UPDATE without OWNER.
    static func registrationWithoutOwner(_ lab: Lab) throws -> [UInt8] {
        ClientMessage.update(
            id: 0x0BAD, records: try MacSleeper.records(lab), owner: nil,
            opts: [ClientMessage.registrationOPT(owner: nil, flags: 0)], compression: .all)
    }

    /// What each step saw, for whoever reads the test's output.
    static func say(_ text: String) { print("package boot: \(text)") }

    // No time limit on the test: Swift Testing's would count the wait for a lab slot (two labs at a time on two
    // cores), which in a full run is most of it. Every step has a deadline of its own (the boot, each command in
    // the container, each wait), so a hang still fails.
    @Test
    func theInstalledPackageServesRestartsAndPurges() async throws {
        let package = try #require(BootTestPackage.path)
        try await BootedSystem.prepareRoot(repository: BootTestPackage.repository)
        try await Lab.withLab { lab in
            let booting = ContinuousClock.now
            try await BootedSystem.withBooted(in: lab) { system in
                Self.say(
                    "\(system.name) booted to \"running\" in \(ContinuousClock.now - booting); installing \(package)")
                try Self.run(["cp", package, system.shared + "/current.deb"])

                // 1. Installed with apt, it starts; the administrator names the interface and restarts it.
                var service = try await installAndConfigure(system, BootedSystem.sharedMountPoint + "/current.deb")
                // It runs as the sleepproxy user, with exactly the two capabilities the unit grants.
                let mainPID = try #require(service["MainPID"])
                let status = try await system.runChecked(["cat", "/proc/\(mainPID)/status"]).stdout
                let passwd = try await system.runChecked(["getent", "passwd", "sleepproxy"]).stdout
                let uid = try #require(passwd.split(separator: ":").dropFirst(2).first)
                #expect(status.contains("\nUid:\t\(uid)\t"), "\(status)")
                #expect(status.contains("\nCapEff:\t0000000000003000\n"), "\(status)")
                Self.say(
                    "installed with apt: enabled, active; interface set and restarted: \"\(service["StatusText"] ?? "")\", main PID \(mainPID), uid \(uid), capabilities 0x3000"
                )
                try await expectDocumentationInstalled(system)

                // 2. A Mac-style sleeper is held.
                try await registerHeldSleeper(system, lab)
                let sleeper = lab.host(.sleeper)

                // 3. A reload that turns the metrics endpoint on.
                try await reloadWithMetrics(system, lab, mainPID: mainPID)

                // 4. A restart keeps the host; it also brings in the page's token as a credential.
                let token = "boot-test-token-0123456789"
                try await configurePageWithCredential(system, lab, token: token)
                try await system.runChecked(["systemctl", "restart", "sleepproxyd"])
                service = try await activeService(system, otherThan: mainPID)
                try await sleeperListed(system, in: "held")
                Self.say("restart: main PID \(mainPID) -> \(service["MainPID"] ?? "?"), Sleeper.local held")
                try await expectPageWithCredential(system, lab, token: token)

                // 5. A SYN from the waker wakes the sleeper; a restart during the wake continues it. One short
                // connection attempt, over before the restart: a SYN retransmitted after it would start a new wake.
                let nic = try lab.withNamespace(.sleeper) { try CaptureStream(interface: "eth0") }
                defer { nic.close() }
                try nic.setFilter("ether proto 0x0842")
                _ = try await lab.run(.waker, ["nc", "-z", "-w", "2", sleeper.ipv4, "22"])
                let first = try await firstElement(of: nic.frames, within: .seconds(10), "a magic packet") { _ in true }
                #expect(try EthernetFrame(parsing: first.bytes).magicPacket?.target == MACAddress(sleeper.macString))
                let waking = try await sleeperListed(system, in: "waking")
                #expect(waking.wakeReason?.contains("TCP SYN from \(lab.host(.waker).ipv4)") == true, "\(waking)")
                let beforeRestart = try #require(service["MainPID"])
                try await system.runChecked(["systemctl", "restart", "sleepproxyd"])
                _ = try await activeService(system, otherThan: beforeRestart)
                var now = timespec()
                clock_gettime(CLOCK_REALTIME, &now)
                let restartedAt = Duration.seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
                let resumed = try await sleeperListed(system, in: "waking", within: .seconds(5))
                #expect(resumed.wakeReason == waking.wakeReason, "\(resumed)")
                // Rounds go on every 2 s: magic packets keep arriving after the restart.
                for count in 1...2 {
                    _ = try await firstElement(
                        of: nic.frames, within: .seconds(6), "magic packet \(count) after the restart"
                    ) { $0.timestamp > restartedAt }
                }
                let continued = try await journal(system).split(separator: "\n").first {
                    $0.contains("the wake continues")
                }
                #expect(continued != nil, "the restored wake is logged")
                Self.say(
                    "SYN to port 22: magic packets, Sleeper.local waking; restart during the wake: still waking, magic packets go on; the log: \(continued ?? "-")"
                )

                // 6. sleepproxyctl: root, a member of the sleepproxy group, and someone else.
                try await system.runChecked(["useradd", "--groups", "sleepproxy", "alice"])
                try await system.runChecked(["useradd", "bob"])
                let asRoot = try await system.run(["sleepproxyctl", "status"])
                #expect(asRoot.status == 0 && asRoot.stdout.contains("eth0"), "\(asRoot)")
                let asMember = try await system.run(["sleepproxyctl", "hosts"], user: "alice")
                #expect(asMember.status == 0 && asMember.stdout.contains("Sleeper.local"), "\(asMember)")
                let asOther = try await system.run(["sleepproxyctl", "hosts"], user: "bob")
                #expect(asOther.status == 3 && asOther.stderr.lowercased().contains("permission denied"), "\(asOther)")
                Self.say(
                    "sleepproxyctl: root exit \(asRoot.status), alice (group sleepproxy) exit \(asMember.status), bob exit \(asOther.status): \(asOther.stderr.trimmingCharacters(in: .whitespacesAndNewlines))"
                )

                // 7. The journal has each line's priority: a refused registration is a warning, the start-up lines
                // are not.
                let client = try lab.withNamespace(.waker) {
                    try DatagramSocket(family: .ipv4, interface: "eth0", port: 0)
                }
                defer { client.close() }
                try client.send(
                    try Self.registrationWithoutOwner(lab),
                    to: Endpoint(address: try ip(lab.host(.proxy).ipv4), port: 5354), scopeID: 0,
                    from: try ip(lab.host(.waker).ipv4), interfaceIndex: 0)
                let warnings = try await eventually("the refusal in the journal") { () -> String? in
                    let text = try await journal(system, ["-p", "warning"])
                    return text.contains("no-owner") ? text : nil
                }
                #expect(!warnings.contains("configuration from"), "\(warnings)")
                // A stock system (send_redirects 1, forwarding off, as in this namespace) is not warned about.
                #expect(!warnings.contains("send_redirects"), "\(warnings)")
                let fields = try await system.runChecked([
                    "journalctl", "_SYSTEMD_UNIT=sleepproxyd.service", "--no-pager", "-o", "json",
                    "--output-fields=PRIORITY,MESSAGE", "-p", "warning..warning",
                ])
                #expect(
                    fields.stdout.split(separator: "\n").contains {
                        $0.contains("no-owner") && $0.contains("\"PRIORITY\":\"4\"")
                    },
                    "\(fields.stdout)")
                Self.say(
                    "journalctl -p warning: \(warnings.split(separator: "\n").first { $0.contains("no-owner") } ?? "-")"
                )

                // 8. The watchdog restarts a daemon whose queue is stuck (a stopped process sends no WATCHDOG=1).
                try await system.write(
                    "[Service]\nWatchdogSec=3\nRestartSec=1\nLimitCORE=0\n",
                    to: "/etc/systemd/system/sleepproxyd.service.d/watchdog-test.conf")
                try await system.runChecked(["systemctl", "daemon-reload"])
                try await system.runChecked(["systemctl", "restart", "sleepproxyd"])
                service = try await activeService(system)
                let stuck = try #require(service["MainPID"])
                let restartsBefore = Int(service["NRestarts"] ?? "") ?? -1
                try await system.runChecked(["kill", "-STOP", stuck])
                let stopped = ContinuousClock.now
                service = try await activeService(system, otherThan: stuck, within: .seconds(20))
                Self.say(
                    "watchdog (WatchdogSec=3): main PID \(stuck) stopped, restarted as \(service["MainPID"] ?? "?") after \(ContinuousClock.now - stopped), NRestarts \(service["NRestarts"] ?? "?")"
                )
                #expect((Int(service["NRestarts"] ?? "") ?? -1) > restartsBefore, "\(service)")
                let all = try await system.runChecked(["journalctl", "-u", "sleepproxyd", "--no-pager", "-o", "cat"])
                #expect(all.stdout.contains("Watchdog timeout"), "\(all.stdout)")
                try await system.runChecked(["rm", "-r", "/etc/systemd/system/sleepproxyd.service.d"])
                try await system.runChecked(["systemctl", "daemon-reload"])

                // 9. Remove keeps the configuration and the lease store; purge removes them.
                try await system.runChecked(["apt-get", "remove", "-y", "sleepproxyd"], timeout: .seconds(120))
                #expect(try await system.run(["systemctl", "is-active", "sleepproxyd"]).stdout.hasPrefix("inactive"))
                try await system.runChecked(["test", "-f", "/etc/sleepproxy/sleepproxy.toml"])
                try await system.runChecked(["test", "-f", "/var/lib/private/sleepproxy/leases.sqlite"])
                try await system.runChecked(["test", "!", "-e", "/usr/sbin/sleepproxyd"])
                try await system.runChecked(["apt-get", "purge", "-y", "sleepproxyd"], timeout: .seconds(120))
                for path in [
                    "/etc/sleepproxy", "/var/lib/sleepproxy", "/var/lib/private/sleepproxy", "/usr/sbin/sleepproxyd",
                    "/usr/bin/sleepproxyctl", "/lib/systemd/system/sleepproxyd.service",
                    "/usr/lib/sysusers.d/sleepproxy.conf",
                    "/etc/systemd/system/multi-user.target.wants/sleepproxyd.service",
                ] {
                    let gone = try await system.run(["test", "!", "-e", path])
                    #expect(gone.status == 0, "\(path) is left after purge")
                }
                let record = try await system.run(["dpkg-query", "-W", "-f", "${Status}", "sleepproxyd"])
                #expect(!record.stdout.contains("installed"), "\(record)")
                // Debian leaves system users in place.
                try await system.runChecked(["getent", "passwd", "sleepproxy"])
                Self.say(
                    "remove kept the configuration and the lease store; purge removed them, the unit and the programs")
            }
        }
    }
}

extension PackageBootLabTests {
    /// The previous release (its package built from its git tag), configured and holding a sleeper, upgraded with
    /// apt to this package: the administrator's configuration stays, with the new sample beside it when the package
    /// changed it too (what dpkg does when its question is answered with the default); the daemon is restarted
    /// with the new programs; the host the old one held, read from the lease store the old release wrote, is held
    /// and answered for.
    @Test(.enabled(if: BootTestPackage.previousPath != nil, Comment(rawValue: BootTestPackage.previousMissing)))
    func thePreviousReleaseUpgradesToThisOne() async throws {
        let package = try #require(BootTestPackage.path)
        let previousPackage = try #require(BootTestPackage.previousPath)
        func version(_ package: String) throws -> String {
            try Self.run(["dpkg-deb", "--field", package, "Version"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let previous = try version(previousPackage)
        let current = try version(package)
        let order = try Lab.runInTestNamespace(["dpkg", "--compare-versions", current, "gt", previous])
        try #require(
            order.succeeded,
            "this package's version \(current) is not above the previous release's \(previous): debian/changelog needs an entry"
        )
        let sample = "./etc/sleepproxy/sleepproxy.toml"
        let newSample = try #require(try Self.file(sample, of: package))
        let sampleChanged = try Self.file(sample, of: previousPackage) != newSample
        let newDaemon = try #require(try Self.md5(of: "usr/sbin/sleepproxyd", in: package))
        try await BootedSystem.prepareRoot(repository: BootTestPackage.repository)
        try await Lab.withLab { lab in
            try await BootedSystem.withBooted(in: lab) { system in
                let share = BootedSystem.sharedMountPoint
                try Self.run(["cp", previousPackage, system.shared + "/previous.deb"])
                try Self.run(["cp", package, system.shared + "/current.deb"])

                // The previous release, installed and configured as the README says, holds a sleeper.
                _ = try await installAndConfigure(system, share + "/previous.deb")
                #expect(try await system.runChecked(["sleepproxyd", "--version"]).stdout == previous + "\n")
                try await registerHeldSleeper(system, lab)
                let oldPID = try #require(try await unit(system)["MainPID"])
                Self.say("previous release \(previous) installed from \(previousPackage): Sleeper.local held")

                // The upgrade, as apt does it.
                try await system.runChecked(
                    ["apt-get", "install", "-y", "-o", "Dpkg::Options::=--force-confold", share + "/current.deb"],
                    timeout: .seconds(120))
                let installed = try await system.runChecked(["dpkg-query", "-W", "-f", "${Version}", "sleepproxyd"])
                #expect(installed.stdout == current, "\(installed)")
                let daemon = try await system.runChecked(["md5sum", "/usr/sbin/sleepproxyd"])
                #expect(daemon.stdout.hasPrefix(newDaemon + " "), "not this package's sleepproxyd: \(daemon)")
                #expect(try await system.runChecked(["sleepproxyd", "--version"]).stdout == current + "\n")
                #expect(try await system.runChecked(["sleepproxyctl", "--version"]).stdout == current + "\n")
                try await system.runChecked([
                    "grep", "-qx", "interfaces = \\[\"eth0\"\\]", "/etc/sleepproxy/sleepproxy.toml",
                ])
                let beside = try await system.run(["cat", "/etc/sleepproxy/sleepproxy.toml.dpkg-dist"])
                if sampleChanged {
                    #expect(beside.status == 0 && beside.stdout == newSample, "the new sample beside: \(beside)")
                } else {
                    #expect(beside.status != 0, "the sample did not change, yet: \(beside)")
                }
                let leftovers = try await system.run([
                    "sh", "-c", "ls /etc/sleepproxy/*.dpkg-* 2>/dev/null | grep -v '\\.dpkg-dist$'",
                ])
                #expect(leftovers.stdout.isEmpty, "\(leftovers)")
                let service = try await activeService(system, otherThan: oldPID)
                try await sleeperListed(system, in: "held")
                #expect(service["StatusText"] == "holding 1 host on eth0", "\(service)")
                let answer = try await lab.dig(
                    from: .waker, server: lab.host(.proxy).ipv4, name: "Sleeper.local", type: "A")
                #expect(answer.answers.contains { $0.data == lab.host(.sleeper).ipv4 }, "\(answer)")
                try await expectDocumentationInstalled(system)
                Self.say(
                    "upgraded to \(current): its sleepproxyd, configuration kept\(sampleChanged ? " (the new sample beside it)" : ""), main PID \(oldPID) -> \(service["MainPID"] ?? "?"), Sleeper.local held"
                )
            }
        }
    }
}

/// The package the boot test installs.
enum BootTestPackage {
    static var repository: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// The package under test: `SLEEPPROXY_DEB`, else the newest `dist/sleepproxyd_<release>-*.deb`.
    static let path = newest("sleepproxyd", named: "SLEEPPROXY_DEB")

    /// The client's package: `SLEEPPROXY_CLIENT_DEB`, else the newest `dist/sleepproxy-client_<release>-*.deb`.
    static let clientPath = newest("sleepproxy-client", named: "SLEEPPROXY_CLIENT_DEB")

    /// The package in the environment variable `variable`, else the newest `dist/<package>_<release>-*.deb`.
    private static func newest(_ package: String, named variable: String) -> String? {
        if let named = ProcessInfo.processInfo.environment[variable], !named.isEmpty { return named }
        let directory = repository + "/dist"
        let candidates = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("\(package)_\(SleepProxyVersion.release)-") && $0.hasSuffix(".deb") }
            .map { directory + "/" + $0 }
        return candidates.max { modified($0) < modified($1) }
    }

    /// The previous release's package: `SLEEPPROXY_PREVIOUS_DEB`, else the newest `dist/previous/sleepproxyd_*.deb`.
    static let previousPath: String? = {
        if let named = ProcessInfo.processInfo.environment["SLEEPPROXY_PREVIOUS_DEB"], !named.isEmpty { return named }
        let directory = repository + "/dist/previous"
        let candidates = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("sleepproxyd_") && $0.hasSuffix(".deb") }.map { directory + "/" + $0 }
        return candidates.max { modified($0) < modified($1) }
    }()

    static let previousMissing =
        "no previous release's package in dist/previous/: scripts/build-previous-deb.sh builds it from the git tag v0.2.0 (`make test` does, as root); a clone without that tag cannot (git fetch --tags brings it), or SLEEPPROXY_PREVIOUS_DEB names one"

    static let clientMissing =
        "no sleepproxy-client_\(SleepProxyVersion.release)-*.deb in dist/: `make deb` builds it (`make test` does, as root), or SLEEPPROXY_CLIENT_DEB names one"

    static let missing =
        "no sleepproxyd_\(SleepProxyVersion.release)-*.deb in dist/: `make deb` builds it (`make test` does, as root), or SLEEPPROXY_DEB names one"

    private static func modified(_ path: String) -> Double {
        var info = stat()
        return stat(path, &info) == 0 ? Double(info.st_mtim.tv_sec) : 0
    }

}
