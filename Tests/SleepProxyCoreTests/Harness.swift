import DNSWire
import FixtureSupport
import Foundation
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// A core on one interface, `eth0`, with a test clock, and the helpers scenario tests read actions with.
struct Harness {
    static let interface: InterfaceName = "eth0"
    static let proxyMAC = MACAddress(0x02, 0x77, 0, 0, 0, 1)
    static let proxyIPv4 = IPAddress.v4(IPv4Address(10, 77, 0, 1))
    static let registrationPort: UInt16 = 5354
    static let proxy = Endpoint(address: proxyIPv4, port: registrationPort)
    static let sleeper = Endpoint(address: .v4(IPv4Address(10, 77, 0, 2)), port: 49_152)
    /// A querier on the link.
    static let waker = Endpoint(address: .v4(IPv4Address(10, 77, 0, 3)), port: 5353)
    /// Another sleep proxy on the same link, handing records over.
    static let otherProxy = Endpoint(address: .v4(IPv4Address(10, 77, 0, 9)), port: 61_000)

    var core: SleepProxyCore
    var now = UnixTime(seconds: 1_800_000_000)
    /// Every action returned so far, in order.
    var log: [Action] = []

    init(configuration: CoreConfiguration = CoreConfiguration(), extraPrefixes: [Link.Prefix] = []) {
        core = SleepProxyCore(configuration: configuration)
        core.setLink(
            Link(
                name: Self.interface, macAddress: Self.proxyMAC,
                prefixes: [
                    Link.Prefix(address: Self.proxyIPv4, length: 24),
                    Link.Prefix(address: .v6(IPv6Address("fd77::1")!), length: 64),
                ] + extraPrefixes))
    }

    mutating func advance(_ duration: Duration) {
        now = now + duration
    }

    @discardableResult
    mutating func register(
        _ bytes: [UInt8], from source: Endpoint = Harness.sleeper, to destination: Endpoint = Harness.proxy,
        interface: InterfaceName = Harness.interface
    ) -> [Action] {
        let actions = core.handleRegistration(
            RegistrationDatagram(interface: interface, source: source, destination: destination, bytes: bytes),
            now: now)
        log += actions
        checkInvariants()
        return actions
    }

    /// An mDNS packet from `source` (the waker by default) to the IPv4 group.
    @discardableResult
    mutating func mdns(
        _ bytes: [UInt8], from source: Endpoint = Harness.waker, to destination: IPAddress = .v4(.mdnsGroup),
        mac: MACAddress? = nil
    ) -> [Action] {
        let actions = core.handleMDNS(
            MDNSPacket(
                interface: Self.interface, source: source, destination: destination, sourceMAC: mac, bytes: bytes),
            now: now)
        log += actions
        checkInvariants()
        return actions
    }

    /// A captured frame on eth0.
    @discardableResult
    mutating func frame(_ bytes: [UInt8]) -> [Action] {
        let actions = core.handleFrame(CapturedFrameInput(interface: Self.interface, bytes: bytes), now: now)
        log += actions
        checkInvariants()
        return actions
    }

    /// Moves the clock to `time` step by step through every deadline on the way, collecting what is sent.
    @discardableResult
    mutating func run(until time: UnixTime) -> [Action] {
        var actions: [Action] = []
        while let deadline = core.nextDeadline, deadline <= time {
            now = max(now, deadline)
            actions += tick()
        }
        now = time
        return actions
    }

    @discardableResult
    mutating func tick() -> [Action] {
        let actions = core.tick(now: now)
        log += actions
        checkInvariants()
        return actions
    }

    /// Invariants that hold after every step.
    /// The `generation` of the held hosts when their indexes were last checked: they change only with it. Checked
    /// while a hundred hosts or fewer are held (each check reads every record).
    private var indexesCheckedAt: UInt64?

    mutating func checkInvariants() {
        #expect(core.recordCount == core.owners.values.reduce(0) { $0 + $1.records.count })
        for (key, owner) in core.owners {
            #expect(owner.key == key)
            #expect(!owner.records.isEmpty, "an owner without records is held: \(key)")
            #expect(owner.records.allSatisfy { $0.sequence == owner.sequence })
        }
        if indexesCheckedAt != core.hosts.generation, core.hosts.count <= 100 {
            indexesCheckedAt = core.hosts.generation
            #expect(core.hosts.indexProblems() == [])
        }
    }

    func owner(_ mac: MACAddress) -> Owner? {
        core.owners[OwnerKey(interface: Self.interface, primaryMAC: mac)]
    }
}

