import CNetSupport
public import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Writes log lines to standard error. Under systemd (when `JOURNAL_STREAM` is set) each line starts with the
/// `<N>` syslog priority that journald reads; elsewhere with a UTC time and the level in words.
public struct StderrLogHandler: LogHandler {
    /// The level every handler made with it logs at; a reload changes it for all at once.
    public final class SharedLevel: Sendable {
        private let storage: Atomic<Int>

        public init(_ level: Logger.Level) {
            storage = Atomic(Self.levels.firstIndex(of: level) ?? 2)
        }

        private static let levels = Logger.Level.allCases

        public var level: Logger.Level {
            get { Self.levels[storage.load(ordering: .relaxed)] }
            set { storage.store(Self.levels.firstIndex(of: newValue) ?? 2, ordering: .relaxed) }
        }
    }

    private let sharedLevel: SharedLevel
    public var logLevel: Logger.Level {
        get { sharedLevel.level }
        set { sharedLevel.level = newValue }
    }
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let journal: Bool

    public init(label: String, level: Logger.Level = .info) {
        self.init(label: label, sharedLevel: SharedLevel(level))
    }

    /// A handler whose level is `sharedLevel`'s, now and after every change.
    public init(label: String, sharedLevel: SharedLevel) {
        self.label = label
        self.sharedLevel = sharedLevel
        journal = getenv("JOURNAL_STREAM") != nil
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var text = event.message.description
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        if !merged.isEmpty {
            text += " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        let line: String
        if journal {
            line = "<\(Self.priority(event.level))>\(text)\n"
        } else {
            line = "\(Self.timestamp()) \(event.level) \(label): \(text)\n"
        }
        // One write(2) per line: lines from several threads never interleave.
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }

    /// syslog priorities, as journald reads them from a `<N>` prefix.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    static func timestamp() -> String {
        var buffer = [CChar](repeating: 0, count: 32)
        let length = sp_format_utc(sp_wall_clock_ns(), &buffer, buffer.count)
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
