import Foundation
import Soak
import TestLab
import Testing

/// The soak (`make soak`, `Tests/Soak`) for two minutes, with the debug daemon: forty Mac-style hosts that sleep,
/// renew, let leases run out, are asked for (legacy, QM, QU, unicast assist, avahi-resolve and avahi-browse),
/// connected to, sent datagrams and magic packets, claimed by another machine, woken, forgotten and come back, while
/// a hostile sender sends its mix and the daemon is reloaded, restarted and killed, and its state directory fills
/// up. Nothing the invariant checker watches may be violated; `SOAK_SEED` replays a failing run's schedule.
@Suite(.requiresLab(tools: soakTools))
struct SoakLabTests {
    @Test func twoMinutesOfChurnAndFaultsViolateNothing() async throws {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let seed =
            ProcessInfo.processInfo.environment["SOAK_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let options = SoakOptions(
            // The debug daemon shares two cores with the other lab tests of a full run: answers get 3 s here, 1 s
            // in `make soak`.
            minutes: 2, seed: seed, hosts: 40, lease: 30, actionsPerSecond: 4, faultSeconds: 25, restartSeconds: 40,
            answerWithin: .seconds(3),
            daemonPath: directory.appendingPathComponent("sleepproxyd").path,
            ctlPath: directory.appendingPathComponent("sleepproxyctl").path)
        let report = try await Lab.withLab { lab in
            try await runSoak(options, in: lab) { print("soak: \($0)") }
        }
        for figure in report.figures { print("figure: \(figure.name): \(figure.value)") }
        for aim in report.aims { print(aim) }
        #expect(report.violations.isEmpty, "SOAK_SEED=\(report.seed): \(report.violations.joined(separator: "; "))")
        // The schedule did what it is for: every kind of event happened.
        let figures = Dictionary(report.figures.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        for kind in [
            "registrations", "renewals", "expiries", "returns", "queries", "queries_for_awake",
            "connections_to_registered_ports", "connections_to_other_ports", "listing_checks", "store_checks",
            "queries_multicast", "avahi_resolves_judged", "avahi_browse_hosts_judged", "hostile_frames",
            "talk_announcements_owner", "talk_announcements_plain",
        ] {
            #expect(Int(figures["soak_events_\(kind)"] ?? "0") ?? 0 > 0, "no \(kind) in SOAK_SEED=\(report.seed)")
        }
        let faults = ["reloads", "restarts", "crashes", "disk_full"].map {
            Int(figures["soak_events_\($0)"] ?? "0") ?? 0
        }
        #expect(faults.reduce(0, +) >= 2, "SOAK_SEED=\(report.seed): \(faults)")
        // The daemon's memory gauges were scraped from its /metrics at most samples (a scrape during a stop or a
        // crash finds nobody), and say something plausible: a few megabytes allocated, SQLite's share of them.
        let samples = Int(figures["soak_samples"] ?? "0") ?? 0
        let scrapes = Int(figures["soak_memory_scrapes"] ?? "0") ?? 0
        #expect(scrapes * 2 > samples, "\(scrapes) of \(samples) samples scraped /metrics")
        let allocated = Double(figures["soak_heap_allocated_mb_end"] ?? "") ?? 0
        let store = Double(figures["soak_store_memory_mb_end"] ?? "") ?? 0
        #expect(allocated > 0.5 && allocated < 64, "\(allocated) MB allocated")
        #expect(store > 0 && store < allocated, "\(store) MB of SQLite's, of \(allocated) MB allocated")
    }
}
