import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon among real avahi-daemons: what a Linux desktop browsing the network sees of a sleeping host,
/// an avahi-daemon on the proxy's own host, and a host that comes back on its own.
@Suite(.requiresLab(tools: ["avahi-daemon", "avahi-browse", "avahi-resolve", "dbus-daemon", "dig"]))
struct AvahiInteropLabTests {
    func startDaemon(_ lab: Lab) throws -> LabProcess {
        try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
    }

    @Test func aHeldHostIsBrowsedAndResolvedWithExactCase() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            try await MacSleeper.registerAndSleep(lab)
            let waker = try await lab.startAvahi(on: .waker, hostName: "waker")

            let entries = try await waker.browse("_ssh._tcp") { entries in
                entries.contains { $0.event == .resolved && $0.name == "Sleeper SSH" && $0.address == "10.77.0.2" }
            }
            let entry = try #require(entries.first { $0.event == .resolved && $0.address == "10.77.0.2" })
            #expect(entry.hostName == "Sleeper.local")
            #expect(entry.port == 22)
            #expect(entry.txt == ["u=test"])

            let host = try await waker.resolveHostName("sleeper.local", version: .v4)
            #expect(host?.address == "10.77.0.2")
            let reverse = try await waker.resolveAddress("10.77.0.2")
            #expect(reverse?.name == "Sleeper.local")

            // The proxy itself, under _sleep-proxy._udp, with its registration port, and the feature digit .1: it
            // offers TCP keepalive offload, which makes Macs prefer it (mDNS.c `ReorderSPSByFeature`).
            let proxies = try await waker.browse("_sleep-proxy._udp") { entries in
                entries.contains { $0.event == .resolved && $0.port == 5354 }
            }
            #expect(
                proxies.contains { $0.name == "20-30-50-73.1 Lab Proxy" && $0.address == "10.77.0.1" }, "\(proxies)")
        }
    }

    /// An avahi-daemon on the proxy's host keeps its names and its unicast port; held names are still answered.
    @Test func avahiOnTheProxyHostKeepsWorking() async throws {
        try await Lab.withLab { lab in
            let local = try await lab.startAvahi(on: .proxy, hostName: "proxyhost")
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            #expect(daemon.stderr.contains("another mDNS stack holds UDP port 5353"), "\(daemon.stderr)")
            try await MacSleeper.registerAndSleep(lab)

            // Avahi's own name, asked by unicast at the proxy host: avahi answers it.
            let own = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: "proxyhost.local", type: "A")
            #expect(own.answers.contains { $0.type == "A" && $0.data == "10.77.0.1" }, "\(own)")
            // A held name, asked the same way: avahi does not know it, the proxy answers through the capture.
            let held = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: "sleeper.local", type: "A")
            #expect(held.answers.contains { $0.type == "A" && $0.data == "10.77.0.2" }, "\(held)")
            #expect(held.idMatched)

            let waker = try await lab.startAvahi(on: .waker, hostName: "waker")
            let resolved = try await waker.resolveHostName("proxyhost.local", version: .v4)
            #expect(resolved?.address == "10.77.0.1")
            #expect(local.isRunning)
            #expect(!local.log.contains("conflict"), "\(local.log)")
        }
    }

    /// A Linux sleeper, registered by a third-party client, wakes by itself: it takes its addresses back and its
    /// avahi-daemon (which never sends OWNER) probes its names. The proxy lets go at once and silently, and the
    /// host keeps its names: no "sleeper-2", no "sleeper SSH #2".
    @Test func aReturningHostIsReleasedAndKeepsItsNames() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let service = AvahiSleeper.service
            let before = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [service])
            await before.stop(graceful: false)
            try await sendRegistration(try AvahiSleeper.registration(lab), from: lab)
            try lab.sleep(.sleeper)
            let asleep = try await lab.dig(
                from: .waker, server: lab.host(.proxy).ipv4, name: "sleeper.local", type: "A")
            #expect(asleep.answers.contains { $0.data == "10.77.0.2" }, "\(asleep)")

            try lab.wake(.sleeper)
            let after = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [service])
            #expect(after.announcedHostName == "sleeper.local", "\(after.log)")
            #expect(!after.log.contains("#2"), "\(after.log)")
            _ = try await eventually("the release in the daemon's log", within: .seconds(10)) {
                daemon.stderr.contains("released") ? true : nil
            }
            #expect(daemon.stderr.contains("from its own MAC 02:77:00:00:00:02"), "\(daemon.stderr)")
            // The proxy no longer answers for it: the host does, from its own address.
            let awake = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: "sleeper.local", type: "A")
            #expect(awake.answers.isEmpty, "\(awake)")
        }
    }
}
