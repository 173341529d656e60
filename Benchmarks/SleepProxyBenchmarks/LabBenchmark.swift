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

// The figures of `make bench` that need the namespace lab: mDNS answers against avahi-daemon, wake latency, and
// how both grow with the number of held hosts, with the daemon's memory and idle CPU.
//
// Every held host `i` is what a sleeping Mac registers for one service: `host<i>.local` A (off the lab's link,
// so nothing to take over for it), `host<i>._ssh._tcp.local` SRV and TXT, the `_ssh._tcp.local` browse PTR, and
// the reverse mapping of an IPv6 address on the lab's link, fd77::3:0:<i>, which the proxy takes over and wakes
// the host for.

/// One run's held hosts and what is asked of them.
struct HeldHostsProfile {
    var count: Int

    func name(_ index: Int) -> String { "host\(index)" }
    func ipv4(_ index: Int) -> IPv4Address { IPv4Address(value: 0x0AC8_0000 | UInt32(index)) }
    func ipv6(_ index: Int) -> IPv6Address {
        IPv6Address(high: 0xFD77_0000_0000_0000, low: 0x3_0000_0000 | UInt64(index))
    }
    func mac(_ index: Int) -> MACAddress {
        MACAddress(0x02, 0x45, 0, UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF))
    }

    /// Up to `limit` hosts spread over all of them: the ones queries and wakes go to.
    func sample(_ limit: Int) -> [Int] {
        guard count > limit else { return Array(0..<count) }
        return (0..<limit).map { $0 * count / limit }
    }

    func registration(_ index: Int) throws -> [UInt8] {
        let host = try DNSName(labels: [name(index), "local"])
        let instance = try DNSName(labels: [name(index), "_ssh", "_tcp", "local"])
        let records: [DNSRecord] = [
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(ipv4(index))),
            DNSRecord(name: ReverseMapping.name(of: .v6(ipv6(index))), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
            DNSRecord(name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: host))),
            DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData([""]))),
            DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(instance)),
        ]
        return ClientMessage.update(
            id: UInt16(truncatingIfNeeded: index + 1), records: records,
            owner: OwnerOption(sequence: 1, primaryMAC: mac(index)))
    }

    /// dnsperf's query file: A, SRV and TXT for each sampled host.
    func queryFile(_ path: String) throws {
        let lines = sample(50).flatMap { index in
            ["\(name(index)).local A", "\(name(index))._ssh._tcp.local SRV", "\(name(index))._ssh._tcp.local TXT"]
        }
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// Registers every host of `profile` from the sleeper, 64 in flight; throws if one goes unanswered.
func register(_ profile: HeldHostsProfile, in lab: Lab) throws {
    let client = try lab.withNamespace(.sleeper) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
    defer { client.close() }
    let proxy = Endpoint(address: IPAddress(lab.host(.proxy).ipv4)!, port: 5354)
    let source = IPAddress(lab.host(.sleeper).ipv4)!
    var next = 0
    var answered = 0
    var lastProgress = ContinuousClock.now
    while answered < profile.count {
        while next < profile.count, next - answered < 64 {
            try client.send(try profile.registration(next), to: proxy, scopeID: 0, from: source, interfaceIndex: 0)
            next += 1
        }
        if try client.receive() != nil {
            answered += 1
            lastProgress = .now
        } else {
            var descriptor = pollfd(fd: client.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 100)
            guard ContinuousClock.now - lastProgress < .seconds(15) else {
                throw TimeoutError("registrations went unanswered: \(answered) of \(profile.count)")
            }
        }
    }
}

/// The release daemon in the lab's proxy namespace, per-source limits lifted (benchmarks measure capacity).
func startLabDaemon(_ lab: Lab, advertise: Bool = false) async throws -> LabProcess {
    let daemonPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("sleepproxyd").path
    guard FileManager.default.isExecutableFile(atPath: daemonPath) else {
        throw TimeoutError("build sleepproxyd first (swift build -c release --product sleepproxyd)")
    }
    let daemon = try lab.spawn(
        .proxy,
        [
            daemonPath, "--config", try capacityConfig(in: lab), "--interface", "eth0", "--state-dir",
            lab.workDirectory + "/state", "--registration-port", "5354", "--maximum-records", "1000000",
            "--log-level", "info",
        ] + (advertise ? [] : ["--no-advertise"]))
    _ = try await eventually("sleepproxyd to start", within: .seconds(10)) {
        daemon.stderr.contains("registrations on UDP port") ? true : nil
    }
    return daemon
}

/// What dnsperf measured, in the figures' units.
struct AnswerFigures {
    var qps: Double
    var lostPercent: Double
    /// The responder's CPU time (user and system) per answer under full load: its capacity, whatever the load
    /// generator, which shares the machine, manages to send.
    var cpuMicrosecondsPerAnswer: Double?
    var loadP99Microseconds: Double?
    var pacedP99Microseconds: Double?
    var pacedP50Microseconds: Double?
}

func percentile(_ sorted: [Double], _ p: Double) -> Double? {
    guard !sorted.isEmpty else { return nil }
    return sorted[max(0, min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
}

func microseconds(_ value: Double?) -> String {
    value.map { String(Int($0.rounded())) } ?? "n/a"
}

/// dnsperf from the waker at `server`: at full load (128 outstanding) for `seconds`, then paced at 1,000 queries
/// a second for `pacedSeconds`.
func measureAnswers(
    _ lab: Lab, server: String, file: String, seconds: Int, pacedSeconds: Int, responder: Int32
) async throws -> AnswerFigures {
    let cpuBefore = processCPUSeconds(responder)
    let load = try await dnsperf(lab, server: server, file: file, seconds: seconds, extra: ["-q", "128", "-c", "1"])
    let cpu = processCPUSeconds(responder) - cpuBefore
    let answered = load.qps * Double(seconds)
    let paced = try await dnsperf(
        lab, server: server, file: file, seconds: pacedSeconds, extra: ["-q", "16", "-Q", "1000"])
    let loadSorted = load.latencies.sorted()
    let pacedSorted = paced.latencies.sorted()
    return AnswerFigures(
        qps: load.qps, lostPercent: load.lostPercent,
        cpuMicrosecondsPerAnswer: answered > 0 && cpu.isFinite ? cpu * 1e6 / answered : nil,
        loadP99Microseconds: percentile(loadSorted, 0.99).map { $0 * 1e6 },
        pacedP99Microseconds: percentile(pacedSorted, 0.99).map { $0 * 1e6 },
        pacedP50Microseconds: percentile(pacedSorted, 0.50).map { $0 * 1e6 })
}

/// Wake latency for each sampled host: a SYN to its address from the waker, 20 ms apart; from the SYN on the
/// proxy's wire to the first magic packet for the host on it (one capture, one clock). Microseconds, sorted.
func measureWakes(_ lab: Lab, profile: HeldHostsProfile, wakes: Int) async throws -> [Double] {
    let targets = profile.sample(wakes)
    let wire = try lab.withNamespace(.proxy) {
        try CaptureStream(interface: "eth0", options: PacketCapture.Options(direction: .both))
    }
    defer { wire.close() }
    try wire.setFilter("(ip6 and tcp dst port 22) or ether proto 0x0842")
    let injector = try lab.withNamespace(.waker) { try CaptureStream(interface: "eth0") }
    defer { injector.close() }
    let collector = Task {
        var syn: [IPv6Address: Duration] = [:]
        var magic: [MACAddress: Duration] = [:]
        for await frame in wire.frames {
            guard let parsed = try? EthernetFrame(parsing: frame.bytes) else { continue }
            if let target = parsed.magicPacket?.target {
                if magic[target] == nil { magic[target] = frame.timestamp }
            } else if parsed.tcp != nil, let ipv6 = parsed.ipv6, syn[ipv6.header.destination] == nil {
                syn[ipv6.header.destination] = frame.timestamp
            }
            if magic.count == targets.count { break }
        }
        return (syn, magic)
    }
    for (number, index) in targets.enumerated() {
        try injector.inject(synFrame(from: lab, to: .v6(profile.ipv6(index)), sourcePort: UInt16(40_000 + number)))
        try await Task.sleep(for: .milliseconds(20))
    }
    try await Task.sleep(for: .seconds(1))
    wire.close()
    let (syn, magic) = await collector.value
    return targets.compactMap { index -> Double? in
        guard let start = syn[profile.ipv6(index)], let end = magic[profile.mac(index)] else { return nil }
        return durationSeconds(end - start) * 1e6
    }.sorted()
}

/// Waits until the daemon has taken over every held address (the log's take-over lines) and the announcements
/// are over, at most `limit`.
func waitForTakeovers(_ daemon: LabProcess, limit: Duration) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    // The last host registered was answered a moment ago; its address is probed from +1 s and announced at +4,
    // +5, +7 and +11 s (TakeoverTiming). The log says nothing per address at notice level.
    try await Task.sleep(for: .seconds(12))
    while clock.now < deadline, !daemon.hasExited {
        if processCPUSeconds(daemon.pid).isNaN { break }
        let before = processCPUSeconds(daemon.pid)
        try await Task.sleep(for: .seconds(2))
        // Quiet: under 10 ms of CPU in two seconds (the announcement rounds are up to 4 s apart, but the last
        // one is over by now).
        if processCPUSeconds(daemon.pid) - before < 0.010 { return }
    }
}

/// `make bench`'s mDNS figures: sleepproxyd with 50 held hosts, then avahi-daemon serving the same names from the
/// proxy's namespace (rate limit off: capacity, not policy; and with Debian's default limit, for reference).
func runMDNSComparison(seconds: Int = 10) async throws {
    guard try labReady("mdns", tools: ["dnsperf", "avahi-daemon", "dbus-daemon"]) else { return }
    let profile = HeldHostsProfile(count: 50)
    try await Lab.withLab { lab in
        let file = lab.workDirectory + "/queries.txt"
        try profile.queryFile(file)
        let proxyAddress = lab.host(.proxy).ipv4

        let daemon = try await startLabDaemon(lab)
        try register(profile, in: lab)
        try await waitForTakeovers(daemon, limit: .seconds(20))
        let ours = try await measureAnswers(
            lab, server: proxyAddress, file: file, seconds: seconds, pacedSeconds: seconds, responder: daemon.pid)
        daemon.signal(SIGTERM)
        _ = daemon.wait(timeout: .seconds(10))

        let services = profile.sample(50).map {
            AvahiService(name: profile.name($0), type: "_ssh._tcp", port: 22, hostName: "\(profile.name($0)).local")
        }
        let hosts = profile.sample(50).map { (name: "\(profile.name($0)).local", address: "\(profile.ipv4($0))") }
        let unlimited = try await lab.startAvahi(
            on: .proxy, hostName: "proxy", services: services, staticHosts: hosts,
            configuration: ["server": ["ratelimit-interval-usec": "0", "ratelimit-burst": "0"]])
        let theirs = try await measureAnswers(
            lab, server: proxyAddress, file: file, seconds: seconds, pacedSeconds: seconds,
            responder: unlimited.daemon.pid)
        await unlimited.stop(graceful: true)
        let throttled = try await lab.startAvahi(on: .proxy, hostName: "proxy", services: services, staticHosts: hosts)
        let limited = try await dnsperf(
            lab, server: proxyAddress, file: file, seconds: 5, extra: ["-q", "128", "-c", "1"])
        await throttled.stop(graceful: true)

        print("mdns_held_hosts: \(profile.count)")
        print("mdns_qps: \(Int(ours.qps))")
        print("mdns_lost_percent: \(String(format: "%.2f", ours.lostPercent))")
        print("mdns_latency_p99_us: \(microseconds(ours.loadP99Microseconds))")
        print("mdns_paced_p50_us: \(microseconds(ours.pacedP50Microseconds))")
        print("mdns_paced_p99_us: \(microseconds(ours.pacedP99Microseconds))")
        print("avahi_mdns_qps: \(Int(theirs.qps))")
        print("avahi_mdns_lost_percent: \(String(format: "%.2f", theirs.lostPercent))")
        print("avahi_mdns_latency_p99_us: \(microseconds(theirs.loadP99Microseconds))")
        print("avahi_mdns_paced_p50_us: \(microseconds(theirs.pacedP50Microseconds))")
        print("avahi_mdns_paced_p99_us: \(microseconds(theirs.pacedP99Microseconds))")
        print("avahi_mdns_qps_with_debian_rate_limit: \(Int(limited.qps))")
        print("mdns_qps_vs_avahi: \(theirs.qps > 0 ? String(format: "%.2f", ours.qps / theirs.qps) : "n/a")")
        print("mdns_cpu_us_per_answer: \(String(format: "%.2f", ours.cpuMicrosecondsPerAnswer ?? .nan))")
        print("avahi_mdns_cpu_us_per_answer: \(String(format: "%.2f", theirs.cpuMicrosecondsPerAnswer ?? .nan))")
        if let mine = ours.cpuMicrosecondsPerAnswer, let avahi = theirs.cpuMicrosecondsPerAnswer, mine > 0 {
            // Answers per CPU second, ours over avahi's: the ratio a machine with a core to spare would see.
            print("mdns_capacity_vs_avahi: \(String(format: "%.2f", avahi / mine))")
        }
    }
}

/// `make bench`'s wake figures: 100 held hosts, each woken once.
func runWakeFigures(wakes: Int = 100) async throws {
    guard try labReady("wake", tools: []) else { return }
    let profile = HeldHostsProfile(count: wakes)
    try await Lab.withLab { lab in
        let daemon = try await startLabDaemon(lab)
        defer { daemon.signal(SIGTERM) }
        try register(profile, in: lab)
        try await waitForTakeovers(daemon, limit: .seconds(30))
        let latencies = try await measureWakes(lab, profile: profile, wakes: wakes)
        print("wake_samples: \(latencies.count) of \(wakes)")
        print("wake_p50_us: \(microseconds(percentile(latencies, 0.5)))")
        print("wake_p99_us: \(microseconds(percentile(latencies, 0.99)))")
        print("wake_max_us: \(microseconds(latencies.last))")
    }
}

/// How cost grows: for each number of held hosts, the mDNS and wake figures, the daemon's memory, and its CPU
/// while nothing happens.
func runScaling(counts: [Int] = scalingCounts(), seconds: Int = 5) async throws {
    guard try labReady("scaling", tools: ["dnsperf"]) else { return }
    var resident: [Int: Int] = [:]
    for count in counts {
        let profile = HeldHostsProfile(count: count)
        try await Lab.withLab { lab in
            let file = lab.workDirectory + "/queries.txt"
            try profile.queryFile(file)
            let daemon = try await startLabDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            try register(profile, in: lab)
            try await waitForTakeovers(daemon, limit: .seconds(60))
            resident[count] = processStatus(daemon.pid, "VmRSS")

            // Idle: nothing on the wire but what the lab's hosts send by themselves.
            // (The kernel counts a process's CPU time, exited threads included, in ticks of 10 ms: 30 s of idling
            // tells it to 20 ms a minute.)
            let idleSeconds = 30.0
            let cpuBefore = processCPUSeconds(daemon.pid)
            try await Task.sleep(for: .seconds(idleSeconds))
            let idle = (processCPUSeconds(daemon.pid) - cpuBefore) * 1000 * 60 / idleSeconds

            let answers = try await measureAnswers(
                lab, server: lab.host(.proxy).ipv4, file: file, seconds: seconds, pacedSeconds: seconds,
                responder: daemon.pid)
            let wakes = try await measureWakes(lab, profile: profile, wakes: 100)
            print("scaling_\(count)_hosts_mdns_qps: \(Int(answers.qps))")
            print(
                "scaling_\(count)_hosts_mdns_cpu_us_per_answer: \(String(format: "%.2f", answers.cpuMicrosecondsPerAnswer ?? .nan))"
            )
            print("scaling_\(count)_hosts_mdns_latency_p99_us: \(microseconds(answers.loadP99Microseconds))")
            print("scaling_\(count)_hosts_mdns_paced_p99_us: \(microseconds(answers.pacedP99Microseconds))")
            print("scaling_\(count)_hosts_wake_p50_us: \(microseconds(percentile(wakes, 0.5)))")
            print("scaling_\(count)_hosts_wake_p99_us: \(microseconds(percentile(wakes, 0.99)))")
            print("scaling_\(count)_hosts_rss_mb: \(megabytes(resident[count]))")
            print("idle_cpu_ms_per_min_\(count)_hosts: \(String(format: "%.1f", idle))")
        }
    }
    if let first = counts.first, let last = counts.last, last > first, let low = resident[first],
        let high = resident[last]
    {
        print("rss_bytes_per_held_host: \(Int(Double(high - low) * 1024 / Double(last - first)))")
    }
}

/// The numbers of held hosts the scaling figures are measured with: 10, 100, 1,000 and 10,000, or those listed in
/// `SCALING_HOSTS` (`SCALING_HOSTS=10000 make bench BENCH=scaling`).
func scalingCounts() -> [Int] {
    let listed = ProcessInfo.processInfo.environment["SCALING_HOSTS"]?.split(separator: ",").compactMap { Int($0) }
    return listed.flatMap { $0.isEmpty ? nil : $0 } ?? [10, 100, 1_000, 10_000]
}

/// Whether the lab can run here; says why not (and that the figure is skipped) otherwise.
func labReady(_ figure: String, tools: [String]) throws -> Bool {
    if let reason = Lab.unsupportedReason {
        print("\(figure) benchmark skipped: \(reason)")
        return false
    }
    let missing = Lab.missingTools(tools)
    guard missing.isEmpty else {
        print("\(figure) benchmark skipped: missing \(missing.joined(separator: ", "))")
        return false
    }
    return true
}
