import Foundation
import Soak
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

/// `make soak`: the release daemon in the lab for `SOAK_MINUTES` (60) under the soak's seeded schedule (see
/// `Tests/Soak`), printing what happens as it goes and `soak_...` figures at the end; exits 1 on a violation.
func runSoakBenchmark() async throws {
    if let reason = Lab.unsupportedReason {
        print("soak skipped: \(reason)")
        return
    }
    let missing = Lab.missingTools(soakTools)
    guard missing.isEmpty else {
        print("soak skipped: missing \(missing.joined(separator: ", ")) (scripts/install-mdns-test-tools.sh)")
        return
    }
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let daemonPath = directory.appendingPathComponent("sleepproxyd").path
    let ctlPath = directory.appendingPathComponent("sleepproxyctl").path
    guard FileManager.default.isExecutableFile(atPath: daemonPath),
        FileManager.default.isExecutableFile(atPath: ctlPath)
    else {
        print("soak skipped: build sleepproxyd and sleepproxyctl first (swift build -c release)")
        return
    }
    let options = SoakOptions.fromEnvironment(daemonPath: daemonPath, ctlPath: ctlPath)
    let report = try await Lab.withLab { lab in
        try await runSoak(options, in: lab) { line in print("soak: \(line)") }
    }
    for figure in report.figures { print("figure: \(figure.name): \(figure.value)") }
    for aim in report.aims { print(aim) }
    for violation in report.violations { print("soak violation: \(violation)") }
    if !report.violations.isEmpty {
        print("soak: replay with SOAK_SEED=\(report.seed)")
        exit(1)
    }
}
