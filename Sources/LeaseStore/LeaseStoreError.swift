/// An error of the lease store.
///
/// Every error names the operation that failed, the database file, and the reason: SQLite's own message and
/// result code when SQLite refused, or what was expected when the store itself did.
public struct LeaseStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure, for tests and callers that branch on it.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: Hashable, Sendable {
            case invalidConfiguration
            case cannotCreateDirectory
            case cannotOpen
            case damaged
            case foreign
            case newerSchema
            case journalMode
            case sqlite
            case diskFull
            case encoding
            case closed
        }
        private let code: Code

        /// A `Configuration` value out of range (an event history limit below 1).
        public static let invalidConfiguration = Kind(code: .invalidConfiguration)
        /// The state directory is missing and could not be created, or the path is not a directory.
        public static let cannotCreateDirectory = Kind(code: .cannotCreateDirectory)
        /// SQLite could not open the file (permissions, a lock held too long, an I/O error).
        public static let cannotOpen = Kind(code: .cannotOpen)
        /// The file is damaged: not a SQLite database at all (random bytes, a file cut short), or one that SQLite
        /// finds corrupt. `LeaseStore.Configuration.damagedFile` says whether it is refused or set aside.
        public static let damaged = Kind(code: .damaged)
        /// A sound SQLite database that is not a lease store (another program's tables). It is left untouched.
        public static let foreign = Kind(code: .foreign)
        /// The database was written by a newer version of the store (its `user_version` is higher than this build
        /// knows). It is left untouched.
        public static let newerSchema = Kind(code: .newerSchema)
        /// SQLite would not switch the database to write-ahead logging.
        public static let journalMode = Kind(code: .journalMode)
        /// SQLite refused a statement (I/O error, busy beyond the timeout, ...).
        public static let sqlite = Kind(code: .sqlite)
        /// A write found no space: `SQLITE_FULL`, or `ENOSPC` or `EDQUOT` from the file system. Nothing of the
        /// transaction was kept; the same write succeeds once space returns.
        public static let diskFull = Kind(code: .diskFull)
        /// An owner's records could not be encoded (more than 65,535 bytes of records for one owner).
        public static let encoding = Kind(code: .encoding)
        /// The store was closed.
        public static let closed = Kind(code: .closed)

        public var description: String {
            switch code {
            case .invalidConfiguration: "invalid configuration"
            case .cannotCreateDirectory: "cannot create directory"
            case .cannotOpen: "cannot open"
            case .damaged: "damaged file"
            case .foreign: "not a lease store"
            case .newerSchema: "newer schema"
            case .journalMode: "journal mode"
            case .sqlite: "SQLite error"
            case .diskFull: "disk full"
            case .encoding: "cannot encode"
            case .closed: "closed"
            }
        }
    }

    public let kind: Kind
    /// What the store was doing: `open`, `apply change 3 of 64 (save owner 02:00:00:00:00:01%eth0)`, ...
    public let operation: String
    /// The database file (or the directory, for directory errors).
    public let path: String
    /// SQLite's extended result code, when SQLite reported the failure.
    public let sqliteResultCode: Int32?
    /// SQLite's message, or what the store expected.
    public let reason: String

    init(_ kind: Kind, operation: String, path: String, sqliteResultCode: Int32? = nil, reason: String) {
        self.kind = kind
        self.operation = operation
        self.path = path
        self.sqliteResultCode = sqliteResultCode
        self.reason = reason
    }

    public var description: String {
        let code = sqliteResultCode.map { " (SQLite result code \($0))" } ?? ""
        return "lease store \(path): \(operation): \(kind)\(code): \(reason)"
    }

    /// A copy whose operation is prefixed by its context (`apply change 3 of 64: ` + `step INSERT ...`).
    func within(_ context: String) -> LeaseStoreError {
        LeaseStoreError(
            kind, operation: operation.isEmpty ? context : "\(context): \(operation)", path: path,
            sqliteResultCode: sqliteResultCode, reason: reason)
    }
}
