import CSQLite
import DNSWire
import Glibc
import NetworkAddresses
public import SleepProxyCore
import Synchronization

/// What the daemon's shell writes the core's `StoreChange`s through and restores the lease table from.
/// `LeaseStore` is the SQLite implementation; tests of the shell can substitute their own.
public protocol LeaseStoring: AnyObject, Sendable {
    /// Makes all `changes` durable together, or none of them.
    func apply(_ changes: [StoreChange]) throws
    /// Every stored owner, with descriptions of the rows that could not be read.
    func loadOwners() throws -> LoadedOwners
}

/// The owners the store held, as read back at start-up.
public struct LoadedOwners: Hashable, Sendable {
    /// Owners in (interface, primary MAC) order.
    public var owners: [Owner]
    /// The wakes that were in progress, by owner.
    public var wakes: [OwnerKey: StoredWake]
    /// One line per row that did not decode and was skipped, or whose wake did not: which row, and what was
    /// wrong with it.
    public var problems: [String]

    public init(owners: [Owner], wakes: [OwnerKey: StoredWake] = [:], problems: [String]) {
        self.owners = owners
        self.wakes = wakes
        self.problems = problems
    }
}

/// What the store kept of the records learned from declared hosts, as read back at start-up.
public struct LoadedLearned: Hashable, Sendable {
    /// Each declared host's records, in the order they were first learned, with when each was last sent.
    public var records: [OwnerKey: [LearnedRecord]]
    /// One line per row that did not decode and was skipped: which row, and what was wrong with it.
    public var problems: [String]

    public init(records: [OwnerKey: [LearnedRecord]], problems: [String]) {
        self.records = records
        self.problems = problems
    }
}

/// An event of the history with its row id. Ids only grow, so a follower can ask for the events after the last
/// id it has seen.
public struct StoredEvent: Hashable, Sendable {
    public var id: Int64
    public var event: Event

    public init(id: Int64, event: Event) {
        self.id = id
        self.event = event
    }
}

/// Events read back from the history, oldest first.
public struct LoadedEvents: Hashable, Sendable {
    /// In ascending id order (oldest first, newest last).
    public var events: [StoredEvent]
    /// One line per row that did not decode and was skipped.
    public var problems: [String]

    public init(events: [StoredEvent], problems: [String]) {
        self.events = events
        self.problems = problems
    }
}

/// The persistent mirror of the core's lease table, the records learned from declared hosts, and the event history,
/// in one SQLite database.
///
/// The database is `<directory>/leases.sqlite` in write-ahead-log mode with `synchronous=NORMAL`: every
/// `apply(_:)` that has returned survives the process being killed (SIGKILL, a crash, the OOM killer), and the
/// database is never left inconsistent. A power loss or kernel crash can lose the last transactions committed
/// before it (WAL with `NORMAL` syncs at checkpoints, not at every commit), which costs at most a few
/// registrations the Macs re-send at their next maintenance wake.
///
/// All methods may be called from any thread: an internal mutex serializes them. They block on disk I/O, so call
/// them from a thread that may block, not from an event loop.
public final class LeaseStore: LeaseStoring {
    /// Tuning of the store. Every value has a default that suits a home network.
    public struct Configuration: Hashable, Sendable {
        /// How many events the history keeps; older ones are deleted as new ones arrive. At least 1.
        public var eventHistoryLimit: Int
        /// How long a statement waits for another connection's lock (the CLI reading, say) before it fails.
        public var busyTimeout: Duration
        /// What opening does with a damaged database file.
        public var damagedFile: DamagedFilePolicy
        /// The most memory SQLite may keep for pages it read or wrote (`PRAGMA cache_size`), in KiB. A commit
        /// touches a few dozen pages; the rest of the file is read once, at start. Under SQLite's own default,
        /// about 2 MB (more than the daemon's whole state), the cache grew a page at a time for as long as the
        /// daemon ran, from empty after each start (loading gives its pages back). A page not cached is in the
        /// kernel's page cache, a read away.
        public var pageCacheKiB: Int

        public init(
            eventHistoryLimit: Int = 10_000, busyTimeout: Duration = .seconds(5),
            damagedFile: DamagedFilePolicy = .refuse, pageCacheKiB: Int = 256
        ) {
            self.eventHistoryLimit = eventHistoryLimit
            self.busyTimeout = busyTimeout
            self.damagedFile = damagedFile
            self.pageCacheKiB = pageCacheKiB
        }
    }

    /// What opening does with a database file that is damaged (error kind `.damaged`: not a SQLite database, or
    /// one SQLite finds corrupt). A sound database that is not a lease store, or one of a newer schema, is always
    /// refused and left untouched, whatever the policy: it is another program's file, or a newer version's.
    public struct DamagedFilePolicy: Hashable, Sendable, CustomStringConvertible {
        private enum Code: Hashable, Sendable {
            case refuse
            case setAside
        }
        private let code: Code

