import CaptureStream
import DNSWire
import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import NetworkIO
import SleepProxyCore
import SleepProxyDaemon
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

/// Hostile traffic from the waker while a bystander, the host "client", goes about its business.
///
/// Twenty hosts are held (the sleeper itself, asleep, and 19 more), then for `FLOOD_SECONDS` (60 by default) the
/// waker sends about 7,000 frames a second (`FloodPlan` lists the mix; three of them are a stranger's gratuitous
/// ARP for the last held host's address, an address conflict that rightly wakes it). Meanwhile the client asks
/// 20 legacy-unicast queries a second and times the answers; a quarter of the way in it registers a new host as
/// a Mac does, later it resolves the sleeper's ssh service, and past the middle it opens ssh to the sleeper,
/// which must wake it. The figures say whether each of those worked and what the flood cost the daemon.
/// `FLOOD_CONFIG` names a config file for the daemon (by default it runs with the default limits).
func runFloodBenchmark() async throws {
    if let reason = Lab.unsupportedReason {
        print("flood benchmark skipped: \(reason)")
        return
    }
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let daemonPath = directory.appendingPathComponent("sleepproxyd").path
    let ctlPath = directory.appendingPathComponent("sleepproxyctl").path
    guard FileManager.default.isExecutableFile(atPath: daemonPath),
        FileManager.default.isExecutableFile(atPath: ctlPath)
    else {
        print("flood benchmark skipped: build sleepproxyd and sleepproxyctl first (swift build -c release)")
        return
    }
    let seconds = ProcessInfo.processInfo.environment["FLOOD_SECONDS"].flatMap { Double($0) } ?? 60
    try await Lab.withLab { lab in
        let client = try lab.addHost("client", number: 4)
        let control = lab.workDirectory + "/control.sock"
        // FLOOD_CONFIG names a config file for the daemon (other limits, say); the defaults otherwise.
        let config = ProcessInfo.processInfo.environment["FLOOD_CONFIG"].map { ["--config", $0] } ?? []
        let daemon = try lab.spawn(
            .proxy,
            [
                daemonPath, "--interface", "eth0", "--state-dir", lab.workDirectory + "/state", "--registration-port",
                "5354", "--log-level", "info", "--control-socket", control,
            ] + config)
        defer { daemon.signal(SIGTERM) }
        _ = try await eventually("sleepproxyd to start", within: .seconds(10)) {
            daemon.stderr.contains("registrations on UDP port") ? true : nil
        }
        let ctl = FloodControl(lab: lab, path: ctlPath, socket: control)
        let held = try floodHeldHosts(lab)
        try registerFromSleeper(lab, held.map(\.registration))
        try lab.sleep(.sleeper)
        for host in held {
            _ = try await eventually("the take-over of \(host.target.ipv4)", within: .seconds(30)) {
                daemon.stderr.contains("took over \(host.target.ipv4)") ? true : nil
            }
        }
        // Let the announcements of the take-overs end.
        try await Task.sleep(for: .seconds(3))

        let sleeperMAC = MACAddress(lab.host(.sleeper).macString)!
        let magic = try lab.withNamespace(.sleeper) { try CaptureStream(interface: "eth0") }
        defer { magic.close() }
        try magic.setFilter("ether proto 0x0842")
        let syns = try client.withNamespace {
            try CaptureStream(interface: "eth0", options: PacketCapture.Options(direction: .outgoing))
        }
        defer { syns.close() }
        try syns.setFilter("tcp dst port 22 and tcp[tcpflags] & tcp-syn != 0")

        let lastEventBefore = try await ctl.events().map(\.id).max() ?? 0
        let logLinesBefore = lineCount(daemon.stderr)
        let cpuBefore = processCPUSeconds(daemon.pid)
        let transmittedBefore = try await interfaceCounter(lab, "tx_packets")
        let victim = held[held.count - 1].target
        let plan = FloodPlan(seconds: seconds, targets: held.map(\.target), conflictAddress: victim.ipv4)
        // Names of the hosts woken during the flood go unanswered while they are woken, rightly: ask for the others.
        let questions = held[1..<(held.count - 1)].flatMap { host in
            [
                FloodQuestion(labels: host.target.hostLabels, type: 1),
                FloodQuestion(labels: host.target.instanceLabels, type: 33),
            ]
        }

        let clock = ContinuousClock()
        let start = clock.now
        let startedAt = Date()
        let flood = Task { try await lab.runFlood(plan) }
        let paced = Task { try await client.pacedQueries(questions, perSecond: 20, seconds: seconds) }
        let sampler = Task {
            var samples: [Int] = []
            while !Task.isCancelled {
                if let rss = processStatus(daemon.pid, "VmRSS") { samples.append(rss) }
                try? await Task.sleep(for: .seconds(1))
            }
            return samples
        }
        func at(_ fraction: Double) async throws {
            try await Task.sleep(until: start + .milliseconds(Int(seconds * fraction * 1000)), clock: clock)
        }

        try await at(0.25)
        let registration = try await client.register(
            try clientRegistration(), to: lab.host(.proxy).ipv4, port: 5354)
        try await at(0.4)
        let sleeperTarget = held[0].target
        let resolve = try await client.resolve(
            FloodQuestion(labels: sleeperTarget.instanceLabels, type: 33), responder: lab.host(.proxy).ipv4)
        try await at(0.55)
        let connection = Task { try await client.connect(to: sleeperTarget.ipv4, port: 22) }
        let syn = try? await firstElement(of: syns.frames, within: .seconds(5), "the SYN to the sleeper") { _ in true }
        let wake = try? await firstElement(of: magic.frames, within: .seconds(10), "a magic packet for the sleeper") {
            (try? EthernetFrame(parsing: $0.bytes))?.magicPacket?.target == sleeperMAC
        }
        _ = try await connection.value

        let report = try await flood.value
        let queries = try await paced.value
        let cpuAfter = processCPUSeconds(daemon.pid)
        let logLinesAfter = lineCount(daemon.stderr)
        let transmittedAfter = try await interfaceCounter(lab, "tx_packets")
        sampler.cancel()
        let samples = await sampler.value
        let peak = processStatus(daemon.pid, "VmHWM")
        let alive = !daemon.hasExited
        let events = try await ctl.events().filter { $0.id > lastEventBefore }
        let hosts = try await ctl.hosts()
        let sockets = try await udpDrops(lab)
        let counters = try await lab.run(.proxy, ["nstat", "-asz"]).stdout

        print("flood_started_at: \(ISO8601DateFormatter().string(from: startedAt))")
        print("flood_seconds: \(String(format: "%.1f", report.seconds))")
        print("flood_frames_sent: \(report.sent)")
        print("flood_frames_refused_by_sender_kernel: \(report.failed)")
        print("flood_fps: \(Int(report.framesPerSecond))")
        print("flood_frames_by_kind: \(report.kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" })")
        print("flood_registration_acknowledged: \(registration.succeeded ? 1 : 0)")
        print("flood_registration_tries: \(registration.tries)")
        print("flood_registration_ms: \(milliseconds(registration.milliseconds))")
        print("flood_resolve_ok: \(resolve.succeeded ? 1 : 0)")
        print("flood_resolve_tries: \(resolve.tries)")
        print("flood_resolve_ms: \(milliseconds(resolve.milliseconds))")
        print("flood_wake_ok: \(wake != nil ? 1 : 0)")
        if let syn, let wake {
            print("flood_wake_latency_ms: \(milliseconds(durationSeconds(wake.timestamp - syn.timestamp) * 1000))")
        } else {
            print("flood_wake_latency_ms: n/a (SYN seen: \(syn != nil), magic packet seen: \(wake != nil))")
        }
        print("flood_paced_queries: \(queries.sent)")
        print("flood_paced_answered: \(queries.answered)")
        print("flood_paced_late: \(queries.late)")
        for (label, p) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
            print("flood_paced_\(label)_us: \(queries.percentile(p).map(String.init) ?? "n/a")")
        }
        for (label, p) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
            let value = queries.percentile(p, steady: true).map(String.init) ?? "n/a"
            print("flood_paced_after_2s_\(label)_us: \(value)")
        }
        let slow = queries.slow.map { String(format: "%.1f s: %.0f ms", $0[0], $0[1] / 1000) }
        print("flood_paced_slower_than_50ms: \(slow.isEmpty ? "none" : slow.joined(separator: ", "))")
        let lost = queries.lost.map { String(format: "%.1f s", $0) }
        print("flood_paced_lost_sent_at: \(lost.isEmpty ? "none" : lost.joined(separator: ", "))")
        print("flood_daemon_alive: \(alive ? 1 : 0)")
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").first
        print("flood_machine_load_average_1min: \(load.map(String.init) ?? "n/a")")
        print("flood_daemon_peak_rss_mb: \(megabytes(peak))")
        let rss = [samples.first, samples.last, samples.max()].map(megabytes).joined(separator: " ")
        print("flood_daemon_rss_mb_first_last_max: \(rss)")
        print("flood_daemon_cpu_s: \(String(format: "%.2f", cpuAfter - cpuBefore))")
        print("flood_proxy_frames_transmitted: \(transmittedAfter - transmittedBefore)")
        let expected = held.count + 1
        print("flood_held_hosts_after: \(hosts.count) of \(expected)")
        let states = Dictionary(grouping: hosts, by: \.state).map { "\($0.key) \($0.value.count)" }.sorted()
        print("flood_held_hosts_after_states: \(states.joined(separator: ", "))")
        print("flood_client_host_held: \(hosts.contains { $0.ownerMAC == floodClientOwnerMAC } ? 1 : 0)")
        let woken = Set(events.filter { $0.kind == "wake" }.compactMap(\.host)).sorted()
        print("flood_hosts_woken: \(woken.isEmpty ? "none" : woken.joined(separator: ", "))")
        print("flood_log_lines: \(logLinesAfter - logLinesBefore)")
        print("flood_store_events: \(events.count)")
        let kinds = Dictionary(grouping: events, by: \.kind).map { "\($0.key) \($0.value.count)" }.sorted()
        print("flood_store_events_by_kind: \(kinds.joined(separator: ", "))")
        let sources = Dictionary(grouping: events) { "\($0.kind) from \($0.sourceAddress ?? "-")" }
            .map { "\($0.key) \($0.value.count)" }.sorted()
        print("flood_store_events_by_kind_and_source: \(sources.joined(separator: ", "))")
        print("flood_udp_drops: \(sockets)")
        for name in ["UdpRcvbufErrors", "UdpInErrors", "Udp6RcvbufErrors", "IpReasmFails", "IpReasmOKs"] {
            let value = counters.split(separator: "\n").first { $0.hasPrefix(name + " ") }?
                .split(separator: " ", omittingEmptySubsequences: true).dropFirst().first
            print("flood_proxy_\(name): \(value.map(String.init) ?? "n/a")")
        }

        daemon.signal(SIGTERM)
        _ = daemon.wait(timeout: .seconds(10))
        let log = daemon.stderr
        let saved = "/tmp/sleepproxy-flood-daemon.log"
        try? log.write(toFile: saved, atomically: true, encoding: .utf8)
        if let line = log.split(separator: "\n").last(where: { $0.contains("capture statistics") }) {
            let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }.suffix(4)
            let figures = numbers.map(String.init).joined(separator: " ")
            print("flood_capture_received_dropped_kernel_interface_daemon: \(figures)")
        }
        print("flood_daemon_log: \(saved)")
    }
}

