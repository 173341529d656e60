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

/// A sleeper that runs Apple's own mDNS code (its mDNSCore, built for Linux) and never registers, declared by its
/// MAC alone: the proxy learns what Apple's core announces, answers it while the sleeper sleeps, wakes the
/// sleeper for a connection to its service's port, and lets go when it is back, without Apple's core ever
/// seeing a conflict over its names. The sleeper goes down in each of the ways Apple's code can: frozen with
/// nothing sent, the core told to sleep (the goodbyes to its shared records a Mac with no proxy sends), and
/// Apple's responder shut down.
@Suite(.requiresLab(tools: ["nc", "python3", "unshare", "hostname"]), .requiresMDNSPosix)
struct MDNSPosixLabTests {
    static let service = MDNSPosixService(name: "Sleeper's Mac", type: "_ssh._tcp", port: 22, txt: ["u=lab"])
    static let instance: DNSName = "Sleeper's Mac._ssh._tcp.local."

    /// How the sleeper's responder goes away before the sleeper sleeps.
    enum Departure {
        /// `mDNSResponderPosix` frozen where it is, as a suspend stops it: nothing sent. Thawed on the way back.
        case suspended
        /// `mDNSSleeperPosix`: Apple's core told to sleep (`mDNSCoreMachineSleep`), which with no proxy to
        /// register with says goodbye to its shared records (`SendSleepGoodbyes`), then frozen. Thawed and told
        /// to wake on the way back.
        case sleptByTheCore
        /// `mDNSResponderPosix` shut down (SIGINT), which sends no goodbyes. Started afresh on the way back.
        case shutDown
    }

    @Test func aSuspendedResponderIsAnsweredWokenAndLetGoWithoutARename() async throws {
        try await Self.sleepAndWake(.suspended)
    }

    @Test func aCoreThatSaidItsSleepGoodbyesIsAnsweredWokenAndLetGoWithoutARename() async throws {
        try await Self.sleepAndWake(.sleptByTheCore)
    }

    @Test func aResponderShutDownByAppleIsAnsweredWokenAndLetGoWithoutARename() async throws {
        try await Self.sleepAndWake(.shutDown)
    }