        /// Throw the `.damaged` error and leave the file as it is.
        public static let refuse = DamagedFilePolicy(code: .refuse)
        /// Rename the file (with its `-wal` and `-shm` files) to `leases.sqlite.damaged-<UTC time>` beside it and
        /// open a new, empty store. `LeaseStore.setAside` then says where the file went and what was wrong.
        public static let setAside = DamagedFilePolicy(code: .setAside)

        public var description: String {
            switch code {
            case .refuse: "refuse"
            case .setAside: "set aside"
            }
        }
    }

    /// A damaged database file that opening renamed before starting an empty store.
    public struct SetAsideFile: Hashable, Sendable {
        /// Where the damaged file is now (its `-wal` and `-shm` files, if any, carry the same name plus suffix).
        public var keptAs: String
        /// What was wrong with it.
        public var problem: LeaseStoreError
    }

    /// The schema version this build writes, kept in `PRAGMA user_version`. Version 1 had no wakes, version 2 no
    /// learned records; an older store is brought to version 3 when it is opened (the wake columns and the
    /// `learned` table are added, everything else is kept).
    public static let schemaVersion: Int64 = 3
    /// The database file's name inside the state directory.
    public static let fileName = "leases.sqlite"

    /// The database file.
    public let path: String
    public let configuration: Configuration
    /// The damaged file this store replaced when it was opened, under the `.setAside` policy; nil otherwise.
    public let setAside: SetAsideFile?
    private let connection: Mutex<Connection?>

    /// Opens the store in `directory`, creating the directory (mode 0700) and the database when missing.
    ///
    /// Opening checks what the file is before it writes anything: a database of a newer schema throws
    /// `.newerSchema`, a SQLite database with other tables `.foreign` (both left untouched); a file that is not a
    /// database, or that fails SQLite's quick integrity check, is `.damaged`: refused or set aside as
    /// `configuration.damagedFile` says. `.cannotCreateDirectory` when the directory cannot be made, `.cannotOpen`
    /// when SQLite cannot open the file at all.
    public init(directory: String, configuration: Configuration = .init()) throws(LeaseStoreError) {
        let path = directory.hasSuffix("/") ? directory + Self.fileName : directory + "/" + Self.fileName
        self.path = path
        self.configuration = configuration
        guard configuration.eventHistoryLimit >= 1 else {
            throw LeaseStoreError(
                .invalidConfiguration, operation: "open", path: path,
                reason: "eventHistoryLimit must be at least 1, not \(configuration.eventHistoryLimit)")
        }
        try Self.makeDirectory(directory)
        do {
            connection = Mutex(try Self.open(path, configuration: configuration))
            setAside = nil
        } catch {
            guard error.kind == .damaged, configuration.damagedFile == .setAside else { throw error }
            let keptAs = try Self.setAside(path)
            connection = Mutex(try Self.open(path, configuration: configuration))
            setAside = SetAsideFile(keptAs: keptAs, problem: error)
        }
    }

    private static func open(_ path: String, configuration: Configuration) throws(LeaseStoreError) -> Connection {
        let connection = try Connection(path: path)
        do {
            try prepare(connection, configuration: configuration)
        } catch {
            // A sound database that is refused (another program's, a newer version's) is closed as any SQLite
            // client closes it, which leaves no empty log beside it; a damaged one stays exactly as found.
            if error.kind != .damaged { try? connection.setCheckpointOnClose(true) }
            connection.close()
            throw error
        }
        return connection
    }

    deinit { close() }

    /// Closes the database. Later calls throw an error of kind `.closed`; closing again does nothing.
    public func close() {
        connection.withLock { connection in
            connection?.close()
            connection = nil
        }
    }

    // MARK: Writing

    /// Makes every change durable in one transaction: all of them, or none when any fails.
    ///
    /// `saveOwner` inserts or replaces the owner with all its records, `removeOwner` deletes it (a missing owner
    /// is not an error), `saveLearned` replaces a declared host's learned records (none deletes them),
    /// `appendEvent` appends to the history, which is then trimmed to the newest
    /// `eventHistoryLimit` events. The daemon gathers the changes of many datagrams into one call (group commit)
    /// and sends their replies after it returns.
    public func apply(_ changes: [StoreChange]) throws(LeaseStoreError) {
        guard !changes.isEmpty else { return }
        let limit = Int64(configuration.eventHistoryLimit)
        try withConnection("apply") { connection throws(LeaseStoreError) in
            try connection.transaction { () throws(LeaseStoreError) in
                var lastEventID: Int64?
                for (index, change) in changes.enumerated() {
                    do throws(LeaseStoreError) {
                        switch change {
                        case .saveOwner(let owner): try Self.save(owner, in: connection)
                        case .removeOwner(let key): try Self.remove(key, in: connection)
                        case .appendEvent(let event): lastEventID = try Self.append(event, in: connection)
                        case .saveWake(let key, let wake): try Self.save(wake, of: key, in: connection)
                        case .saveLearned(let key, let learned): try Self.save(learned, of: key, in: connection)
                        }
                    } catch {
                        throw error.within("apply change \(index + 1) of \(changes.count) (\(Self.summary(change)))")
                    }
                }
                if let lastEventID, lastEventID > limit {
                    let trim = try connection.prepared(SQL.trimEvents)
                    defer { trim.reset() }
                    try trim.bind(1, lastEventID - limit)
                    try trim.run()
                }
            }
        }
    }

