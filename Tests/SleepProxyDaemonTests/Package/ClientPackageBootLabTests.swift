import CaptureStream
import DNSWire
import Foundation
import Frames
import NetworkAddresses
import SleepProxyDaemon
import Synchronization
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The client's Debian package in a Debian 12 system booted under systemd, in the lab's sleeper host beside the
/// sleeper's avahi-daemon (the container shares its network namespace), with `sleepproxyd` in the proxy host:
/// installed, its unit enabled into sleep.target but not started; when sleep.target is started and stopped by hand,
/// as a suspend and resume do, it registers and returns. The machine itself never sleeps.
@Suite(
    .requiresLab(tools: ["avahi-daemon", "dbus-daemon", "dpkg-deb"]),
    .enabled(if: BootedSystem.unsupportedReason == nil, Comment(rawValue: BootedSystem.unsupportedReason ?? "")),
    .enabled(if: BootTestPackage.clientPath != nil, Comment(rawValue: BootTestPackage.clientMissing)))
struct ClientPackageBootLabTests {
    static func say(_ text: String) { print("client package boot: \(text)") }

    func unit(_ system: BootedSystem) async throws -> [String: String] {
        let shown = try await system.runChecked([
            "systemctl", "show", "sleepproxy-client", "-p", "ActiveState,SubState,Result,ExecMainStatus,UnitFileState",
        ])
        return Dictionary(
            shown.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let equals = line.firstIndex(of: "=") else { return nil }
                return (String(line[..<equals]), String(line[line.index(after: equals)...]))
            }, uniquingKeysWith: { first, _ in first })
    }

    /// The frames a capture delivered so far.
    final class Seen: Sendable {
        let frames = Mutex<[CapturedFrame]>([])
    }

    /// What the sleeper's host put on the link, as the proxy's interface saw it.
    struct Sent {
        /// The OWNER sequence of each registration (a DNS UPDATE to the proxy).
        var registrations: [UInt8] = []
        /// Each mDNS response that carries OWNER: its sequence, its records, and whether it went over IPv6.
        var announcements: [(sequence: UInt8, records: [DNSRecord], ipv6: Bool)] = []
        /// The address of each gratuitous ARP (broadcast, sender and target the same address) for `mac`.
        var gratuitousARP: [IPv4Address] = []
        /// The target of each unsolicited Neighbour Advertisement (to all nodes, Override, not Solicited) for `mac`.
        var unsolicitedNA: [IPv6Address] = []

        init(_ frames: [CapturedFrame], mac: MACAddress) {
            for frame in frames {
                guard let parsed = try? EthernetFrame(parsing: frame.bytes), parsed.header.source == mac else {
                    continue
                }
                if let arp = parsed.arp, arp.isGratuitous, arp.senderHardwareAddress == mac,
                    parsed.header.destination == .broadcast
                {
                    gratuitousARP.append(arp.senderProtocolAddress)
                } else if let advertisement = parsed.icmpv6?.neighborAdvertisement,
                    parsed.ipv6?.header.destination == IPv6Address("ff02::1"),
                    advertisement.flags.contains(.override), !advertisement.flags.contains(.solicited),
                    advertisement.targetLinkLayerAddress == mac
                {
                    unsolicitedNA.append(advertisement.target)
                } else if let udp = parsed.udp, let message = try? DNSMessage(decoding: udp.payload),
                    let owner = message.optRecords.first?.optData?.owner
                {
                    if message.flags.opcode == .update, udp.destinationPort == 5354 {
                        registrations.append(owner.sequence)
                    } else if message.flags.isResponse, udp.destinationPort == 5353 {
                        announcements.append((owner.sequence, message.answers, parsed.ipv6 != nil))
                    }
                }
            }
        }
    }

    func journal(_ system: BootedSystem) async throws -> String {
        try await system.runChecked(["journalctl", "-u", "sleepproxy-client", "--no-pager", "-o", "cat"]).stdout
    }

    // No time limit on the test: Swift Testing's would count the wait for a lab slot (two labs at a time on two
    // cores), which in a full run is most of it. Every step has a deadline of its own (the boot, each command in
    // the container, each wait), so a hang still fails.
    @Test
    func theUnitRegistersWhenStartedAndReturnsWhenStopped() async throws {
        let package = try #require(BootTestPackage.clientPath)
        try await BootedSystem.prepareRoot(repository: BootTestPackage.repository)
        try await Lab.withLab { lab in
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            _ = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: SleepClientLabTests.services)
            // What the container (in the sleeper's namespace) sends, from the wire: the proxy's interface.
            let sleeper = lab.host(.sleeper)
            let sleeperMAC = try #require(MACAddress(sleeper.macString))
            let wire = try lab.withNamespace(.proxy) { try CaptureStream(interface: "eth0") }
            defer { wire.close() }
            try wire.setFilter("ether src \(sleeper.macString)")
            let seen = Seen()
            let reader = Task { for await frame in wire.frames { seen.frames.withLock { $0.append(frame) } } }
            defer { reader.cancel() }
            func sent() -> Sent { Sent(seen.frames.withLock { $0 }, mac: sleeperMAC) }
            try await BootedSystem.withBooted(in: lab, role: .sleeper) { system in
                _ = try Lab.runInTestNamespace(["cp", package, system.shared + "/client.deb"])
                // No network in the container: the recommended avahi-daemon and ethtool are not fetched (the
                // sleeper's avahi-daemon runs beside it, in the same network namespace).
                try await system.runChecked(
                    [
                        "apt-get", "install", "-y", "--no-install-recommends",
                        BootedSystem.sharedMountPoint + "/client.deb",
                    ], timeout: .seconds(120))
                var state = try await unit(system)
                #expect(state["UnitFileState"] == "enabled", "\(state)")
                #expect(state["ActiveState"] == "inactive", "installing does not register: \(state)")
                let wants = try await system.runChecked(["systemctl", "list-dependencies", "--plain", "sleep.target"])
                #expect(wants.stdout.contains("sleepproxy-client.service"), "\(wants)")
                let order = try await system.runChecked([
                    "systemctl", "show", "-p", "Before,StopWhenUnneeded,RemainAfterExit", "sleepproxy-client",
                ])
                #expect(order.stdout.contains("sleep.target"), "\(order)")
                #expect(order.stdout.contains("StopWhenUnneeded=yes") && order.stdout.contains("RemainAfterExit=yes"))
                Self.say("installed with apt: \(state["UnitFileState"] ?? "") in sleep.target's wants, inactive")

                // The lab's interface is a veth: no Wake-on-LAN. With the default handling register refuses (exit
                // status 4, one error line); the unit counts that as started (SuccessExitStatus=) so that a stop
                // still runs `return`, and since nothing needs it, it is stopped at once.
                try await system.write("interfaces = [\"eth0\"]\n", to: "/etc/sleepproxy/client.toml")
                try await system.runChecked(["systemctl", "start", "sleepproxy-client"])
                state = try await eventually("the unit stopped again", within: .seconds(30)) {
                    let state = try await unit(system)
                    return state["ActiveState"] == "inactive" ? state : nil
                }
                #expect(state["Result"] == "success", "\(state)")
                let refusal = try await journal(system)
                #expect(refusal.contains("not registering eth0: eth0 has no Wake-on-LAN"), "\(refusal)")
                #expect(refusal.contains("nothing to return"), "\(refusal)")
                Self.say(
                    "with wake_on_lan = \"check\" on a veth: \(refusal.split(separator: "\n").first { $0.contains("not registering") } ?? "")"
                )

                // As on a virtual machine: the check is skipped. What a suspend does: something that needs
                // sleep.target starts (systemd-suspend.service is that; here a stand-in that only waits), which
                // starts this unit first and keeps it needed. Started alone, StopWhenUnneeded= would stop it
                // again at once.
                try await system.write(
                    "interfaces = [\"eth0\"]\nwake_on_lan = \"skip\"\n", to: "/etc/sleepproxy/client.toml")
                try await system.runChecked([
                    "systemd-run", "--unit=suspend-stand-in", "--property=Wants=sleep.target",
                    "--property=After=sleep.target", "/bin/sleep", "infinity",
                ])
                state = try await eventually("the unit active", within: .seconds(30)) {
                    let state = try await unit(system)
                    return state["ActiveState"] == "active" ? state : nil
                }
                #expect(state["SubState"] == "exited", "\(state)")
                let target = try await system.runChecked(["systemctl", "is-active", "sleep.target"])
                #expect(target.stdout.hasPrefix("active"), "\(target)")
                let registered = try await journal(system)
                #expect(
                    registered.contains("registered eth0 with \"20-30-50-73.1 Lab Proxy\" at 10.77.0.1 port 5354"),
                    "\(registered)")
                let held = try await OperationsLabTests().ctl(lab, ["hosts"])
                #expect(held.stdout.contains("sleeper.local"), "\(held)")
                let registration = try await eventually("the registration on the wire", within: .seconds(5)) {
                    sent().registrations.last
                }
                #expect(!daemon.stderr.contains("released"), "\(daemon.stderr)")
                Self.say(
                    "sleep.target started: the unit is active (exited); \(registered.split(separator: "\n").last(where: { $0.contains("registered") }) ?? "")"
                )

                // The resume: the stand-in ends, sleep.target is no longer needed and stops, and so does this unit,
                // whose stop runs `return`.
                try await system.runChecked(["systemctl", "stop", "suspend-stand-in"])
                _ = try await eventually("the unit stopped", within: .seconds(30)) {
                    try await unit(system)["ActiveState"] == "inactive" ? true : nil
                }
                let returned = try await journal(system)
                #expect(returned.contains("returned on eth0: announced"), "\(returned)")
                // On the wire, all sent before the unit stopped: the records twice, a second apart, to each family's
                // group, with the next sequence; each time, under the unit's sandbox (CAP_NET_RAW, AF_PACKET), a gratuitous ARP for the
                // IPv4 address and an unsolicited Neighbour Advertisement for each IPv6 one, the link-local too.
                let back = try await eventually("the return's frames at the proxy", within: .seconds(5)) {
                    let back = sent()
                    return back.announcements.count >= 4 && back.gratuitousARP.count >= 2
                        && back.unsolicitedNA.count >= 4 ? back : nil
                }
                for ipv6 in [false, true] {
                    #expect(
                        back.announcements.filter { $0.ipv6 == ipv6 }.map(\.sequence) == [
                            registration &+ 1, registration &+ 1,
                        ], "over IPv\(ipv6 ? 6 : 4)")
                }
                for announcement in back.announcements {
                    #expect(
                        announcement.records.contains {
                            $0.name == "sleeper.local." && $0.rdata == .a(IPv4Address(sleeper.ipv4)!)
                        }, "\(announcement.records)")
                }
                #expect(back.gratuitousARP == [IPv4Address(sleeper.ipv4)!, IPv4Address(sleeper.ipv4)!])
                #expect(
                    back.unsolicitedNA.sorted { $0.description < $1.description }
                        == [sleeper.ula, sleeper.ula, sleeper.ipv6LinkLocal, sleeper.ipv6LinkLocal].map {
                            IPv6Address($0)!
                        }.sorted { $0.description < $1.description }, "\(back.unsolicitedNA)")
                #expect(!returned.contains("cannot announce the addresses"), "\(returned)")
                #expect(!returned.contains("cannot read /proc/self/net/if_inet6"), "\(returned)")
                _ = try await eventually("the release", within: .seconds(2)) {
                    daemon.stderr.contains("released") ? true : nil
                }
                let after = try await OperationsLabTests().ctl(lab, ["hosts"])
                #expect(after.stdout.contains("no hosts held"), "\(after)")
                // The state directory belongs to the dynamic user, behind /var/lib/private.
                let sequence = try await system.runChecked(["cat", "/var/lib/sleepproxy-client/sequence"])
                Self.say(
                    "sleep.target stopped: \(returned.split(separator: "\n").last(where: { $0.contains("returned") }) ?? ""); released by the proxy; sequence now \(sequence.stdout.trimmingCharacters(in: .whitespacesAndNewlines))"
                )
            }
        }
    }
}
