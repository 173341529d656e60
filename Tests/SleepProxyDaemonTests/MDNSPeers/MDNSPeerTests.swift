import DNSWire
import Foundation
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Real mDNS peers in the lab: avahi-daemon with private buses, avahi's tools, dig and raw multicast queries.
@Suite(
    .requiresLab(tools: ["avahi-daemon", "avahi-browse", "avahi-resolve", "dig", "dbus-daemon", "python3", "unshare"])
)
struct MDNSPeerTests {
    static let ssh = AvahiService(name: "sleeper SSH", type: "_ssh._tcp", port: 22, txt: ["u=test"])

    @Test func wakerBrowsesAndResolvesTheSleepersService() async throws {
        try await Lab.withLab { lab in
            // avahi publishes a link-local IPv6 address only when the interface has no global one.
            let sleeperHost = lab.host(.sleeper)
            let deleteULA = ["ip", "address", "delete", "\(sleeperHost.ula)/64", "dev", "eth0"]
            let removed = try await lab.run(.sleeper, deleteULA)
            #expect(removed.succeeded, "\(removed)")
            // Without AAAA records over IPv4, each transport resolves to its own address family.
            async let sleeperStarted = lab.startAvahi(
                on: .sleeper,
                hostName: "sleeper",
                services: [Self.ssh],
                configuration: ["publish": ["publish-aaaa-on-ipv4": "no"]]
            )
            let waker = try await lab.startAvahi(on: .waker, hostName: "waker")
            let sleeper = try await sleeperStarted
            #expect(sleeper.announcedHostName == "sleeper.local")
            #expect(waker.announcedHostName == "waker.local")

            let entries = try await waker.browse("_ssh._tcp") { entries in
                Set(entries.filter { $0.event == .resolved }.map(\.ipVersion)) == [.v4, .v6]
            }
            let resolved = entries.filter { $0.event == .resolved }
            #expect(resolved.count == 2, "\(entries)")
            for entry in resolved {
                #expect(entry.interface == "eth0")
                #expect(entry.name == "sleeper SSH")
                #expect(entry.type == "_ssh._tcp")
                #expect(entry.domain == "local")
                #expect(entry.hostName == "sleeper.local")
                #expect(entry.port == 22)
                #expect(entry.txt == ["u=test"])
            }
            #expect(resolved.first { $0.ipVersion == .v4 }?.address == sleeperHost.ipv4, "\(entries)")
            #expect(resolved.first { $0.ipVersion == .v6 }?.address == sleeperHost.ipv6LinkLocal, "\(entries)")
            #expect(entries.contains { $0.event == .added && $0.name == "sleeper SSH" })

            let ipv4 = try await waker.resolveHostName("sleeper.local", version: .v4)
            #expect(ipv4 == AvahiResolution(name: "sleeper.local", address: sleeperHost.ipv4))
            let ipv6 = try await waker.resolveHostName("sleeper.local", version: .v6)
            #expect(ipv6 == AvahiResolution(name: "sleeper.local", address: sleeperHost.ipv6LinkLocal))
            let reverse = try await waker.resolveAddress(sleeperHost.ipv4)
            #expect(reverse == AvahiResolution(name: "sleeper.local", address: sleeperHost.ipv4))
        }
    }

    @Test func digGetsLegacyUnicastAnswersWithTheQueryID() async throws {
        try await Lab.withLab { lab in
            _ = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [Self.ssh])
            let sleeper = lab.host(.sleeper)

            let address = try await lab.dig(from: .waker, server: sleeper.ipv4, name: "sleeper.local", type: "A")
            #expect(address.answered, "\(address.command)")
            #expect(address.idMatched, "\(address.command)")
            #expect(address.query?.questions.first?.hasPrefix("sleeper.local.") == true)
            #expect(address.status == "NOERROR")
            #expect(address.flags.contains("qr") && address.flags.contains("aa"), "\(address.flags)")
            #expect(
                address.answers.contains {
                    $0.name == "sleeper.local." && $0.type == "A" && $0.data == sleeper.ipv4 && $0.recordClass == "IN"
                },
                "\(address.answers)"
            )
            // Legacy-unicast answers carry a TTL of at most 10 seconds.
            #expect(address.answers.allSatisfy { $0.ttl <= 10 }, "\(address.answers)")

