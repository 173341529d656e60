import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyCore
import SleepProxyDaemon
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

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
