import CSQLite
import Glibc

/// One SQLite connection with its cache of prepared statements.
///
/// Not thread-safe: `LeaseStore` only touches it while holding its mutex. The connection is opened with
/// `SQLITE_OPEN_NOMUTEX` for the same reason.
final class Connection {
    let path: String
    private var handle: OpaquePointer?
    /// Prepared statements by SQL text, finalized on close.
    private var statements: [String: Statement] = [:]

    init(path: String) throws(LeaseStoreError) {
        self.path = path
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let result = sqlite3_open_v2(path, &db, flags, nil)
        guard result == SQLITE_OK, let db else {
            // SQLite allocates a handle even when opening fails; it carries the message and must be closed.
            let reason = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(result))
            sqlite3_close(db)
            throw LeaseStoreError(.cannotOpen, operation: "open", path: path, sqliteResultCode: result, reason: reason)
        }
        // Fails only for a null handle, which `db` is not.
        sqlite3_extended_result_codes(db, 1)
        handle = db
    }

    deinit { close() }

    var isOpen: Bool { handle != nil }

    /// Gives the pages SQLite caches for this connection back to the allocator: after reading the whole file
    /// once (the quick check, loading every owner) the cache is full of pages that are not read again.
    func releaseCachedPages() {
        if let handle { sqlite3_db_release_memory(handle) }
    }

    /// The memory this connection's page cache holds now, in bytes (`SQLITE_DBSTATUS_CACHE_USED`).
    var cachedPageBytes: Int {
        guard let handle else { return 0 }
        var current: Int32 = 0
        var highest: Int32 = 0
        sqlite3_db_status(handle, SQLITE_DBSTATUS_CACHE_USED, &current, &highest, 0)
        return Int(current)
    }

    /// Finalizes every cached statement and closes the connection; harmless when already closed.
    func close() {
        for statement in statements.values { sqlite3_finalize(statement.handle) }
        statements = [:]
        if let handle {
            // With every statement finalized, close_v2 closes at once; it always returns SQLITE_OK.
            sqlite3_close_v2(handle)
            self.handle = nil
        }
    }

    private func database(_ operation: @autoclosure () -> String) throws(LeaseStoreError) -> OpaquePointer {
        guard let handle else {
            throw LeaseStoreError(.closed, operation: operation(), path: path, reason: "the store was closed")
        }
        return handle
    }

    /// An error carrying SQLite's current message for this connection. A result that says the disk is full or
    /// the file is damaged gets that kind (`.diskFull`, `.damaged`) whatever `kind` the caller expected, so that
    /// callers can tell those apart wherever they happen.
    func error(_ kind: LeaseStoreError.Kind, _ result: Int32, _ operation: String) -> LeaseStoreError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(result))
        // The system error behind an I/O error: SQLite reports ENOSPC as SQLITE_FULL on most writes, but not on
        // every path (growing the shared-memory file, say).
        let systemError = handle.map { sqlite3_system_errno($0) } ?? 0
        let refined: LeaseStoreError.Kind =
            switch result & 0xFF {
            case SQLITE_FULL: .diskFull
            case SQLITE_IOERR where systemError == ENOSPC || systemError == EDQUOT: .diskFull
            case SQLITE_CORRUPT, SQLITE_NOTADB: .damaged
            default: kind
            }
        return LeaseStoreError(refined, operation: operation, path: path, sqliteResultCode: result, reason: message)
    }

    /// Off, closing leaves the file and its write-ahead log as they were (no checkpoint, no deleted log): for a
    /// file that may turn out damaged or another program's, and so must not be changed.
    func setCheckpointOnClose(_ on: Bool) throws(LeaseStoreError) {
        let result = csqlite_set_no_checkpoint_on_close(try database("set checkpoint on close"), on ? 0 : 1)
        guard result == SQLITE_OK else { throw error(.sqlite, result, "set checkpoint on close") }
    }

    func setBusyTimeout(milliseconds: Int32) throws(LeaseStoreError) {
        let result = sqlite3_busy_timeout(try database("set busy timeout"), milliseconds)
        guard result == SQLITE_OK else { throw error(.sqlite, result, "set busy timeout") }
    }

    /// Runs SQL that returns no rows the caller needs (pragmas that set, DDL, transaction control).
    func execute(_ sql: String) throws(LeaseStoreError) {
        let db = try database("execute \(sql)")
        let result = sqlite3_exec(db, sql, nil, nil, nil)
        guard result == SQLITE_OK else { throw error(.sqlite, result, "execute \(sql)") }
    }

    /// The cached prepared statement for `sql`, prepared on first use. Reset it after use (`Statement.reset()`).
    func prepared(_ sql: String) throws(LeaseStoreError) -> Statement {
        if let statement = statements[sql] { return statement }
        let db = try database("prepare \(sql)")
        var handle: OpaquePointer?
        let result = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
        guard result == SQLITE_OK, let handle else { throw error(.sqlite, result, "prepare \(sql)") }
        let statement = Statement(handle: handle, connection: self, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Reads one integer (a pragma or an aggregate).
    func integer(_ sql: String) throws(LeaseStoreError) -> Int64 {
        let statement = try prepared(sql)
        defer { statement.reset() }
        guard try statement.step() else {
            throw LeaseStoreError(.sqlite, operation: "step \(sql)", path: path, reason: "expected a row, found none")
        }
        return statement.int64(0)
    }

    /// Reads the first column of every row as text (NULL as the empty string).
    func texts(_ sql: String) throws(LeaseStoreError) -> [String] {
        let statement = try prepared(sql)
        defer { statement.reset() }
        var values: [String] = []
        while try statement.step() { values.append(statement.text(0) ?? "") }
        return values
    }

    /// Reads one text value (`PRAGMA journal_mode=WAL` answers the mode now in force).
    func text(_ sql: String) throws(LeaseStoreError) -> String? {
        let statement = try prepared(sql)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return statement.text(0)
    }

    var lastInsertedRowID: Int64 {
        handle.map { sqlite3_last_insert_rowid($0) } ?? 0
    }

    /// Runs `body` inside `BEGIN IMMEDIATE` ... `COMMIT`; rolls back when `body` or the commit fails.
    ///
    /// `IMMEDIATE` takes the write lock at the start, so a transaction never fails half-way because another
    /// connection started writing first; the busy timeout covers the wait.
    func transaction<R>(_ body: () throws(LeaseStoreError) -> R) throws(LeaseStoreError) -> R {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            rollback()
            throw error
        }
    }

    /// Rolls back the open transaction, if any. A failure here leaves nothing to do: SQLite has already rolled
    /// back when it reports that no transaction is active.
    private func rollback() {
        guard let handle, sqlite3_get_autocommit(handle) == 0 else { return }
        sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
    }
}

