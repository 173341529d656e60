import DNSWire
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// The conflict rules as tables: what one record of another host's packet means for the held records, and what a
/// conflicting answer does to one held record, decided without changing anything.
@Suite("Conflict decisions")
struct ConflictDecisionTests {
    static let mac = ConflictTests.mac
    static let key = OwnerKey(interface: Harness.interface, primaryMAC: mac)
    static let ours = DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
    static let theirs = DNSRecord(
        name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 66)))

    static func with(_ ttl: UInt32, _ record: DNSRecord) -> DNSRecord {
        var copy = record
        copy.ttl = ttl
        return copy
    }

    static func summary(_ finding: HeldRecordFinding) -> String {
        var parts: [String] = []
        switch finding.echo {
        case .goodbye(let record): parts.append("goodbye \(record.type)")
        case .duplicate(let record): parts.append("duplicate \(record.type)")
        case nil: break
        }
        parts += finding.conflicts.map { "conflict \($0.record.type) of \($0.key.primaryMAC)" }
        parts += finding.defended.map { "defend \($0.type)" }
        return parts.isEmpty ? "-" : parts.joined(separator: ", ")
    }

    struct Finding: Sendable, CustomTestStringConvertible {
        var rule: String
        var settled = true
        var record: DNSRecord
        var isResponse = true
        var sourceMAC: MACAddress? = ConflictTests.intruderMAC
        var expected: String
        var testDescription: String { rule }
    }

    static let findings: [Finding] = [
        Finding(rule: "a goodbye for a held record", record: with(0, ours), expected: "goodbye A"),
        Finding(rule: "less than half our TTL", record: with(59, ours), expected: "goodbye A"),
        Finding(rule: "someone else answering for us", record: with(60, ours), expected: "duplicate A"),
        Finding(rule: "other data for a unique held name", record: theirs, expected: "conflict A of \(mac)"),
        Finding(rule: "other data from the host itself", record: theirs, sourceMAC: mac, expected: "-"),
        Finding(rule: "other data with TTL 0", record: with(0, theirs), expected: "-"),
        Finding(
            rule: "other data for a shared name",
            record: DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("other._ssh._tcp.local.")),
            expected: "-"),
        Finding(rule: "a probe for a held unique name", record: theirs, isResponse: false, expected: "defend A"),
        Finding(
            rule: "a probe for a name in its silent probe", settled: false, record: theirs, isResponse: false,
            expected: "-"),
        Finding(rule: "a probe with our own record", record: ours, isResponse: false, expected: "-"),
        Finding(rule: "a record in its silent probe is not echoed", settled: false, record: ours, expected: "-"),
    ]

    @Test(arguments: findings)
    func weighs(_ row: Finding) {
        var harness = ConflictTests.registered()
        harness.run(until: harness.now + (row.settled ? .seconds(3) : .milliseconds(100)))
        let packet = MDNSPacket(
            interface: Harness.interface, source: Harness.waker, destination: .v4(.mdnsGroup),
            sourceMAC: row.sourceMAC, bytes: [])
        let finding = harness.core.weigh(row.record, from: packet, isResponse: row.isResponse, now: harness.now)
        #expect(Self.summary(finding) == row.expected)
    }

    struct Outcome: Sendable, CustomTestStringConvertible {
        var rule: String
        /// Brings the held host to the state the rule is about; the conflict comes at the harness's `now`.
        var prepare: @Sendable (inout Harness) -> Void
        var record = ConflictDecisionTests.ours
        var expected: @Sendable (UnixTime) -> ConflictOutcome
        var testDescription: String { rule }
    }

    static func conflict(_ harness: inout Harness) {
        harness.mdns(ConflictTests.claim(IPv4Address(10, 77, 0, 66)), mac: ConflictTests.intruderMAC)
    }

    /// A conflict `first` after the registration, then `wait` more.
    static func conflict(at first: Duration, then wait: Duration, _ harness: inout Harness) {
        harness.run(until: harness.now + first)
        conflict(&harness)
        harness.run(until: harness.now + wait)
    }

    static let outcomes: [Outcome] = [
        Outcome(
            rule: "a settled record is probed again",
            prepare: { $0.run(until: $0.now + .seconds(3)) },
            expected: { now in .probeAgain(RecordProbe(started: now, announcements: 4, afterConflict: true), at: 0) }),
        Outcome(
            rule: "before the first probe tick", prepare: { $0.run(until: $0.now + .milliseconds(100)) },
            expected: { _ in .beforeFirstTick }),
        Outcome(
            rule: "the first during the probe is forgiven", prepare: { $0.run(until: $0.now + .milliseconds(300)) },
            expected: { now in
                var probe = RecordProbe(
                    started: now + RecordProbe.conflictPause - RecordProbe.tick, announcements: 2, afterConflict: false)
                probe.forgiven = 1
                return .forgiven(probe, at: 0)
            }),
        Outcome(
            rule: "a second during the probe wakes",
            prepare: { conflict(at: .milliseconds(300), then: .milliseconds(1_100), &$0) }, expected: { _ in .wake }),
        Outcome(
            rule: "another before the record settled again wakes",
            prepare: { conflict(at: .seconds(3), then: .seconds(2), &$0) }, expected: { _ in .wake }),
        Outcome(
            rule: "a record its wake withdrew",
            prepare: { harness in
                conflict(at: .seconds(3), then: .seconds(2), &harness)
                conflict(&harness)
            }, expected: { _ in .withdrawn }),
        Outcome(
            rule: "a host being woken whole",
            prepare: { harness in
                harness.run(until: harness.now + .seconds(3))
                _ = harness.core.requestWake(key, now: harness.now, reason: "test")
            }, expected: { _ in .withdrawn }),
        Outcome(
            rule: "a record not held", prepare: { $0.run(until: $0.now + .seconds(3)) }, record: theirs,
            expected: { _ in .notHeld }),
    ]

    @Test(arguments: outcomes)
    func decides(_ row: Outcome) {
        var harness = ConflictTests.registered()
        row.prepare(&harness)
        let generation = harness.core.hosts.generation
        let outcome = harness.core.conflictOutcome(on: row.record, of: Self.key, now: harness.now)
        #expect(outcome == row.expected(harness.now))
        #expect(harness.core.hosts.generation == generation, "deciding changes nothing")
    }
}
