import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon answering for a sleeping host, asked by `dig` (BIND's, a querier nobody on the team wrote).
@Suite(.requiresLab(tools: ["dig"]))
struct ResponderLabTests {
    /// dig's output with every run of spaces and tabs made one space, so that lines compare as text.
    func dig(_ lab: Lab, _ arguments: [String], expectAnswer: Bool = true) async throws -> String {
        let result = try await lab.run(
            .waker,
            [
                "dig", "+norecurse", "+time=2", "+tries=\(expectAnswer ? 2 : 1)", "-p", "5353",
                "@\(lab.host(.proxy).ipv4)",
            ]
                + arguments)
        if expectAnswer { #expect(result.succeeded, "dig failed: \(result)") }
        return result.stdout.split(separator: "\n").map {
            $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
        }.joined(separator: "\n")
    }

    @Test func heldNamesResolveByLegacyUnicast() async throws {
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            try await MacSleeper.registerAndSleep(lab)

            let a = try await dig(lab, ["sleeper.local", "A"])
            #expect(a.contains("status: NOERROR"), "\(a)")
            // The stored case, a TTL capped at 10 s for a legacy querier, the sleeper's address.
            #expect(a.contains("Sleeper.local. 10 IN A 10.77.0.2"), "\(a)")

            let srv = try await dig(lab, ["Sleeper\\032SSH._ssh._tcp.local", "SRV"])
            #expect(srv.contains("Sleeper\\032SSH._ssh._tcp.local. 10 IN SRV 0 0 22 Sleeper.local."), "\(srv)")
            // The address of the target comes along as an additional record.
            #expect(srv.contains("Sleeper.local. 10 IN A 10.77.0.2"), "\(srv)")

            let reverse = try await dig(lab, ["-x", "10.77.0.2"])
            #expect(reverse.contains("IN PTR Sleeper.local."), "\(reverse)")

            let browse = try await dig(lab, ["_ssh._tcp.local", "PTR"])
            #expect(browse.contains("IN PTR Sleeper\\032SSH._ssh._tcp.local."), "\(browse)")

            // Nothing is made up for names nobody registered.
            // mDNS sends no negative answers for names nobody holds: the query goes unanswered.
            let unknown = try await dig(lab, ["nobody.local", "A"], expectAnswer: false)
            #expect(unknown.contains("timed out") && !unknown.contains("ANSWER SECTION"), "\(unknown)")
        }
    }

    @Test func theProxyIsDiscoveredUnderSleepProxy() async throws {
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            // Probing and the first announcement take about a second (more on a loaded machine).
            let deadline = ContinuousClock.now + .seconds(30)
            var browse = ""
            while ContinuousClock.now < deadline {
                browse = try await dig(lab, ["_sleep-proxy._udp.local", "PTR"], expectAnswer: false)
                if browse.contains("ANSWER SECTION") { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(
                browse.contains("IN PTR 20-30-50-73\\.1\\032Lab\\032Proxy._sleep-proxy._udp.local."),
                "\(browse)\ndaemon: \(daemon.stderr)")
            #expect(browse.contains("IN SRV 0 0 5354 "), "\(browse)")
            #expect(browse.contains("IN TXT \"\""), "\(browse)")
            #expect(browse.contains("IN A 10.77.0.1"), "\(browse)")
        }
    }
}