/// A prepared statement owned by a `Connection`'s cache.
///
/// Text and blob values are bound with `SQLITE_TRANSIENT`: SQLite copies them during the bind call, because the
/// Swift buffers they come from are only valid inside `withUnsafeBytes`-style closures, not until the step.
struct Statement {
    let handle: OpaquePointer
    unowned let connection: Connection
    let sql: String

    private func check(_ result: Int32, _ what: @autoclosure () -> String) throws(LeaseStoreError) {
        guard result == SQLITE_OK else { throw connection.error(.sqlite, result, "\(what()) in \(sql)") }
    }

    func bind(_ index: Int32, _ value: Int64) throws(LeaseStoreError) {
        try check(sqlite3_bind_int64(handle, index, value), "bind parameter \(index)")
    }

    /// Binds `value`, or SQL NULL when it is nil.
    func bind(_ index: Int32, _ value: Int64?) throws(LeaseStoreError) {
        guard let value else {
            try check(sqlite3_bind_null(handle, index), "bind parameter \(index)")
            return
        }
        try bind(index, value)
    }

    func bind(_ index: Int32, text value: String?) throws(LeaseStoreError) {
        guard var value else {
            try check(sqlite3_bind_null(handle, index), "bind parameter \(index)")
            return
        }
        let result = value.withUTF8 { utf8 in
            sqlite3_bind_text(handle, index, utf8.baseAddress, Int32(utf8.count), csqlite_transient())
        }
        try check(result, "bind parameter \(index)")
    }

    func bind(_ index: Int32, blob value: [UInt8]?) throws(LeaseStoreError) {
        guard let value else {
            try check(sqlite3_bind_null(handle, index), "bind parameter \(index)")
            return
        }
        // An empty buffer may have no base address, and a null pointer would bind SQL NULL: bind an empty blob.
        guard !value.isEmpty else {
            try check(sqlite3_bind_zeroblob(handle, index, 0), "bind parameter \(index)")
            return
        }
        let result = value.withUnsafeBytes { bytes in
            sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), csqlite_transient())
        }
        try check(result, "bind parameter \(index)")
    }

    /// Steps once: true when a row is available, false when the statement is done.
    func step() throws(LeaseStoreError) -> Bool {
        let result = sqlite3_step(handle)
        switch result {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.error(.sqlite, result, "step \(sql)")
        }
    }

    /// Steps a statement that returns no rows.
    func run() throws(LeaseStoreError) {
        if try step() {
            throw LeaseStoreError(
                .sqlite, operation: "step \(sql)", path: connection.path, reason: "expected no rows, found one")
        }
    }

    /// Makes the statement ready for its next use and releases the bound copies. The result code of `reset`
    /// repeats the last step's error, which `step()` has already reported, so it is not checked here.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column as bytes, valid until the next step or reset; nil for SQL NULL, empty for an empty blob.
    func withBlob<R, E: Error>(_ column: Int32, _ body: (UnsafeRawBufferPointer?) throws(E) -> R) throws(E) -> R {
        guard !isNull(column) else { return try body(nil) }
        let pointer = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        guard let pointer, count > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    func blob(_ column: Int32) -> [UInt8]? {
        withBlob(column) { bytes in bytes.map { Array($0) } }
    }
}
