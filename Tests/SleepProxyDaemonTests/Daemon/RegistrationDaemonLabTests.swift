import DNSWire
import FixtureSupport
import Foundation
import LeaseStore
import NetworkAddresses
import NetworkIO
import SleepProxyCore
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The real daemon in the proxy namespace, real UDP registrations from the sleeper namespace.
@Suite(.requiresLab())
struct RegistrationDaemonLabTests {
    static let port: UInt16 = 5354

    /// A Mac-style registration (no zone, cache-flush on unique records, SRV target in full) for host `index`.
    static func registration(index: Int, id: UInt16, lease: UInt32 = 7200) throws -> (
        bytes: [UInt8], records: [DNSRecord]
    ) {
        let records = ClientMessage.host(
            named: "host\(index)", address: .v4(IPv4Address(10, 77, 1, UInt8(index % 250 + 1))))
        let bytes = ClientMessage.update(
            id: id, records: records, owner: OwnerOption(sequence: 7, primaryMAC: mac(index)),
            lease: UpdateLease(lease: lease))
        return (bytes, records)
    }

    static func mac(_ index: Int) -> MACAddress {
        MACAddress(0x02, 0x55, 0, 0, UInt8(index >> 8), UInt8(index & 0xFF))
    }

    /// Apple's reply, byte for byte: ID, flags A800, counts 0/0/0/1, OPT with only the lease.
    static func expectedReply(id: UInt16, lease: UInt32) -> [UInt8] {
        [UInt8(id >> 8), UInt8(id & 0xFF), 0xA8, 0x00, 0, 0, 0, 0, 0, 0, 0, 1]
            + [0x00, 0x00, 0x29, 0x05, 0xA0, 0x00, 0x00, 0x11, 0x94, 0x00, 0x08, 0x00, 0x02, 0x00, 0x04]
            + [UInt8(lease >> 24), UInt8((lease >> 16) & 0xFF), UInt8((lease >> 8) & 0xFF), UInt8(lease & 0xFF)]
    }

    @Test func registrationsAreAnsweredCommittedAndSurviveSIGKILL() async throws {
        try await Lab.withLab { lab in
            let state = lab.workDirectory + "/state"
            let proxy = lab.host(.proxy)
            var daemon = try startDaemon(lab, state: state)

            let client = try lab.withNamespace(.sleeper) {
                try DatagramSocket(family: .ipv4, interface: "eth0", port: 0)
            }
            defer { client.close() }
            let sleeperAddress = try #require(IPAddress(lab.host(.sleeper).ipv4))
            let proxyEndpoint = Endpoint(address: try #require(IPAddress(proxy.ipv4)), port: Self.port)

            var sent: [Int: (records: [DNSRecord], at: UnixTime)] = [:]
            for index in 0..<100 {
                let id = UInt16(0x1000 + index)
                let (bytes, records) = try Self.registration(index: index, id: id)
                let at = Self.now()
                try client.send(bytes, to: proxyEndpoint, scopeID: 0, from: sleeperAddress, interfaceIndex: 0)
                let reply = try await nextDatagram(from: client, within: .seconds(5))
                #expect(reply.bytes == Self.expectedReply(id: id, lease: 7200), "reply #\(index)")
                #expect(reply.source == proxyEndpoint)
                sent[index] = (records, at)
            }
            // The 100th reply is in: kill the daemon at once, without a chance to clean up.
            daemon.signal(SIGKILL)
            #expect(daemon.wait(timeout: .seconds(5)) != nil)

            daemon = try startDaemon(lab, state: state)
            try await daemon.waitUntilLogged("restore: holding 100 owners with 500 records", "the restore")

            let store = try LeaseStore(directory: state)
            defer { store.close() }
            let loaded = try store.loadOwners()
            #expect(loaded.problems.isEmpty)
            #expect(loaded.owners.count == 100)
            for owner in loaded.owners {
                let index = Int(owner.key.primaryMAC.bytes.4) << 8 | Int(owner.key.primaryMAC.bytes.5)
                let expected = try #require(sent[index])
                #expect(owner.key.interface == "eth0")
                #expect(owner.records.map(\.record) == expected.records)
                #expect(owner.sequence == 7)
                let expiry = try #require(owner.expiresAt)
                let remaining = expiry - expected.at
                #expect(remaining > .seconds(7199) && remaining < .seconds(7202), "lease of #\(index): \(remaining)")
            }

            // A refusal is silent: no reply, but a line in the log saying why.
            let (zero, _) = try Self.registration(index: 200, id: 0x2000, lease: 0)
            try client.send(zero, to: proxyEndpoint, scopeID: 0, from: sleeperAddress, interfaceIndex: 0)
            await #expect(throws: TimeoutError.self) { try await nextDatagram(from: client, within: .seconds(1)) }
            try await daemon.waitUntilLogged("zero-lease", "the zero-lease log line")

            daemon.signal(SIGTERM)
            #expect(daemon.wait(timeout: .seconds(5)) == 0)
            #expect(daemon.stderr.contains("stopping; leases are kept"))
        }
    }

    /// Replies leave from the exact address the client targeted: IPv4, the ULA and the link-local address.
    @Test func repliesComeFromTheTargetedAddress() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab, state: lab.workDirectory + "/state")
            defer { daemon.signal(SIGTERM) }
            let proxy = lab.host(.proxy)
            let sleeper = lab.host(.sleeper)
            let index = try lab.withNamespace(.sleeper) { try NetworkInterface.named("eth0").index }
            let client = try lab.withNamespace(.sleeper) {
                try DatagramSocket(family: .ipv6, interface: "eth0", port: 0)
            }
            defer { client.close() }
            let targets: [(IPAddress, IPAddress, UInt32)] = [
                (try #require(IPAddress(proxy.ula)), try #require(IPAddress(sleeper.ula)), 0),
                (try #require(IPAddress(proxy.ipv6LinkLocal)), try #require(IPAddress(sleeper.ipv6LinkLocal)), index),
            ]
            for (number, (target, source, scope)) in targets.enumerated() {
                let id = UInt16(0x3000 + number)
                let (bytes, _) = try Self.registration(index: 300 + number, id: id)
                let destination = Endpoint(address: target, port: Self.port)
                try client.send(bytes, to: destination, scopeID: scope, from: source, interfaceIndex: index)
                let reply = try await nextDatagram(from: client, within: .seconds(5))
                #expect(reply.source == destination)
                #expect(reply.bytes == Self.expectedReply(id: id, lease: 7200))
            }
        }
    }

    // MARK: Helpers

    static func now() -> UnixTime { Daemon.now() }

    /// The daemon built next to the test bundle.
    static func daemonPath() throws -> String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let path = directory.appendingPathComponent("sleepproxyd").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TimeoutError("sleepproxyd is not built at \(path): run `swift build --build-tests` first")
        }
        return path
    }

    func startDaemon(_ lab: Lab, state: String, extraArguments: [String] = []) throws -> LabProcess {
        let process = try lab.spawn(
            .proxy,
            [
                try Self.daemonPath(), "--interface", "eth0", "--state-dir", state, "--registration-port",
                String(Self.port), "--log-level", "debug", "--advertise-name", "Lab Proxy",
                "--control-socket", lab.workDirectory + "/control.sock",
            ] + extraArguments)
        let deadline = ContinuousClock.now + .seconds(10)
        while !process.stderr.contains("registrations on UDP port") {
            if process.hasExited || ContinuousClock.now > deadline {
                throw TimeoutError("sleepproxyd did not start: \(process.stderr)")
            }
            usleep(20_000)
        }
        return process
    }
}