    static func sleepAndWake(_ departure: Departure) async throws {
        try await Lab.withLab { lab in
            let sleeper = lab.host(.sleeper)
            let proxy = lab.host(.proxy)
            let path = lab.workDirectory + "/sleepproxy.toml"
            try """
            [hosts.sleeper]
            mac = "\(sleeper.macString)"
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let daemon = try RegistrationDaemonLabTests().startDaemon(
                lab, state: lab.workDirectory + "/state", extraArguments: ["--config", path])
            defer { daemon.signal(SIGTERM) }
            let program: MDNSPosixProgram = departure == .sleptByTheCore ? .sleeper : .responder
            var responder = try await lab.startMDNSPosix(
                on: .sleeper, hostName: "sleeper", services: [service], program: program)
            // Awake, Apple's responder answers for its service itself.
            _ = try await eventually("Apple's responder answering for its service", within: .seconds(10)) {
                let answers = try await lab.multicastQuery(from: .waker, name: "_ssh._tcp.local", type: "PTR")
                return answers.contains { $0.answers("_ssh._tcp.local.", .ptr) && $0.source == sleeper.ipv4 }
                    ? true : nil
            }

            // What the sleeper sends on its way down, seen from the waker.
            let link = try lab.withNamespace(.waker) { try CaptureStream(interface: "eth0") }
            defer { link.close() }
            try link.setFilter("udp port 5353")
            switch departure {
            case .suspended:
                responder.freeze()
            case .sleptByTheCore:
                try await responder.sleep()
                responder.freeze()
            case .shutDown:
                let status = try await responder.stop(orderly: true)
                #expect(status == 0, "\(responder.log)")
            }
            let sent = try await framesBeforeMarker(link, Marker.udp(port: 5353), at: .waker, of: lab)
            let goodbyes = Self.goodbyes(in: sent, from: sleeper)
            print("mdnsposix_goodbyes(\(departure)): \(goodbyes.map { "\($0.name) \($0.type)" })")
            if departure == .sleptByTheCore {
                // The core says goodbye to its shared records, the service's PTR among them. (Records that ride
                // along in the same packets, its SRV, TXT and addresses unless it sent them a moment before, go
                // out with TTL 0 too.)
                #expect(goodbyes.contains { $0.rdata == .ptr(instance) }, "\(goodbyes)")
            } else {
                #expect(goodbyes.isEmpty, "\(departure): \(goodbyes)")
            }

            // It sleeps: taken over with what Apple's responder announced.
            try lab.sleep(.sleeper)
            try await daemon.waitUntilLogged("learned from its announcements", "the take-over", within: .seconds(40))

            // Browsing from the waker finds the service under its exact instance name, answered by the proxy, and
            // resolves it to the port and host Apple's responder gave.
            let browsed = try await lab.multicastQuery(from: .waker, name: "_ssh._tcp.local", type: "PTR")
            let pointers = Self.records(in: browsed.filter { $0.source == proxy.ipv4 })
            #expect(pointers.contains { $0.rdata == .ptr(instance) }, "browsing: \(browsed)")
            let resolved = try await lab.multicastQuery(
                from: .waker, name: "Sleeper's Mac._ssh._tcp.local", type: "SRV", sourcePort: 0)
            let srv = Self.records(in: resolved.filter { $0.source == proxy.ipv4 }).compactMap { record in
                if case .srv(let data) = record.rdata { data } else { nil }
            }
            #expect(srv.contains { $0.port == 22 && $0.target.caseInsensitiveEquals("sleeper.local.") }, "\(resolved)")

            // A connection to the learned port wakes it: the magic packet arrives at its NIC.
            let nic = try magicPackets(lab)
            defer { nic.close() }
            let client = try lab.spawn(.waker, ["nc", "-z", "-w", "40", sleeper.ipv4, "22"])
            try await expectMagicPacketForSleeper(lab, at: nic)
            try await daemon.waitUntilLogged(
                "port 22 (\(instance))", "the wake for the learned service", within: .seconds(5))

            // It wakes: addresses back, ssh listening, and its responder back (thawed, or started afresh). The
            // proxy lets go, the client's retransmitted SYN reaches the host, and Apple's responder, probing and
            // announcing again, meets no conflict: it keeps its names.
            let server = try lab.spawn(.sleeper, ["nc", "-l", "22"])
            defer { server.signal(SIGTERM) }
            try lab.wake(.sleeper)
            switch departure {
            case .suspended:
                responder.thaw()
            case .sleptByTheCore:
                responder.thaw()
                try await responder.wake()
            case .shutDown:
                responder = try await lab.startMDNSPosix(on: .sleeper, hostName: "sleeper", services: [service])
            }
            try await daemon.waitUntilLogged("declared host sleeper is back", "the release", within: .seconds(10))
            let status = try await eventually("the connection to the woken host", within: .seconds(30)) {
                client.hasExited ? client.wait(timeout: .seconds(1)) : nil
            }
            #expect(status == 0, "nc: \(client.stderr)")
            let again = try await eventually("Apple's core answering for its service again", within: .seconds(15)) {
                let answers = try await lab.multicastQuery(from: .waker, name: "_ssh._tcp.local", type: "PTR")
                let own = answers.filter { $0.answers("_ssh._tcp.local.", .ptr) && $0.source == sleeper.ipv4 }
                return Self.records(in: own).contains { $0.rdata == .ptr(instance) } ? answers : nil
            }
            #expect(!again.contains { $0.source == proxy.ipv4 }, "the proxy still answers: \(again)")
            #expect(responder.renames.isEmpty, "\(responder.renames)")
        }
    }

    /// The answer records of `responses`.
    static func records(in responses: [MDNSQueryResponse]) -> [DNSRecord] {
        responses.compactMap { try? DNSMessage(decoding: $0.bytes) }.flatMap(\.answers)
    }

    /// The records `host` said goodbye to (TTL 0) in `frames`.
    static func goodbyes(in frames: [CapturedFrame], from host: LabHost) -> [DNSRecord] {
        let mac = MACAddress(host.macString)
        return frames.compactMap { try? EthernetFrame(parsing: $0.bytes) }
            .filter { $0.header.source == mac }
            .compactMap { $0.udp.flatMap { try? DNSMessage(decoding: $0.payload) } }
            .flatMap(\.answers).filter { $0.ttl == 0 }
    }
}
