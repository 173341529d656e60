import Testing

@testable import DNSWire

/// The table of names written so far, which compression points at: a record taken back takes its names with it.
@Suite("Compression table")
struct SuffixTableTests {
    /// Hashes that all start their probe at slot 62, so that the entries form one chain that wraps around the end
    /// of the first table (64 slots) and does not in the next (128).
    static func hash(_ index: Int) -> UInt64 { UInt64(index) << 32 | 62 }

    @Test func entriesTakenBackAcrossAGrowthLeaveTheOthersFound() {
        var table = SuffixTable()
        for index in 0..<20 { table.insertIfAbsent(Self.hash(index), offset: index) }
        let mark = table.insertions
        // Past half of 64 slots: the table grows while these are in it.
        for index in 20..<40 { table.insertIfAbsent(Self.hash(index), offset: index) }
        table.undo(to: mark)
        #expect(table.insertions == 20)
        for index in 0..<20 { #expect(table.offset(for: Self.hash(index)) == index) }
        for index in 20..<40 { #expect(table.offset(for: Self.hash(index)) == nil) }
        // And the freed slots take new entries.
        table.insertIfAbsent(Self.hash(99), offset: 99)
        #expect(table.offset(for: Self.hash(99)) == 99)
        #expect(table.offset(for: Self.hash(0)) == 0)
    }

    @Test func anEntryAlreadyThereIsNotInsertedTwice() {
        var table = SuffixTable()
        table.insertIfAbsent(Self.hash(1), offset: 12)
        let mark = table.insertions
        table.insertIfAbsent(Self.hash(1), offset: 40)
        #expect(table.insertions == mark)
        table.undo(to: mark)
        #expect(table.offset(for: Self.hash(1)) == 12)
    }
}
