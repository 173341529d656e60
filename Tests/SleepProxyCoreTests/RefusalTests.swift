import DNSWire
import NetworkAddresses
import SleepProxyCore
import Testing

/// Every refusal is silent on the wire, loud in the log and in the event history, and leaves held state alone.
@Suite("Refusals")
struct RefusalTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var reason: RefusalReason
        var detail: String
        var configuration = CoreConfiguration()
        var source = Harness.sleeper
        var interface = Harness.interface
        var bytes: @Sendable () -> [UInt8]
        var testDescription: String { reason.identifier }
    }

    static let records = Update.host("fanboy", ipv4: IPv4Address(10, 77, 0, 2))

    static let cases: [Case] = [
        Case(reason: .malformed, detail: "additional[0].rdata(OPT) at offset 161: bad RDATA length") {
            Array(Update.bytes(records: records).dropLast(3))
        },
        Case(reason: .notAnUpdate, detail: "opcode 0") {
            Update.bytes(
                records: records, opts: [Update.opt(owner: Update.owner())],
                flags: DNSFlags(response: false, opcode: .query))
        },
        Case(reason: .notAnUpdate, detail: "response") {
            Update.bytes(
                records: records, opts: [Update.opt(owner: Update.owner())],
                flags: DNSFlags(response: true, opcode: .update))
        },
        Case(reason: .noOwner, detail: "no OWNER option in 1 OPT") {
            Update.bytes(records: records, opts: [Update.opt(owner: nil)])
        },
        Case(reason: .noOwner, detail: "no OWNER option in 0 OPT") { Update.bytes(records: records, opts: []) },
        Case(reason: .noLease, detail: "OWNER without an Update Lease") {
            Update.bytes(records: records, opts: [Update.opt(owner: Update.owner(), lease: nil)])
        },
        Case(reason: .zeroLease, detail: "Update Lease 0") {
            Update.bytes(records: records, lease: UpdateLease(lease: 0))
        },
        Case(reason: .ownerVersion, detail: "OWNER version 1") {
            Update.bytes(records: records, owner: OwnerOption(version: 1, sequence: 1, primaryMAC: Update.mac))
        },
        Case(reason: .zeroPrimaryMAC, detail: "00:00:00:00:00:00") {
            Update.bytes(records: records, owner: OwnerOption(sequence: 1, primaryMAC: .zero))
        },
        Case(
            reason: .sourceOffLink, detail: "source 192.168.5.5 is not on eth0",
            source: Endpoint(address: .v4(IPv4Address(192, 168, 5, 5)), port: 5353)
        ) { Update.bytes(records: records) },
        Case(
            reason: .ownerRecordLimit, detail: "owner would hold 5 records, limit 4",
            configuration: CoreConfiguration(maximumRecordsPerOwner: 4)
        ) { Update.bytes(records: records) },
        Case(
            reason: .totalRecordLimit, detail: "proxy would hold 5 records, limit 4",
            configuration: CoreConfiguration(maximumRecordsTotal: 4)
        ) { Update.bytes(records: records) },
        Case(reason: .unknownInterface, detail: "interface wlan0 is not served", interface: "wlan0") {
            Update.bytes(records: records)
        },
    ]

    @Test(arguments: cases)
    func refusedSilently(_ refusal: Case) throws {
        var harness = Harness(configuration: refusal.configuration)
        let actions = harness.register(refusal.bytes(), from: refusal.source, interface: refusal.interface)
        #expect(actions.replies.isEmpty, "a refusal must not be answered")
        #expect(actions.savedOwners.isEmpty)
        #expect(harness.core.owners.isEmpty)
        let event = try #require(actions.events.first)
        #expect(actions.events.count == 1)
        #expect(event.kind == .refused)
        #expect(event.reason == refusal.reason)
        #expect(event.source == refusal.source)
        #expect(event.detail.contains(refusal.detail), "detail: \(event.detail)")
        let warning = try #require(actions.logLines.first { $0.0 == .warning })
        #expect(warning.1.contains(refusal.reason.identifier) && warning.1.contains(refusal.detail))
    }

    /// A flood of bad datagrams from one source is recorded 20 times a minute, then counted, and logged at most
    /// 100 times a minute: neither the store nor the log pays per datagram.
    @Test func refusalLogLinesAreRateLimited() {
        var harness = Harness()
        let bad = Update.bytes(records: Self.records, lease: UpdateLease(lease: 0))
        var logged = 0
        var events = 0
        for _ in 0..<250 {
            let actions = harness.register(bad)
            logged += actions.logLines.filter { $0.1.contains("zero-lease") }.count
            events += actions.events.count
            harness.advance(.milliseconds(100))
        }
        #expect(events == 20)
        #expect(logged == 100)
        harness.advance(.seconds(60))
        let after = harness.register(bad)
        #expect(after.logLines.map(\.1).contains("150 more refusals in the last minute were not logged"))
        #expect(after.logLines.contains { $0.1.contains("zero-lease") })
        #expect(
            after.events.map(\.detail).contains(
                "230 more refusals from 10.77.0.2 in the last minute were not recorded"),
            "\(after.events)")
        #expect(after.events.count == 2, "the count, then this refusal")
    }

    @Test func everyReasonIsCovered() {
        // The others have suites of their own (Impersonation, Limits).
        #expect(
            Set(Self.cases.map(\.reason)).union([.nameHijack, .addressHijack, .tooLarge, .hostLimit, .rateLimited])
                == Set(RefusalReason.all))
    }

    /// A unique name held for one owner cannot be taken by another; the first owner keeps everything.
    @Test(arguments: [0, 1, 2])
    func nameHijackIsRefused(record: Int) throws {
        var harness = Harness()
        harness.register(Update.bytes(records: Self.records))
        let before = harness.core.owners
        // Another host claims one of the held unique names: the A record, the reverse PTR, the SRV instance.
        let intruder = MACAddress(0x02, 0, 0, 0, 0, 0x66)
        var claim = Self.records[record]
        if case .a = claim.rdata { claim.rdata = .a(IPv4Address(10, 77, 0, 66)) }
        if case .ptr = claim.rdata { claim.rdata = .ptr("intruder.local.") }
        if case .srv = claim.rdata { claim.rdata = .srv(SRVData(port: 2222, target: "intruder.local.")) }
        claim.name = try DNSName(claim.name.description.uppercased())  // case does not hide a claim
        let actions = harness.register(
            Update.bytes(records: [claim], owner: OwnerOption(sequence: 1, primaryMAC: intruder)))
        #expect(actions.replies.isEmpty)
        #expect(actions.events.first?.reason == .nameHijack)
        #expect(actions.events.first?.detail.contains("is held for \(Update.mac)") == true)
        #expect(harness.core.owners == before)
    }

    /// Shared records (service browsing PTRs) are held for many owners at once.
    @Test func sharedNamesAreNotHijacks() throws {
        var harness = Harness()
        harness.register(Update.bytes(records: Self.records))
        let other = MACAddress(0x02, 0, 0, 0, 0, 0x77)
        let actions = harness.register(
            Update.bytes(
                records: Update.host("other", ipv4: IPv4Address(10, 77, 0, 7)),
                owner: OwnerOption(sequence: 1, primaryMAC: other)))
        #expect(actions.replies.count == 1)
        #expect(harness.core.owners.count == 2)
    }

    /// The same host may of course re-register its own names, and names are freed when their owner goes.
    @Test func namesAreFreedWhenTheOwnerExpires() throws {
        var harness = Harness()
        harness.register(Update.bytes(records: Self.records, lease: UpdateLease(lease: 60)))
        // The lease ends at 60 s; the wake that follows gives up after about 36 s.
        harness.run(until: harness.now + .seconds(61))
        let other = MACAddress(0x02, 0, 0, 0, 0, 0x77)
        let during = harness.register(
            Update.bytes(records: Self.records, owner: OwnerOption(sequence: 1, primaryMAC: other)))
        #expect(during.events.map(\.reason) == [.nameHijack], "names stay taken while their owner is woken")
        harness.run(until: harness.now + .seconds(40))
        let actions = harness.register(
            Update.bytes(records: Self.records, owner: OwnerOption(sequence: 1, primaryMAC: other)))
        #expect(actions.events.map(\.kind) == [.registered])
        #expect(harness.core.owners.keys.map(\.primaryMAC) == [other])
    }

    /// A refused datagram from a held owner changes nothing of what it holds. (A datagram with another message
    /// ID: one with the ID of an answered one is kept in part, see `RegistrationTests`.)
    @Test func refusalKeepsHeldState() throws {
        var harness = Harness(configuration: CoreConfiguration(maximumRecordsPerOwner: 6))
        harness.register(Update.bytes(id: 1, records: Self.records))
        let before = harness.core.owners
        let more = Update.host("more", ipv4: IPv4Address(10, 77, 0, 3))
        let actions = harness.register(Update.bytes(id: 2, records: more))
        #expect(actions.events.first?.reason == .ownerRecordLimit)
        #expect(harness.core.owners == before)
        #expect(harness.core.recordCount == 5)
    }
}