    private static func summary(_ change: StoreChange) -> String {
        switch change {
        case .saveOwner(let owner): "save owner \(owner.key)"
        case .removeOwner(let key): "remove owner \(key)"
        case .appendEvent(let event): "append \(event.kind) event"
        case .saveWake(let key, let wake): wake == nil ? "clear the wake of \(key)" : "save the wake of \(key)"
        case .saveLearned(let key, let learned):
            learned.isEmpty ? "delete the learned records of \(key)" : "save \(learned.count) learned records of \(key)"
        }
    }

    private static func save(_ owner: Owner, in connection: Connection) throws(LeaseStoreError) {
        let records: [UInt8]
        do {
            records = try RecordCoding.encodeRecords(owner.records)
        } catch {
            throw LeaseStoreError(
                .encoding, operation: "encode \(owner.records.count) records", path: connection.path,
                reason: "\(error)")
        }
        let times = RecordCoding.encodeTimes(owner.records, ownerRegisteredAt: owner.registeredAt)
        let statement = try connection.prepared(SQL.upsertOwner)
        defer { statement.reset() }
        try statement.bind(1, text: owner.key.interface.rawValue)
        try statement.bind(2, blob: owner.key.primaryMAC.array)
        try statement.bind(3, blob: owner.wakeMAC.array)
        try statement.bind(4, blob: owner.password)
        try statement.bind(5, Int64(owner.sequence))
        try statement.bind(6, owner.registeredAt.nanoseconds)
        try statement.bind(7, owner.updatedAt.nanoseconds)
        try statement.bind(8, text: owner.lastSource?.description)
        try statement.bind(9, blob: records)
        try statement.bind(10, blob: times)
        try statement.run()
    }

    /// Sets (or clears) the wake of a stored owner; an owner that is not stored has none to keep.
    private static func save(_ wake: StoredWake?, of key: OwnerKey, in connection: Connection) throws(LeaseStoreError) {
        let statement = try connection.prepared(SQL.updateWake)
        defer { statement.reset() }
        try statement.bind(1, text: key.interface.rawValue)
        try statement.bind(2, blob: key.primaryMAC.array)
        try statement.bind(3, text: wake?.reason)
        try statement.bind(4, wake.map { Int64($0.rounds) })
        try statement.bind(5, wake.map { Int64($0.goodbyes) })
        try statement.bind(6, wake?.next.nanoseconds)
        try statement.bind(7, text: wake?.withdrawn.map { $0.map(String.init).joined(separator: ",") })
        try statement.run()
    }

    /// Replaces the learned records of the declared host of `key`; none deletes its row.
    private static func save(
        _ learned: [LearnedRecord], of key: OwnerKey, in connection: Connection
    ) throws(LeaseStoreError) {
        let statement = try connection.prepared(learned.isEmpty ? SQL.deleteLearned : SQL.upsertLearned)
        defer { statement.reset() }
        try statement.bind(1, text: key.interface.rawValue)
        try statement.bind(2, blob: key.primaryMAC.array)
        if !learned.isEmpty {
            let encoded: (records: [UInt8], heard: [UInt8])
            do {
                encoded = try RecordCoding.encode(learned)
            } catch {
                throw LeaseStoreError(
                    .encoding, operation: "encode \(learned.count) learned records", path: connection.path,
                    reason: "\(error)")
            }
            try statement.bind(3, blob: encoded.records)
            try statement.bind(4, blob: encoded.heard)
        }
        try statement.run()
    }

    private static func remove(_ key: OwnerKey, in connection: Connection) throws(LeaseStoreError) {
        let statement = try connection.prepared(SQL.deleteOwner)
        defer { statement.reset() }
        try statement.bind(1, text: key.interface.rawValue)
        try statement.bind(2, blob: key.primaryMAC.array)
        try statement.run()
    }