/// A held host of the flood: what the flood knows of it, and its registration.
struct FloodHeldHost {
    var target: FloodTarget
    var registration: [UInt8]
}

/// The sleeper (10.77.0.2, fd77::2, ssh) and 19 hosts like it at 10.77.0.101 to 119 and fd77::1:1 to 13.
func floodHeldHosts(_ lab: Lab) throws -> [FloodHeldHost] {
    let sleeper = lab.host(.sleeper)
    var hosts = [
        try floodHeldHost(
            name: "Sleeper", ipv4: sleeper.ipv4, ipv6: sleeper.ula, mac: sleeper.macString, sequence: 3, id: 0x5151)
    ]
    for index in 1..<20 {
        hosts.append(
            try floodHeldHost(
                name: "flood\(index)", ipv4: "10.77.0.\(100 + index)", ipv6: "fd77::1:\(String(index, radix: 16))",
                mac: "02:66:00:00:00:" + (index < 0x10 ? "0" : "") + String(index, radix: 16), sequence: 1,
                id: UInt16(0x1000 + index)))
    }
    return hosts
}

/// A Mac's registration: its addresses and their reverse mappings, an ssh service, Lease 7200 and OWNER.
func floodHeldHost(
    name: String, ipv4: String, ipv6: String, mac: String, sequence: UInt8, id: UInt16
) throws -> FloodHeldHost {
    let host = try DNSName(labels: [name, "local"])
    let instanceLabels = ["\(name) SSH", "_ssh", "_tcp", "local"]
    let instance = try DNSName(labels: instanceLabels)
    let v4 = IPv4Address(ipv4)!
    let v6 = IPv6Address(ipv6)!
    let records: [DNSRecord] = [
        DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(v4)),
        DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(v6)),
        DNSRecord(name: ReverseMapping.name(of: .v4(v4)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
        DNSRecord(name: ReverseMapping.name(of: .v6(v6)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
        DNSRecord(name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: host))),
        DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData([""]))),
        DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(instance)),
        DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr("_ssh._tcp.local.")),
    ]
    let bytes = ClientMessage.update(
        id: id, records: records, owner: OwnerOption(sequence: sequence, primaryMAC: MACAddress(mac)!))
    let target = FloodTarget(
        hostLabels: [name, "local"], instanceLabels: instanceLabels, serviceLabels: ["_ssh", "_tcp", "local"],
        ipv4: ipv4, ipv6: ipv6, ownerMAC: mac, ownerSequence: Int(sequence), registration: bytes)
    return FloodHeldHost(target: target, registration: bytes)
}

