import DNSWire
import FixtureSupport
import NetworkAddresses
import NetworkIO
import SleepProxyDaemon
import TestLab
import Testing

/// The sleeper as a Mac is around its registration: it registers (OWNER sequence 3), and while it goes to sleep
/// it keeps talking: it re-announces its records with the same OWNER sequence, 1 and 2 s apart
/// (mDNSResponder's announcements while it "transfers" to the proxy). When it wakes, it announces its address
/// (a gratuitous ARP) and its records with OWNER and the next sequence number.
enum MacSleeper {
    static let sequence: UInt8 = 3

    /// The records: host name, address, reverse mapping, an ssh service, and any `extra` records.
    static func records(_ lab: Lab, extra: [DNSRecord] = []) throws -> [DNSRecord] {
        let sleeper = lab.host(.sleeper)
        let address = try #require(IPv4Address(sleeper.ipv4))
        let instance = try DNSName(labels: ["Sleeper SSH", "_ssh", "_tcp", "local"])
        return ClientMessage.host(
            "Sleeper.local.", address: .v4(address), instance: instance, txt: ["u=test"], servicesEntry: true) + extra
    }

    static func ownerOption(_ lab: Lab, sequence: UInt8) throws -> OwnerOption {
        OwnerOption(sequence: sequence, primaryMAC: try #require(MACAddress(lab.host(.sleeper).macString)))
    }

    /// The registration: Mac style (no zone, cache-flush on unique records, SRV target in full), Lease 7200.
    static func registration(_ lab: Lab, extra: [DNSRecord] = []) throws -> [UInt8] {
        ClientMessage.update(
            id: 0x5151, records: try records(lab, extra: extra), owner: try ownerOption(lab, sequence: sequence))
    }

    /// An announcement of its records (not the reverse mapping, which Macs announce separately) with OWNER.
    static func announcement(_ lab: Lab, sequence: UInt8, extra: [DNSRecord] = []) throws -> [UInt8] {
        ClientMessage.announcement(
            records: try records(lab, extra: extra), owner: try ownerOption(lab, sequence: sequence))
    }

    static func announce(_ lab: Lab, sequence: UInt8, extra: [DNSRecord] = []) async throws {
        _ = try await lab.multicastQuery(
            from: .sleeper, message: try announcement(lab, sequence: sequence, extra: extra), listen: .milliseconds(20))
    }

    /// Registers, is answered, re-announces with the same sequence (as a Mac does while it goes to sleep), then
    /// sleeps: no addresses, no answers of its own.
    static func registerAndSleep(_ lab: Lab, extra: [DNSRecord] = []) async throws {
        try await sendRegistration(try registration(lab, extra: extra), from: lab)
        try await announce(lab, sequence: sequence, extra: extra)
        try await Task.sleep(for: .seconds(1))
        try await announce(lab, sequence: sequence, extra: extra)
        try lab.sleep(.sleeper)
    }

    /// Registers and sleeps (``registerAndSleep(_:extra:)``), then waits until `daemon` has taken over the
    /// sleeper's IPv4 address.
    static func registerSleepAndWaitForTakeOver(_ lab: Lab, by daemon: LabProcess, extra: [DNSRecord] = [])
        async throws
    {
        try await registerAndSleep(lab, extra: extra)
        let address = lab.host(.sleeper).ipv4
        try await daemon.waitUntilLogged("took over \(address)", "the take-over of \(address)", within: .seconds(20))
    }

    /// Wakes: its addresses back, a gratuitous ARP, then its announcement with the next sequence number.
    static func wake(_ lab: Lab) async throws {
        try lab.wake(.sleeper)
        _ = try await lab.run(.sleeper, ["arping", "-U", "-c", "1", "-I", "eth0", lab.host(.sleeper).ipv4])
        try await announce(lab, sequence: sequence &+ 1)
    }
}

/// The sleeper as a Linux host with avahi-daemon and a third-party sleep-proxy client: the registration carries
/// a zone (`. SOA`), no cache-flush bits, lower-case reverse-mapping nibbles and an 8-byte OWNER with sequence 0;
/// its avahi answers for its names without OWNER, and keeps answering the resolves its client just made.
enum AvahiSleeper {
    static let service = AvahiService(name: "sleeper SSH", type: "_ssh._tcp", port: 22, txt: ["u=test"])

    /// The records avahi publishes for the sleeper, as the client copies them into its registration.
    static func records(_ lab: Lab) throws -> [DNSRecord] {
        let sleeper = lab.host(.sleeper)
        let address = try #require(IPv4Address(sleeper.ipv4))
        let instance = try DNSName(labels: ["sleeper SSH", "_ssh", "_tcp", "local"])
        return ClientMessage.host(
            "sleeper.local.", address: .v4(address), instance: instance, txt: ["u=test"], unique: false)
    }

    static func registration(_ lab: Lab) throws -> [UInt8] {
        let mac = try #require(MACAddress(lab.host(.sleeper).macString))
        let owner = OwnerOption(sequence: 0, primaryMAC: mac)
        return ClientMessage.update(
            id: 0x2A2A, records: try records(lab), owner: owner,
            opts: [ClientMessage.registrationOPT(owner: owner, udpPayloadSize: 4096, flags: 0)], zone: true,
            compression: .all)
    }
}

/// Sends a registration from the sleeper to the proxy's registration port and waits for the reply.
func sendRegistration(_ bytes: [UInt8], from lab: Lab) async throws {
    let client = try lab.withNamespace(.sleeper) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
    defer { client.close() }
    let proxy = Endpoint(address: try #require(IPAddress(lab.host(.proxy).ipv4)), port: 5354)
    try client.send(
        bytes, to: proxy, scopeID: 0, from: try ip(lab.host(.sleeper).ipv4), interfaceIndex: 0)
    _ = try await nextDatagram(from: client, within: .seconds(5))
}