    private static func append(_ event: Event, in connection: Connection) throws(LeaseStoreError) -> Int64 {
        let statement = try connection.prepared(SQL.insertEvent)
        defer { statement.reset() }
        try statement.bind(1, event.time.nanoseconds)
        try statement.bind(2, text: event.kind.identifier)
        try statement.bind(3, text: event.interface.rawValue)
        try statement.bind(4, blob: event.owner?.array)
        try statement.bind(5, text: event.source?.description)
        try statement.bind(6, text: event.reason?.identifier)
        try statement.bind(7, text: event.detail)
        try statement.run()
        return connection.lastInsertedRowID
    }

    // MARK: Reading

    /// Every stored owner in (interface, primary MAC) order. A row that does not decode is skipped and described
    /// in `problems`; only a failure of SQLite itself throws.
    public func loadOwners() throws(LeaseStoreError) -> LoadedOwners {
        try withConnection("load owners") { connection throws(LeaseStoreError) in
            let statement = try connection.prepared(SQL.selectOwners)
            defer { statement.reset() }
            var owners: [Owner] = []
            var wakes: [OwnerKey: StoredWake] = [:]
            var problems: [String] = []
            while try statement.step() {
                let owner: Owner
                do throws(RecordCoding.Failure) {
                    owner = try Self.owner(from: statement)
                } catch {
                    problems.append("owner row \(statement.int64(0)) (\(Self.rowName(statement))): \(error.reason)")
                    continue
                }
                owners.append(owner)
                // A wake that does not read back costs the wake, not the host: it stays held.
                do throws(RecordCoding.Failure) {
                    if let wake = try Self.wake(from: statement) { wakes[owner.key] = wake }
                } catch {
                    problems.append(
                        "owner row \(statement.int64(0)) (\(Self.rowName(statement))): wake: \(error.reason); the host is held, not woken"
                    )
                }
            }
            // Whole, at start (and when the daemon catches up after failed commits): the pages it read would
            // stay cached otherwise, up to SQLite's default cache of about 2 MB.
            connection.releaseCachedPages()
            return LoadedOwners(owners: owners, wakes: wakes, problems: problems)
        }
    }

    /// The records learned from each declared host. A row that does not decode is skipped and described in
    /// `problems`; only a failure of SQLite itself throws.
    public func loadLearned() throws(LeaseStoreError) -> LoadedLearned {
        try withConnection("load learned records") { connection throws(LeaseStoreError) in
            let statement = try connection.prepared(SQL.selectLearned)
            defer { statement.reset() }
            var records: [OwnerKey: [LearnedRecord]] = [:]
            var problems: [String] = []
            while try statement.step() {
                do throws(RecordCoding.Failure) {
                    guard let interface = statement.text(1), !interface.isEmpty else {
                        throw RecordCoding.Failure(reason: "interface is NULL or empty")
                    }
                    guard let mac = statement.withBlob(2, { $0.flatMap { MACAddress(bytes: $0) } }) else {
                        throw RecordCoding.Failure(reason: "mac is not 6 bytes")
                    }
                    let learned = try statement.withBlob(3) { (blob) throws(RecordCoding.Failure) in
                        try statement.withBlob(4) { (heard) throws(RecordCoding.Failure) in
                            guard let blob, let heard else {
                                throw RecordCoding.Failure(reason: "records or heard is NULL")
                            }
                            return try RecordCoding.decodeLearned(records: blob, heard: heard)
                        }
                    }
                    records[OwnerKey(interface: InterfaceName(interface), primaryMAC: mac)] = learned
                } catch {
                    problems.append(
                        "learned row \(statement.int64(0)) (\(Self.rowName(statement))): \(error.reason); learned again when the host next announces"
                    )
                }
            }
            return LoadedLearned(records: records, problems: problems)
        }
    }

    /// How a row names its owner in a problem report, whatever its key columns hold.
    private static func rowName(_ statement: Statement) -> String {
        let interface = statement.text(1) ?? "NULL"
        let mac = statement.blob(2).map { bytes in
            MACAddress(bytes: bytes).map(String.init(describing:)) ?? "\(bytes.count)-byte MAC"
        }
        return "\(mac ?? "NULL MAC")%\(interface)"
    }

