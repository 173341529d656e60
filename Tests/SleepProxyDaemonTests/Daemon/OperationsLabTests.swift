import CaptureStream
import DNSWire
import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import NetworkIO
import SleepProxyControl
import SleepProxyCore
import SleepProxyDaemon
import Synchronization
import TestLab
import Testing

@testable import sleepproxyctl

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon as an administrator runs it: several interfaces, a reload, and `sleepproxyctl` against it.
@Suite(.requiresLab(tools: ["arping", "nc", "setpriv"]))
struct OperationsLabTests {
    static func ctlPath() throws -> String {
        let directory = (try RegistrationDaemonLabTests.daemonPath() as NSString).deletingLastPathComponent
        return directory + "/sleepproxyctl"
    }

    /// Runs `sleepproxyctl` with `arguments` against the lab daemon's socket.
    func ctl(_ lab: Lab, _ arguments: [String], socket: String? = nil) async throws -> CommandResult {
        try await lab.run(
            .proxy, [try Self.ctlPath(), "--socket", socket ?? lab.workDirectory + "/control.sock"] + arguments)
    }

    func start(_ lab: Lab, _ arguments: [String]) async throws -> LabProcess {
        let process = try lab.spawn(
            .proxy,
            [
                try RegistrationDaemonLabTests.daemonPath(), "--state-dir", lab.workDirectory + "/state",
                "--log-level", "debug", "--advertise-name", "Lab Proxy", "--control-socket",
                lab.workDirectory + "/control.sock",
            ] + arguments)
        _ = try await eventually("the daemon's start", within: .seconds(10)) { () -> Bool? in
            if process.hasExited { throw TimeoutError("sleepproxyd exited: \(process.stderr)") }
            return process.stderr.contains("registrations on UDP port") ? true : nil
        }
        return process
    }