/// The OWNER of the host the client registers during the flood.
let floodClientOwnerMAC = "02:77:00:00:00:44"

/// The new host the client registers during the flood: 10.77.0.44 and fd77::44.
func clientRegistration() throws -> [UInt8] {
    try floodHeldHost(
        name: "FloodClient", ipv4: "10.77.0.44", ipv6: "fd77::44", mac: floodClientOwnerMAC, sequence: 1, id: 0x4444
    ).registration
}

/// Sends each registration from the sleeper's address and waits for its reply.
func registerFromSleeper(_ lab: Lab, _ registrations: [[UInt8]]) throws {
    let socket = try lab.withNamespace(.sleeper) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
    defer { socket.close() }
    let proxy = Endpoint(address: IPAddress(lab.host(.proxy).ipv4)!, port: 5354)
    let source = IPAddress(lab.host(.sleeper).ipv4)!
    for (index, bytes) in registrations.enumerated() {
        try socket.send(bytes, to: proxy, scopeID: 0, from: source, interfaceIndex: 0)
        let deadline = ContinuousClock.now + .seconds(5)
        while try socket.receive() == nil {
            guard ContinuousClock.now < deadline else { throw TimeoutError("no reply to registration \(index)") }
            usleep(1_000)
        }
    }
}

/// `sleepproxyctl` against the lab's daemon, for what it holds and what it recorded.
struct FloodControl {
    struct Event: Decodable {
        var id: Int64
        var kind: String
        var host: String?
        var sourceAddress: String?
    }

