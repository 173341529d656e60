import CaptureStream
import DNSWire
import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import NetworkIO
import SleepProxyCore
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The whole story on real interfaces: a host registers and falls asleep, the proxy takes its address, a
/// connection to one of its services wakes it with a magic packet, and once it is back the connection reaches it.
@Suite(.requiresLab(tools: ["arping", "nc"]))
struct TakeoverLabTests {
    @Test func sleepTakeOverWakeAndReturn() async throws {
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            let sleeper = lab.host(.sleeper)
            let proxyMAC = try #require(MACAddress(lab.host(.proxy).macString))
            let sleeperMAC = try #require(MACAddress(sleeper.macString))

            // What arrives at the sleeping NIC.
            let nic = try magicPackets(lab)
            defer { nic.close() }

            try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon)
            // After the announcements, asking for the sleeper's address gets the proxy's MAC.
            let arping = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", sleeper.ipv4])
            #expect(arping.stdout.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(arping)")

            // A port the host did not register wakes nothing.
            _ = try await lab.run(.waker, ["nc", "-z", "-w", "2", sleeper.ipv4, "8080"])
            #expect(!daemon.stderr.contains("waking"), "\(daemon.stderr)")

            // ssh, which it did register, wakes it: the magic packet arrives at its NIC.
            let client = try lab.spawn(.waker, ["nc", "-z", "-w", "40", sleeper.ipv4, "22"])
            let frame = try await firstElement(of: nic.frames, within: .seconds(10), "a magic packet") { _ in true }
            let magic = try EthernetFrame(parsing: frame.bytes)
            #expect(magic.header.source == proxyMAC)
            #expect(magic.header.destination == sleeperMAC)
            #expect(magic.magicPacket?.target == sleeperMAC)
            // The wake's log line follows its magic packets.
            try await daemon.waitUntilLogged("TCP SYN from 10.77.0.3:", "the wake's log line", within: .seconds(5))