    private static func owner(from row: Statement) throws(RecordCoding.Failure) -> Owner {
        guard let interface = row.text(1), !interface.isEmpty else {
            throw RecordCoding.Failure(reason: "interface is NULL or empty")
        }
        guard let primaryMAC = row.withBlob(2, { $0.flatMap { MACAddress(bytes: $0) } }) else {
            throw RecordCoding.Failure(reason: "primary_mac is not 6 bytes")
        }
        guard let wakeMAC = row.withBlob(3, { $0.flatMap { MACAddress(bytes: $0) } }) else {
            throw RecordCoding.Failure(reason: "wake_mac is not 6 bytes")
        }
        let password = row.blob(4)
        let sequence = row.int64(5)
        guard let sequence = UInt8(exactly: sequence) else {
            throw RecordCoding.Failure(reason: "sequence \(sequence) is not 0...255")
        }
        let registeredAt = UnixTime(nanoseconds: row.int64(6))
        let updatedAt = UnixTime(nanoseconds: row.int64(7))
        var lastSource: Endpoint?
        if let text = row.text(8) {
            guard let endpoint = Endpoint(parsing: text) else {
                throw RecordCoding.Failure(reason: "last_source \"\(text)\" is not an address and port")
            }
            lastSource = endpoint
        }
        let records = try row.withBlob(9) { (records) throws(RecordCoding.Failure) -> HeldRecords in
            try row.withBlob(10) { (times) throws(RecordCoding.Failure) -> HeldRecords in
                guard let records, let times else {
                    throw RecordCoding.Failure(reason: "records or record_times is NULL")
                }
                return try RecordCoding.decode(records: records, times: times, ownerRegisteredAt: registeredAt)
            }
        }
        return Owner(
            key: OwnerKey(interface: InterfaceName(interface), primaryMAC: primaryMAC), wakeMAC: wakeMAC,
            password: password, sequence: sequence, registeredAt: registeredAt, updatedAt: updatedAt,
            lastSource: lastSource, records: records)
    }

    /// The wake in columns 11 to 15 of an owner row: nil when the reason is NULL (no wake).
    private static func wake(from row: Statement) throws(RecordCoding.Failure) -> StoredWake? {
        guard let reason = row.text(11) else { return nil }
        let rounds = row.int64(12)
        let goodbyes = row.int64(13)
        guard let rounds = Int(exactly: rounds), rounds >= 0, let goodbyes = Int(exactly: goodbyes), goodbyes >= 0
        else {
            throw RecordCoding.Failure(reason: "rounds \(rounds) or goodbyes \(goodbyes) is negative")
        }
        var withdrawn: [Int]?
        if let list = row.text(15) {
            let positions = list.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
            guard !positions.isEmpty, positions.allSatisfy({ ($0 ?? -1) >= 0 }) else {
                throw RecordCoding.Failure(reason: "withdrawn records \"\(list)\" is not a list of record positions")
            }
            withdrawn = positions.compactMap { $0 }
        }
        return StoredWake(
            rounds: rounds, goodbyes: goodbyes, next: UnixTime(nanoseconds: row.int64(14)), reason: reason,
            withdrawn: withdrawn)
    }

    /// The newest `limit` events, oldest first.
    public func events(limit: Int) throws(LeaseStoreError) -> LoadedEvents {
        try readEvents("read events", sql: SQL.selectNewestEvents, bindings: [Int64(max(limit, 0))], reversed: true)
    }

    /// Up to `limit` events with ids greater than `id`, oldest first: what a follower has not seen yet.
    public func events(after id: Int64, limit: Int) throws(LeaseStoreError) -> LoadedEvents {
        try readEvents(
            "read events", sql: SQL.selectEventsAfter, bindings: [id, Int64(max(limit, 0))], reversed: false)
    }

    /// The memory SQLite keeps now for this store's cached pages, in bytes: about `pageCacheKiB` at most.
    public func cachedPageBytes() throws(LeaseStoreError) -> Int {
        try withConnection("read the page cache's size") { connection throws(LeaseStoreError) in
            connection.cachedPageBytes
        }
    }

    /// The memory SQLite holds now in this process, for every store and connection (`sqlite3_memory_used`): page
    /// caches, schemas, prepared statements.
    public static func sqliteMemoryBytes() -> Int {
        Int(sqlite3_memory_used())
    }

    /// How many events the history holds.
    public func eventCount() throws(LeaseStoreError) -> Int {
        try withConnection("count events") { connection throws(LeaseStoreError) in
            Int(try connection.integer(SQL.countEvents))
        }
    }

    private func readEvents(
        _ operation: String, sql: String, bindings: [Int64], reversed: Bool
    ) throws(LeaseStoreError) -> LoadedEvents {
        try withConnection(operation) { connection throws(LeaseStoreError) in
            let statement = try connection.prepared(sql)
            defer { statement.reset() }
            for (index, value) in bindings.enumerated() { try statement.bind(Int32(index + 1), value) }
            var events: [StoredEvent] = []
            var problems: [String] = []
            while try statement.step() {
                do throws(RecordCoding.Failure) {
                    events.append(try Self.event(from: statement))
                } catch {
                    problems.append("event row \(statement.int64(0)): \(error.reason)")
                }
            }
            if reversed { events.reverse() }
            return LoadedEvents(events: events, problems: problems)
        }
    }

