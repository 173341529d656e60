import CaptureStream
import DNSWire
import Foundation
import Frames
import NetworkAddresses
import SleepProxyControl
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The flood benchmark's hostile mix from the waker (`FloodPlan`), shorter and slower, while a fourth host goes
/// about its business: it registers, resolves and wakes the sleeper during the flood, and afterwards the daemon
/// runs and holds every host it held.
@Suite(.requiresLab(tools: ["python3", "arping", "nc", "setpriv"]))
struct FloodLabTests {
    static let seconds = 10.0

    /// What the flood knows of held host `index` of `RegistrationDaemonLabTests.registration(index:id:)`.
    static func target(index: Int, registration: [UInt8]) -> FloodTarget {
        FloodTarget(
            hostLabels: ["host\(index)", "local"], instanceLabels: ["host\(index)", "_ssh", "_tcp", "local"],
            serviceLabels: ["_ssh", "_tcp", "local"], ipv4: "10.77.1.\(index % 250 + 1)", ipv6: nil,
            ownerMAC: RegistrationDaemonLabTests.mac(index).description, ownerSequence: 7, registration: registration)
    }

    @Test func aBystanderRegistersResolvesAndWakesThroughAFlood() async throws {
        try await Lab.withLab { lab in
            let client = try lab.addHost("client", number: 4)
            let operations = OperationsLabTests()
            let daemon = try await operations.start(lab, ["--interface", "eth0", "--log-level", "info"])
            defer { daemon.signal(SIGTERM) }
            let magic = try magicPackets(lab)
            defer { magic.close() }

            var targets: [FloodTarget] = []
            for index in 0..<4 {
                let (bytes, _) = try RegistrationDaemonLabTests.registration(index: index, id: UInt16(0x100 + index))
                try await sendRegistration(bytes, from: lab)
                targets.append(Self.target(index: index, registration: bytes))
            }
            try await MacSleeper.registerAndSleep(lab)
            let sleeper = lab.host(.sleeper)
            let sleeperInstance = ["Sleeper SSH", "_ssh", "_tcp", "local"]
            targets.append(
                FloodTarget(
                    hostLabels: ["Sleeper", "local"], instanceLabels: sleeperInstance,
                    serviceLabels: ["_ssh", "_tcp", "local"], ipv4: sleeper.ipv4, ipv6: nil,
                    ownerMAC: sleeper.macString, ownerSequence: Int(MacSleeper.sequence),
                    registration: try MacSleeper.registration(lab)))
            _ = try await eventually("the take-over of \(sleeper.ipv4)", within: .seconds(20)) {
                daemon.stderr.contains("took over \(sleeper.ipv4)") ? true : nil
            }

            let plan = FloodPlan(framesPerSecond: 1_500, seconds: Self.seconds, targets: targets)
            let flood = Task { try await lab.runFlood(plan) }
            let questions = targets.dropLast().map { FloodQuestion(labels: $0.hostLabels, type: 1) }
            let paced = Task { try await client.pacedQueries(questions, perSecond: 20, seconds: Self.seconds) }
            try await Task.sleep(for: .seconds(2))

            let proxy = lab.host(.proxy).ipv4
            let (newHost, _) = try RegistrationDaemonLabTests.registration(index: 40, id: 0x4040)
            let registration = try await client.register(newHost, to: proxy)
            #expect(registration.succeeded, "the registration from the client: \(registration)")
            let resolve = try await client.resolve(FloodQuestion(labels: sleeperInstance, type: 33), responder: proxy)
            #expect(resolve.succeeded, "the resolve from the client: \(resolve)")
            let sleeperMAC = try #require(MACAddress(sleeper.macString))
            let connection = Task { try await client.connect(to: sleeper.ipv4, port: 22) }
            // A capture that failed says so here, rather than passing for a missing wake; the test goes on to
            // collect the flood and the paced queries either way.
            await #expect(throws: Never.self, "a magic packet for the sleeper after the client's SYN") {
                _ = try await firstElement(of: magic.frames, within: .seconds(6), "a magic packet for the sleeper") {
                    (try? EthernetFrame(parsing: $0.bytes))?.magicPacket?.target == sleeperMAC
                }
            }
            _ = try await connection.value

            let report = try await flood.value
            let queries = try await paced.value
            #expect(report.sent >= Int(Double(plan.framesPerSecond) * Self.seconds * 0.8), "\(report)")
            #expect(queries.answered * 10 >= queries.sent * 8, "paced queries: \(queries.answered) of \(queries.sent)")
            #expect(!daemon.hasExited, "the daemon died: \(daemon.stderr.suffix(2_000))")

            let hosts = try await operations.ctl(lab, ["hosts", "--json"])
            #expect(hosts.status == 0, "\(hosts)")
            let held = Set(
                try ControlProtocol.decoder().decode([HostSummary].self, from: Data(hosts.stdout.utf8)).map(\.ownerMAC))
            let expected = Set(targets.map(\.ownerMAC) + [RegistrationDaemonLabTests.mac(40).description])
            #expect(held == expected, "held after the flood: \(held.sorted()); expected \(expected.sorted())")
        }
    }
}
