import Foundation
import LeaseStore
import NetworkAddresses
import SleepProxyCore
import Testing

/// The wake in progress kept with its owner, and version-1 stores (which had no wakes) brought to the current version.
@Suite struct WakeStoreTests {
    static let wake = StoredWake(
        rounds: 4, goodbyes: 0, next: baseTime + .seconds(8), reason: "TCP SYN from 10.77.0.3:50000 to 10.77.0.2",
        withdrawn: nil)

    @Test func aWakeIsKeptWithItsOwnerUntilClearedOrRemoved() throws {
        try withTemporaryDirectory { directory in
            let owner = smallOwner(1)
            let store = try LeaseStore(directory: directory)
            try store.apply([.saveOwner(owner), .saveWake(owner.key, Self.wake)])
            #expect(try LeaseStore(directory: directory).loadOwners().wakes == [owner.key: Self.wake])
            // A later save of the owner (its lease brought in, say) keeps the wake; the wake's own progress
            // replaces it.
            var later = Self.wake
            later.rounds = 5
            later.next = later.next + .seconds(2)
            try store.apply([.saveOwner(owner), .saveWake(owner.key, later)])
            #expect(try store.loadOwners().wakes == [owner.key: later])
            // A wake of some records: their positions come back as they went in.
            var records = later
            records.withdrawn = [0, 1]
            try store.apply([.saveWake(owner.key, records)])
            #expect(try store.loadOwners().wakes[owner.key]?.withdrawn == [0, 1])
            // Cleared, it is gone; the owner stays.
            try store.apply([.saveWake(owner.key, nil)])
            var loaded = try store.loadOwners()
            #expect(loaded.wakes.isEmpty && loaded.owners == [owner] && loaded.problems.isEmpty)
            // It goes with its owner, and an owner saved again later starts without one.
            try store.apply([.saveWake(owner.key, Self.wake)])
            try store.apply([.removeOwner(owner.key)])
            try store.apply([.saveOwner(owner)])
            #expect(try store.loadOwners().wakes.isEmpty)
            // The wake of an owner that is not stored is not kept, and is no error.
            try store.apply([.saveWake(smallOwner(2).key, Self.wake)])
            loaded = try store.loadOwners()
            #expect(loaded.wakes.isEmpty && loaded.owners == [owner])
        }
    }

    /// The columns of a version-1 store's owners table, as version 1 created it.
    static let version1Columns = [
        "interface", "primary_mac", "wake_mac", "password", "sequence", "registered_at", "updated_at", "last_source",
        "records", "record_times",
    ]

    /// Every installation before this version has a version-1 store: it is migrated in place when opened, and
    /// keeps every owner and event.
    @Test func aVersion1StoreIsMigratedKeepingEverything() throws {
        try withTemporaryDirectory { directory in
            let owners = [makeOwner(records: held(try macRecords())), smallOwner(2), smallOwner(3)]
            let events = (0..<5).map { makeEvent($0) }
            try LeaseStore(directory: directory).apply(owners.map { .saveOwner($0) } + events.map { .appendEvent($0) })
            // Back to version 1: the same file as version 1 wrote it.
            try executeRawSQL("DROP TABLE learned", inDirectory: directory)
            for column in ["wake_reason", "wake_rounds", "wake_goodbyes", "wake_next", "wake_withdrawn"] {
                try executeRawSQL("ALTER TABLE owners DROP COLUMN \(column)", inDirectory: directory)
            }
            try executeRawSQL("PRAGMA user_version = 1", inDirectory: directory)
            #expect(
                try rawTexts("SELECT name FROM pragma_table_info('owners')", inDirectory: directory)
                    == Self.version1Columns)

            let store = try LeaseStore(directory: directory)
            #expect(try rawTexts("PRAGMA user_version", inDirectory: directory) == ["\(LeaseStore.schemaVersion)"])
            let loaded = try store.loadOwners()
            #expect(
                loaded.owners == owners.sorted { $0.key < $1.key } && loaded.wakes.isEmpty && loaded.problems.isEmpty)
            #expect(try store.events(limit: 10).events.map(\.event) == events)
            try store.apply([.saveWake(owners[1].key, Self.wake)])
            #expect(try store.loadOwners().wakes == [owners[1].key: Self.wake])
            store.close()
            // Opening again migrates nothing more.
            #expect(try LeaseStore(directory: directory).loadOwners().wakes == [owners[1].key: Self.wake])
        }
    }

    /// A wake whose columns do not read back costs the wake, not the host: it is held, and the problem says so.
    @Test(arguments: [
        "wake_rounds = -1", "wake_withdrawn = '1,x'", "wake_withdrawn = ''",
    ])
    func aDamagedWakeIsAProblemAndTheOwnerStays(_ damage: String) throws {
        try withTemporaryDirectory { directory in
            let owner = smallOwner(1)
            try LeaseStore(directory: directory).apply([.saveOwner(owner), .saveWake(owner.key, Self.wake)])
            try executeRawSQL("UPDATE owners SET \(damage)", inDirectory: directory)
            let loaded = try LeaseStore(directory: directory).loadOwners()
            #expect(loaded.owners == [owner] && loaded.wakes.isEmpty)
            #expect(
                loaded.problems.count == 1 && loaded.problems.first?.contains("wake:") == true, "\(loaded.problems)")
        }
    }
}
