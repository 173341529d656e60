import CSQLite
import Foundation
import SleepProxyCore
import Testing

@testable import LeaseStore

/// What opening does with a `leases.sqlite` that is not a sound lease store: damaged files are refused or set
/// aside, as the policy says; another program's database and a newer version's are refused and never touched.
struct DamagedFileTests {
    /// Ways a lease store's file ends up damaged, each made from a store holding `owners` small owners.
    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        case randomBytes
        case truncatedToHalf
        case truncatedInsideTheHeader
        case overwrittenPage

        var testDescription: String { rawValue }

        /// Writes the damaged file into `directory` and returns its bytes.
        func make(in directory: String) throws -> Data {
            let path = directory + "/" + LeaseStore.fileName
            if self == .randomBytes {
                var generator = SystemRandomNumberGenerator()
                let bytes = Data((0..<8192).map { _ in UInt8.random(in: 0...255, using: &generator) })
                try bytes.write(to: URL(fileURLWithPath: path))
                return bytes
            }
            let store = try LeaseStore(directory: directory)
            try store.apply(
                (0..<300).map { .saveOwner(smallOwner($0)) } + (0..<300).map { .appendEvent(makeEvent($0)) })
            store.close()
            // The last connection's close checkpoints the log into the file and deletes it.
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            try #require(bytes.count > 8 * 4096)
            switch self {
            case .randomBytes: break
            case .truncatedToHalf: bytes = bytes.prefix(bytes.count / 2)
            case .truncatedInsideTheHeader: bytes = bytes.prefix(60)
            case .overwrittenPage:
                // A page in the middle, overwritten as a bad sector or a stray write would.
                bytes.replaceSubrange(4 * 4096..<5 * 4096, with: Data(repeating: 0xA5, count: 4096))
            }
            try bytes.write(to: URL(fileURLWithPath: path))
            return bytes
        }
    }

    static func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    static func setAsideNames(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".damaged-") }.sorted()
    }

    @Test("a damaged file is refused by default and left as it was", arguments: Damage.allCases)
    func damagedFileIsRefused(damage: Damage) throws {
        try withTemporaryDirectory { directory in
            let bytes = try damage.make(in: directory)
            let error = #expect(throws: LeaseStoreError.self) { try LeaseStore(directory: directory) }
            #expect(error?.kind == .damaged, "\(String(describing: error))")
            #expect(error?.description.contains(directory + "/leases.sqlite") == true)
            #expect(Self.contents(directory + "/leases.sqlite") == bytes)
            #expect(try Self.setAsideNames(in: directory) == [])
        }
    }

    @Test("a damaged file is set aside whole and an empty store takes its place", arguments: Damage.allCases)
    func damagedFileIsSetAside(damage: Damage) throws {
        try withTemporaryDirectory { directory in
            let bytes = try damage.make(in: directory)
            // A write-ahead log left beside it must go with it: replayed into a new database it would resurrect
            // pages of the damaged one.
            let log = Data("not a real log, but it must move".utf8)
            try log.write(to: URL(fileURLWithPath: directory + "/leases.sqlite-wal"))

            let store = try LeaseStore(directory: directory, configuration: .init(damagedFile: .setAside))
            let setAside = try #require(store.setAside)
            #expect(setAside.problem.kind == .damaged)
            #expect(setAside.problem.path == directory + "/leases.sqlite")
            let name = (setAside.keptAs as NSString).lastPathComponent
            #expect(name.wholeMatch(of: /leases\.sqlite\.damaged-\d{8}T\d{6}Z/) != nil, "\(name)")
            #expect((setAside.keptAs as NSString).deletingLastPathComponent == directory)
            #expect(Self.contents(setAside.keptAs) == bytes, "the damaged file is kept byte for byte")
            #expect(Self.contents(setAside.keptAs + "-wal") == log)

            #expect(try store.loadOwners() == LoadedOwners(owners: [], problems: []))
            try store.apply([.saveOwner(smallOwner(7)), .appendEvent(makeEvent(7))])
            store.close()
            let reopened = try LeaseStore(directory: directory, configuration: .init(damagedFile: .setAside))
            #expect(reopened.setAside == nil)
            #expect(try reopened.loadOwners().owners == [smallOwner(7)])
            #expect(try reopened.events(limit: 10).events.map(\.event) == [makeEvent(7)])
        }
    }

    @Test func setAsideNamesNeverCollide() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/leases.sqlite"
            let moment = UnixTime(seconds: 1_750_000_000)
            var kept: [String] = []
            for round in 0..<3 {
                try Data([UInt8(round)]).write(to: URL(fileURLWithPath: path))
                kept.append(try LeaseStore.setAside(path, at: moment))
            }
            #expect(
                kept.map { ($0 as NSString).lastPathComponent } == [
                    "leases.sqlite.damaged-20250615T150640Z", "leases.sqlite.damaged-20250615T150640Z-2",
                    "leases.sqlite.damaged-20250615T150640Z-3",
                ])
            #expect(kept.map { Self.contents($0) } == [Data([0]), Data([1]), Data([2])])
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    /// Another program's database: schema version and tables as that program left them.
    @Test(
        "another program's SQLite database is refused and left untouched, whatever the policy",
        arguments: [
            (0, "CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)"),
            (3, "CREATE TABLE leases (address TEXT, expiry INTEGER); CREATE TABLE config (key TEXT, value TEXT)"),
            (1, "CREATE TABLE owners (name TEXT); CREATE TABLE pets (name TEXT)"),
            // The store's table names, but not its columns.
            (1, "CREATE TABLE owners (name TEXT); CREATE TABLE events (what TEXT)"),
        ])
    func foreignDatabaseIsRefused(version: Int, schema: String) throws {
        try withTemporaryDirectory { directory in
            try executeRawSQL(
                "\(schema); PRAGMA user_version = \(version); CREATE TABLE filler (x); INSERT INTO filler VALUES (1)",
                inDirectory: directory)
            let path = directory + "/leases.sqlite"
            let bytes = try #require(Self.contents(path))
            for policy in [LeaseStore.DamagedFilePolicy.refuse, .setAside] {
                let error = #expect(throws: LeaseStoreError.self) {
                    try LeaseStore(directory: directory, configuration: .init(damagedFile: policy))
                }
                #expect(error?.kind == .foreign, "\(String(describing: error))")
                #expect(error?.description.contains(path) == true)
                #expect(error?.reason.contains("left untouched") == true, "\(String(describing: error))")
            }
            #expect(Self.contents(path) == bytes)
            #expect(try Self.setAsideNames(in: directory) == [])
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        }
    }

    @Test func foreignDatabaseErrorNamesItsTables() throws {
        try withTemporaryDirectory { directory in
            try executeRawSQL(
                "CREATE TABLE messages (body TEXT); CREATE TABLE users (name TEXT)", inDirectory: directory)
            let error = #expect(throws: LeaseStoreError.self) { try LeaseStore(directory: directory) }
            #expect(error?.reason.contains("schema version 0 and the tables messages, users") == true)
        }
    }

    @Test func newerSchemaIsRefusedUntouchedEvenUnderSetAside() throws {
        try withTemporaryDirectory { directory in
            try LeaseStore(directory: directory).apply([.saveOwner(smallOwner(1))])
            let newer = LeaseStore.schemaVersion + 1
            try executeRawSQL("PRAGMA user_version = \(newer)", inDirectory: directory)
            let path = directory + "/leases.sqlite"
            let bytes = try #require(Self.contents(path))
            let error = #expect(throws: LeaseStoreError.self) {
                try LeaseStore(directory: directory, configuration: .init(damagedFile: .setAside))
            }
            #expect(error?.kind == .newerSchema)
            #expect(error?.reason.contains("schema version \(newer)") == true)
            #expect(error?.reason.contains("left untouched") == true)
            #expect(Self.contents(path) == bytes)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["leases.sqlite"])
        }
    }

    @Test func anEmptyFileIsANewStore() throws {
        try withTemporaryDirectory { directory in
            try Data().write(to: URL(fileURLWithPath: directory + "/leases.sqlite"))
            let store = try LeaseStore(directory: directory, configuration: .init(damagedFile: .setAside))
            #expect(store.setAside == nil)
            try store.apply([.saveOwner(smallOwner(1))])
            #expect(try store.loadOwners().owners == [smallOwner(1)])
        }
    }

    /// SQLite's page limit fails a write exactly as a full disk does (`SQLITE_FULL`): the error says so, nothing
    /// of the transaction is kept, and the connection goes on working once there is room again.
    @Test func aFullDiskIsNamedAsSuch() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            try store.apply([.saveOwner(smallOwner(0))])
            let pages = try store.pageCount()
            try store.setMaximumPageCount(pages)
            let big = makeOwner(primary: mac(9, 0xEE), records: held(try macRecords() + macRecords() + macRecords()))
            let batch = (1..<40).map { StoreChange.saveOwner(smallOwner($0)) } + [.saveOwner(big)]
            let error = #expect(throws: LeaseStoreError.self) { try store.apply(batch) }
            #expect(error?.kind == .diskFull, "\(String(describing: error))")
            #expect(error?.sqliteResultCode.map { $0 & 0xFF } == SQLITE_FULL)
            #expect(try store.loadOwners().owners == [smallOwner(0)])
            try store.setMaximumPageCount(1_000_000)
            try store.apply(batch)
            #expect(try store.loadOwners().owners.count == 41)
        }
    }
}

extension LeaseStore {
    /// The database's size in pages, over the store's own connection.
    fileprivate func pageCount() throws -> Int64 {
        try withConnection("test") { (connection) throws(LeaseStoreError) in try connection.integer("PRAGMA page_count")
        }
    }

    /// Caps the database's size (a per-connection limit), so that writes fail as on a full disk.
    fileprivate func setMaximumPageCount(_ pages: Int64) throws {
        try withConnection("test") { (connection) throws(LeaseStoreError) in
            _ = try connection.integer("PRAGMA max_page_count = \(pages)")
        }
    }
}
