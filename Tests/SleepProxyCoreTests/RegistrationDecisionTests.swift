import DNSWire
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// The registration rules as a table: each datagram, against what is held already, is refused for one reason or
/// accepted with an owner, decided without changing anything.
@Suite("Registration decisions")
struct RegistrationDecisionTests {
    static let records = Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 2))
    static let other = MACAddress(0x02, 0x77, 0, 0, 0, 0x42)
    static let otherSource = Endpoint(address: .v4(IPv4Address(10, 77, 0, 42)), port: 5353)
    /// A service record the first datagram did not hold.
    static let extra = DNSRecord(
        name: "fanboy._sftp-ssh._tcp.local.", ttl: 120, cacheFlush: true,
        rdata: .srv(SRVData(port: 22, target: "fanboy.local.")))
    static let extra2 = DNSRecord(
        name: "fanboy._rfb._tcp.local.", ttl: 120, cacheFlush: true,
        rdata: .srv(SRVData(port: 5900, target: "fanboy.local.")))

    /// What a decision says, in the terms of the rules.
    enum Outcome: Equatable, CustomStringConvertible {
        case refused(RefusalReason)
        case accepted(Accepted)

        var description: String {
            switch self {
            case .refused(let reason): "refused (\(reason))"
            case .accepted(let accepted): "accepted \(accepted)"
            }
        }
    }

    struct Accepted: Equatable {
        var kind: Event.Kind
        var held: Int
        var new: Int
        var dropped = 0
        var fromTheStart: Bool
        var retransmission = false
        var cancelsWake = false
        var granted: UInt32 = 7200
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var rule: String
        var configuration = CoreConfiguration()
        var prepare: @Sendable (inout Harness) -> Void = { _ in }
        var source = Harness.sleeper
        var interface = Harness.interface
        var bytes: @Sendable () -> [UInt8]
        var expected: Outcome
        var testDescription: String { rule }
    }

    static func registered(_ harness: inout Harness) {
        harness.register(Update.bytes(records: records))
    }

    /// The host registered, settled, and is being woken.
    static func beingWoken(_ harness: inout Harness) {
        registered(&harness)
        harness.run(until: harness.now + .seconds(12))
        _ = harness.core.requestWake(
            OwnerKey(interface: Harness.interface, primaryMAC: Update.mac), now: harness.now, reason: "test")
    }

    /// Another owner holds `records`, from its own address.
    static func otherHolds(_ records: [DNSRecord]) -> @Sendable (inout Harness) -> Void {
        { harness in
            harness.register(
                Update.bytes(records: records, owner: Update.owner(mac: other)), from: otherSource)
        }
    }

    static let hostLimitOfOne: CoreConfiguration = {
        var configuration = CoreConfiguration()
        configuration.maximumHostsPerInterface = 1
        return configuration
    }()

    static let rows: [Row] = [
        Row(
            rule: "an interface not served", interface: "wlan0", bytes: { Update.bytes(records: records) },
            expected: .refused(.unknownInterface)),
        Row(
            rule: "an interface being retired",
            prepare: { harness in
                registered(&harness)
                _ = harness.core.removeLink(Harness.interface, now: harness.now, reason: "removed")
            }, bytes: { Update.bytes(records: records, owner: Update.owner(mac: other)) },
            expected: .refused(.unknownInterface)),
        Row(
            rule: "a malformed datagram", bytes: { Array(Update.bytes(records: records).dropLast(3)) },
            expected: .refused(.malformed)),
        Row(
            rule: "a datagram without a lease",
            bytes: {
                Update.bytes(records: records, opts: [Update.opt(owner: Update.owner(), lease: nil)])
            }, expected: .refused(.noLease)),
        Row(
            rule: "a source off the link", source: Endpoint(address: .v4(IPv4Address(192, 168, 5, 5)), port: 5353),
            bytes: { Update.bytes(records: records) }, expected: .refused(.sourceOffLink)),
        Row(
            rule: "a new host over the host limit", configuration: hostLimitOfOne,
            prepare: otherHolds(Update.host("other", ipv4: IPv4Address(10, 77, 0, 42))),
            bytes: { Update.bytes(records: records) }, expected: .refused(.hostLimit)),
        Row(
            rule: "a unique name held for another owner", prepare: otherHolds(records),
            bytes: { Update.bytes(records: Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 7))) },
            expected: .refused(.nameHijack)),
        Row(
            rule: "an address held for another owner", prepare: otherHolds(records),
            bytes: { Update.bytes(records: Update.host("imposter", ipv4: IPv4Address(10, 77, 0, 2))) },
            expected: .refused(.addressHijack)),
        Row(
            rule: "more records than an owner may hold", configuration: CoreConfiguration(maximumRecordsPerOwner: 4),
            bytes: { Update.bytes(records: records) }, expected: .refused(.ownerRecordLimit)),
        Row(
            rule: "more records than the proxy may hold", configuration: CoreConfiguration(maximumRecordsTotal: 8),
            prepare: otherHolds(Update.host("other", ipv4: IPv4Address(10, 77, 0, 42))),
            bytes: { Update.bytes(records: records) }, expected: .refused(.totalRecordLimit)),
        Row(
            rule: "nothing to hold",
            bytes: {
                Update.bytes(
                    records: records.map {
                        var copy = $0
                        copy.ttl = 0
                        return copy
                    })
            },
            expected: .refused(.nameHijack)),
        Row(
            rule: "a new host", bytes: { Update.bytes(records: records) },
            expected: .accepted(Accepted(kind: .registered, held: 5, new: 5, fromTheStart: true))),
        Row(
            rule: "a lease longer than the maximum", configuration: CoreConfiguration(maximumLease: 3600),
            bytes: { Update.bytes(records: records) },
            expected: .accepted(Accepted(kind: .registered, held: 5, new: 5, fromTheStart: true, granted: 3600))),
        Row(
            rule: "a retransmission", prepare: registered, bytes: { Update.bytes(records: records) },
            expected: .accepted(Accepted(kind: .renewed, held: 5, new: 0, fromTheStart: false, retransmission: true))),
        Row(
            rule: "a further datagram of the same sequence", prepare: registered,
            bytes: { Update.bytes(id: 0x4B2F, records: [extra]) },
            expected: .accepted(Accepted(kind: .renewed, held: 6, new: 1, fromTheStart: false))),
        Row(
            rule: "a new sequence", prepare: registered,
            bytes: { Update.bytes(records: Array(records.prefix(2)), owner: Update.owner(sequence: 22)) },
            expected: .accepted(Accepted(kind: .replaced, held: 2, new: 2, fromTheStart: true))),
        Row(
            rule: "a later datagram with a hijacked record: the rest is held",
            prepare: { harness in
                registered(&harness)
                otherHolds(Update.host("other", ipv4: IPv4Address(10, 77, 0, 42)))(&harness)
            },
            bytes: {
                Update.bytes(
                    records: records + [extra] + Array(Update.host("other", ipv4: IPv4Address(10, 77, 0, 9)).prefix(1)))
            },
            expected: .accepted(Accepted(kind: .renewed, held: 6, new: 1, dropped: 1, fromTheStart: false))),
        Row(
            rule: "a later datagram over the owner limit: what fits is held",
            configuration: CoreConfiguration(maximumRecordsPerOwner: 6), prepare: registered,
            bytes: { Update.bytes(records: records + [extra, extra2]) },
            expected: .accepted(Accepted(kind: .renewed, held: 6, new: 1, dropped: 1, fromTheStart: false))),
        Row(
            rule: "a registration while being woken calls the wake off",
            prepare: beingWoken,
            bytes: { Update.bytes(id: 0x4B2F, records: records) },
            expected: .accepted(Accepted(kind: .renewed, held: 5, new: 0, fromTheStart: true, cancelsWake: true))),
        Row(
            rule: "a replay while being woken does not",
            prepare: beingWoken,
            source: otherSource, bytes: { Update.bytes(records: records) },
            expected: .accepted(Accepted(kind: .renewed, held: 5, new: 0, fromTheStart: false, retransmission: true))),
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) {
        var harness = Harness(configuration: row.configuration)
        row.prepare(&harness)
        harness.advance(.seconds(1))
        let before = harness.core.owners
        let datagram = RegistrationDatagram(
            interface: row.interface, source: row.source, destination: Harness.proxy, bytes: row.bytes())
        let outcome: Outcome =
            switch harness.core.decideRegistration(datagram, now: harness.now) {
            case .failure(let refusal): .refused(refusal.reason)
            case .success(let decision):
                .accepted(
                    Accepted(
                        kind: decision.kind, held: decision.owner.records.count, new: decision.newRecords.count,
                        dropped: decision.dropped.count, fromTheStart: decision.fromTheStart,
                        retransmission: decision.isRetransmission, cancelsWake: decision.cancelledWake != nil,
                        granted: decision.granted))
            }
        #expect(outcome == row.expected)
        #expect(harness.core.owners == before, "deciding changes nothing")
        // Applied, the decision is what the core does.
        let actions = harness.register(datagram.bytes, from: row.source, interface: row.interface)
        switch row.expected {
        case .refused(let reason):
            #expect(actions.replies.isEmpty)
            #expect(actions.events.map(\.reason) == [reason])
        case .accepted(let accepted):
            #expect(actions.replies.count == 1)
            #expect(
                harness.core.owners[OwnerKey(interface: row.interface, primaryMAC: Update.mac)]?.records.count
                    == accepted.held)
            let kinds = actions.events.map(\.kind)
            #expect(kinds.contains(accepted.kind) == !accepted.retransmission, "\(kinds)")
            #expect(kinds.contains(.wakeCancelled) == accepted.cancelsWake, "\(kinds)")
        }
    }

    /// The event's text says what the datagram held, what was granted and what was left out.
    @Test func theDetailNamesWhatWasHeldAndLeftOut() throws {
        var harness = Harness(configuration: CoreConfiguration(maximumLease: 3600, maximumRecordsPerOwner: 6))
        harness.register(Update.bytes(records: Self.records))
        let datagram = RegistrationDatagram(
            interface: Harness.interface, source: Harness.sleeper, destination: Harness.proxy,
            bytes: Update.bytes(records: Self.records + [Self.extra, Self.extra2]))
        let decision = try harness.core.decideRegistration(datagram, now: harness.now).get()
        #expect(
            decision.detail
                == "seq 21, 7 records in this datagram (1 new), 6 held, lease 3600 s (asked 7200 s), addresses 10.77.0.2, 1 records of this later datagram not held (the client counts them registered): fanboy._rfb._tcp.local. SRV: owner-record-limit"
        )
    }
}
