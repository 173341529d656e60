import DNSWire
import LeaseStore
import NetworkAddresses
import SleepProxyCore
import Testing

/// The records learned from declared hosts, kept so that a host asleep when the proxy restarts is held with them;
/// and version-2 stores (which had none) brought to the current version.
@Suite struct LearnedStoreTests {
    static let imac = OwnerKey(interface: "eth0", primaryMAC: mac(0x31))
    static let nas = OwnerKey(interface: "eth0.20", primaryMAC: mac(0x32))

    /// A Mac's records, as learned: each heard at its own time, some earlier than the one before.
    static func learned() throws -> [LearnedRecord] {
        try macRecords().enumerated().map { index, record in
            LearnedRecord(record: record, heard: baseTime + .milliseconds(Int64((index * 7_919) % 5_000) - 2_500))
        }
    }

    @Test func learnedRecordsAreReplacedAndDeletedPerHost() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            #expect(try store.loadLearned() == LoadedLearned(records: [:], problems: []))
            let imac = try Self.learned()
            let nas = Array(imac.prefix(2))
            try store.apply([.saveLearned(Self.imac, imac), .saveLearned(Self.nas, nas)])
            // Read back by another connection, exactly: every bit of each record, and each time.
            let loaded = try LeaseStore(directory: directory).loadLearned()
            #expect(loaded.problems.isEmpty)
            #expect(loaded.records == [Self.imac: imac, Self.nas: nas])

            // Saved again, the host's records are replaced whole, in the order given.
            let replaced = Array(imac.suffix(3).reversed())
            try store.apply([.saveLearned(Self.imac, replaced)])
            #expect(try store.loadLearned().records == [Self.imac: replaced, Self.nas: nas])
            // None deletes them, and deleting what is not kept is no error.
            try store.apply([
                .saveLearned(Self.nas, []), .saveLearned(OwnerKey(interface: "eth1", primaryMAC: mac(9)), []),
            ])
            #expect(try store.loadLearned().records == [Self.imac: replaced])
            #expect(try rawTexts("SELECT count(*) FROM learned", inDirectory: directory) == ["1"])
            // They live beside the owners, not in them.
            #expect(try store.loadOwners().owners.isEmpty)
        }
    }

    /// A row that does not read back costs that host's learned records, not the start: it is learned again.
    @Test(arguments: ["heard = x'02'", "records = x'0000'", "mac = x'0102'", "heard = x'01'"])
    func aDamagedRowIsAProblemAndTheOthersLoad(_ damage: String) throws {
        try withTemporaryDirectory { directory in
            let learned = try Self.learned()
            try LeaseStore(directory: directory).apply([
                .saveLearned(Self.imac, learned), .saveLearned(Self.nas, learned),
            ])
            try executeRawSQL("UPDATE learned SET \(damage) WHERE interface = 'eth0'", inDirectory: directory)
            let loaded = try LeaseStore(directory: directory).loadLearned()
            #expect(loaded.records == [Self.nas: learned])
            #expect(
                loaded.problems.count == 1 && loaded.problems.first?.contains("learned row") == true,
                "\(loaded.problems)")
        }
    }

    /// The schema of version 2, as that version created it.
    static let version2Schema = """
        CREATE TABLE owners (
            interface TEXT NOT NULL,
            primary_mac BLOB NOT NULL,
            wake_mac BLOB NOT NULL,
            password BLOB,
            sequence INTEGER NOT NULL,
            registered_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            last_source TEXT,
            records BLOB NOT NULL,
            record_times BLOB NOT NULL,
            wake_reason TEXT,
            wake_rounds INTEGER,
            wake_goodbyes INTEGER,
            wake_next INTEGER,
            wake_withdrawn TEXT,
            PRIMARY KEY (interface, primary_mac)
        );
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            time INTEGER NOT NULL,
            kind TEXT NOT NULL,
            interface TEXT NOT NULL,
            owner BLOB,
            source TEXT,
            reason TEXT,
            detail TEXT NOT NULL
        );
        PRAGMA user_version = 2;
        """

    /// Every installation before this version has a version-2 store (or a version-1 one, brought through version
    /// 2): it is migrated in place when opened, and keeps every owner, wake and event.
    @Test func aVersion2StoreIsMigratedKeepingEverything() throws {
        try withTemporaryDirectory { source in
            try withTemporaryDirectory { directory in
                let owners = [makeOwner(records: held(try macRecords())), smallOwner(2), smallOwner(3)]
                let wake = WakeStoreTests.wake
                let events = (0..<5).map { makeEvent($0) }
                try LeaseStore(directory: source).apply(
                    owners.map { .saveOwner($0) } + [.saveWake(owners[1].key, wake)] + events.map { .appendEvent($0) })
                // A store as version 2 wrote it: its tables made by its own SQL, the rows as it wrote them.
                try executeRawSQL(
                    """
                    \(Self.version2Schema)
                    ATTACH DATABASE '\(source)/leases.sqlite' AS written;
                    INSERT INTO owners SELECT * FROM written.owners;
                    INSERT INTO events SELECT * FROM written.events;
                    DETACH DATABASE written;
                    """, inDirectory: directory)
                #expect(try rawTexts("PRAGMA user_version", inDirectory: directory) == ["2"])
                #expect(
                    try rawTexts(
                        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", inDirectory: directory)
                        == ["events", "owners"])

                let store = try LeaseStore(directory: directory)
                #expect(try rawTexts("PRAGMA user_version", inDirectory: directory) == ["\(LeaseStore.schemaVersion)"])
                let loaded = try store.loadOwners()
                #expect(loaded.owners == owners.sorted { $0.key < $1.key } && loaded.problems.isEmpty)
                #expect(loaded.wakes == [owners[1].key: wake])
                #expect(try store.events(limit: 10).events.map(\.event) == events)
                #expect(try store.loadLearned() == LoadedLearned(records: [:], problems: []))
                let learned = try Self.learned()
                try store.apply([.saveLearned(Self.imac, learned)])
                store.close()
                // Opening again migrates nothing more, and the learned records are there.
                let reopened = try LeaseStore(directory: directory)
                #expect(try reopened.loadLearned().records == [Self.imac: learned])
                #expect(try reopened.loadOwners().owners.count == owners.count)
            }
        }
    }
}
