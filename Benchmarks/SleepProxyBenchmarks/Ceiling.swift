import Foundation
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

/// The zero-work responder of `Benchmarks/ceiling/mdns-ceiling.c`: what a responder can reach in this lab, on this
/// machine, with the same load. It listens on the proxy's address at `ceilingPort`, which the daemon does not
/// capture, so that the daemon can stay up, idle, while the ceiling is measured.
let ceilingPort = 15_353

/// Compiles the ceiling responder into the lab's directory with the system's C compiler; nil, with the reason
/// printed, when there is none.
func buildCeiling(in lab: Lab) throws -> String? {
    let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("ceiling/mdns-ceiling.c").path
    let binary = lab.workDirectory + "/mdns-ceiling"
    let compile = Process()
    compile.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    compile.arguments = ["cc", "-O2", "-o", binary, source]
    guard (try? compile.run()) != nil else {
        print("ceiling benchmark skipped: no C compiler (cc) to build \(source)")
        return nil
    }
    compile.waitUntilExit()
    guard compile.terminationStatus == 0 else {
        print("ceiling benchmark skipped: cc could not build \(source)")
        return nil
    }
    return binary
}

/// Starts the ceiling responder in the proxy's namespace (batched: recvmmsg and sendmmsg) and waits until it
/// listens.
func startCeiling(_ lab: Lab, binary: String, batched: Bool) async throws -> LabProcess {
    let process = try lab.spawn(
        .proxy, [binary, lab.host(.proxy).ipv4, String(ceilingPort)] + (batched ? ["batched"] : []))
    _ = try await eventually("the ceiling responder to listen", within: .seconds(5)) {
        process.stdout.contains("listening") ? true : nil
    }
    return process
}

/// How dnsperf loads a responder: its threads (`-T`), client sockets (`-c`) and queries outstanding (`-q`).
struct LoadSetting: Hashable, CustomStringConvertible {
    var threads: Int
    var clients: Int
    var outstanding: Int

    var arguments: [String] { ["-T", String(threads), "-c", String(clients), "-q", String(outstanding)] }
    var description: String { arguments.joined(separator: " ") }

    /// One thread, one socket, 128 outstanding: the setting used when no search was made.
    static let single = LoadSetting(threads: 1, clients: 1, outstanding: 128)
    /// The settings tried: one thread or two (the machine's cores), one socket or several, and deeper queues.
    static let candidates = [
        single, LoadSetting(threads: 1, clients: 1, outstanding: 512),
        LoadSetting(threads: 2, clients: 2, outstanding: 128),
        LoadSetting(threads: 2, clients: 2, outstanding: 256), LoadSetting(threads: 2, clients: 4, outstanding: 256),
        LoadSetting(threads: 2, clients: 8, outstanding: 512),
    ]
}

/// The load generator's own limit: the setting at which the zero-work responder answers the most (a clean run, no
/// losses), each candidate measured once for `seconds`. Every responder is then measured at that setting, so that
/// the ceiling is the kernel's and not dnsperf's. A deeper setting is taken only when it gets more than
/// `margin` above the single-thread one: less is within one short run's noise, and a queue deep enough for the
/// zero-work responder makes a real one (which reads more slowly) overflow its receive buffer and lose queries.
/// Prints each candidate's rate and the choice.
func findLoadSetting(_ lab: Lab, binary: String, file: String, seconds: Int = 4, margin: Double = 0.05) async throws
    -> LoadSetting
{
    let responder = try await startCeiling(lab, binary: binary, batched: false)
    defer { _ = responder.terminate() }
    var best = (setting: LoadSetting.single, qps: 0.0)
    var single = 0.0
    for setting in LoadSetting.candidates {
        let run = try await dnsperf(
            lab, server: lab.host(.proxy).ipv4, port: ceilingPort, file: file, seconds: seconds,
            extra: setting.arguments)
        let verdict = run.flaw.map { " (not clean: \($0))" } ?? ""
        print("mdns_load_setting_ceiling_qps: \(setting): \(Int(run.qps))\(verdict)")
        if setting == .single, run.flaw == nil { single = run.qps }
        if run.flaw == nil, run.qps > best.qps { best = (setting, run.qps) }
    }
    guard best.qps > single * (1 + margin) else {
        print(
            "mdns_load_setting: \(LoadSetting.single) (the best, \(best.setting), got \(Int(best.qps)) answers/s, not more than \(Int(margin * 100)) % above its \(Int(single)): dnsperf is not the limit)"
        )
        return .single
    }
    print("mdns_load_setting: \(best.setting) (the zero-work responder's best: \(Int(best.qps)) answers/s)")
    return best.setting
}

