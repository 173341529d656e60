import CaptureStream
import DNSWire
import Foundation
import Frames
import NetworkAddresses
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Sleeping hosts that behave like real ones: they keep talking for a while after they register, and the proxy
/// must hold them through it; they come back in their own ways, and the proxy must let go then, silently.
@Suite(
    .requiresLab(tools: ["avahi-daemon", "avahi-browse", "avahi-resolve", "dbus-daemon", "dig", "arping", "nc"]))
struct SleepingHostLabTests {
    func startDaemon(_ lab: Lab) throws -> LabProcess {
        try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
    }

    /// While asleep: answered by the proxy, its address claimed, a SYN to another port wakes nothing, a SYN to
    /// its ssh port wakes it.
    /// Returns the connecting `nc`, which goes on sending its SYN for up to 40 s (again at about 1, 3, 7, 15 and
    /// 31 s).
    @discardableResult
    func expectHeldThenWokenBySSH(
        _ lab: Lab, daemon: LabProcess, nic: CaptureStream, name: String
    ) async throws -> LabProcess {
        let sleeper = lab.host(.sleeper)
        try await daemon.waitUntilLogged(
            "took over \(sleeper.ipv4)", "the take-over of \(sleeper.ipv4)", within: .seconds(20))
        #expect(!daemon.stderr.contains("released"), "\(daemon.stderr)")
        let answer = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: name, type: "A")
        #expect(answer.answers.contains { $0.type == "A" && $0.data == sleeper.ipv4 }, "\(answer)")
        let arping = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", sleeper.ipv4])
        #expect(arping.stdout.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(arping)")

        _ = try await lab.run(.waker, ["nc", "-z", "-w", "2", sleeper.ipv4, "8080"])
        #expect(!daemon.stderr.contains("waking"), "\(daemon.stderr)")

