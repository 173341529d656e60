import CaptureStream
import DNSWire
import Foundation
import Frames
import NetworkAddresses
import SleepProxyControl
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A host that never registers, declared in the config file: the proxy finds out from the wire alone that it
/// sleeps, takes it over, wakes it for a connection to one of its ports, and lets go when it is back.
@Suite(.requiresLab(tools: ["arping", "nc"]))
struct DeclaredHostLabTests {
    /// The sleeper declared with its IPv4 and ULA addresses, ssh as its wake port and one service.
    static func config(_ lab: Lab) throws -> String {
        let sleeper = lab.host(.sleeper)
        let path = lab.workDirectory + "/sleepproxy.toml"
        try """
        [hosts.sleeper]
        mac = "\(sleeper.macString)"
        addresses = ["\(sleeper.ipv4)", "\(sleeper.ula)"]
        wake_ports = ["tcp/22"]
        host_name = "sleeper"
        services = [{ name = "Sleeper Files", type = "_smb._tcp", port = 445 }]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func startDaemon(_ lab: Lab) throws -> LabProcess {
        try RegistrationDaemonLabTests().startDaemon(
            lab, state: lab.workDirectory + "/state", extraArguments: ["--config", try config(lab)])
    }

    /// Prints what an administrator sees, when SLEEPPROXY_SHOW_CTL is set (the closing note's examples).
    static func show(_ lab: Lab, _ arguments: [String], _ moment: String) async throws {
        guard ProcessInfo.processInfo.environment["SLEEPPROXY_SHOW_CTL"] != nil else { return }
        let output = try await OperationsLabTests().ctl(lab, arguments)
        print("# \(moment)\n$ sleepproxyctl \(arguments.joined(separator: " "))\n\(output.stdout)\(output.stderr)")
    }

    /// A stale declaration: the declared address now belongs to another machine (here the waker's own, as DHCP
    /// gives an address away) and the declared MAC is silent. The take-over's probes ask the whole link, the other
    /// machine's kernel answers, and the proxy never claims the address: ARP for it is answered by its owner only,
    /// nobody is woken, the log says why, and the host is not held again over the same address.
    @Test func aDeclaredAddressAnotherMachineAnswersForIsNeverTaken() async throws {
        try await Lab.withLab { lab in
            let waker = lab.host(.waker)
            let path = lab.workDirectory + "/sleepproxy.toml"
            try """
            [hosts.pc]
            mac = "02:77:00:00:00:55"
            addresses = ["\(waker.ipv4)"]
            wake_ports = ["tcp/22"]
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let daemon = try RegistrationDaemonLabTests().startDaemon(
                lab, state: lab.workDirectory + "/state", extraArguments: ["--config", path])
            defer { daemon.signal(SIGTERM) }
            let nic = try magicPackets(lab, at: .waker)
            defer { nic.close() }

            _ = try await eventually("the address found in use", within: .seconds(45)) {
                daemon.stderr.contains("\(waker.ipv4) is in use by \(waker.macString)") ? true : nil
            }
            // Asked from the sleeper, only the waker answers for its address.
            let asked = try await lab.run(.sleeper, ["arping", "-c", "3", "-w", "4", "-I", "eth0", waker.ipv4])
            #expect(asked.stdout.lowercased().contains(waker.macString.lowercased()), "\(asked.stdout)")
            #expect(!asked.stdout.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(asked.stdout)")
            // Watched afresh, it is found asleep again and not held: the address is left alone, nothing announced.
            _ = try await eventually("the host left unheld", within: .seconds(45)) {
                daemon.stderr.contains("not held: no address to take over (\(waker.ipv4) is in use by") ? true : nil
            }
            #expect(!daemon.stderr.contains("took over \(waker.ipv4)"), "\(daemon.stderr)")
            #expect(!daemon.stderr.contains("waking"), "\(daemon.stderr)")
            let magic = try await framesBeforeMarker(nic, Marker.wakeOnLAN, at: .waker, of: lab, after: .seconds(1))
            #expect(magic.isEmpty, "nobody woken, yet \(magic.count) magic packets")
            let hosts = try await OperationsLabTests().ctl(lab, ["hosts"])
            #expect(hosts.stdout.contains("is in use by \(waker.macString)"), "\(hosts.stdout)")
        }
    }

    @Test func aDeclaredSleeperIsTakenOverWokenForItsPortAndLetGoWhenBack() async throws {
        try await Lab.withLab { lab in
            let daemon = try Self.startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let sleeper = lab.host(.sleeper)
            let sleeperMAC = try #require(MACAddress(sleeper.macString))
            let nic = try magicPackets(lab)
            defer { nic.close() }

            // Awake, it answers its probes: nothing is claimed, its service is not answered by the proxy.
            _ = try await eventually("the first probe answered", within: .seconds(15)) {
                daemon.stderr.contains("declared host sleeper (\(sleeperMAC)%eth0) is awake: heard after 1 probes")
                    ? true : nil
            }
            let awake = try await lab.multicastQuery(from: .waker, name: "_smb._tcp.local", type: "PTR")
            #expect(!awake.contains { $0.answers("_smb._tcp.local.", .ptr) }, "\(awake)")
            try await Self.show(lab, ["hosts"], "awake")

            // It sleeps (its addresses go, so its kernel answers nothing): taken over within half a minute.
            let asleepAt = ContinuousClock.now
            try lab.sleep(.sleeper)
            try await daemon.waitUntilLogged(
                "took over \(sleeper.ipv4)", "the take-over of \(sleeper.ipv4)", within: .seconds(40))
            let takeOver = ContinuousClock.now - asleepAt
            print(
                "declared_takeover_s: \(Double(takeOver.components.seconds) + Double(takeOver.components.attoseconds) / 1e18)"
            )
            #expect(takeOver < .seconds(30), "taken over \(takeOver) after it fell asleep")
            #expect(daemon.stderr.contains("declared host sleeper answered none of 3 probes: asleep"))
            try await Self.show(lab, ["hosts"], "asleep")

            // Its declared service is answered while it sleeps.
            let asleep = try await lab.multicastQuery(from: .waker, name: "_smb._tcp.local", type: "PTR")
            #expect(asleep.contains { $0.answers("_smb._tcp.local.", .ptr) }, "\(asleep)")

            // A port it did not declare wakes nothing; ssh does: the magic packet arrives at its NIC.
            _ = try await lab.run(.waker, ["nc", "-z", "-w", "2", sleeper.ipv4, "8080"])
            #expect(!daemon.stderr.contains("waking"), "\(daemon.stderr)")
            let client = try lab.spawn(.waker, ["nc", "-z", "-w", "40", sleeper.ipv4, "22"])
            try await expectMagicPacketForSleeper(lab, at: nic)
            try await daemon.waitUntilLogged("hosts.sleeper.wake_ports", "the wake's log line", within: .seconds(5))
            try await Self.show(lab, ["hosts"], "being woken")

            // It wakes as a PC does: addresses back, ssh listening, and a first frame of its own (an ARP for its
            // gateway); no announcement. The proxy lets go within a second and hands the address back, and the
            // client's next retransmitted SYN reaches the host itself.
            let server = try lab.spawn(.sleeper, ["nc", "-l", "22"])
            defer { server.signal(SIGTERM) }
            try lab.wake(.sleeper)
            let backAt = ContinuousClock.now
            _ = try lab.spawn(.sleeper, ["arping", "-c", "1", "-w", "1", "-I", "eth0", Lab.gatewayIPv4])
            _ = try await eventually("the release", within: .seconds(5), every: .milliseconds(20)) {
                daemon.stderr.contains("declared host sleeper is back") ? true : nil
            }
            let release = ContinuousClock.now - backAt
            print(
                "declared_release_ms: \(release.components.seconds * 1000 + release.components.attoseconds / 1_000_000_000_000_000)"
            )
            #expect(release < .seconds(1), "released \(release) after its first frame")
            let status = try await eventually("the connection to the woken host", within: .seconds(30)) {
                client.hasExited ? client.wait(timeout: .seconds(1)) : nil
            }
            #expect(status == 0, "nc: \(client.stderr)")
            try await Self.show(lab, ["hosts"], "back")
            try await Self.show(lab, ["events", "--host", sleeper.macString], "its events")
            let events = try await OperationsLabTests().ctl(lab, ["events", "--host", "sleeper"])
            for kind in ["asleep", "takeover", "wake", "released"] {
                #expect(events.stdout.contains(kind), "no \(kind) event: \(events.stdout)")
            }
        }
    }

    /// Declared by its MAC alone, a sleeper running avahi is held with what avahi announced, and still so after a
    /// restart of the proxy while it sleeps: the learned records come back from the lease store, with the address
    /// to take over, though the sleeper sends nothing more.
    @Test(.requiresLab(tools: ["avahi-daemon", "dbus-daemon"]))
    func whatASleeperAnnouncedIsAnsweredAfterARestartWhileItSleeps() async throws {
        try await Lab.withLab { lab in
            let sleeper = lab.host(.sleeper)
            let path = lab.workDirectory + "/sleepproxy.toml"
            try """
            [hosts.sleeper]
            mac = "\(sleeper.macString)"
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let state = lab.workDirectory + "/state"
            let first = try RegistrationDaemonLabTests().startDaemon(
                lab, state: state, extraArguments: ["--config", path])
            defer { first.signal(SIGTERM) }
            let avahi = try await lab.startAvahi(
                on: .sleeper, hostName: "sleeper",
                services: [AvahiService(name: "Sleeper Files", type: "_smb._tcp", port: 445)])
            defer { avahi.stop(graceful: false) }
            let instance: DNSName = "Sleeper Files._smb._tcp.local."
            // Its service is out on the link (avahi answers for it itself).
            _ = try await eventually("avahi answering for its service", within: .seconds(10)) {
                let answers = try await lab.multicastQuery(from: .waker, name: "_smb._tcp.local", type: "PTR")
                return answers.contains { $0.answers("_smb._tcp.local.", .ptr) && $0.source == sleeper.ipv4 }
                    ? true : nil
            }

            // It suspends: its responder stops where it is (no goodbyes), its addresses go.
            avahi.freeze()
            try lab.sleep(.sleeper)
            try await first.waitUntilLogged("learned from its announcements", "the take-over", within: .seconds(40))
            first.signal(SIGTERM)
            #expect(first.wait(timeout: .seconds(10)) == 0, "\(first.stderr)")

            let second = try RegistrationDaemonLabTests().startDaemon(
                lab, state: state, extraArguments: ["--config", path])
            defer { second.signal(SIGTERM) }
            #expect(second.stderr.contains("records learned before the restart"), "\(second.stderr)")
            try await second.waitUntilLogged(
                "took over \(sleeper.ipv4)", "the take-over after the restart", within: .seconds(40))
            #expect(second.stderr.contains("learned from its announcements"), "\(second.stderr)")
            let asleep = try await lab.multicastQuery(from: .waker, name: "_smb._tcp.local", type: "PTR")
            let answered = asleep.filter { $0.answers("_smb._tcp.local.", .ptr) }
            #expect(answered.contains { $0.source == lab.host(.proxy).ipv4 }, "\(asleep)")
            let records = answered.compactMap { try? DNSMessage(decoding: $0.bytes) }.flatMap(\.answers)
            #expect(records.contains { $0.rdata == .ptr(instance) }, "the exact instance name: \(records)")
        }
    }

    /// What a user does for a machine that does not register: `sleepproxyctl seen` shows it (avahi announcing two
    /// services on it), `seen --toml` prints its table, which passes `--check-config` and is reloaded; the proxy
    /// asks the machine what it offers and learns it; the machine suspends (its responder frozen, no goodbyes);
    /// browsing from the waker finds both services under their exact names, answered by the proxy; a connection to
    /// a learned port wakes it; back, it is let go, and its avahi renames nothing.
    @Test(.requiresLab(tools: ["avahi-daemon", "dbus-daemon"]))
    func aMachineFoundWithSeenAndDeclaredWithItsTableIsServedWithWhatItAnnounces() async throws {
        try await Lab.withLab { lab in
            let sleeper = lab.host(.sleeper)
            let operations = OperationsLabTests()
            let path = lab.workDirectory + "/sleepproxy.toml"
            try "# Machines that do not register are added below.\n".write(
                toFile: path, atomically: true, encoding: .utf8)
            let daemon = try RegistrationDaemonLabTests().startDaemon(
                lab, state: lab.workDirectory + "/state", extraArguments: ["--config", path])
            defer { daemon.signal(SIGTERM) }
            let nic = try magicPackets(lab)
            defer { nic.close() }
            let services = [
                AvahiService(name: "Sleeper Files", type: "_smb._tcp", port: 445),
                AvahiService(name: "Sleeper Shell", type: "_ssh._tcp", port: 22),
            ]
            let avahi = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: services)
            defer { avahi.stop(graceful: false) }

            // The proxy heard it announce itself.
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let machine = try await eventually("the sleeper listed by seen, with both services", within: .seconds(15)) {
                let output = try await operations.ctl(lab, ["seen", "--json"])
                let machines = try decoder.decode([SeenReport].self, from: Data(output.stdout.utf8))
                return machines.first { $0.mac == sleeper.macString && $0.services.count == 2 }
            }
            #expect(machine.hostName == "sleeper.local")
            #expect(Set(machine.services.map(\.name)) == ["Sleeper Files", "Sleeper Shell"])
            #expect(machine.addresses.contains(sleeper.ipv4))
            #expect(machine.role == "neither")
            try await Self.show(lab, ["seen"], "what the proxy hears")

            // Its table, pasted into the config file, checked and reloaded.
            let table = try await operations.ctl(lab, ["seen", "--toml", "sleeper.local"])
            #expect(table.succeeded, "\(table)")
            try await Self.show(lab, ["seen", "--toml", "sleeper.local"], "its table")
            let file = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            file.seekToEndOfFile()
            file.write(Data(table.stdout.utf8))
            try file.close()
            let check = try await lab.run(
                .proxy,
                [
                    try RegistrationDaemonLabTests.daemonPath(), "--interface", "eth0", "--config", path,
                    "--check-config",
                ])
            #expect(check.succeeded, "\(check)")
            #expect(check.stdout.contains("[hosts.sleeper]"), "\(check.stdout)")
            daemon.signal(SIGHUP)
            try await daemon.waitUntilLogged("watching declared host sleeper", "the reload", within: .seconds(10))

            // Asked what it offers, it answers, and both services are learned before it sleeps.
            let learned = try await eventually("both services learned", within: .seconds(15)) {
                let output = try await operations.ctl(lab, ["hosts", "--json"])
                let hosts = try decoder.decode([HostSummary].self, from: Data(output.stdout.utf8))
                return hosts.first { $0.declared == "sleeper" && ($0.learnedRecords ?? 0) >= 8 }
            }
            let listed = try decoder.decode(
                [SeenReport].self, from: Data(try await operations.ctl(lab, ["seen", "--json"]).stdout.utf8))
            #expect(listed.first { $0.mac == sleeper.macString }?.declared == "sleeper")
            #expect(learned.ownerMAC == sleeper.macString)

            // It suspends: its responder stops where it is, its addresses go.
            avahi.freeze()
            let asleepAt = ContinuousClock.now
            try lab.sleep(.sleeper)
            try await daemon.waitUntilLogged("took over \(sleeper.ipv4)", "the take-over", within: .seconds(40))
            let instances: [String: DNSName] = [
                "_smb._tcp.local": "Sleeper Files._smb._tcp.local.",
                "_ssh._tcp.local": "Sleeper Shell._ssh._tcp.local.",
            ]
            for (type, instance) in instances.sorted(by: { $0.key < $1.key }) {
                let records = try await eventually("\(type) answered by the proxy", within: .seconds(10)) {
                    let answers = try await lab.multicastQuery(from: .waker, name: type, type: "PTR")
                    let records = answers.filter { $0.source == lab.host(.proxy).ipv4 }
                        .compactMap { try? DNSMessage(decoding: $0.bytes) }.flatMap { $0.answers + $0.additionals }
                    return records.isEmpty ? nil : records
                }
                #expect(records.contains { $0.rdata == .ptr(instance) }, "the exact instance name: \(records)")
                #expect(records.contains { $0.name == instance && $0.type == .srv }, "its SRV: \(records)")
            }
            let answered = ContinuousClock.now - asleepAt
            let count =
                daemon.stderr.firstMatch(of: /\((\d+) learned from its announcements\)/).map { Int($0.1) ?? 0 } ?? 0
            print("declared_records_learned: \(count)")
            print(
                "declared_services_answered_s: \(Double(answered.components.seconds) + Double(answered.components.attoseconds) / 1e18)"
            )
            #expect(count >= 8, "its address, reverse mapping, and PTR, SRV, TXT and type of two services")
            try await Self.show(lab, ["hosts"], "asleep")

            // A browser that starts now, with nothing cached, finds both services with their exact names.
            let browser = try await lab.startAvahi(on: .waker, hostName: "waker")
            defer { browser.stop(graceful: false) }
            let found = try await browser.browse("_ssh._tcp") { entries in
                entries.contains { $0.name == "Sleeper Shell" && $0.port == 22 }
            }
            #expect(found.contains { $0.name == "Sleeper Shell" })

            // ssh, a learned port, wakes it.
            let client = try lab.spawn(.waker, ["nc", "-z", "-w", "40", sleeper.ipv4, "22"])
            defer { client.signal(SIGTERM) }
            try await expectMagicPacketForSleeper(lab, at: nic)
            try await daemon.waitUntilLogged("waking", "the wake", within: .seconds(5))

            // Back: its addresses return and its avahi runs again; the proxy lets go, and avahi renames nothing.
            try lab.wake(.sleeper)
            avahi.thaw()
            try await daemon.waitUntilLogged("declared host sleeper is back", "the release", within: .seconds(10))
            _ = try await eventually("avahi answering for its service again", within: .seconds(15)) {
                let answers = try await lab.multicastQuery(from: .waker, name: "_ssh._tcp.local", type: "PTR")
                return answers.contains { $0.answers("_ssh._tcp.local.", .ptr) && $0.source == sleeper.ipv4 }
                    ? true : nil
            }
            #expect(!avahi.log.lowercased().contains("conflict"), "\(avahi.log)")
        }
    }

    /// A declared host that stays awake is never claimed, and all it costs is one probe per quiet spell.
    @Test func aDeclaredHostThatNeverSleepsIsNeverClaimedAndCostsOnlyItsProbes() async throws {
        try await Lab.withLab { lab in
            let proxyMAC = try #require(MACAddress(lab.host(.proxy).macString))
            // Everything the proxy sends to the sleeper, and every ARP it broadcasts (an announcement would be one).
            let sleeperMAC = lab.host(.sleeper).macString
            let nic = try lab.withNamespace(.sleeper) { try CaptureStream(interface: "eth0") }
            defer { nic.close() }
            try nic.setFilter("ether src \(proxyMAC) and (ether dst \(sleeperMAC) or arp)")
            let collector = Task {
                var seen: [CapturedFrame] = []
                for await frame in nic.frames { seen.append(frame) }
                return seen
            }
            let daemon = try Self.startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let watched = ContinuousClock.now
            try await Task.sleep(for: .seconds(25))
            nic.close()
            // The filter again, frame by frame: frames the capture took in before its filter was set (the lab's
            // own link-up reports) are not the daemon's.
            let sleeper = try #require(MACAddress(sleeperMAC))
            let frames = await collector.value.compactMap { try? EthernetFrame(parsing: $0.bytes) }.filter {
                $0.header.source == proxyMAC && ($0.header.destination == sleeper || $0.arp != nil)
            }
            let probes = frames.filter { $0.arp?.senderProtocolAddress == .any }
            print("declared_idle_probes_per_minute: \(Double(probes.count) * 60 / 25)")
            #expect(
                probes.count >= 1 && probes.count <= 3, "\(probes.count) probes in \(ContinuousClock.now - watched)")
            #expect(frames.count == probes.count, "only probes: \(frames)")
            #expect(!daemon.stderr.contains("took over") && !daemon.stderr.contains("asleep"), "\(daemon.stderr)")
        }
    }
}