/// Repeated measurements of one figure: the median is reported, the spread printed beside it.
struct Samples {
    var values: [Double] = []

    mutating func append(_ value: Double) { values.append(value) }

    var median: Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// (largest - smallest) / median, in percent.
    var spreadPercent: Double? {
        guard let median, median > 0, let low = values.min(), let high = values.max() else { return nil }
        return (high - low) / median * 100
    }

    /// `41234 (3 runs: 40100 41234 42000, spread 4.7 %)`, or `n/a`.
    func summary(_ format: String = "%.0f") -> String {
        guard let median else { return "n/a" }
        let runs = values.map { String(format: format, $0) }.joined(separator: " ")
        return
            "\(String(format: format, median)) (\(values.count) runs: \(runs), spread \(String(format: "%.1f", spreadPercent ?? 0)) %)"
    }
}

/// The median of the ratios of paired runs (`ours[i] / theirs[i]`): a ratio a drifting machine does not bend, as
/// each pair ran back to back.
func pairedRatio(_ ours: Samples, _ theirs: Samples) -> Samples {
    var ratios = Samples()
    for (mine, other) in zip(ours.values, theirs.values) where other > 0 { ratios.append(mine / other) }
    return ratios
}

/// The verdicts of the figures with an aim, printed together at the end of `make bench`.
nonisolated(unsafe) var aims: [String] = []

/// Notes whether `figure` (`value`) meets its aim; a figure from a flawed run (losses, errors) is not met,
/// whatever its value.
func judge(_ figure: String, _ value: Double?, _ comparison: String, _ aim: Double, flaws: [String] = []) {
    guard let value else {
        aims.append("aim \(figure) \(comparison) \(aim): not measured")
        return
    }
    let met = comparison == ">=" ? value >= aim : value <= aim
    let shown = value < 10 ? String(format: "%.2f", value) : String(format: "%.0f", value)
    if !flaws.isEmpty {
        aims.append("aim \(figure) \(comparison) \(aim): \(shown), not met: \(flaws.joined(separator: "; "))")
    } else {
        aims.append("aim \(figure) \(comparison) \(aim): \(shown), \(met ? "met" : "missed")")
    }
}

/// With `PERF_DIRECTORY` set, records a CPU profile of the whole machine for the next `seconds` (`perf record -a
/// -g`, on the software clock: virtual machines have no hardware counters) into `PERF_DIRECTORY/name.data`, for
/// `perf report -i FILE --pid PID --no-children`; the returned closure waits until it is written. Without it,
/// does nothing. perf is started through the lab, which clears the signal mask a child would otherwise inherit
/// from a Dispatch thread: with SIGCHLD and SIGINT blocked, perf never stops. (Recording one process with `-p`
/// also makes perf spin once a thread of that process exits.)
func startProfile(_ lab: Lab, _ pid: Int32, name: String, seconds: Int) -> () -> Void {
    guard let directory = ProcessInfo.processInfo.environment["PERF_DIRECTORY"] else { return {} }
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let path = "\(directory)/\(name).data"
    guard Lab.missingTools(["perf"]).isEmpty,
        let perf = try? lab.spawn(
            .proxy,
            ["perf", "record", "-a", "-g", "-e", "cpu-clock", "-F", "1000", "-o", path, "--", "sleep", String(seconds)])
    else {
        print("profile \(name) skipped: perf is not installed (apt-get install linux-perf)")
        return {}
    }
    return {
        guard perf.wait(timeout: .seconds(Int64(seconds) + 120)) != nil else {
            _ = perf.terminate()
            print("profile \(name): perf did not finish; killed")
            return
        }
        print("profile: \(path) (the daemon is pid \(pid))")
    }
}
