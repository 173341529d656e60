import DNSWire
import LeaseStore
import NetworkAddresses
import SleepProxyCore
import Testing

@testable import SleepProxyDaemon

/// What the store is told when it catches up with the core after failed commits: owners new or changed are saved,
/// owners it keeps that the core let go are removed, and wakes whose progress differs are written.
@Suite struct StoreCatchUpTests {
    static func owner(_ number: UInt8, sequence: UInt8 = 1) -> Owner {
        let mac = MACAddress(2, 0, 0, 0, 0, number)
        return Owner(
            key: OwnerKey(interface: "eth0", primaryMAC: mac), wakeMAC: mac, sequence: sequence,
            registeredAt: UnixTime(seconds: 1_900_000_000), updatedAt: UnixTime(seconds: 1_900_000_000), records: [])
    }

    static let wake = StoredWake(
        rounds: 2, goodbyes: 0, next: UnixTime(seconds: 1_900_000_010), reason: "a SYN", withdrawn: nil)

    @Test func theDifferenceSavesRemovesAndWritesWakes() {
        let stored = LoadedOwners(
            owners: [Self.owner(1), Self.owner(2), Self.owner(3)], wakes: [Self.owner(3).key: Self.wake], problems: [])
        let held = [Self.owner(4), Self.owner(1, sequence: 2), Self.owner(3)]
        let difference = StoreCatchUp.difference(stored: stored, held: held, wakes: [Self.owner(4).key: Self.wake])
        #expect(difference.saved == [Self.owner(1, sequence: 2), Self.owner(4)])
        #expect(difference.removed == [Self.owner(2).key])
        #expect(difference.wakes.map(\.key) == [Self.owner(3).key, Self.owner(4).key])
        #expect(
            difference.changes == [
                .saveOwner(Self.owner(1, sequence: 2)), .saveOwner(Self.owner(4)), .removeOwner(Self.owner(2).key),
                .saveWake(Self.owner(3).key, nil), .saveWake(Self.owner(4).key, Self.wake),
            ])
    }

    static func learned(_ ttl: UInt32) -> [LearnedRecord] {
        [
            LearnedRecord(
                record: DNSRecord(name: "nas.local.", ttl: ttl, cacheFlush: true, rdata: .a(IPv4Address(10, 0, 0, 9))),
                heard: UnixTime(seconds: 1_900_000_000))
        ]
    }

    /// Learned records the store lacks or has otherwise are saved; those of a host the core no longer learns from
    /// are deleted; those in step are left alone.
    @Test func theDifferenceSavesAndDeletesLearnedRecords() {
        let stored = LoadedOwners(owners: [], problems: [])
        let keys = (1...4).map { Self.owner($0).key }
        let difference = StoreCatchUp.difference(
            stored: stored, held: [], wakes: [:],
            storedLearned: [keys[0]: Self.learned(120), keys[1]: Self.learned(120), keys[3]: Self.learned(120)],
            learned: [keys[0]: Self.learned(120), keys[1]: Self.learned(4_500), keys[2]: Self.learned(120)])
        #expect(!difference.isEmpty)
        #expect(
            difference.changes == [
                .saveLearned(keys[1], Self.learned(4_500)), .saveLearned(keys[2], Self.learned(120)),
                .saveLearned(keys[3], []),
            ])
    }

    @Test func aStoreInStepWithTheCoreIsToldNothing() {
        let stored = LoadedOwners(owners: [Self.owner(1)], wakes: [Self.owner(1).key: Self.wake], problems: [])
        let difference = StoreCatchUp.difference(
            stored: stored, held: [Self.owner(1)], wakes: [Self.owner(1).key: Self.wake])
        #expect(difference.isEmpty)
    }
}