    private static func event(from row: Statement) throws(RecordCoding.Failure) -> StoredEvent {
        let kindText = row.text(2) ?? "NULL"
        guard let kind = Event.Kind(identifier: kindText) else {
            throw RecordCoding.Failure(reason: "unknown kind \"\(kindText)\"")
        }
        guard let interface = row.text(3) else { throw RecordCoding.Failure(reason: "interface is NULL") }
        var owner: MACAddress?
        if let bytes = row.blob(4) {
            guard let mac = MACAddress(bytes: bytes) else {
                throw RecordCoding.Failure(reason: "owner is \(bytes.count) bytes, expected 6")
            }
            owner = mac
        }
        var source: Endpoint?
        if let text = row.text(5) {
            guard let endpoint = Endpoint(parsing: text) else {
                throw RecordCoding.Failure(reason: "source \"\(text)\" is not an address and port")
            }
            source = endpoint
        }
        var reason: RefusalReason?
        if let text = row.text(6) {
            guard let value = RefusalReason(identifier: text) else {
                throw RecordCoding.Failure(reason: "unknown refusal reason \"\(text)\"")
            }
            reason = value
        }
        let event = Event(
            time: UnixTime(nanoseconds: row.int64(1)), kind: kind, interface: InterfaceName(interface), owner: owner,
            source: source, reason: reason, detail: row.text(7) ?? "")
        return StoredEvent(id: row.int64(0), event: event)
    }

    // MARK: Plumbing

    /// Runs `body` with the connection, under the mutex; internal for the tests' own pragmas.
    func withConnection<R: Sendable>(
        _ operation: String, _ body: (Connection) throws(LeaseStoreError) -> R
    ) throws(LeaseStoreError) -> R {
        let path = path
        return try connection.withLock { (connection) throws(LeaseStoreError) -> R in
            guard let connection, connection.isOpen else {
                throw LeaseStoreError(.closed, operation: operation, path: path, reason: "the store was closed")
            }
            do throws(LeaseStoreError) {
                return try body(connection)
            } catch {
                throw error.within(operation)
            }
        }
    }