        let connecting = try lab.spawn(.waker, ["nc", "-z", "-w", "40", sleeper.ipv4, "22"])
        try await expectWoken(lab, daemon: daemon, nic: nic, by: .waker)
        return connecting
    }

    /// A magic packet for the sleeper arrives at its `nic`, and the wake's log line names a SYN from `client`.
    func expectWoken(_ lab: Lab, daemon: LabProcess, nic: CaptureStream, by client: Lab.Role) async throws {
        try await expectMagicPacketForSleeper(lab, at: nic)
        // The wake's log line follows its magic packets.
        try await daemon.waitUntilLogged(
            "TCP SYN from \(lab.host(client).ipv4):", "the wake's log line", within: .seconds(5))
    }

    /// A Linux host with avahi-daemon registers through a third-party client, and its avahi answers a resolve
    /// of its names right after (as it does for the client's own resolves). The proxy keeps it through that;
    /// once it sleeps it is answered for, claimed and woken. When it comes back its avahi probes its names: the
    /// proxy lets go at once, and the host keeps its names (no `sleeper-2`, no `#2`).
    @Test func anAvahiHostIsHeldThroughItsOwnAnswersAndReleasedOnItsProbe() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let nic = try magicPackets(lab)
            defer { nic.close() }
            let sleeper = lab.host(.sleeper)
            let avahi = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [AvahiSleeper.service])

            try await sendRegistration(try AvahiSleeper.registration(lab), from: lab)
            // A querier resolves the sleeper's names: its avahi answers, from its own MAC, without OWNER. Like a
            // real querier, it asks again (up to three times) when no answer came, which a loaded machine needs.
            var resolves: [MDNSQueryResponse] = []
            for _ in 0..<3 {
                resolves += try await lab.multicastQuery(
                    from: .waker, name: "sleeper.local", type: "A", listen: .seconds(1), maxResponses: 50)
                if resolves.contains(where: { $0.source == sleeper.ipv4 && $0.answers("sleeper.local.", .a) }) { break }
            }
            #expect(resolves.contains { $0.source == sleeper.ipv4 && $0.answers("sleeper.local.", .a) }, "\(resolves)")
            // The service too; the proxy, which answers it already, may be heard first (avahi then suppresses its
            // duplicate answer).
            let service = try await lab.multicastQuery(
                from: .waker, name: "sleeper SSH._ssh._tcp.local", type: "SRV", listen: .seconds(1), maxResponses: 50)
            #expect(service.contains { $0.answers("sleeper SSH._ssh._tcp.local.", .srv) }, "\(service)")
            #expect(!daemon.stderr.contains("released"), "the host's own answers are no return: \(daemon.stderr)")

            // It suspends: avahi gets no chance to say goodbye, the addresses go.
            await avahi.stop(graceful: false)
            try lab.sleep(.sleeper)
            try await expectHeldThenWokenBySSH(lab, daemon: daemon, nic: nic, name: "sleeper.local")

            // It comes back: its addresses, then its avahi, which probes for its names.
            try lab.wake(.sleeper)
            let after = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: [AvahiSleeper.service])
            try await daemon.waitUntilLogged("released", "the release")
            #expect(daemon.stderr.contains("probed for its name"), "\(daemon.stderr)")
            #expect(after.announcedHostName == "sleeper.local", "\(after.log)")
            #expect(!after.log.contains("#2") && !after.log.contains("sleeper-2"), "\(after.log)")
            // The host answers for itself now, and the proxy stays out of it.
            let awake = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: "sleeper.local", type: "A")
            #expect(awake.answers.isEmpty, "\(awake)")
        }
    }

    /// A Mac re-announces with the same OWNER sequence while it goes to sleep: held. It wakes with the next
    /// sequence: released within that one packet, with no goodbye on the wire and no more magic packets.
    @Test func aMacIsHeldThroughItsReannouncementsAndReleasedSilentlyOnItsNextSequence() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let nic = try magicPackets(lab)
            defer { nic.close() }
            try await MacSleeper.registerAndSleep(lab)
            try await expectHeldThenWokenBySSH(lab, daemon: daemon, nic: nic, name: "sleeper.local")

            // The mDNS the waker sees from now on (the proxy's is told apart by its source MAC).
            let proxyMAC = try #require(MACAddress(lab.host(.proxy).macString))
            let wire = try lab.withNamespace(.waker) { try CaptureStream(interface: "eth0") }
            defer { wire.close() }
            try wire.setFilter("udp port 5353")

            try await MacSleeper.wake(lab)
            try await daemon.waitUntilLogged("released", "the release", within: .seconds(5))
            #expect(daemon.stderr.contains("OWNER seq 4 (held 3)"), "\(daemon.stderr)")
            // No magic packet in the 5 s after the release.
            let laterMagic = try magicPackets(lab)
            defer { laterMagic.close() }
            let magic = try await framesBeforeMarker(
                laterMagic, Marker.wakeOnLAN, at: .sleeper, of: lab, after: .seconds(5))
            #expect(magic.isEmpty, "\(magic.count) magic packets after the release")
            // No goodbye for the host's records (its own announcements keep caches right).
            let multicast = try await framesBeforeMarker(wire, Marker.udp(port: 5353), at: .waker, of: lab)
            let goodbyes = multicast.compactMap { try? EthernetFrame(parsing: $0.bytes) }.filter { frame in
                guard frame.header.source == proxyMAC, let payload = frame.udp?.payload,
                    let message = try? DNSMessage(decoding: payload)
                else { return false }
                return message.answers.contains { $0.ttl == 0 && $0.name.caseInsensitiveEquals("sleeper.local.") }
            }
            #expect(goodbyes.isEmpty, "\(goodbyes.count) goodbyes from the proxy")
        }
    }

    /// The proxy's own host is a client like any other: its ssh to a sleeping host wakes it. A datagram to
    /// Apple Remote Desktop's port does not (consoles poll it constantly), even with ARD registered.
    @Test func theProxysOwnHostWakesASleeperButARemoteDesktopPollDoesNot() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let nic = try magicPackets(lab)
            defer { nic.close() }
            let ard = try DNSName(labels: ["Sleeper", "_net-assistant", "_udp", "local"])
            try await MacSleeper.registerSleepAndWaitForTakeOver(
                lab, by: daemon,
                extra: [
                    DNSRecord(
                        name: ard, ttl: 120, cacheFlush: true,
                        rdata: .srv(SRVData(port: 3283, target: "Sleeper.local.")))
                ])
            let sleeper = lab.host(.sleeper)

            // The proxy host's neighbour entry from the registration exchange has aged out: its kernel asks again.
            _ = try await lab.run(.proxy, ["ip", "neigh", "flush", "dev", "eth0"])
            _ = try await lab.run(.proxy, ["sh", "-c", "echo poll | nc -u -w 1 \(sleeper.ipv4) 3283"])
            #expect(!daemon.stderr.contains("waking"), "\(daemon.stderr)")

            // A program on the proxy's host resolving a held name (a one-shot query, as a browser's resolver
            // sends) is answered like anyone's.
            let resolved = try await lab.multicastQuery(
                from: .proxy, name: "sleeper.local", type: "A", sourcePort: 0, id: 0x0077, listen: .seconds(2),
                maxResponses: 50)
            #expect(resolved.contains { $0.id == 0x0077 && $0.answers("sleeper.local.", .a) }, "\(resolved)")

            _ = try lab.spawn(.proxy, ["nc", "-z", "-w", "10", sleeper.ipv4, "22"])
            try await expectWoken(lab, daemon: daemon, nic: nic, by: .proxy)
        }
    }
}