            let browse = try await lab.dig(from: .waker, server: sleeper.ipv4, name: "_ssh._tcp.local", type: "PTR")
            #expect(browse.idMatched, "\(browse.command)")
            #expect(
                browse.answers.contains { $0.type == "PTR" && $0.data == "sleeper\\032SSH._ssh._tcp.local." },
                "\(browse.answers)"
            )

            // Over IPv6, query the ULA: avahi answers from its one published IPv6 address (the ULA), so dig's
            // connected socket would drop the answer to a query sent to the link-local address.
            let overIPv6 = try await lab.dig(from: .waker, server: sleeper.ula, name: "sleeper.local", type: "AAAA")
            #expect(overIPv6.idMatched, "\(overIPv6.command)")
            #expect(overIPv6.answers.contains { $0.type == "AAAA" && $0.data == sleeper.ula }, "\(overIPv6.answers)")

            // avahi stays silent about names it does not own: dig times out.
            let unknown = try await lab.dig(from: .waker, server: sleeper.ipv4, name: "nobody.local", type: "A")
            #expect(!unknown.answered && !unknown.errors.isEmpty, "\(unknown.command)")
        }
    }

    @Test func multicastQueriesGetAnswersFromTheSleeper() async throws {
        try await Lab.withLab { lab in
            _ = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [Self.ssh])
            let sleeper = lab.host(.sleeper)

            // avahi answers a QU question by multicast, and by unicast only when its response scheduler will not
            // take the record (it has just multicast it); either way an answer comes.
            let unicast = try await lab.multicastQuery(
                from: .waker,
                name: "sleeper.local",
                type: "A",
                unicastResponse: true,
                listen: .seconds(2),
                maxResponses: 50
            )
            // Wait for the response that answers the question: avahi also announces its reverse mappings unasked.
            let unicastAnswer = try #require(
                unicast.first { $0.source == sleeper.ipv4 && $0.answers("sleeper.local.", .a) }, "\(unicast)")
            #expect([lab.host(.waker).ipv4, "224.0.0.251"].contains(unicastAnswer.destination))
            #expect(unicastAnswer.answerCount >= 1 && unicastAnswer.contains(sleeper.ipv4Bytes), "\(unicastAnswer)")

            let multicast = try await lab.multicastQuery(
                from: .waker,
                name: "sleeper.local",
                type: "A",
                listen: .seconds(2),
                maxResponses: 50
            )
            let multicastAnswer = try #require(
                multicast.first { $0.source == sleeper.ipv4 && $0.answers("sleeper.local.", .a) }, "\(multicast)")
            #expect(multicastAnswer.isMulticast && multicastAnswer.sourcePort == 5353, "\(multicastAnswer)")
            #expect(multicastAnswer.flags & 0x8400 == 0x8400, "QR and AA: \(multicastAnswer)")
            #expect(multicastAnswer.contains(sleeper.ipv4Bytes))

            // One-shot from an ephemeral port: a unicast reply carrying the query's ID.
            let oneShot = try await lab.multicastQuery(
                from: .waker,
                name: "sleeper.local",
                type: "A",
                sourcePort: 0,
                id: 0x1234,
                listen: .seconds(2),
                maxResponses: 50
            )
            let oneShotAnswer = try #require(
                oneShot.first { $0.source == sleeper.ipv4 && $0.answers("sleeper.local.", .a) }, "\(oneShot)")
            #expect(oneShotAnswer.id == 0x1234 && !oneShotAnswer.isMulticast, "\(oneShotAnswer)")

            let overIPv6 = try await lab.multicastQuery(
                from: .waker,
                name: "sleeper.local",
                type: "AAAA",
                ipVersion: .v6,
                listen: .seconds(2),
                maxResponses: 50
            )
            // avahi sends from (and publishes) the interface's global address when it has one.
            let ipv6Answer = try #require(
                overIPv6.first { $0.source == sleeper.ula && $0.answers("sleeper.local.", .aaaa) }, "\(overIPv6)")
            #expect(ipv6Answer.destination == "ff02::fb")
            #expect(ipv6Answer.contains(sleeper.ulaBytes), "\(ipv6Answer)")
        }
    }

    @Test func suddenlyStoppedSleeperAnswersNothing() async throws {
        try await Lab.withLab { lab in
            let avahi = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [Self.ssh])
            let sleeper = lab.host(.sleeper)
            let before = try await lab.dig(from: .waker, server: sleeper.ipv4, name: "sleeper.local", type: "A")
            #expect(before.answered, "\(before.command)")

            await avahi.stop(graceful: false)
            #expect(!avahi.isRunning)
            #expect(!avahi.log.contains("exiting"), "SIGKILL leaves no time for a clean exit: \(avahi.log)")

            let after = try await lab.dig(from: .waker, server: sleeper.ipv4, name: "sleeper.local", type: "A")
            #expect(!after.answered, "\(after.command)")
            let multicast = try await lab.multicastQuery(from: .waker, name: "sleeper.local", type: "A")
            #expect(multicast.allSatisfy { $0.source != sleeper.ipv4 }, "\(multicast)")
        }
    }

    @Test func gracefulStopSendsGoodbyes() async throws {
        try await Lab.withLab { lab in
            async let sleeperStarted = lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [Self.ssh])
            let waker = try await lab.startAvahi(on: .waker, hostName: "waker")
            let sleeper = try await sleeperStarted
            let browser = try waker.startBrowsing("_ssh._tcp")
            _ = try await browser.waitForEntries { entries in
                entries.contains { $0.event == .resolved && $0.name == "sleeper SSH" }
            }

            await sleeper.stop(graceful: true)
            #expect(sleeper.log.contains("exiting"), "\(sleeper.log)")
            let entries = try await browser.waitForEntries { entries in
                Set(entries.filter { $0.event == .removed && $0.name == "sleeper SSH" }.map(\.ipVersion)) == [.v4, .v6]
            }
            #expect(entries.last?.event == .removed, "\(entries)")
            browser.stop()
        }
    }

    @Test func twoLabsAtOnceDoNotInterfere() async throws {
        try await Lab.withLab { first in
            try await Lab.withLab { second in
                #expect(first.prefix != second.prefix)
                // The same host and service names in both labs: any leak between them would be a name conflict.
                func service(_ mark: String) -> AvahiService {
                    AvahiService(name: "sleeper SSH", type: "_ssh._tcp", port: 22, txt: ["u=\(mark)"])
                }
                async let firstSleeper = first.startAvahi(on: .sleeper, hostName: "sleeper", services: [service("1")])
                async let secondSleeper = second.startAvahi(on: .sleeper, hostName: "sleeper", services: [service("2")])
                async let firstWaker = first.startAvahi(on: .waker, hostName: "waker")
                async let secondWaker = second.startAvahi(on: .waker, hostName: "waker")
                let sleepers = try await [firstSleeper, secondSleeper]
                let wakers = try await [firstWaker, secondWaker]

                for (waker, mark) in zip(wakers, ["1", "2"]) {
                    let entries = try await waker.browse("_ssh._tcp") { entries in
                        entries.filter { $0.event == .resolved }.count >= 2
                    }
                    let resolved = entries.filter { $0.event == .resolved }
                    #expect(resolved.allSatisfy { $0.txt == ["u=\(mark)"] }, "\(entries)")
                }
                for instance in sleepers + wakers {
                    #expect(instance.announcedHostName == "\(instance.hostName).local", "\(instance.log)")
                    #expect(!instance.log.localizedCaseInsensitiveContains("conflict"), "\(instance.log)")
                }
            }
        }
    }

    @Test func teardownLeavesNoDaemonsNamespacesOrMounts() async throws {
        let lab = try Lab.create()
        let sleeper = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [Self.ssh])
        let waker = try await lab.startAvahi(on: .waker, hostName: "waker")
        let pids = [sleeper.daemon.pid, sleeper.bus.pid, waker.daemon.pid, waker.bus.pid]
        let running = try processLines("avahi-daemon") + processLines("dbus-daemon")
        #expect(running.filter { $0.contains(lab.workDirectory) }.count == 4, "\(running)")
        // The private mounts stay inside the daemons' mount namespaces.
        #expect(!ownMounts().contains(lab.workDirectory))

        lab.teardown()
        for pid in pids {
            #expect(kill(pid, 0) != 0 && errno == ESRCH, "process \(pid) survived the teardown")
        }
        let left = try processLines("avahi-daemon") + processLines("dbus-daemon")
        #expect(left.filter { $0.contains(lab.workDirectory) }.isEmpty, "\(left)")
        let namespaces = try Lab.runInTestNamespace(["ip", "netns", "list"])
        #expect(!namespaces.stdout.contains(lab.prefix), "\(namespaces)")
        #expect(!FileManager.default.fileExists(atPath: lab.workDirectory))
        #expect(!ownMounts().contains(lab.workDirectory))
    }

    /// `pgrep -a <name>` lines: pid and command line of each process with that exact name.
    private func processLines(_ name: String) throws -> [String] {
        try Lab.runInTestNamespace(["pgrep", "-a", "-x", name]).stdout.split(separator: "\n").map(String.init)
    }

    private func ownMounts() -> String {
        (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
    }
}
