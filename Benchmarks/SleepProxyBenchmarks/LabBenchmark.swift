import CaptureStream
import DNSWire
import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import NetworkIO
import SleepProxyDaemon
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

// The figures of `make bench` that need the namespace lab: mDNS answers against avahi-daemon and against the
// ceiling (a responder that does no work), wake latency, and how all of them grow with the number of held hosts,
// with the daemon's memory, idle CPU and the CPU a registration costs it.
//
// Every held host `i` registers what a Mac registers (the 25 records of `macRegistration`): `host<i>.local` A (off
// the lab's link, so nothing to take over for it) and AAAA fd77::3:0:<i> (on the lab's link: the proxy takes it
// over and wakes the host for it), four services, screen sharing, device info, Kerberos, the reverse mappings.

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
        try macRegistration(
            name: name(index), ipv4: ipv4(index), ipv6: ipv6(index), mac: mac(index),
            id: UInt16(truncatingIfNeeded: index + 1))
    }

    /// dnsperf's query file: A, SRV and TXT for each of `hosts` (by default 50 spread over all: 150 questions,
    /// which the daemon's answer cache holds after their first round).
    func queryFile(_ path: String, hosts: [Int]? = nil) throws {
        let lines = (hosts ?? sample(50)).flatMap { index in
            ["\(name(index)).local A", "\(name(index))._ssh._tcp.local SRV", "\(name(index))._ssh._tcp.local TXT"]
        }
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// Registers the hosts `indices` of `profile` (all of them by default) from the sleeper, 64 in flight. As a real
/// client does, a registration still unanswered after a second is sent again with the same ID (a daemon busy with
/// thousands of take-overs may drop a datagram from a full socket buffer); throws when nothing is answered for 15 s.
/// Returns how many datagrams were sent again.
@discardableResult
func register(_ profile: HeldHostsProfile, _ indices: Range<Int>? = nil, in lab: Lab) throws -> Int {
    let indices = indices ?? 0..<profile.count
    let client = try lab.withNamespace(.sleeper) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
    defer { client.close() }
    let proxy = Endpoint(address: IPAddress(lab.host(.proxy).ipv4)!, port: 5354)
    let source = IPAddress(lab.host(.sleeper).ipv4)!
    var next = indices.lowerBound
    var answered = 0
    var retransmitted = 0
    // Sent and not yet answered: the message ID (the index plus one, wrapping) to the index and when it was sent.
    var outstanding: [UInt16: (index: Int, sent: ContinuousClock.Instant)] = [:]
    var lastProgress = ContinuousClock.now
    func send(_ index: Int) throws {
        try client.send(try profile.registration(index), to: proxy, scopeID: 0, from: source, interfaceIndex: 0)
        outstanding[UInt16(truncatingIfNeeded: index + 1)] = (index, .now)
    }
    while answered < indices.count {
        while next < indices.upperBound, outstanding.count < 64 {
            try send(next)
            next += 1
        }
        if let reply = try client.receive() {
            guard reply.bytes.count >= 2 else { continue }
            let id = UInt16(reply.bytes[0]) << 8 | UInt16(reply.bytes[1])
            // A registration sent twice may be answered twice: counted once.
            guard outstanding.removeValue(forKey: id) != nil else { continue }
            answered += 1
            lastProgress = .now
        } else {
            var descriptor = pollfd(fd: client.fileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 100)
            let now = ContinuousClock.now
            for (_, entry) in outstanding where now - entry.sent > .seconds(1) {
                try send(entry.index)
                retransmitted += 1
            }
            guard now - lastProgress < .seconds(15) else {
                throw TimeoutError(
                    "registrations went unanswered: \(answered) of \(indices.count) (\(retransmitted) sent again)")
            }
        }
    }
    return retransmitted
}

/// The release daemon in the lab's proxy namespace, per-source limits lifted (benchmarks measure capacity), in the
/// configuration users run otherwise: advertising itself, its answers worked out as a user's daemon works them out.
func startLabDaemon(_ lab: Lab, build: String? = nil, state: String = "state") async throws -> LabProcess {
    // SLEEPPROXYD names another build to measure instead of the one beside the benchmark.
    let daemonPath =
        build ?? ProcessInfo.processInfo.environment["SLEEPPROXYD"]
        ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("sleepproxyd").path
    guard FileManager.default.isExecutableFile(atPath: daemonPath) else {
        throw TimeoutError("build sleepproxyd first (swift build -c release --product sleepproxyd)")
    }
    let daemon = try lab.spawn(
        .proxy,
        [
            daemonPath, "--config", try capacityConfig(in: lab), "--interface", "eth0", "--state-dir",
            lab.workDirectory + "/" + state, "--registration-port", "5354", "--maximum-records", "1000000",
            "--log-level", "info", "--metrics-listen", "127.0.0.1:\(labMetricsPort)",
        ])
    _ = try await eventually("sleepproxyd to start", within: .seconds(30)) {
        daemon.stderr.contains("registrations on UDP port") ? true : nil
    }
    return daemon
}

/// SLEEPPROXYD_BASELINE: another build of the daemon (the commit a change started from) measured in the same
/// rounds as this one, for an A/B comparison in one run.
let baselineDaemon = ProcessInfo.processInfo.environment["SLEEPPROXYD_BASELINE"]

/// The lab daemon's metrics endpoint, on the proxy namespace's loopback.
let labMetricsPort = 9187

/// The lab daemon's counters now (`name{labels}` to value), from its metrics endpoint; empty if it cannot be read.
func labMetrics(_ lab: Lab) -> [String: Double] {
    guard
        let reply = try? lab.withNamespace(
            .proxy,
            {
                try httpGet(host: "127.0.0.1", port: labMetricsPort, "/metrics")
            }), reply.status == 200
    else { return [:] }
    var values: [String: Double] = [:]
    for line in reply.text.split(separator: "\n") where !line.hasPrefix("#") {
        let parts = line.split(separator: " ")
        if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
    }
    return values
}

/// What dnsperf measured, in the figures' units.
struct AnswerFigures {
    var load: DNSPerfResult
    var paced: DNSPerfResult?
    /// The responder's CPU time (user and system) per answer under full load: its capacity, whatever the load
    /// generator, which shares the machine, manages to send.
    var cpuMicrosecondsPerAnswer: Double?
    /// All the machine's CPU per answer but the load generator's, the kernel's included: every receive and send
    /// on both sides, and, for sleepproxyd, the capture's copy of each frame into its ring, which the kernel does
    /// in its receive path and charges to no process (so `cpuMicrosecondsPerAnswer` leaves it out, while the
    /// ceiling and avahi-daemon pay for their `recvfrom` copies).
    var systemCPUMicrosecondsPerAnswer: Double?

    var qps: Double { load.qps }
    var loadP99Microseconds: Double? { percentile(load.latencies.sorted(), 0.99).map { $0 * 1e6 } }
    var pacedP99Microseconds: Double? { paced.flatMap { percentile($0.latencies.sorted(), 0.99) }.map { $0 * 1e6 } }
    var pacedP50Microseconds: Double? { paced.flatMap { percentile($0.latencies.sorted(), 0.50) }.map { $0 * 1e6 } }
    /// Losses or errors in either run.
    var flaw: String? {
        let flaws = [load.flaw.map { "under load: \($0)" }, paced?.flaw.map { "paced: \($0)" }].compactMap { $0 }
        return flaws.isEmpty ? nil : flaws.joined(separator: "; ")
    }
}

func percentile(_ sorted: [Double], _ p: Double) -> Double? {
    guard !sorted.isEmpty else { return nil }
    return sorted[max(0, min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
}

func microseconds(_ value: Double?) -> String {
    value.map { String(Int($0.rounded())) } ?? "n/a"
}

/// dnsperf from the waker at `server`, `port`: at full load (`load`) for `seconds`, then, unless `pacedSeconds` is
/// 0, paced at 1,000 queries a second for `pacedSeconds`.
func measureAnswers(
    _ lab: Lab, server: String, port: Int = 5353, file: String, seconds: Int, pacedSeconds: Int, responder: Int32,
    load setting: LoadSetting = .single
) async throws -> AnswerFigures {
    let cpuBefore = processCPUSeconds(responder)
    let machineBefore = machineBusySeconds()
    let load = try await dnsperf(
        lab, server: server, port: port, file: file, seconds: seconds, extra: setting.arguments)
    let cpu = processCPUSeconds(responder) - cpuBefore
    let system = machineBusySeconds() - machineBefore - (load.cpuSeconds ?? .nan)
    let paced =
        pacedSeconds > 0
        ? try await dnsperf(
            lab, server: server, port: port, file: file, seconds: pacedSeconds, extra: ["-q", "16", "-Q", "1000"])
        : nil
    let answered = Double(load.completed)
    return AnswerFigures(
        load: load, paced: paced, cpuMicrosecondsPerAnswer: answered > 0 && cpu.isFinite ? cpu * 1e6 / answered : nil,
        systemCPUMicrosecondsPerAnswer: answered > 0 && system.isFinite ? system * 1e6 / answered : nil)
}

/// The CPU time the whole machine spent busy so far (user, nice, system, interrupts, soft interrupts, steal:
/// `/proc/stat`, which no network namespace changes), in seconds; NaN if unreadable.
func machineBusySeconds() -> Double {
    guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
        let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
    else { return .nan }
    let fields = line.split(separator: " ").dropFirst().compactMap { Double($0) }
    guard fields.count >= 8 else { return .nan }
    // user nice system idle iowait irq softirq steal: all but idle and iowait.
    let busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    return busy / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// The figures of one responder over the rounds of a comparison.
struct ResponderRuns {
    var qps = Samples()
    var cpu = Samples()
    var systemCPU = Samples()
    var loadP99 = Samples()
    var pacedP50 = Samples()
    var pacedP99 = Samples()
    /// The share of questions answered from the answer cache, per run (sleepproxyd only).
    var cacheHitShare = Samples()
    var flaws: [String] = []

    mutating func add(_ figures: AnswerFigures, round: Int) {
        qps.append(figures.qps)
        if let value = figures.cpuMicrosecondsPerAnswer { cpu.append(value) }
        if let value = figures.systemCPUMicrosecondsPerAnswer { systemCPU.append(value) }
        if let value = figures.loadP99Microseconds { loadP99.append(value) }
        if let value = figures.pacedP50Microseconds { pacedP50.append(value) }
        if let value = figures.pacedP99Microseconds { pacedP99.append(value) }
        if let flaw = figures.flaw { flaws.append("run \(round): \(flaw)") }
    }

    /// `prefix_qps`, its runs, and the rest, as `figure: value` lines.
    func print(_ prefix: String, latency: Bool) {
        Swift.print("\(prefix)_qps: \(qps.median.map { String(format: "%.0f", $0) } ?? "n/a")")
        Swift.print("\(prefix)_qps_runs: \(qps.summary())")
        Swift.print("\(prefix)_cpu_us_per_answer: \(cpu.median.map { String(format: "%.2f", $0) } ?? "n/a")")
        Swift.print(
            "\(prefix)_system_cpu_us_per_answer: \(systemCPU.median.map { String(format: "%.2f", $0) } ?? "n/a")")
        if latency {
            Swift.print("\(prefix)_latency_p99_us: \(microseconds(loadP99.median))")
            Swift.print("\(prefix)_paced_p50_us: \(microseconds(pacedP50.median))")
            Swift.print("\(prefix)_paced_p99_us: \(microseconds(pacedP99.median))")
        }
        if let share = cacheHitShare.median {
            Swift.print("\(prefix)_answer_cache_hit_share: \(String(format: "%.3f", share))")
            Swift.print("\(prefix)_answer_cache_hit_share_runs: \(cacheHitShare.summary("%.3f"))")
        }
        Swift.print("\(prefix)_runs_clean: \(flaws.isEmpty ? "yes" : "no: " + flaws.joined(separator: " | "))")
    }
}

/// The lab daemon's answer cache lookups so far, from its metrics: hits and misses.
func answerCacheLookups(_ lab: Lab) -> (hits: Double, misses: Double) {
    let metrics = labMetrics(lab)
    func lookups(_ result: String) -> Double {
        metrics["sleepproxy_mdns_answer_cache_lookups_total{result=\"\(result)\"}"] ?? 0
    }
    return (lookups("hit"), lookups("miss"))
}

extension ResponderRuns {
    /// Notes the share of cache hits among the lookups between `before` and `after` (`answerCacheLookups`).
    mutating func addCacheShare(from before: (hits: Double, misses: Double), to after: (hits: Double, misses: Double)) {
        let hits = after.hits - before.hits
        let total = hits + after.misses - before.misses
        if total > 0 { cacheHitShare.append(hits / total) }
    }
}

/// Wake latencies from a SYN on the wire to the magic packet on the wire, with the wakes that brought no magic
/// packet: a missed wake counts as slower than any, so that a p99 with more than 1 % missed is not a number.
struct WakeSamples {
    /// Microseconds, sorted.
    var latencies: [Double]
    var missed: Int

    var count: Int { latencies.count + missed }

    /// The `p` quantile with the missed wakes last; nil if it falls among them (or nothing was asked).
    func percentile(_ p: Double) -> Double? {
        let value = SleepProxyBenchmarks.percentile(latencies + Array(repeating: .infinity, count: missed), p)
        return value?.isFinite == true ? value : nil
    }

    /// `wake_p50_us`, `wake_p99_us`, `wake_max_us` and the samples, each under `prefix`.
    func print(_ prefix: String) {
        Swift.print("\(prefix)_samples: \(latencies.count) woken of \(count) asked (\(missed) missed)")
        Swift.print("\(prefix)_p50_us: \(microseconds(percentile(0.5)))")
        Swift.print("\(prefix)_p99_us: \(microseconds(percentile(0.99)))")
        Swift.print("\(prefix)_max_us: \(missed > 0 ? "n/a (\(missed) missed)" : microseconds(latencies.last))")
    }
}

/// Wakes `wakes` of the held hosts (each once, 20 ms apart) with a SYN to its IPv6 address from the waker; each
/// latency is from the SYN on the proxy's wire to the first magic packet for the host on it (one capture, one
/// clock).
func measureWakes(_ lab: Lab, profile: HeldHostsProfile, wakes: Int) async throws -> WakeSamples {
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
    let latencies = targets.compactMap { index -> Double? in
        guard let start = syn[profile.ipv6(index)], let end = magic[profile.mac(index)] else { return nil }
        return durationSeconds(end - start) * 1e6
    }.sorted()
    return WakeSamples(latencies: latencies, missed: targets.count - latencies.count)
}

/// Waits until process `pid` is quiet (under 10 ms of CPU in two seconds), at most `limit`.
func waitForQuiet(_ pid: Int32, limit: Duration) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while clock.now < deadline {
        let before = processCPUSeconds(pid)
        if before.isNaN { return }
        try await Task.sleep(for: .seconds(2))
        if processCPUSeconds(pid) - before < 0.010 { return }
    }
}

/// Waits until the daemon has taken over every held address (the log's take-over lines) and the announcements
/// are over, at most `limit`.
func waitForTakeovers(_ daemon: LabProcess, limit: Duration) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    // The last host registered was answered a moment ago; its address is probed from +1 s and announced at +4,
    // +5, +7 and +11 s (TakeoverTiming). The log says nothing per address at notice level. Then quiet (the
    // announcement rounds are up to 4 s apart, but the last one is over by now).
    try await Task.sleep(for: .seconds(12))
    guard !daemon.hasExited else { return }
    try await waitForQuiet(daemon.pid, limit: deadline - clock.now)
}

/// `make bench`'s mDNS figures: sleepproxyd with 50 held hosts, avahi-daemon serving the same names from the
/// proxy's namespace (rate limit off: capacity, not policy; and with Debian's default limit, for reference), and the
/// ceiling responder, unbatched and batched, with the same load. Each is measured `rounds` times, alternating
/// (sleepproxyd, ceiling, ceiling batched, avahi-daemon; again), and the median reported with the runs beside it.
/// The ratios are the medians of each round's own ratio. The daemon is restarted for each round (it restores its
/// hosts from the lease store): avahi-daemon needs the mDNS port to itself.
func runMDNSComparison(seconds: Int = 10, rounds: Int = 3) async throws {
    guard try labReady("mdns", tools: ["dnsperf", "avahi-daemon", "dbus-daemon"]) else { return }
    let profile = HeldHostsProfile(count: 50)
    try await Lab.withLab { lab in
        let file = lab.workDirectory + "/queries.txt"
        try profile.queryFile(file)
        let proxyAddress = lab.host(.proxy).ipv4
        let ceilingBinary = try buildCeiling(in: lab)
        var setting = LoadSetting.single
        if let ceilingBinary { setting = try await findLoadSetting(lab, binary: ceilingBinary, file: file) }
        var ours = ResponderRuns()
        var baseline = ResponderRuns()
        var avahi = ResponderRuns()
        var ceiling = ResponderRuns()
        var batched = ResponderRuns()
        let services = profile.sample(50).map {
            AvahiService(name: profile.name($0), type: "_ssh._tcp", port: 22, hostName: "\(profile.name($0)).local")
        }
        let hosts = profile.sample(50).map { (name: "\(profile.name($0)).local", address: "\(profile.ipv4($0))") }

        for round in 1...rounds {
            let daemon = try await startLabDaemon(lab)
            if round == 1 { try register(profile, in: lab) }
            try await waitForTakeovers(daemon, limit: .seconds(30))
            let stopProfile = round == 1 ? startProfile(lab, daemon.pid, name: "mdns-50-hosts", seconds: seconds) : {}
            let lookups = answerCacheLookups(lab)
            let figures = try await measureAnswers(
                lab, server: proxyAddress, file: file, seconds: seconds, pacedSeconds: 0, responder: daemon.pid,
                load: setting)
            ours.addCacheShare(from: lookups, to: answerCacheLookups(lab))
            stopProfile()
            // The paced run after the load run, as for avahi-daemon below.
            let paced = try await dnsperf(
                lab, server: proxyAddress, file: file, seconds: seconds / 2, extra: ["-q", "16", "-Q", "1000"])
            ours.add(
                AnswerFigures(
                    load: figures.load, paced: paced, cpuMicrosecondsPerAnswer: figures.cpuMicrosecondsPerAnswer),
                round: round)
            if let ceilingBinary {
                // The daemon stays up, idle: the ceiling's port is not one it captures.
                for mode in [false, true] {
                    let responder = try await startCeiling(lab, binary: ceilingBinary, batched: mode)
                    let figures = try await measureAnswers(
                        lab, server: proxyAddress, port: ceilingPort, file: file, seconds: seconds, pacedSeconds: 0,
                        responder: responder.pid, load: setting)
                    _ = responder.terminate()
                    if mode { batched.add(figures, round: round) } else { ceiling.add(figures, round: round) }
                }
            }
            daemon.signal(SIGTERM)
            _ = daemon.wait(timeout: .seconds(10))

            if let baselineDaemon {
                let other = try await startLabDaemon(lab, build: baselineDaemon, state: "baseline-state")
                if round == 1 { try register(profile, in: lab) }
                try await waitForTakeovers(other, limit: .seconds(30))
                let lookups = answerCacheLookups(lab)
                baseline.add(
                    try await measureAnswers(
                        lab, server: proxyAddress, file: file, seconds: seconds, pacedSeconds: seconds / 2,
                        responder: other.pid, load: setting), round: round)
                baseline.addCacheShare(from: lookups, to: answerCacheLookups(lab))
                other.signal(SIGTERM)
                _ = other.wait(timeout: .seconds(10))
            }

            let unlimited = try await lab.startAvahi(
                on: .proxy, hostName: "proxy", services: services, staticHosts: hosts,
                configuration: ["server": ["ratelimit-interval-usec": "0", "ratelimit-burst": "0"]])
            avahi.add(
                try await measureAnswers(
                    lab, server: proxyAddress, file: file, seconds: seconds, pacedSeconds: seconds / 2,
                    responder: unlimited.daemon.pid, load: setting), round: round)
            await unlimited.stop(graceful: true)
        }
        let throttled = try await lab.startAvahi(on: .proxy, hostName: "proxy", services: services, staticHosts: hosts)
        let limited = try await dnsperf(
            lab, server: proxyAddress, file: file, seconds: 5, extra: setting.arguments)
        await throttled.stop(graceful: true)

        print("mdns_held_hosts: \(profile.count)")
        print(
            "mdns_rounds: \(rounds) of \(seconds) s each (sleepproxyd, ceiling, ceiling batched\(baselineDaemon == nil ? "" : ", the baseline sleepproxyd"), avahi-daemon)"
        )
        ours.print("mdns", latency: true)
        if baselineDaemon != nil {
            baseline.print("baseline_mdns", latency: true)
            let versusBaseline = pairedRatio(ours.qps, baseline.qps)
            print("mdns_qps_vs_baseline: \(versusBaseline.median.map { String(format: "%.2f", $0) } ?? "n/a")")
            print("mdns_qps_vs_baseline_runs: \(versusBaseline.summary("%.2f"))")
            print("baseline_mdns_qps_vs_ceiling: \(pairedRatio(baseline.qps, ceiling.qps).summary("%.2f"))")
        }
        avahi.print("avahi_mdns", latency: true)
        print("avahi_mdns_qps_with_debian_rate_limit: \(Int(limited.qps))")
        if ceilingBinary != nil {
            ceiling.print("mdns_ceiling", latency: false)
            batched.print("mdns_ceiling_batched", latency: false)
        }
        // CPU per answer first: it does not depend on which process wins the two cores.
        let cpuVersusCeiling = pairedRatio(ours.cpu, ceiling.cpu)
        let cpuVersusAvahi = pairedRatio(ours.cpu, avahi.cpu)
        print("mdns_load: \(setting)")
        print("mdns_cpu_per_answer_vs_ceiling: \(cpuVersusCeiling.median.map { String(format: "%.2f", $0) } ?? "n/a")")
        print("mdns_cpu_per_answer_vs_ceiling_runs: \(cpuVersusCeiling.summary("%.2f"))")
        print("mdns_cpu_per_answer_vs_avahi: \(cpuVersusAvahi.median.map { String(format: "%.2f", $0) } ?? "n/a")")
        print("mdns_cpu_per_answer_vs_avahi_runs: \(cpuVersusAvahi.summary("%.2f"))")
        // The same with the kernel's share counted for every responder: the capture's ring copy included.
        let systemVersusCeiling = pairedRatio(ours.systemCPU, ceiling.systemCPU)
        let systemVersusAvahi = pairedRatio(ours.systemCPU, avahi.systemCPU)
        print("mdns_system_cpu_per_answer_vs_ceiling: \(systemVersusCeiling.summary("%.2f"))")
        print("mdns_system_cpu_per_answer_vs_avahi: \(systemVersusAvahi.summary("%.2f"))")
        let versusAvahi = pairedRatio(ours.qps, avahi.qps)
        print("mdns_qps_vs_avahi: \(versusAvahi.median.map { String(format: "%.2f", $0) } ?? "n/a")")
        print("mdns_qps_vs_avahi_runs: \(versusAvahi.summary("%.2f"))")
        let versusCeiling = pairedRatio(ours.qps, ceiling.qps)
        print("mdns_qps_vs_ceiling: \(versusCeiling.median.map { String(format: "%.2f", $0) } ?? "n/a")")
        print("mdns_qps_vs_ceiling_runs: \(versusCeiling.summary("%.2f"))")
        let versusBatched = pairedRatio(ours.qps, batched.qps)
        print("mdns_qps_vs_ceiling_batched: \(versusBatched.median.map { String(format: "%.2f", $0) } ?? "n/a")")
        if let mine = ours.cpu.median, let theirs = avahi.cpu.median, mine > 0 {
            // Answers per CPU second, ours over avahi's: the ratio a machine with a core to spare would see.
            print("mdns_capacity_vs_avahi: \(String(format: "%.2f", theirs / mine))")
        }
        judge(
            "mdns_qps_vs_ceiling (50 hosts)", versusCeiling.median, ">=", 0.9, flaws: ours.flaws + ceiling.flaws)
    }
}

/// `make bench`'s wake figures: 1,000 held hosts, each woken once (a p99 of fewer than a thousand wakes is one
/// draw of a few).
func runWakeFigures(wakes: Int = 1_000) async throws {
    guard try labReady("wake", tools: []) else { return }
    let profile = HeldHostsProfile(count: wakes)
    try await Lab.withLab { lab in
        let daemon = try await startLabDaemon(lab)
        defer { daemon.signal(SIGTERM) }
        try register(profile, in: lab)
        try await waitForTakeovers(daemon, limit: .seconds(30))
        let samples = try await measureWakes(lab, profile: profile, wakes: wakes)
        samples.print("wake")
        judge("6 wake_p99_us (\(samples.count) wakes, missed ones counted)", samples.percentile(0.99), "<=", 500)
    }
}

/// How cost grows: for each number of held hosts, the CPU a registration costs the daemon (with its take-over of
/// the host's address), the mDNS figures against the ceiling in the same run (cached questions, and where there
/// are more distinct questions than the answer cache keeps, uncached ones), the wake figures, the daemon's memory,
/// and its CPU while nothing happens.
func runScaling(counts: [Int] = scalingCounts(), seconds: Int = 5, rounds: Int = 3) async throws {
    guard try labReady("scaling", tools: ["dnsperf"]) else { return }
    var resident: [Int: Int] = [:]
    var growth: [String] = []
    // The load generator's setting, searched once as the mdns benchmark searches it (against the ceiling).
    var load: LoadSetting?
    for count in counts {
        let profile = HeldHostsProfile(count: count)
        try await Lab.withLab { lab in
            let cached = lab.workDirectory + "/queries.txt"
            try profile.queryFile(cached)
            // Every host's questions, in order: more distinct questions than the cache keeps (4,096 answers) once
            // there are 1,366 hosts, so that each is worked out afresh.
            let uncached: String? = 3 * count > 4_096 ? lab.workDirectory + "/uncached.txt" : nil
            if let uncached { try profile.queryFile(uncached, hosts: Array(0..<count)) }
            let ceilingBinary = try buildCeiling(in: lab)
            if load == nil, let ceilingBinary {
                let found = try await findLoadSetting(lab, binary: ceilingBinary, file: cached)
                print("scaling_mdns_load: \(found)")
                load = found
            }
            let setting = load ?? .single
            let daemon = try await startLabDaemon(lab)
            defer { daemon.signal(SIGTERM) }

            // Registrations through the whole daemon as it runs for users: capture, responder, take-over of each
            // host's on-link address (probes, announcements, the multicast group joined), until it is quiet.
            let first = count >= 2_000 ? 1_000 : count
            var cpu = processCPUSeconds(daemon.pid)
            var resent = try register(profile, 0..<first, in: lab)
            try await waitForTakeovers(daemon, limit: .seconds(60))
            let firstCPU = processCPUSeconds(daemon.pid) - cpu
            var registrationCPU = firstCPU
            if first < count {
                cpu = processCPUSeconds(daemon.pid)
                resent += try register(profile, first..<count, in: lab)
                try await waitForTakeovers(daemon, limit: .seconds(120))
                registrationCPU += processCPUSeconds(daemon.pid) - cpu
            }
            resident[count] = processStatus(daemon.pid, "VmRSS")
            let anonymous = processStatus(daemon.pid, "RssAnon")

            // Idle: nothing on the wire but what the lab's hosts send by themselves.
            // (The kernel counts a process's CPU time, exited threads included, in ticks of 10 ms: 30 s of idling
            // tells it to 20 ms a minute.)
            let idleSeconds = 30.0
            let cpuBefore = processCPUSeconds(daemon.pid)
            try await Task.sleep(for: .seconds(idleSeconds))
            let idle = (processCPUSeconds(daemon.pid) - cpuBefore) * 1000 * 60 / idleSeconds

            let proxy = lab.host(.proxy).ipv4
            var ours = ResponderRuns()
            var oursUncached = ResponderRuns()
            var ceiling = ResponderRuns()
            var worked = 0.0
            var fromCache = 0.0
            // Multicast questions from the LAN throughout the rounds: the daemon answers them while it is measured
            // and while the ceiling is.
            let mix = try MulticastMix.start(lab, profile: profile, hosts: profile.sample(50))
            for round in 1...rounds {
                let stopProfile =
                    round == 1 ? startProfile(lab, daemon.pid, name: "mdns-\(count)-hosts", seconds: seconds) : {}
                ours.add(
                    try await measureAnswers(
                        lab, server: proxy, file: cached, seconds: seconds, pacedSeconds: seconds,
                        responder: daemon.pid, load: setting), round: round)
                stopProfile()
                if let uncached {
                    let before = labMetrics(lab)
                    let stopProfile =
                        round == 1
                        ? startProfile(lab, daemon.pid, name: "mdns-uncached-\(count)-hosts", seconds: seconds) : {}
                    oursUncached.add(
                        try await measureAnswers(
                            lab, server: proxy, file: uncached, seconds: seconds, pacedSeconds: 0,
                            responder: daemon.pid, load: setting), round: round)
                    stopProfile()
                    let after = labMetrics(lab)
                    func delta(_ result: String) -> Double {
                        let name = "sleepproxy_mdns_answer_cache_lookups_total{result=\"\(result)\"}"
                        return (after[name] ?? 0) - (before[name] ?? 0)
                    }
                    worked += delta("miss")
                    fromCache += delta("hit")
                }
                if let ceilingBinary {
                    let responder = try await startCeiling(lab, binary: ceilingBinary, batched: false)
                    ceiling.add(
                        try await measureAnswers(
                            lab, server: proxy, port: ceilingPort, file: cached, seconds: seconds, pacedSeconds: 0,
                            responder: responder.pid, load: setting), round: round)
                    _ = responder.terminate()
                }
            }
            mix.stop("scaling_\(count)_hosts")

            // The questions of the hosts avahi-daemon serves below, asked now: before the wakes, which end the
            // records of the woken hosts.
            let peerHosts = 2_000
            let peerFile = lab.workDirectory + "/uncached-\(peerHosts).txt"
            var oursPeerUncached = ResponderRuns()
            if count >= 10_000 {
                try profile.queryFile(peerFile, hosts: Array(0..<peerHosts))
                for round in 1...rounds {
                    oursPeerUncached.add(
                        try await measureAnswers(
                            lab, server: proxy, file: peerFile, seconds: seconds, pacedSeconds: 0,
                            responder: daemon.pid, load: setting), round: round)
                }
            }

            // One thousand more registrations with `count` held, from the first of them to the daemon's quiet.
            var moreCPU: Double?
            if count >= 2_000 {
                let more = HeldHostsProfile(count: count + 1_000)
                cpu = processCPUSeconds(daemon.pid)
                let stopProfile = startProfile(lab, daemon.pid, name: "registrations-\(count)-held", seconds: 15)
                resent += try register(more, count..<count + 1_000, in: lab)
                try await waitForTakeovers(daemon, limit: .seconds(60))
                stopProfile()
                moreCPU = processCPUSeconds(daemon.pid) - cpu
            }

            // After the registrations above: a thousand hosts being woken (magic packets every 2 s each) would be
            // charged to them. With 10,000 held, the wakes are of 11,000.
            let wakes = try await measureWakes(lab, profile: profile, wakes: min(count, 1_000))

            // Aim 1's peer: avahi-daemon serving hosts of the same profile (a static host and an ssh service each),
            // asked the same distinct questions, in rounds after the daemon's (it needs the mDNS port; the daemon
            // keeps its leases). avahi-daemon 0.8 establishes static services in time growing with their square
            // (1,000 in 2.5 s, 4,000 in 64 s on this kind of machine): 10,000 would take minutes, so it serves the
            // first 2,000, and the daemon, holding all of them, is asked the same 6,000 questions (more than its
            // answer cache keeps) right before.
            var avahiUncached = ResponderRuns()
            let avahiMissing = Lab.missingTools(["avahi-daemon", "dbus-daemon"])
            if count >= 10_000, !avahiMissing.isEmpty {
                print("scaling_avahi: skipped, not installed: \(avahiMissing.joined(separator: ", "))")
            }
            if count >= 10_000, avahiMissing.isEmpty {
                daemon.signal(SIGTERM)
                _ = daemon.wait(timeout: .seconds(30))
                let services = (0..<peerHosts).map {
                    AvahiService(
                        name: profile.name($0), type: "_ssh._tcp", port: 22, hostName: "\(profile.name($0)).local")
                }
                let hosts = (0..<peerHosts).map {
                    (name: "\(profile.name($0)).local", address: "\(profile.ipv4($0))")
                }
                let clock = ContinuousClock()
                let started = clock.now
                let avahi = try await lab.startAvahi(
                    on: .proxy, hostName: "proxy", services: services, staticHosts: hosts,
                    configuration: ["server": ["ratelimit-interval-usec": "0", "ratelimit-burst": "0"]],
                    startup: .seconds(180))
                // Established is not done: it announces every entry for a while after, too busy to answer.
                try await waitForQuiet(avahi.daemon.pid, limit: .seconds(300))
                let startup = durationSeconds(clock.now - started)
                print("scaling_avahi_\(peerHosts)_hosts_startup_seconds: \(String(format: "%.1f", startup))")
                for round in 1...rounds {
                    avahiUncached.add(
                        try await measureAnswers(
                            lab, server: proxy, file: peerFile, seconds: seconds, pacedSeconds: 0,
                            responder: avahi.daemon.pid, load: setting), round: round)
                }
                await avahi.stop(graceful: true)
            }

            let prefix = "scaling_\(count)_hosts"
            // The kernel counts a process's CPU in clock ticks (10 ms): below 20 of them the figure says nothing.
            let ticks = registrationCPU * Double(sysconf(Int32(_SC_CLK_TCK)))
            let registrationEach =
                ticks < 20
                ? "n/a (\(Int(ticks.rounded())) clock ticks for \(count) registrations)"
                : String(format: "%.1f", registrationCPU * 1e6 / Double(count))
            print("\(prefix)_registration_cpu_us_each: \(registrationEach)")
            print("\(prefix)_registrations_sent_again: \(resent)")
            if let moreCPU {
                print("registration_lab_cpu_us_each_0_held: \(String(format: "%.1f", firstCPU * 1e6 / Double(first)))")
                print("registration_lab_cpu_us_each_\(count / 1000)k_held: \(String(format: "%.1f", moreCPU * 1e3))")
                judge(
                    "3 (whole daemon, lab) registration_lab_cpu_us_each_\(count / 1000)k_held over _0_held",
                    moreCPU * 1e3 / (firstCPU * 1e6 / Double(first)), "<=", 1.2)
            }
            ours.print("\(prefix)_mdns", latency: true)
            let versusCeiling = pairedRatio(ours.qps, ceiling.qps)
            if ceilingBinary != nil {
                ceiling.print("\(prefix)_mdns_ceiling", latency: false)
                print(
                    "\(prefix)_mdns_qps_vs_ceiling: \(versusCeiling.median.map { String(format: "%.2f", $0) } ?? "n/a")"
                )
                print("\(prefix)_mdns_qps_vs_ceiling_runs: \(versusCeiling.summary("%.2f"))")
            }
            if uncached != nil {
                oursUncached.print("\(prefix)_mdns_uncached", latency: false)
                print("\(prefix)_mdns_uncached_lookups: \(Int(worked)) worked out, \(Int(fromCache)) from the cache")
                if !avahiUncached.qps.values.isEmpty {
                    oursPeerUncached.print("\(prefix)_mdns_uncached_\(peerHosts)", latency: false)
                    avahiUncached.print("scaling_avahi_\(peerHosts)_hosts_mdns_uncached", latency: false)
                    let ratio = oursPeerUncached.cpu.median.flatMap { ours in
                        avahiUncached.cpu.median.map { ours / $0 }
                    }
                    print(
                        "\(prefix)_mdns_uncached_cpu_per_answer_vs_avahi_\(peerHosts): \(ratio.map { String(format: "%.2f", $0) } ?? "n/a")"
                    )
                    let system = oursPeerUncached.systemCPU.median.flatMap { ours in
                        avahiUncached.systemCPU.median.map { ours / $0 }
                    }
                    print(
                        "\(prefix)_mdns_uncached_system_cpu_per_answer_vs_avahi_\(peerHosts): \(system.map { String(format: "%.2f", $0) } ?? "n/a")"
                    )
                }
                if ceilingBinary != nil {
                    let ratio = pairedRatio(oursUncached.qps, ceiling.qps)
                    print(
                        "\(prefix)_mdns_uncached_qps_vs_ceiling: \(ratio.median.map { String(format: "%.2f", $0) } ?? "n/a")"
                    )
                }
            }
            wakes.print("\(prefix)_wake")
            print("\(prefix)_rss_mb: \(megabytes(resident[count]))")
            print("\(prefix)_rss_anon_mb: \(megabytes(anonymous))")
            print("idle_cpu_ms_per_min_\(count)_hosts: \(String(format: "%.1f", idle))")
            if ceilingBinary != nil {
                judge(
                    "2 (cached, legacy unicast with \(MulticastMix.rate) multicast questions a second, advertising, lab) mdns_qps_vs_ceiling (\(count) hosts)",
                    versusCeiling.median, ">=", 0.95, flaws: ours.flaws + ceiling.flaws)
            }
            if count == 10_000 {
                judge(
                    "1 (uncached, lab) mdns_uncached_qps_vs_ceiling (10,000 hosts)",
                    pairedRatio(oursUncached.qps, ceiling.qps).median, ">=", 0.85,
                    flaws: oursUncached.flaws + ceiling.flaws)
                let versusAvahi = oursPeerUncached.cpu.median.flatMap { ours in
                    avahiUncached.cpu.median.map { ours / $0 }
                }
                judge(
                    "1 (uncached, 10,000 held, against avahi-daemon serving 2,000 of them) mdns_uncached_cpu_per_answer_vs_avahi",
                    versusAvahi, "<=", 0.6, flaws: oursPeerUncached.flaws + avahiUncached.flaws)
                judge(
                    "6 wake_p99_us (10,000 hosts, \(wakes.count) wakes, missed ones counted)", wakes.percentile(0.99),
                    "<=", 500)
            }
            let uncachedVersusCeiling = pairedRatio(oursUncached.qps, ceiling.qps)
            func cell(_ value: Double?) -> String { value.map { String(format: "%.2f", $0) } ?? "n/a" }
            let cells: [String] = [
                "\(count)", cell(ours.cpu.median), cell(versusCeiling.median), cell(oursUncached.cpu.median),
                cell(uncachedVersusCeiling.median), cell(ceiling.cpu.median),
                microseconds(wakes.percentile(0.99)), ticks < 20 ? "n/a" : registrationEach,
                megabytes(anonymous), megabytes(resident[count]), String(format: "%.1f", idle),
            ]
            growth.append("| " + cells.joined(separator: " | ") + " |")
        }
    }
    if let first = counts.first, let last = counts.last, last > first, let low = resident[first],
        let high = resident[last]
    {
        print("rss_bytes_per_held_host: \(Int(Double(high - low) * 1024 / Double(last - first)))")
    }
    // The README's growth table, as measured.
    print("growth_table:")
    print(
        "| held hosts | cached: CPU µs per answer | cached: qps vs ceiling | uncached: CPU µs per answer | uncached: qps vs ceiling | ceiling: CPU µs per answer | wake p99 µs | registration CPU µs | RssAnon MB | RSS MB | idle CPU ms/min |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in growth { print(row) }
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
