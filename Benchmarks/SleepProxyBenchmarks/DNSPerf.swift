import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyDaemon
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

/// What one dnsperf run reported.
struct DNSPerfResult {
    var qps: Double
    var sent = 0
    var completed = 0
    var lost = 0
    var lostPercent: Double
    /// Answers by response code (`NOERROR`, `NXDOMAIN`, ...).
    var responseCodes: [String: Int] = [:]
    /// Seconds, one per answered query (from dnsperf -v).
    var latencies: [Double]
    /// The CPU dnsperf itself used (user and system), if the run reported it.
    var cpuSeconds: Double?

    /// Why the run does not count as a clean measurement: queries lost, answers other than NOERROR, or none at
    /// all. Nil when clean.
    var flaw: String? {
        var problems: [String] = []
        if completed == 0 { problems.append("no answers") }
        if lost > 0 { problems.append("\(lost) of \(sent) queries lost") }
        let others = responseCodes.filter { $0.key != "NOERROR" && $0.value > 0 }.sorted { $0.key < $1.key }
        if !others.isEmpty {
            problems.append(
                "answers other than NOERROR: " + others.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }
}

/// dnsperf from the waker at `server`, `port`.
func dnsperf(
    _ lab: Lab, server: String, port: Int = 5353, file: String, seconds: Int, extra: [String]
) async throws -> DNSPerfResult {
    // The shell reports its reaped child's CPU (cutime and cstime of its own /proc stat, read by a builtin, so that
    // no other child counts), for the CPU the machine spent apart from the load generator.
    let script = """
        dnsperf "$@"; status=$?; read -r stat < /proc/$$/stat; echo "dnsperf_stat: ${stat##*) }"; exit $status
        """
    let result = try await lab.run(
        .waker,
        ["sh", "-c", script, "sh", "-s", server, "-p", String(port), "-d", file, "-l", String(seconds), "-v"] + extra,
        timeout: .seconds(Int64(seconds) + 30))
    var parsed = parseDNSPerf(result.stdout)
    parsed.cpuSeconds = childCPUSeconds(result.stdout)
    return parsed
}

/// The children's CPU in a `dnsperf_stat:` line: the fields of `/proc/PID/stat` after the command name, where
/// cutime and cstime are the 14th and 15th (fields 16 and 17 of the whole line), in clock ticks.
func childCPUSeconds(_ output: String) -> Double? {
    guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("dnsperf_stat: ") }) else { return nil }
    let fields = line.dropFirst("dnsperf_stat: ".count).split(separator: " ")
    guard fields.count > 14, let user = Double(fields[13]), let system = Double(fields[14]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Reads dnsperf's summary (`Queries sent:`, `Queries completed:`, `Queries lost:`, `Response codes:`,
/// `Queries per second:`) and its per-query lines (`> NOERROR ... 0.000123` with -v).
func parseDNSPerf(_ output: String) -> DNSPerfResult {
    var parsed = DNSPerfResult(qps: 0, lostPercent: 0, latencies: [])
    func count(_ line: Substring) -> Int {
        line.split(separator: ":", maxSplits: 1).last?.split(separator: " ").first.flatMap { Int($0) } ?? 0
    }
    for line in output.split(separator: "\n") {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        let fields = trimmed.split(separator: " ", omittingEmptySubsequences: true)
        if trimmed.hasPrefix("Queries per second:"), let value = fields.last.flatMap({ Double($0) }) {
            parsed.qps = value
        } else if trimmed.hasPrefix("Queries sent:") {
            parsed.sent = count(line)
        } else if trimmed.hasPrefix("Queries completed:") {
            parsed.completed = count(line)
        } else if trimmed.hasPrefix("Queries lost:") {
            parsed.lost = count(line)
            if let percent = fields.last {
                parsed.lostPercent = Double(percent.trimmingCharacters(in: CharacterSet(charactersIn: "()%"))) ?? 0
            }
        } else if trimmed.hasPrefix("Response codes:") {
            // "Response codes:       NOERROR 1234 (99.00%), NXDOMAIN 12 (1.00%)"
            let list = trimmed.dropFirst("Response codes:".count)
            for entry in list.split(separator: ",") {
                let parts = entry.split(separator: " ", omittingEmptySubsequences: true)
                if parts.count >= 2, let number = Int(parts[1]) { parsed.responseCodes[String(parts[0])] = number }
            }
        } else if trimmed.hasPrefix(">"), let value = fields.last.flatMap({ Double($0) }) {
            parsed.latencies.append(value)
        }
    }
    return parsed
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