    /// The second sleeper's registration, Mac style, on the second network.
    static func secondSleeperRegistration() throws -> [UInt8] {
        let address = try #require(IPv4Address(SecondNetwork.sleeperIPv4))
        let host: DNSName = "Sleeper2.local."
        let instance = try DNSName(labels: ["Sleeper2 SSH", "_ssh", "_tcp", "local"])
        let records = [
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(address)),
            DNSRecord(name: ReverseMapping.name(of: .v4(address)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
            DNSRecord(name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: host))),
            DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(instance)),
        ]
        let mac = try #require(MACAddress(SecondNetwork.sleeperMAC))
        return ClientMessage.update(id: 0x5252, records: records, owner: OwnerOption(sequence: 5, primaryMAC: mac))
    }

    /// Registers the second sleeper through the proxy's `eth1` and waits for the reply; then, as a Mac does while
    /// it falls asleep, it announces its records twice on its link with the same OWNER sequence.
    func registerSecondSleeper(_ network: SecondNetwork) async throws {
        let (client, mdns) = try Lab.withNamespace(named: network.sleeperNamespace) {
            (
                try DatagramSocket(family: .ipv4, interface: "eth0", port: 0),
                try DatagramSocket.multicastDNS(family: .ipv4, interfaceIndex: try NetworkInterface.named("eth0").index)
            )
        }
        defer {
            client.close()
            mdns.close()
        }
        let bytes = try Self.secondSleeperRegistration()
        let registration = try DNSMessage(decoding: bytes)
        try client.send(
            bytes,
            to: Endpoint(address: try #require(IPAddress(SecondNetwork.proxyIPv4)), port: 5354), scopeID: 0,
            from: try ip(SecondNetwork.sleeperIPv4), interfaceIndex: 0)
        _ = try await nextDatagram(from: client, within: .seconds(5))
        let announcement = ClientMessage.announcement(
            records: registration.authorities,
            owner: OwnerOption(sequence: 5, primaryMAC: try #require(MACAddress(SecondNetwork.sleeperMAC))))
        for round in 0..<2 {
            if round > 0 { try await Task.sleep(for: .seconds(1)) }
            try mdns.send(
                announcement, to: MulticastDNS.ipv4Group, from: try ip(SecondNetwork.sleeperIPv4))
        }
    }

    /// Every frame `nic` sees until `done` holds (asked every 100 ms, for at most `timeout`).
    func frames(
        of nic: CaptureStream, _ what: String, within timeout: Duration, until done: @escaping @Sendable () -> Bool
    ) async throws -> [CapturedFrame] {
        let seen = Mutex<[CapturedFrame]>([])
        let reader = Task { for await frame in nic.frames { seen.withLock { $0.append(frame) } } }
        defer { reader.cancel() }
        _ = try await eventually(what, within: timeout) { done() ? true : nil }
        return seen.withLock { $0 }
    }

    /// The whole wake of the lab's sleeper, as its NIC sees it: 15 rounds, the first two unicast only, each later
    /// one unicast and broadcast: 28 magic frames, every one for the sleeper.
    func expectWholeWake(_ frames: [CapturedFrame], of lab: Lab) throws {
        let targets = try frames.map { try EthernetFrame(parsing: $0.bytes).magicPacket?.target }
        #expect(targets.count == 2 + 13 * 2, "\(targets.count) magic frames")
        #expect(targets.allSatisfy { $0 == MACAddress(lab.host(.sleeper).macString) })
        let broadcast = frames.filter { $0.bytes.prefix(6).allSatisfy { $0 == 0xFF } }
        #expect(broadcast.count == 13, "\(broadcast.count) broadcast copies")
        if let first = frames.first?.timestamp, let last = frames.last?.timestamp {
            #expect(last - first >= .seconds(26), "rounds 2 s apart: \(last - first)")
        }
    }

    /// Two LANs, a host registered on each: both are held, each on its own interface, and a connection to the
    /// second wakes it there, and only it.
    @Test func twoNetworksEachHostIsWokenOnItsOwn() async throws {
        try await Lab.withLab { lab in
            let network = try lab.addSecondNetwork()
            let daemon = try await start(lab, ["--interface", "eth0", "--interface", "eth1"])
            defer { daemon.signal(SIGTERM) }
            let first = try magicPackets(lab)
            defer { first.close() }
            let second = try magicPackets(namespace: network.sleeperNamespace)
            defer { second.close() }

            try await MacSleeper.registerAndSleep(lab)
            try await registerSecondSleeper(network)
            try network.sleep()
            for address in [lab.host(.sleeper).ipv4, SecondNetwork.sleeperIPv4] {
                _ = try await eventually("the take-over of \(address)", within: .seconds(20)) {
                    daemon.stderr.contains("took over \(address)") ? true : nil
                }
            }
            let hosts = try await ctl(lab, ["hosts", "--json"])
            #expect(hosts.status == 0, "\(hosts)")
            let summaries = try ControlProtocol.decoder().decode([HostSummary].self, from: Data(hosts.stdout.utf8))
            #expect(
                Set(summaries.map { "\($0.ownerMAC)%\($0.interface)" }) == [
                    "\(lab.host(.sleeper).macString)%eth0", "\(SecondNetwork.sleeperMAC)%eth1",
                ], "\(summaries)")

            _ = try lab.spawn(.waker, ["nc", "-z", "-w", "10", SecondNetwork.sleeperIPv4, "22"])
            let frame = try await firstElement(of: second.frames, within: .seconds(10), "a magic packet") { _ in true }
            #expect(try EthernetFrame(parsing: frame.bytes).magicPacket?.target == MACAddress(SecondNetwork.sleeperMAC))
            #expect(
                Array(frame.bytes[6..<12]) == [0x02, 0x78, 0, 0, 0, 0x01], "sent by the proxy's eth1: \(frame.bytes)")
            // The first sleeper is not asked for: until the wake's second round, 2 s after its first, its NIC sees
            // no magic packet.
            _ = try await firstElement(of: second.frames, within: .seconds(10), "the wake's second round") {
                $0.timestamp >= frame.timestamp + .milliseconds(1_500)
            }
            let stray = try await framesBeforeMarker(first, Marker.wakeOnLAN, at: .sleeper, of: lab)
            #expect(stray.isEmpty, "the first sleeper was asked for: \(stray.count) magic packets")

            // SLEEPPROXY_SHOW_CTL=1 prints the tables an administrator would see (the README's examples).
            if ProcessInfo.processInfo.environment["SLEEPPROXY_SHOW_CTL"] != nil {
                _ = try await eventually("the wake recorded", within: .seconds(5)) {
                    try await ctl(lab, ["events", "--host", SecondNetwork.sleeperMAC]).stdout.contains("wake")
                        ? true : nil
                }
                for arguments in [["hosts"], ["events"], ["show", SecondNetwork.sleeperIPv4], ["status"]] {
                    let output = try await ctl(lab, arguments)
                    print("$ sleepproxyctl \(arguments.joined(separator: " "))\n\(output.stdout)\(output.stderr)")
                }
            }
            let events = try await ctl(lab, ["events", "--json", "--host", SecondNetwork.sleeperMAC])
            let reports = try ControlProtocol.decoder().decode([EventReport].self, from: Data(events.stdout.utf8))
            let wake = try #require(reports.last { $0.kind == "wake" }, "\(reports)")
            #expect(wake.interface == "eth1")
            #expect(wake.sourceAddress == SecondNetwork.wakerIPv4)
            #expect(wake.detail.contains("port 22"), "\(wake)")
        }
    }

    /// SIGHUP reloads the config file: an interface added starts serving, a bad file is refused and changes
    /// nothing, an interface removed stops after its hosts are woken; held hosts elsewhere stay.
    @Test func aReloadAddsAndRemovesAnInterface() async throws {
        try await Lab.withLab { lab in
            let network = try lab.addSecondNetwork()
            let config = lab.workDirectory + "/sleepproxy.toml"
            func write(_ text: String) throws { try text.write(toFile: config, atomically: true, encoding: .utf8) }
            try write("interfaces = [\"eth0\"]\n")
            let daemon = try await start(lab, ["--config", config])
            defer { daemon.signal(SIGTERM) }
            let nic = try magicPackets(lab)
            defer { nic.close() }
            try await MacSleeper.registerAndSleep(lab)

            try write("interfaces = [\"eth0\", \"eth1\"]\n")
            daemon.signal(SIGHUP)
            _ = try await eventually("eth1 served", within: .seconds(10)) {
                daemon.stderr.contains("reload: serving eth1") ? true : nil
            }
            try await registerSecondSleeper(network)
            // Asleep, as hosts are that register: awake, it would be let go while eth0's wake runs.
            try network.sleep()

            try write("interfaces = [\"eth1\"]\nregistration_port = \"high\"\n")
            daemon.signal(SIGHUP)
            _ = try await eventually("the bad file refused", within: .seconds(10)) {
                daemon.stderr.contains("reload refused") ? true : nil
            }
            #expect(daemon.stderr.contains("registration_port"), "the error names the key: \(daemon.stderr)")
            let held = try await ctl(lab, ["hosts", "--json"])
            #expect(
                try ControlProtocol.decoder().decode([HostSummary].self, from: Data(held.stdout.utf8)).count == 2,
                "\(held)")

            try write("interfaces = [\"eth1\"]\n")
            daemon.signal(SIGHUP)
            // eth0 stays open for the whole wake of its host, then closes.
            _ = try await eventually("the wake under way", within: .seconds(10)) {
                daemon.stderr.contains("reload: eth0 removed from the configuration") ? true : nil
            }
            let during = try await ctl(lab, ["hosts", "--json"])
            let waking = try ControlProtocol.decoder().decode([HostSummary].self, from: Data(during.stdout.utf8))
            #expect(waking.first { $0.interface == "eth0" }?.state == "waking", "\(waking)")
            let wake = try await frames(of: nic, "eth0 closed after the wake", within: .seconds(60)) {
                daemon.stderr.contains("stopped serving eth0")
            }
            try expectWholeWake(wake, of: lab)
            let after = try await ctl(lab, ["hosts", "--json"])
            let left = try ControlProtocol.decoder().decode([HostSummary].self, from: Data(after.stdout.utf8))
            #expect(left.map(\.interface) == ["eth1"], "\(left)")
            #expect(!daemon.hasExited)
        }
    }

    /// A restart with an interface taken out of the file while the daemon was stopped: the host the store kept
    /// there is not left in limbo. The interface is opened for its wake alone (no advertisement, no registrations),
    /// the whole wake goes out, and then it closes.
    @Test func aRestartWithoutAnInterfaceWakesItsHostsThere() async throws {
        try await Lab.withLab { lab in
            _ = try lab.addSecondNetwork()
            let config = lab.workDirectory + "/sleepproxy.toml"
            func write(_ text: String) throws { try text.write(toFile: config, atomically: true, encoding: .utf8) }
            try write("interfaces = [\"eth0\", \"eth1\"]\n")
            let first = try await start(lab, ["--config", config])
            try await MacSleeper.registerAndSleep(lab)
            _ = try await eventually("the take-over", within: .seconds(20)) {
                first.stderr.contains("took over \(lab.host(.sleeper).ipv4)") ? true : nil
            }
            first.signal(SIGTERM)
            _ = try await eventually("the first daemon's exit", within: .seconds(10)) { first.hasExited ? true : nil }

            try write("interfaces = [\"eth1\"]\n")
            let nic = try magicPackets(lab)
            defer { nic.close() }
            let daemon = try await start(lab, ["--config", config])
            defer { daemon.signal(SIGTERM) }
            let wake = try await frames(of: nic, "eth0 closed after the wake", within: .seconds(60)) {
                daemon.stderr.contains("stopped serving eth0")
            }
            #expect(
                daemon.stderr.contains(
                    "restore: 1 held host on eth0, which the configuration no longer names: waking them there"),
                "\(daemon.stderr)")
            try expectWholeWake(wake, of: lab)
            let after = try await ctl(lab, ["hosts", "--json"])
            #expect(try ControlProtocol.decoder().decode([HostSummary].self, from: Data(after.stdout.utf8)).isEmpty)
            let status = try await ctl(lab, ["status", "--json"])
            let report = try ControlProtocol.decoder().decode(StatusReport.self, from: Data(status.stdout.utf8))
            #expect(report.interfaces.map(\.name) == ["eth1"], "\(report)")
            #expect(!daemon.hasExited)
        }
    }

    /// Every command against a live daemon, in tables and JSON, with every exit code.
    @Test func sleepproxyctlAgainstALiveDaemon() async throws {
        try await Lab.withLab { lab in
            let daemon = try await start(lab, ["--interface", "eth0"])
            defer { daemon.signal(SIGTERM) }
            try await MacSleeper.registerAndSleep(lab)
            let sleeper = lab.host(.sleeper)
            _ = try await eventually("the take-over", within: .seconds(20)) {
                daemon.stderr.contains("took over \(sleeper.ipv4)") ? true : nil
            }

            let status = try await ctl(lab, ["status"])
            #expect(status.status == 0, "\(status)")
            #expect(status.stdout.contains("eth0") && status.stdout.contains(lab.host(.proxy).macString), "\(status)")
            let statusJSON = try await ctl(lab, ["status", "--json"])
            let report = try ControlProtocol.decoder().decode(StatusReport.self, from: Data(statusJSON.stdout.utf8))
            #expect(report.hostCount == 1 && report.interfaces.map(\.name) == ["eth0"], "\(report)")
            #expect(report.interfaces.first?.advertisedName?.contains("Lab Proxy") == true, "\(report)")

            let hosts = try await ctl(lab, ["hosts"])
            #expect(hosts.status == 0, "\(hosts)")
            for text in ["Sleeper.local", sleeper.macString, "eth0", sleeper.ipv4, "held"] {
                #expect(hosts.stdout.contains(text), "\(text) in \(hosts.stdout)")
            }
            let show = try await ctl(lab, ["show", "sleeper"])
            #expect(show.status == 0, "\(show)")
            #expect(show.stdout.contains("SRV") && show.stdout.contains("claimed"), "\(show.stdout)")
            let showJSON = try await ctl(lab, ["show", sleeper.ipv4, "--json"])
            let detail = try ControlProtocol.decoder().decode(HostDetail.self, from: Data(showJSON.stdout.utf8))
            #expect(detail.records.count == 6 && detail.addresses.map(\.state) == ["claimed"], "\(detail)")
            // Clock times are local times, as the C library has them (TZ here: UTC+5:30, no time zone files).
            let shifted = try await lab.run(
                .proxy,
                [
                    "env", "TZ=UTC-05:30", try Self.ctlPath(), "--socket", lab.workDirectory + "/control.sock", "show",
                    "sleeper",
                ])
            let registered = Presentation(clockZone: .fixed(secondsFromUTC: 19_800)).clockTime(
                detail.summary.registeredAt)
            #expect(shifted.stdout.contains(registered), "\(registered) in \(shifted.stdout)")

            let unknown = try await ctl(lab, ["show", "nosuchhost"])
            #expect(unknown.status == 1 && unknown.stderr.contains("nosuchhost"), "\(unknown)")
            let usage = try await ctl(lab, ["show"])
            #expect(usage.status == 2, "\(usage)")
            let absent = try await ctl(lab, ["status"], socket: lab.workDirectory + "/nothing.sock")
            #expect(absent.status == 3 && absent.stderr.contains("nothing.sock"), "\(absent)")
            let denied = try await lab.run(
                .proxy,
                [
                    "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", try Self.ctlPath(), "--socket",
                    lab.workDirectory + "/control.sock", "status",
                ])
            #expect(denied.status == 3 && denied.stderr.lowercased().contains("permission"), "\(denied)")

            // Malformed and oversized requests get an error line and a closed connection; the daemon goes on.
            let garbage = try exchange(lab, Array("{\"version\":1,\"command\"\n".utf8))
            #expect(garbage.contains("bad-request"), "\(garbage)")
            let huge = try exchange(lab, [UInt8](repeating: 0x61, count: 100_000))
            #expect(huge.contains("request-too-large"), "\(huge)")
            let future = try exchange(lab, Array("{\"version\":99,\"command\":\"status\"}\n".utf8))
            #expect(future.contains("unsupported-version"), "\(future)")

            // A follower sees the history, then each new event as it happens.
            let follower = try lab.spawn(
                .proxy,
                [
                    try Self.ctlPath(), "--socket", lab.workDirectory + "/control.sock", "events", "--follow",
                    "--json", "--limit", "1",
                ])
            defer { follower.signal(SIGINT) }
            _ = try await eventually("the follower's history", within: .seconds(5)) {
                follower.stdout.split(separator: "\n").count == 1 ? true : nil
            }
            let wake = try await ctl(lab, ["wake", "Sleeper.local"])
            #expect(wake.status == 0 && wake.stdout.contains("waking"), "\(wake)")
            _ = try await eventually("the wake in the history", within: .seconds(5)) {
                let events = try await ctl(lab, ["events", "--limit", "100"])
                return events.stdout.contains("sleepproxyctl wake") ? events : nil
            }
            let forget = try await ctl(lab, ["forget", sleeper.macString])
            #expect(forget.status == 0, "\(forget)")
            let followed = try await eventually("the release followed", within: .seconds(5)) {
                let lines = follower.stdout.split(separator: "\n")
                return lines.contains { $0.contains("\"kind\":\"released\"") } ? lines : nil
            }
            let streamed = try followed.map {
                try ControlProtocol.decoder().decode(EventReport.self, from: Data($0.utf8))
            }
            #expect(
                streamed.map(\.id) == streamed.map(\.id).sorted() && Set(streamed.map(\.id)).count == streamed.count)
            #expect(streamed.contains { $0.kind == "wake" && $0.detail.contains("sleepproxyctl wake") }, "\(streamed)")
            let none = try await ctl(lab, ["hosts", "--json"])
            #expect(try ControlProtocol.decoder().decode([HostSummary].self, from: Data(none.stdout.utf8)).isEmpty)
            let events = try await ctl(lab, ["events", "--json", "--limit", "100"])
            let kinds = try ControlProtocol.decoder().decode([EventReport].self, from: Data(events.stdout.utf8))
                .map(\.kind)
            for kind in ["registered", "takeover", "wake", "released"] {
                #expect(kinds.contains(kind), "\(kind) in \(kinds)")
            }
            #expect(!daemon.hasExited, "\(daemon.stderr)")
        }
    }

    /// Sends raw bytes to the control socket and reads until it closes.
    func exchange(_ lab: Lab, _ bytes: [UInt8]) throws -> String {
        let descriptor = try connectToControlSocket(lab.workDirectory + "/control.sock")
        defer { close(descriptor) }
        _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return readUntilClosed(descriptor)
    }
}
