import Testing

@testable import SleepProxyCore

/// The probes of a host's records, one slot per record: what is put in is read back at its record's place,
/// whether the probes are one value (a registration's) or many (conflicts one after another), and equality looks at
/// the probes, not at how they are kept.
@Suite("Record probes")
struct RecordProbesTests {
    static let start = UnixTime(seconds: 1_700_000_000)

    static func probe(_ milliseconds: Int64, conflict: Bool = false) -> RecordProbe {
        RecordProbe(
            started: start + .milliseconds(milliseconds), announcements: conflict ? 4 : 2, afterConflict: conflict)
    }

    @Test func manyDistinctProbesReadBackAtTheirRecords() {
        var probes = RecordProbes()
        #expect(probes.isEmpty)
        // A registration's probe for every other record, then a conflict's probe for each of 20 records in turn.
        for position in stride(from: 0, to: 40, by: 2) { probes.set(Self.probe(0), at: position, of: 40) }
        for position in 0..<20 { probes.set(Self.probe(Int64(1_000 + position), conflict: true), at: position, of: 40) }
        for position in 0..<40 {
            let expected: RecordProbe? =
                position < 20
                ? Self.probe(Int64(1_000 + position), conflict: true) : position % 2 == 0 ? Self.probe(0) : nil
            #expect(probes[position] == expected, "record \(position)")
        }
        #expect(probes[40] == nil)
        #expect(probes.values.count == 30)

        // The same probes put in another order are equal.
        var again = RecordProbes()
        for position in (0..<20).reversed() {
            again.set(Self.probe(Int64(1_000 + position), conflict: true), at: position, of: 40)
        }
        for position in stride(from: 20, to: 40, by: 2) { again.set(Self.probe(0), at: position, of: 40) }
        #expect(again == probes)
        #expect(again.hashValue == probes.hashValue)

        // Moving every probe moves each; forgetting the conflicts' leaves the registration's.
        probes.update { $0.started = $0.started + .seconds(5) }
        #expect(
            probes[3] == RecordProbe(started: Self.start + .milliseconds(6_003), announcements: 4, afterConflict: true))
        probes.removeAll { $0.afterConflict }
        #expect(probes.values.count == 10)
        #expect(probes[20] == RecordProbe(started: Self.start + .seconds(5), announcements: 2, afterConflict: false))
        #expect(probes[2] == nil)
        probes.removeAll { _ in true }
        #expect(probes.isEmpty)
        #expect(probes == RecordProbes())
    }
}
