import DNSWire
import FixtureSupport
import NetworkAddresses
import SleepProxyCore
import Testing

/// A host's records packed with their lease times: read back as they were given, in order, with their own times,
/// however many distinct times there are.
@Suite("Held records, packed")
struct HeldRecordsTests {
    static let base = UnixTime(seconds: 1_700_000_000)

    static func records(_ count: Int, distinctTimes: (Int) -> Int) -> [HeldRecord] {
        (0..<count).map { index in
            let time = distinctTimes(index)
            return HeldRecord(
                record: DNSRecord(
                    name: try! DNSName(labels: ["Host\(index % 5)", "local"]), ttl: 120, cacheFlush: index % 2 == 0,
                    rdata: .a(IPv4Address(10, 0, UInt8(index >> 8), UInt8(index & 0xFF)))),
                sequence: UInt8(time % 256), registeredAt: base + .seconds(Int64(time)),
                expiresAt: base + .seconds(Int64(7_200 + time)))
        }
    }

    @Test(arguments: [1, 3, 40, 2_000])
    func recordsAndTheirTimesReadBackInOrder(distinct: Int) {
        // Times repeat in runs and come back out of order, as datagrams of one sequence add to a host.
        let given = Self.records(3_000) { index in (index / 7 * 31) % distinct }
        let held = HeldRecords(given)
        #expect(Array(held) == given)
        #expect(held.count == given.count)
        #expect(held.earliestExpiry == given.map(\.expiresAt).min())
        for position in [0, 1, 1_499, 2_999] {
            #expect(held.record(at: position) == given[position].record)
            #expect(held.type(at: position) == .a)
            #expect(held.isUnique(at: position) == given[position].record.cacheFlush)
            #expect(held.expiresAt(at: position) == given[position].expiresAt)
            #expect(held.nameEquals(at: position, ignoringCase: given[position].record.name.lowercased()))
        }
    }

    @Test func changesPackTheRecordsAgain() {
        var held = HeldRecords(Self.records(10) { $0 })
        held.updateEach { $0.expiresAt = $0.expiresAt + .seconds(60) }
        #expect(held.map(\.expiresAt) == Self.records(10) { $0 }.map { $0.expiresAt + .seconds(60) })
        held.removeAll { $0.sequence % 2 == 1 }
        #expect(held.map(\.sequence) == [0, 2, 4, 6, 8])
        held.append(contentsOf: Self.records(1) { _ in 99 })
        #expect(held.last?.sequence == 99)
        #expect(held.position(of: Self.records(1) { _ in 0 }[0].record) == 0)
        let kept = held.filter { $0.sequence != 4 }
        #expect(kept.map(\.sequence) == [0, 2, 6, 8, 99])
        #expect(Array(held.filter { _ in false }).isEmpty)
        #expect(HeldRecords() == [])
        #expect(HeldRecords().earliestExpiry == nil)
    }
}