    struct Host: Decodable {
        var ownerMAC: String
        var state: String
    }

    var lab: Lab
    var path: String
    var socket: String

    func events() async throws -> [Event] {
        try await decode(["events", "--json", "--limit", "100000"])
    }

    func hosts() async throws -> [Host] {
        try await decode(["hosts", "--json"])
    }

    private func decode<Value: Decodable>(_ arguments: [String]) async throws -> Value {
        let result = try await lab.run(.proxy, [path, "--socket", socket] + arguments, timeout: .seconds(30))
        guard result.succeeded else {
            throw FloodControlError("sleepproxyctl \(arguments.joined(separator: " ")): \(result)")
        }
        return try JSONDecoder().decode(Value.self, from: Data(result.stdout.utf8))
    }
}

struct FloodControlError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// A `VmRSS`-style field of `/proc/PID/status`, in kilobytes.
func processStatus(_ pid: Int32, _ field: String) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return nil }
    return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) }
}

/// User and system CPU time of a process so far, in seconds.
func processCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
    else { return .nan }
    // After the command's closing parenthesis: state is field 3; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A counter of the proxy's `eth0` (`/sys/class/net/eth0/statistics`).
func interfaceCounter(_ lab: Lab, _ name: String) async throws -> Int {
    let result = try await lab.run(.proxy, ["cat", "/sys/class/net/eth0/statistics/\(name)"])
    return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
}

/// Datagrams dropped by the proxy's UDP sockets, per local port (`/proc/net/udp` and `udp6`, last column).
func udpDrops(_ lab: Lab) async throws -> String {
    let table = try await lab.run(.proxy, ["cat", "/proc/net/udp", "/proc/net/udp6"]).stdout
    var drops: [Int: Int] = [:]
    for line in table.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 13, let port = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
            let dropped = fields.last.flatMap({ Int($0) })
        else { continue }
        drops[port, default: 0] += dropped
    }
    // Port 5353's sockets only send: a socket filter drops what reaches them, and the kernel counts it here.
    return drops.sorted { $0.key < $1.key }
        .map { "port \($0.key)\($0.key == 5353 ? " (never read, filtered)" : "") \($0.value)" }
        .joined(separator: ", ")
}

func lineCount(_ text: String) -> Int {
    text.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
}

func milliseconds(_ value: Double?) -> String {
    value.map { String(format: "%.1f", $0) } ?? "n/a"
}

func megabytes(_ kilobytes: Int?) -> String {
    kilobytes.map { String(format: "%.1f", Double($0) / 1024) } ?? "n/a"
}
