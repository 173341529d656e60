import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyCore
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon answering for a sleeping host, asked by `dig` (BIND's, a querier nobody on the team wrote).
@Suite(.requiresLab(tools: ["dig"]))
struct ResponderLabTests {
    /// The sleeper's registration: its host name, address, reverse mapping and an ssh service, Mac style.
    static func sleeperRegistration(_ lab: Lab) throws -> [UInt8] {
        let sleeper = lab.host(.sleeper)
        let address = try #require(IPv4Address(sleeper.ipv4))
        let host: DNSName = "Sleeper.local."
        let instance = try DNSName(labels: ["Sleeper SSH", "_ssh", "_tcp", "local"])
        let records: [DNSRecord] = [
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(address)),
            DNSRecord(name: ReverseMapping.name(of: .v4(address)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
            DNSRecord(name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: host))),
            DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData(["u=test"]))),
            DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(instance)),
            DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr("_ssh._tcp.local.")),
        ]
        let mac = try #require(MACAddress(sleeper.macString))
        return try DNSMessage(
            id: 0x5151, flags: DNSFlags(response: false, opcode: .update), authorities: records,
            additionals: [
                .opt(
                    EDNSHeader(udpPayloadSize: 1440, flags: 0x1194),
                    options: [
                        .updateLease(UpdateLease(lease: 7200)), .owner(OwnerOption(sequence: 3, primaryMAC: mac)),
                    ])
            ]
        ).encoded(compression: .exceptSRVTargets)
    }

    /// Registers the sleeper with the daemon, then puts it to sleep (no addresses, no answers of its own).
    static func registerAndSleep(_ lab: Lab) async throws {
        let client = try lab.withNamespace(.sleeper) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
        defer { client.close() }
        let proxy = Endpoint(address: try #require(IPAddress(lab.host(.proxy).ipv4)), port: 5354)
        try client.send(
            try sleeperRegistration(lab), to: proxy, scopeID: 0, from: try #require(IPAddress(lab.host(.sleeper).ipv4)),
            interfaceIndex: 0)
        _ = try await nextDatagram(from: client, within: .seconds(5))
        try lab.sleep(.sleeper)
    }

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
            try await Self.registerAndSleep(lab)

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
                browse.contains("IN PTR 20-30-50-73\\032Lab\\032Proxy._sleep-proxy._udp.local."),
                "\(browse)\ndaemon: \(daemon.stderr)")
            #expect(browse.contains("IN SRV 0 0 5354 "), "\(browse)")
            #expect(browse.contains("IN TXT \"\""), "\(browse)")
            #expect(browse.contains("IN A 10.77.0.1"), "\(browse)")
        }
    }
}