extension [Action] {
    var replies: [RegistrationReply] {
        compactMap { if case .reply(let reply) = $0 { reply } else { nil } }
    }

    var storeChanges: [StoreChange] {
        compactMap { if case .store(let change) = $0 { change } else { nil } }
    }

    var events: [Event] {
        storeChanges.compactMap { if case .appendEvent(let event) = $0 { event } else { nil } }
    }

    var savedOwners: [Owner] {
        storeChanges.compactMap { if case .saveOwner(let owner) = $0 { owner } else { nil } }
    }

    var transmissions: [MDNSTransmission] {
        compactMap { if case .sendMDNS(let transmission) = $0 { transmission } else { nil } }
    }

    /// The messages sent, decoded.
    var sentMessages: [DNSMessage] {
        transmissions.compactMap { try? DNSMessage(decoding: $0.bytes) }
    }

    /// The frames put on the wire, but for MLD reports (which every take-over of an IPv6 address brings; see
    /// `mldReports`).
    var injectedFrames: [[UInt8]] {
        compactMap { if case .injectFrame(_, let bytes) = $0, !Self.isMLDReport(bytes) { bytes } else { nil } }
    }

    /// The MLD reports and Dones put on the wire (`MulticastListener`).
    var mldReports: [[UInt8]] {
        compactMap { if case .injectFrame(_, let bytes) = $0, Self.isMLDReport(bytes) { bytes } else { nil } }
    }

    /// IPv6 with a Hop-by-Hop header, then ICMPv6 type 131 (MLDv1 report), 132 (Done) or 143 (MLDv2 report).
    static func isMLDReport(_ bytes: [UInt8]) -> Bool {
        bytes.count > 62 && bytes[12] == 0x86 && bytes[13] == 0xDD && bytes[20] == 0 && bytes[54] == 58
            && [131, 132, 143].contains(bytes[62])
    }

    var logLines: [(LogLevel, String)] {
        compactMap { if case .log(let level, let text) = $0 { (level, text) } else { nil } }
    }
}

/// Builds mDNS queries.
enum Query {
    static func bytes(
        id: UInt16 = 0, _ questions: [DNSQuestion], knownAnswers: [DNSRecord] = [], truncated: Bool = false,
        authorities: [DNSRecord] = [], additionals: [DNSRecord] = []
    ) -> [UInt8] {
        var flags = DNSFlags(response: false, opcode: .query)
        flags.truncated = truncated
        return try! DNSMessage(
            id: id, flags: flags, questions: questions, answers: knownAnswers, authorities: authorities,
            additionals: additionals
        ).encoded()
    }

    static func bytes(id: UInt16 = 0, _ name: DNSName, _ type: DNSType, unicast: Bool = false) -> [UInt8] {
        bytes(id: id, [DNSQuestion(name: name, type: type, unicastResponse: unicast)])
    }
}

/// Builds registration datagrams for scenarios.
enum Update {
    static let mac = MACAddress(0xD4, 0x9A, 0x20, 0xDE, 0x9D, 0x38)

    static func owner(sequence: UInt8 = 21, mac: MACAddress = Update.mac, wake: MACAddress? = nil) -> OwnerOption {
        OwnerOption(sequence: sequence, primaryMAC: mac, wakeMAC: wake)
    }

    static func opt(owner: OwnerOption?, lease: UpdateLease? = UpdateLease(lease: 7200)) -> DNSRecord {
        ClientMessage.registrationOPT(owner: owner, lease: lease)
    }

    static func bytes(
        id: UInt16 = 0x4B2E, records: [DNSRecord], opts: [DNSRecord], zone: Bool = false,
        flags: DNSFlags = DNSFlags(response: false, opcode: .update)
    ) -> [UInt8] {
        ClientMessage.update(id: id, records: records, owner: nil, opts: opts, zone: zone, flags: flags)
    }

    static func bytes(
        id: UInt16 = 0x4B2E, records: [DNSRecord], owner: OwnerOption = Update.owner(),
        lease: UpdateLease? = UpdateLease(lease: 7200)
    ) -> [UInt8] {
        ClientMessage.update(id: id, records: records, owner: owner, lease: lease)
    }

    /// A small host: address records, their reverse mappings and one ssh service.
    static func host(_ name: String, ipv4: IPv4Address, unique: Bool = true) -> [DNSRecord] {
        ClientMessage.host(named: name, address: .v4(ipv4), unique: unique)
    }
}
