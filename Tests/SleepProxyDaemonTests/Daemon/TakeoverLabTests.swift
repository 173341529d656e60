import DNSWire
import Foundation
import Frames
import NetworkAddresses
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
            let nic = try lab.withNamespace(.sleeper) { try PacketCapture(interface: "eth0") }
            defer { nic.close() }
            try nic.setFilter("ether proto 0x0842")

            try ResponderLabTests.registerAndSleep(lab)
            _ = try await eventually("the take-over of \(sleeper.ipv4)", within: .seconds(15)) {
                daemon.stderr.contains("took over \(sleeper.ipv4)") ? true : nil
            }
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
            #expect(daemon.stderr.contains("TCP SYN from 10.77.0.3:"), "\(daemon.stderr)")

            // The host wakes: its addresses back, ssh listening, a gratuitous ARP. The proxy lets go, and the
            // client's next retransmitted SYN reaches the host itself.
            try lab.wake(.sleeper)
            let server = try lab.spawn(.sleeper, ["nc", "-l", "22"])
            defer { server.signal(SIGTERM) }
            _ = try await lab.run(.sleeper, ["arping", "-U", "-c", "2", "-I", "eth0", sleeper.ipv4])
            _ = try await eventually("the release", within: .seconds(10)) {
                daemon.stderr.contains("released") ? true : nil
            }
            let status = try await eventually("the connection to the woken host", within: .seconds(30)) {
                client.hasExited ? client.wait(timeout: .seconds(1)) : nil
            }
            #expect(status == 0, "nc: \(client.stderr)")
        }
    }
}
