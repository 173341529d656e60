import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyCore
import SleepProxyDaemon
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

/// Legacy-unicast queries for held names, answered by sleepproxyd, side by side with avahi-daemon answering as
/// many names of its own, in the same lab, measured with dnsperf from the waker.
///
/// Figures: queries per second at full load (64 outstanding), and latency percentiles at a fixed 1,000 queries per
/// second (so that they measure the responder, not a queue).
func runResponderBenchmark(names: Int = 100, seconds: Int = 10) async throws {
    if let reason = Lab.unsupportedReason {
        print("mdns benchmark skipped: \(reason)")
        return
    }
    let missing = Lab.missingTools(["dnsperf", "avahi-daemon", "dbus-daemon"])
    guard missing.isEmpty else {
        print(
            "mdns benchmark skipped: missing \(missing.joined(separator: ", ")) (apt-get install dnsperf avahi-daemon)")
        return
    }
    let daemonPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("sleepproxyd").path
    guard FileManager.default.isExecutableFile(atPath: daemonPath) else {
        print("mdns benchmark skipped: build sleepproxyd first (swift build -c release)")
        return
    }
    try await Lab.withLab { lab in
        let config = try capacityConfig(in: lab)
        let daemon = try lab.spawn(
            .proxy,
            [
                daemonPath, "--config", config, "--interface", "eth0", "--state-dir", lab.workDirectory + "/state",
                "--registration-port", "5354", "--maximum-records", "100000", "--log-level", "notice",
            ])
        defer { daemon.signal(SIGTERM) }
        _ = try await eventually("sleepproxyd to start", within: .seconds(10)) {
            daemon.stderr.contains("advertising") ? true : nil
        }
        try registerHeldServices(lab, count: names)
        let avahi = try await lab.startAvahi(
            on: .sleeper, hostName: "sleeper",
            services: (0..<names).map { AvahiService(name: "avahi\($0)", type: "_http._tcp", port: 80) })
        defer { avahi.stop(graceful: true) }

        let proxyQueries = lab.workDirectory + "/held.txt"
        let avahiQueries = lab.workDirectory + "/avahi.txt"
        try (0..<names).map { "held\($0)._http._tcp.local SRV" }.joined(separator: "\n").write(
            toFile: proxyQueries, atomically: true, encoding: .utf8)
        try (0..<names).map { "avahi\($0)._http._tcp.local SRV" }.joined(separator: "\n").write(
            toFile: avahiQueries, atomically: true, encoding: .utf8)

        for (label, server, file) in [
            ("sleepproxyd", lab.host(.proxy).ipv4, proxyQueries), ("avahi", lab.host(.sleeper).ipv4, avahiQueries),
        ] {
            let load = try await dnsperf(lab, server: server, file: file, seconds: seconds, extra: ["-q", "64"])
            print("mdns_legacy_unicast_\(label)_queries_per_second: \(Int(load.qps))")
            print("mdns_legacy_unicast_\(label)_lost_percent: \(String(format: "%.2f", load.lostPercent))")
            let paced = try await dnsperf(
                lab, server: server, file: file, seconds: seconds, extra: ["-q", "16", "-Q", "1000"])
            let sorted = paced.latencies.sorted()
            func percentile(_ p: Double) -> String {
                guard !sorted.isEmpty else { return "n/a" }
                let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
                return String(format: "%.3f", sorted[max(0, index)] * 1000)
            }
            print("mdns_legacy_unicast_\(label)_p50_ms_at_1000qps: \(percentile(0.50))")
            print("mdns_legacy_unicast_\(label)_p99_ms_at_1000qps: \(percentile(0.99))")
        }
    }
}

/// Registers `count` hosts, each with one `_http._tcp` service, from the sleeper's address.
func registerHeldServices(_ lab: Lab, count: Int) throws {
    let client = try lab.withNamespace(.sleeper) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
    defer { client.close() }
    let proxy = Endpoint(address: IPAddress(lab.host(.proxy).ipv4)!, port: 5354)
    let source = IPAddress(lab.host(.sleeper).ipv4)!
    for index in 0..<count {
        let host = try DNSName(labels: ["held\(index)", "local"])
        let instance = try DNSName(labels: ["held\(index)", "_http", "_tcp", "local"])
        let records: [DNSRecord] = [
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 3, UInt8(index % 250)))),
            DNSRecord(name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 80, target: host))),
            DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData([""]))),
            DNSRecord(name: "_http._tcp.local.", ttl: 4500, rdata: .ptr(instance)),
        ]
        let mac = MACAddress(0x02, 0x33, 0, 0, UInt8(index >> 8), UInt8(index & 0xFF))
        let bytes = try DNSMessage(
            id: UInt16(index + 1), flags: DNSFlags(response: false, opcode: .update), authorities: records,
            additionals: [
                .opt(
                    EDNSHeader(udpPayloadSize: 1440, flags: 0x1194),
                    options: [
                        .updateLease(UpdateLease(lease: 7200)), .owner(OwnerOption(sequence: 1, primaryMAC: mac)),
                    ])
            ]
        ).encoded(compression: .exceptSRVTargets)
        try client.send(bytes, to: proxy, scopeID: 0, from: source, interfaceIndex: 0)
        let deadline = ContinuousClock.now + .seconds(5)
        while try client.receive() == nil {
            guard ContinuousClock.now < deadline else { throw TimeoutError("no reply to registration \(index)") }
            usleep(1_000)
        }
    }
}

struct DNSPerfResult {
    var qps: Double
    var lostPercent: Double
    /// Seconds, one per answered query (from dnsperf -v).
    var latencies: [Double]
}

func dnsperf(_ lab: Lab, server: String, file: String, seconds: Int, extra: [String]) async throws -> DNSPerfResult {
    let result = try await lab.run(
        .waker, ["dnsperf", "-s", server, "-p", "5353", "-d", file, "-l", String(seconds), "-v"] + extra,
        timeout: .seconds(Int64(seconds) + 30))
    var qps = 0.0
    var lost = 0.0
    var latencies: [Double] = []
    for line in result.stdout.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        if line.contains("Queries per second:"), let value = fields.last.flatMap({ Double($0) }) {
            qps = value
        } else if line.contains("Queries lost:"), let percent = fields.last {
            lost = Double(percent.trimmingCharacters(in: CharacterSet(charactersIn: "()%"))) ?? 0
        } else if line.hasPrefix(">"), let value = fields.last.flatMap({ Double($0) }) {
            latencies.append(value)
        }
    }
    return DNSPerfResult(qps: qps, lostPercent: lost, latencies: latencies)
}

/// A config file that lifts the per-source limits: benchmarks measure capacity, not policy. dnsperf is one querier
/// far above the per-source query rate, and one host registers every held name.
func capacityConfig(in lab: Lab) throws -> String {
    let path = lab.workDirectory + "/sleepproxy.toml"
    try """
    [limits]
    queries_per_second = 10000000
    query_burst = 10000000
    registrations_per_second = 1000000
    registration_burst = 1000000
    maximum_hosts_per_interface = 1000000
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}
