import Foundation
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `sleepproxy-client` on a Linux host among real peers: its avahi-daemon publishes its services, the client
/// learns them from the wire and registers with `sleepproxyd`, the host sleeps, a Linux desktop browses and
/// connects, the proxy wakes it, and after `return` the proxy lets go at once while the host keeps its names.
@Suite(
    .requiresLab(tools: ["avahi-daemon", "avahi-browse", "avahi-resolve", "dbus-daemon", "dig", "arping", "nc"]))
struct SleepClientLabTests {
    static let services = [
        AvahiService(name: "sleeper SSH", type: "_ssh._tcp", port: 22),
        AvahiService(name: "sleeper files", type: "_smb._tcp", port: 445),
    ]

    static func clientPath() throws -> String {
        URL(fileURLWithPath: try RegistrationDaemonLabTests.daemonPath()).deletingLastPathComponent()
            .appendingPathComponent("sleepproxy-client").path
    }

    /// Runs the client in `role`'s namespace with the lab's options (no Wake-on-LAN on a veth).
    static func client(
        _ lab: Lab, _ command: String, on role: Lab.Role = .sleeper, _ more: [String] = []
    ) async throws -> CommandResult {
        try await lab.run(role, try arguments(lab, command, on: role, more), timeout: .seconds(30))
    }

    static func arguments(
        _ lab: Lab, _ command: String, on role: Lab.Role = .sleeper, _ more: [String] = []
    ) throws -> [String] {
        [
            try clientPath(), command, "--interface", "eth0", "--skip-wake-on-lan-check", "--state-directory",
            stateDirectory(lab, role), "--config", lab.workDirectory + "/client.toml",
        ] + more
    }

    static func stateDirectory(_ lab: Lab, _ role: Lab.Role) -> String {
        lab.workDirectory + "/client-state-\(role.rawValue)"
    }

    /// The sequence number the client keeps.
    static func sequence(_ lab: Lab, _ role: Lab.Role = .sleeper) throws -> UInt8 {
        let text = try String(contentsOfFile: stateDirectory(lab, role) + "/sequence", encoding: .utf8)
        return try #require(UInt8(text.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    static func writeConfig(_ lab: Lab, _ text: String = "") throws {
        try text.write(toFile: lab.workDirectory + "/client.toml", atomically: true, encoding: .utf8)
    }

    @Test func aLinuxHostRegistersSleepsIsWokenAndReturns() async throws {
        try await Lab.withLab { lab in
            try Self.writeConfig(lab)
            let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            let nic = try SleepingHostLabTests().magicPackets(lab)
            defer { nic.close() }
            let sleeper = lab.host(.sleeper)
            let avahi = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: Self.services)

            let status = try await Self.client(lab, "status")
            print("sleepproxy-client status:\n\(status.stdout)\(status.stderr)")
            #expect(status.status == 0, "\(status)")
            #expect(status.stdout.contains("1. 20-30-50-73.1 Lab Proxy"), "\(status)")
            #expect(status.stdout.contains("sleeper SSH._ssh._tcp.local."), "\(status)")

            let register = try await Self.client(lab, "register")
            print("sleepproxy-client register:\n\(register.stderr)")
            #expect(register.status == 0, "\(register)")
            #expect(
                register.stderr.contains(
                    "registered eth0 with \"20-30-50-73.1 Lab Proxy\" at \(lab.host(.proxy).ipv4) port 5354 for 7200 s"),
                "\(register)")
            #expect(register.stderr.contains("not checked"), "the skipped check is logged: \(register)")
            let sequence = try Self.sequence(lab)
            #expect(register.stderr.contains("sequence \(sequence),"), "\(register)")

            // Everything the host's avahi answered is held: both services, the name, the address.
            let hosts = try await OperationsLabTests().ctl(lab, ["hosts"])
            print("sleepproxyctl hosts:\n\(hosts.stdout)")
            #expect(hosts.stdout.contains("sleeper.local"), "\(hosts)")
            let shown = try await OperationsLabTests().ctl(lab, ["show", "sleeper.local", "--json"])
            for name in [
                "sleeper SSH._ssh._tcp.local.", "sleeper files._smb._tcp.local.", "_services._dns-sd._udp.local.",
            ] {
                #expect(shown.stdout.contains(name), "\(name): \(shown)")
            }
            #expect(shown.stdout.contains("2.0.77.10.in-addr.arpa."), "\(shown)")

            // It suspends: avahi has no chance to say goodbye, the addresses go.
            await avahi.stop(graceful: false)
            try lab.sleep(.sleeper)

            let waker = try await lab.startAvahi(on: .waker, hostName: "waker")
            for type in ["_ssh._tcp", "_smb._tcp"] {
                let entries = try await waker.browse(type) { entries in
                    entries.contains { $0.event == .resolved && $0.address == sleeper.ipv4 }
                }
                #expect(entries.contains { $0.event == .resolved && $0.hostName == "sleeper.local" }, "\(entries)")
            }
            try await SleepingHostLabTests().expectHeldThenWokenBySSH(
                lab, daemon: daemon, nic: nic, name: "sleeper.local")

            // It wakes: its addresses come back and the unit's stop runs `return`, whose announcement carries the
            // next sequence number. The proxy lets go within a second, on that alone.
            try lab.wake(.sleeper)
            let clock = ContinuousClock()
            let started = clock.now
            let returning = try lab.spawn(.sleeper, try Self.arguments(lab, "return"))
            let released = try await eventually("the release", within: .seconds(1)) {
                daemon.stderr.contains("released") ? clock.now : nil
            }
            print("release: \(started.duration(to: released)) after return started")
            #expect(returning.wait(timeout: .seconds(10)) == 0, "\(returning.stderr)")
            print("sleepproxy-client return:\n\(returning.stderr)")
            #expect(
                returning.stderr.contains(
                    "returned on eth0: announced 12 records with sequence \(sequence &+ 1); \"20-30-50-73.1 Lab Proxy\""
                ),
                "\(returning.stderr)")
            #expect(daemon.stderr.contains("OWNER seq \(sequence &+ 1) (held \(sequence))"), "\(daemon.stderr)")
            // Its avahi-daemon (back from the suspend) keeps its names: the announcement was its own records.
            let after = try await lab.startAvahi(on: .sleeper, hostName: "sleeper", services: Self.services)
            let events = try await OperationsLabTests().ctl(lab, ["events"])
            print("sleepproxyctl events:\n\(events.stdout)")
            #expect(!after.log.contains("#2") && !after.log.contains("sleeper-2"), "\(after.log)")
            #expect(!after.log.lowercased().contains("conflict"), "\(after.log)")
            let awake = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: "sleeper.local", type: "A")
            #expect(awake.answers.isEmpty, "\(awake)")
        }
    }
}