            // The host wakes as a Mac does: its addresses back, ssh listening, a gratuitous ARP, then its
            // announcement with OWNER and the next sequence number. The proxy lets go at once and silently, and
            // the client's next retransmitted SYN reaches the host itself.
            let server = try lab.spawn(.sleeper, ["nc", "-l", "22"])
            defer { server.signal(SIGTERM) }
            try await MacSleeper.wake(lab)
            try await daemon.waitUntilLogged("released", "the release")
            #expect(daemon.stderr.contains("OWNER seq 4 (held 3)"), "\(daemon.stderr)")
            let status = try await eventually("the connection to the woken host", within: .seconds(30)) {
                client.hasExited ? client.wait(timeout: .seconds(1)) : nil
            }
            #expect(status == 0, "nc: \(client.stderr)")
        }
    }

    /// A phone app's Wake-on-LAN: a magic packet for the sleeper sent to its address on UDP port 9, as apps send
    /// it when they cannot broadcast. The address is the proxy's while the host sleeps; the proxy wakes the host
    /// with magic packets of its own.
    @Test func aMagicPacketToAHeldAddressWakesItsHost() async throws {
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            let sleeper = lab.host(.sleeper)
            let waker = lab.host(.waker)
            let proxyMAC = try #require(MACAddress(lab.host(.proxy).macString))
            let sleeperMAC = try #require(MACAddress(sleeper.macString))
            let nic = try magicPackets(lab)
            defer { nic.close() }

            try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon)
            let app = try lab.withNamespace(.waker) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
            defer { app.close() }
            try app.send(
                MagicPacket(target: sleeperMAC).bytes, to: Endpoint(address: try ip(sleeper.ipv4), port: 9),
                scopeID: 0, from: try ip(waker.ipv4), interfaceIndex: 0)

            let frame = try await firstElement(of: nic.frames, within: .seconds(10), "the proxy's magic packet") { _ in
                true
            }
            let magic = try EthernetFrame(parsing: frame.bytes)
            #expect(magic.header.source == proxyMAC && magic.header.destination == sleeperMAC)
            #expect(magic.magicPacket?.target == sleeperMAC)
            try await daemon.waitUntilLogged(
                "magic packet from \(waker.ipv4):", "the wake's log line", within: .seconds(5))
        }
    }

    /// Claiming lazily (`[takeover] claim = "lazy"`), the proxy sends no gratuitous ARP for the sleeper's
    /// address, through the whole time its announcements would go out, and still answers a neighbour who asks.
    @Test func aLazyClaimAnnouncesNothingAndAnswersRequests() async throws {
        try await Lab.withLab { lab in
            let config = lab.workDirectory + "/sleepproxy.toml"
            try "[takeover]\nclaim = \"lazy\"\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try RegistrationDaemonLabTests().startDaemon(
                lab, state: lab.workDirectory + "/state", extraArguments: ["--config", config])
            defer { daemon.signal(SIGTERM) }
            let sleeper = lab.host(.sleeper)
            let proxyMAC = try #require(MACAddress(lab.host(.proxy).macString))
            let sleeperIPv4 = try #require(IPv4Address(sleeper.ipv4))
            // Every ARP frame the waker's NIC sees.
            let wire = try lab.withNamespace(.waker) { try CaptureStream(interface: "eth0") }
            defer { wire.close() }
            try wire.setFilter("arp")

            try await MacSleeper.registerAndSleep(lab)
            try await daemon.waitUntilLogged(
                "took over \(sleeper.ipv4) (answering requests only)", "the lazy take-over of \(sleeper.ipv4)",
                within: .seconds(15))
            // Announcing, the last of four gratuitous ARPs would go out 7 s after the first.
            try await Task.sleep(for: .seconds(8))
            let arping = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", sleeper.ipv4])
            #expect(arping.stdout.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(arping)")

            // Everything up to the proxy's answer to that request: probes, the request, no announcement.
            let seen = try await elements(of: wire.frames, "the proxy's ARP reply for the sleeper") { frame in
                guard let parsed = try? EthernetFrame(parsing: frame.bytes), let arp = parsed.arp else { return false }
                return arp.operation == .reply && arp.senderHardwareAddress == proxyMAC
                    && arp.senderProtocolAddress == sleeperIPv4
            }
            let announcements = seen.compactMap { try? EthernetFrame(parsing: $0.bytes) }.filter {
                $0.header.source == proxyMAC && $0.arp?.isGratuitous == true
            }
            #expect(announcements.isEmpty, "\(announcements.count) gratuitous ARPs from the proxy")
            #expect(!daemon.stderr.contains("took over \(sleeper.ipv4)\n"), "\(daemon.stderr)")
        }
    }

    /// A forwarding kernel would pass the SYNs meant for a sleeper on: the daemon names the setting at start.
    @Test func forwardingIsWarnedAbout() async throws {
        try await Lab.withLab { lab in
            let set = try await lab.run(.proxy, ["sysctl", "-w", "net.ipv4.ip_forward=1"])
            #expect(set.succeeded, "\(set)")
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            #expect(daemon.stderr.contains("net.ipv4.ip_forward is 1"), "\(daemon.stderr)")
            #expect(daemon.stderr.contains("set net.ipv4.ip_forward=0"))
            #expect(!daemon.stderr.contains("proxy_arp is"))
        }
    }

    /// Configured to, the daemon wakes every held host when it stops; otherwise it keeps their leases.
    @Test func wakeEveryHostOnExit() async throws {
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(
                lab, state: lab.workDirectory + "/state", extraArguments: ["--wake-all-on-exit"])
            let nic = try magicPackets(lab)
            defer { nic.close() }
            try await MacSleeper.registerAndSleep(lab)
            daemon.signal(SIGTERM)
            #expect(daemon.wait(timeout: .seconds(5)) == 0)
            try await expectMagicPacketForSleeper(lab, at: nic, within: .seconds(5), "a magic packet at exit")
            #expect(daemon.stderr.contains("woke 1 held hosts"), "\(daemon.stderr)")
            #expect(daemon.stderr.contains("capture statistics on eth0: received"), "\(daemon.stderr)")
        }
    }

    /// The proxy's own host talking to a sleeping host is pointed at the host's real NIC, not answered by the
    /// proxy; the entry goes when the host is released.
    @Test func ourOwnHostGetsANeighbourEntry() async throws {
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            let sleeper = lab.host(.sleeper)
            try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon)
            // The proxy's host learnt the sleeper's MAC while it was awake (the registration's reply); that entry
            // has aged out by the time anyone there talks to the sleeper, so its kernel asks again.
            _ = try await lab.run(.proxy, ["ip", "neigh", "flush", "dev", "eth0"])
            _ = try await lab.run(.proxy, ["ping", "-c", "1", "-W", "1", sleeper.ipv4])
            let entry = try await eventually("the neighbour entry", within: .seconds(5)) {
                let neigh = try await lab.run(.proxy, ["ip", "neigh", "show", sleeper.ipv4, "dev", "eth0"])
                return neigh.stdout.contains("PERMANENT") ? neigh.stdout : nil
            }
            #expect(entry.lowercased().contains(sleeper.macString.lowercased()), "\(entry)")
            // The host comes back: released, and the entry is gone.
            try await MacSleeper.wake(lab)
            try await daemon.waitUntilLogged("released", "the release")
            let after = try await lab.run(.proxy, ["ip", "neigh", "show", sleeper.ipv4, "dev", "eth0"])
            #expect(!after.stdout.contains("PERMANENT"), "\(after.stdout)")
        }
    }

    /// IPv6 too: the proxy claims the sleeper's ULA with Neighbour Discovery, so the waker's neighbour entry for
    /// it points at the proxy.
    @Test func ipv6AddressesAreTakenOverWithNeighbourDiscovery() async throws {
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            let sleeper = lab.host(.sleeper)
            try await Self.registerULAAndSleep(lab, daemon)
            // The waker solicits the address (a ping makes it) and learns the proxy's MAC.
            _ = try await lab.run(.waker, ["ping", "-6", "-c", "1", "-W", "2", sleeper.ula])
            let neighbour = try await eventually("the waker's neighbour entry", within: .seconds(5)) {
                let entry = try await lab.run(.waker, ["ip", "-6", "neigh", "show", sleeper.ula, "dev", "eth0"])
                return entry.stdout.contains("lladdr") ? entry.stdout : nil
            }
            #expect(neighbour.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(neighbour)")
            // A ping is no reason to wake anyone.
            #expect(!daemon.stderr.contains("waking"), "\(daemon.stderr)")
        }
    }

    /// A switch with MLD snooping forwards a solicited-node group's frames only to the ports that reported it. The
    /// lab's bridge becomes such a switch (snooping, its own querier with short timers, no flooding of unreported
    /// multicast to the proxy's port), with an MLDv1 or an MLDv2 querier; the sleeper leaves its groups as it
    /// sleeps. The proxy's reports, and its answers to the bridge's queries, keep the group of the held address on
    /// the proxy's port past several membership intervals, and so the waker's solicitation reaches the proxy.
    @Test(arguments: [1, 2])
    func aSnoopingSwitchForwardsSolicitationsForAHeldAddressToTheProxy(mldVersion: Int) async throws {
        try await Lab.withLab { lab in
            let bridge = lab.bridgeNamespace
            for command in [
                ["ip", "-n", bridge, "address", "add", "fe80::b0/64", "dev", "br0", "nodad"],
                [
                    "ip", "-n", bridge, "link", "set", "br0", "type", "bridge", "mcast_snooping", "1",
                    "mcast_querier", "1", "mcast_mld_version", String(mldVersion), "mcast_query_interval", "200",
                    "mcast_query_response_interval", "100", "mcast_membership_interval", "500",
                    "mcast_startup_query_interval", "100",
                ],
                ["bridge", "-n", bridge, "link", "set", "dev", "p-proxy", "mcast_flood", "off"],
            ] {
                let result = try Lab.runInTestNamespace(command, timeout: .seconds(10))
                try #require(result.succeeded, "\(command.joined(separator: " ")): \(result)")
            }
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            let sleeper = lab.host(.sleeper)
            let group = try #require(IPv6Address(sleeper.ula)).solicitedNodeGroup
            try await Self.registerULAAndSleep(lab, daemon)

            // The bridge learns the group on the proxy's port from the proxy's report ...
            func ports() async throws -> Set<String> {
                let result = try Lab.runInTestNamespace(["bridge", "-n", bridge, "mdb", "show"], timeout: .seconds(5))
                guard result.succeeded else { throw TestFailure("bridge mdb show: \(result)") }
                // `dev br0 port p-proxy grp ff02::1:ff00:2 temp`
                return Set(
                    result.stdout.split(separator: "\n").compactMap { line in
                        let fields = line.split(whereSeparator: \.isWhitespace).map(String.init)
                        guard let port = fields.firstIndex(of: "port"), let grp = fields.firstIndex(of: "grp"),
                            port + 1 < fields.count, grp + 1 < fields.count,
                            IPv6Address(fields[grp + 1]) == group
                        else { return nil }
                        return fields[port + 1]
                    })
            }
            _ = try await eventually("the bridge to list \(group) on p-proxy", within: .seconds(10)) {
                try await ports().contains("p-proxy") ? true : nil
            }
            // ... and keeps it there through three membership intervals (5 s), only because the proxy answers the
            // queries (every 2 s); the sleeper's entry, if it had one, times out.
            let clock = ContinuousClock()
            let until = clock.now + .seconds(15)
            while clock.now < until {
                let now = try await ports()
                #expect(now.contains("p-proxy"), "the bridge dropped \(group) from the proxy's port: \(now)")
                if !now.contains("p-proxy") { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(try await ports().contains("p-sleeper") == false)

            // The waker solicits the address; only the proxy's port gets the solicitation, and the proxy answers.
            _ = try await lab.run(.waker, ["ping", "-6", "-c", "1", "-W", "2", sleeper.ula])
            let neighbour = try await eventually("the waker's neighbour entry", within: .seconds(5)) {
                let entry = try await lab.run(.waker, ["ip", "-6", "neigh", "show", sleeper.ula, "dev", "eth0"])
                return entry.stdout.contains("lladdr") ? entry.stdout : nil
            }
            #expect(neighbour.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(neighbour)")
        }
    }

    /// The sleeper registers its ULA's reverse mapping along with its name, goes to sleep, and the proxy takes the
    /// ULA over.
    static func registerULAAndSleep(_ lab: Lab, _ daemon: LabProcess) async throws {
        let sleeper = lab.host(.sleeper)
        let ula = try #require(IPv6Address(sleeper.ula))
        let client = try lab.withNamespace(.sleeper) {
            try DatagramSocket(family: .ipv4, interface: "eth0", port: 0)
        }
        defer { client.close() }
        let host: DNSName = "Sleeper.local."
        let records: [DNSRecord] = [
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(ula)),
            DNSRecord(name: ReverseMapping.name(of: .v6(ula)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
        ]
        let mac = try #require(MACAddress(sleeper.macString))
        let bytes = ClientMessage.update(
            id: 0x6666, records: records, owner: OwnerOption(sequence: 1, primaryMAC: mac))
        try client.send(
            bytes, to: Endpoint(address: try #require(IPAddress(lab.host(.proxy).ipv4)), port: 5354), scopeID: 0,
            from: try ip(sleeper.ipv4), interfaceIndex: 0)
        _ = try await nextDatagram(from: client, within: .seconds(5))
        try lab.sleep(.sleeper)
        try await daemon.waitUntilLogged(
            "took over \(sleeper.ula)", "the take-over of \(sleeper.ula)", within: .seconds(15))
    }
}