    /// Sets the connection up: busy timeout, what the file is (version, tables, integrity), WAL, pragmas, and the
    /// schema on first use. Nothing is written before the file is known to be an empty database or a lease store.
    private static func prepare(_ connection: Connection, configuration: Configuration) throws(LeaseStoreError) {
        let (seconds, attoseconds) = configuration.busyTimeout.components
        let milliseconds = max(0, min(Int64(Int32.max), seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        try connection.setBusyTimeout(milliseconds: Int32(milliseconds))
        // Until the file is known to be a lease store, closing must not checkpoint (which writes the log into the
        // file and deletes the log): a damaged file is set aside as found, another program's left as it was.
        try connection.setCheckpointOnClose(false)
        // The first reads find out whether the file is a database at all.
        var version: Int64
        var tables: [String]
        do {
            version = try connection.integer("PRAGMA user_version")
            tables = try connection.texts(SQL.tableNames)
        } catch {
            throw LeaseStoreError(
                error.kind == .damaged ? .damaged : .cannotOpen, operation: "open: read schema", path: connection.path,
                sqliteResultCode: error.sqliteResultCode, reason: error.reason)
        }
        try checkIdentity(version: version, tables: tables, path: connection.path)
        if version != 0 {
            try checkIntegrity(connection)
            try checkColumns(connection, version: version)
        }
        try connection.setCheckpointOnClose(true)
        let mode = try connection.text("PRAGMA journal_mode=WAL")
        guard mode?.lowercased() == "wal" else {
            throw LeaseStoreError(
                .journalMode, operation: "open: PRAGMA journal_mode=WAL", path: connection.path,
                reason: "SQLite kept journal mode \(mode ?? "unknown"), expected wal")
        }
        try connection.execute("PRAGMA synchronous=NORMAL")
        try connection.execute("PRAGMA foreign_keys=ON")
        // A negative size is in KiB, whatever the page size.
        try connection.execute("PRAGMA cache_size=-\(max(1, configuration.pageCacheKiB))")
        if version < schemaVersion {
            try connection.transaction { () throws(LeaseStoreError) in
                // Another process may have created or migrated the schema since the first read.
                version = try connection.integer("PRAGMA user_version")
                tables = try connection.texts(SQL.tableNames)
                try checkIdentity(version: version, tables: tables, path: connection.path)
                if version == 0 {
                    for statement in SQL.schema { try connection.execute(statement) }
                } else {
                    if version == 1 {
                        for statement in SQL.migrationFrom1 { try connection.execute(statement) }
                    }
                    if version <= 2 {
                        for statement in SQL.migrationFrom2 { try connection.execute(statement) }
                    }
                }
                try connection.execute("PRAGMA user_version = \(schemaVersion)")
            }
        }
    }

    /// The statements the store runs name every column it uses: a table without one is not the store's. An older
    /// store is checked against the columns it had, before anything is added to it.
    private static func checkColumns(_ connection: Connection, version: Int64) throws(LeaseStoreError) {
        let used =
            switch version {
            case 1: SQL.usedInVersion1
            case 2: SQL.usedInVersion2
            default: SQL.used
            }
        for sql in used {
            do {
                _ = try connection.prepared(sql)
            } catch {
                guard error.kind == .sqlite else { throw error }
                throw LeaseStoreError(
                    .foreign, operation: "open: check tables", path: connection.path,
                    sqliteResultCode: error.sqliteResultCode,
                    reason: "the tables are not a lease store's (\(error.reason)). It is left untouched")
            }
        }
    }

    /// Whether a file with `version` and `tables` is this store's: empty, or a schema up to this build's with its
    /// two tables.
    private static func checkIdentity(version: Int64, tables: [String], path: String) throws(LeaseStoreError) {
        let ours = tables.contains("owners") && tables.contains("events")
        if version > schemaVersion, ours {
            throw LeaseStoreError(
                .newerSchema, operation: "open", path: path,
                reason:
                    "the database has schema version \(version), this build reads versions up to \(schemaVersion): a newer sleepproxyd wrote it. It is left untouched: run that version, or move the file away to start with an empty store"
            )
        }
        guard version == 0 ? tables.isEmpty : (version > 0 && ours) else {
            let listed = tables.isEmpty ? "no tables" : "the tables " + tables.prefix(8).joined(separator: ", ")
            throw LeaseStoreError(
                .foreign, operation: "open", path: path,
                reason:
                    "a SQLite database with schema version \(version) and \(listed)\(tables.count > 8 ? ", ..." : ""), not a lease store (schema version 1 to \(schemaVersion) with the tables owners and events). It is left untouched: is state_directory another program's directory? Choose another, or move the file away"
            )
        }
    }

    /// SQLite's quick check (every page and record well formed; O(size), tens of milliseconds for 10,000 hosts).
    private static func checkIntegrity(_ connection: Connection) throws(LeaseStoreError) {
        let findings: [String]
        do {
            findings = try connection.texts("PRAGMA quick_check(5)")
        } catch {
            throw error.kind == .damaged ? error.within("open: quick check") : error
        }
        guard findings == ["ok"] else {
            throw LeaseStoreError(
                .damaged, operation: "open: quick check", path: connection.path,
                reason: "SQLite's quick check found: " + findings.joined(separator: "; "))
        }
    }

    /// Renames the database at `path` and its `-wal` and `-shm` files to `<path>.damaged-<UTC time>` (the same
    /// plus `-wal`, `-shm`), so that a new store can start there and the damaged one stays for inspection
    /// (`sqlite3` opens the renamed set as it was). Returns the new name of the database file.
    ///
    /// The write-ahead log is renamed first: a log left beside a new database would be replayed into it.
    /// `at` names the time in the new name (now when nil).
    public static func setAside(_ path: String, at time: UnixTime? = nil) throws(LeaseStoreError) -> String {
        var moment = tm()
        var seconds = time.map { time_t($0.nanoseconds / 1_000_000_000) } ?? Glibc.time(nil)
        gmtime_r(&seconds, &moment)
        var buffer = [CChar](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%Y%m%dT%H%M%SZ", &moment)
        let stamp = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var target = "\(path).damaged-\(stamp)"
        var attempt = 1
        while ["", "-wal", "-shm"].contains(where: { access(target + $0, F_OK) == 0 }) {
            attempt += 1
            target = "\(path).damaged-\(stamp)-\(attempt)"
        }
        for suffix in ["-wal", "-shm", ""] where access(path + suffix, F_OK) == 0 {
            guard rename(path + suffix, target + suffix) == 0 else {
                let reason = String(cString: strerror(errno))
                throw LeaseStoreError(
                    .cannotOpen, operation: "set aside as \(target + suffix)", path: path + suffix, reason: reason)
            }
        }
        // The renames are durable before anything is written under the old name.
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let descriptor = Glibc.open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if descriptor >= 0 {
            fsync(descriptor)
            Glibc.close(descriptor)
        }
        return target
    }

    /// Creates `directory` and any missing parents with mode 0700; an existing directory is left as it is.
    private static func makeDirectory(_ directory: String) throws(LeaseStoreError) {
        var prefix = directory.hasPrefix("/") ? "/" : ""
        for component in directory.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                let reason = String(cString: strerror(errno))
                throw LeaseStoreError(.cannotCreateDirectory, operation: "mkdir", path: prefix, reason: reason)
            }
            prefix += "/"
        }
        var info = stat()
        guard stat(directory, &info) == 0 else {
            let reason = String(cString: strerror(errno))
            throw LeaseStoreError(.cannotCreateDirectory, operation: "stat", path: directory, reason: reason)
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw LeaseStoreError(
                .cannotCreateDirectory, operation: "stat", path: directory, reason: "exists and is not a directory")
        }
    }
}

/// The SQL the store runs; each statement is prepared once per connection.
private enum SQL {
    /// The tables a database holds, without SQLite's own.
    static let tableNames = """
        SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name
        """
    /// Every statement that names columns, prepared at open to check the tables.
    static var used: [String] { usedInVersion2 + [upsertLearned, deleteLearned, selectLearned] }
    /// The columns of a version-2 store, checked before it is migrated.
    static var usedInVersion2: [String] {
        [upsertOwner, deleteOwner, selectOwners, updateWake, insertEvent, selectNewestEvents]
    }
    /// The columns of a version-1 store, checked before it is migrated.
    static var usedInVersion1: [String] {
        [
            """
            SELECT rowid, interface, primary_mac, wake_mac, password, sequence, registered_at, updated_at, last_source,
                records, record_times
            FROM owners
            """,
            insertEvent, selectNewestEvents,
        ]
    }
    static let schema = [
        """
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
        )
        """,
        """
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            time INTEGER NOT NULL,
            kind TEXT NOT NULL,
            interface TEXT NOT NULL,
            owner BLOB,
            source TEXT,
            reason TEXT,
            detail TEXT NOT NULL
        )
        """,
        createLearned,
    ]

    /// The records learned from each declared host (`RecordCoding.encode(_:)`): a row per host that has some.
    static let createLearned = """
        CREATE TABLE learned (
            interface TEXT NOT NULL,
            mac BLOB NOT NULL,
            records BLOB NOT NULL,
            heard BLOB NOT NULL,
            PRIMARY KEY (interface, mac)
        )
        """

    /// Version 2 to 3: the learned records, none yet.
    static let migrationFrom2 = [createLearned]

    /// Version 1 to 2: the wake in progress, NULL (none) in every row.
    static let migrationFrom1 = [
        "ALTER TABLE owners ADD COLUMN wake_reason TEXT",
        "ALTER TABLE owners ADD COLUMN wake_rounds INTEGER",
        "ALTER TABLE owners ADD COLUMN wake_goodbyes INTEGER",
        "ALTER TABLE owners ADD COLUMN wake_next INTEGER",
        "ALTER TABLE owners ADD COLUMN wake_withdrawn TEXT",
    ]

    /// An owner's registration; its wake columns are left as they are (`updateWake` sets them).
    static let upsertOwner = """
        INSERT INTO owners (interface, primary_mac, wake_mac, password, sequence, registered_at, updated_at,
            last_source, records, record_times)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
        ON CONFLICT (interface, primary_mac) DO UPDATE SET
            wake_mac = excluded.wake_mac, password = excluded.password, sequence = excluded.sequence,
            registered_at = excluded.registered_at, updated_at = excluded.updated_at,
            last_source = excluded.last_source, records = excluded.records, record_times = excluded.record_times
        """
    static let deleteOwner = "DELETE FROM owners WHERE interface = ?1 AND primary_mac = ?2"
    static let selectOwners = """
        SELECT rowid, interface, primary_mac, wake_mac, password, sequence, registered_at, updated_at, last_source,
            records, record_times, wake_reason, wake_rounds, wake_goodbyes, wake_next, wake_withdrawn
        FROM owners ORDER BY interface, primary_mac
        """
    static let updateWake = """
        UPDATE owners SET wake_reason = ?3, wake_rounds = ?4, wake_goodbyes = ?5, wake_next = ?6, wake_withdrawn = ?7
        WHERE interface = ?1 AND primary_mac = ?2
        """
    static let upsertLearned = """
        INSERT INTO learned (interface, mac, records, heard) VALUES (?1, ?2, ?3, ?4)
        ON CONFLICT (interface, mac) DO UPDATE SET records = excluded.records, heard = excluded.heard
        """
    static let deleteLearned = "DELETE FROM learned WHERE interface = ?1 AND mac = ?2"
    static let selectLearned = "SELECT rowid, interface, mac, records, heard FROM learned ORDER BY interface, mac"
    static let insertEvent = """
        INSERT INTO events (time, kind, interface, owner, source, reason, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
        """
    /// The ids only grow (the newest row is never deleted), so everything at or below the newest id minus the
    /// limit is older than the newest `limit` events.
    static let trimEvents = "DELETE FROM events WHERE id <= ?1"
    static let countEvents = "SELECT count(*) FROM events"
    static let selectNewestEvents = """
        SELECT id, time, kind, interface, owner, source, reason, detail FROM events ORDER BY id DESC LIMIT ?1
        """
    static let selectEventsAfter = """
        SELECT id, time, kind, interface, owner, source, reason, detail FROM events WHERE id > ?1 ORDER BY id LIMIT ?2
        """
}
