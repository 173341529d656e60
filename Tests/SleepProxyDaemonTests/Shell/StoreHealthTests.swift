import Logging
import SleepProxyDaemon
import Synchronization
import Testing

@testable import LeaseStore

/// Failed commits are logged once when they start, once a minute while they last, and once when they end.
@Suite struct StoreHealthTests {
    /// Log lines as the test reads them, in order.
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
    }

    struct Recorder: LogHandler {
        let lines: Lines
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.lines.withLock { $0.append("\(event.level): \(event.message)") }
        }
    }

    final class Clock: @unchecked Sendable {
        var now = ContinuousClock.now
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String { "I/O error" }
    }

    static let path = "/var/lib/sleepproxy/leases.sqlite"

    /// A full disk, as the store reports it.
    static let diskFull = LeaseStoreError(
        .diskFull, operation: "apply: execute COMMIT", path: path, sqliteResultCode: 13,
        reason: "database or disk is full")

    @Test func aFullDiskIsLoggedOnceAMinuteAndItsEndOnce() {
        let error = Self.diskFull
        #expect(error.kind == .diskFull)
        let lines = Lines()
        let logger = Logger(label: "test") { _ in Recorder(lines: lines) }
        let clock = Clock()
        let health = StoreHealth(clock: { clock.now })
        #expect(!health.isFailing && !health.isBehind)

        for _ in 0..<100 {
            health.commitFailed(error, logger: logger)
            clock.now += .milliseconds(100)
        }
        let full =
            "error: lease store: the disk is full (ENOSPC/SQLITE_FULL) at \(error.path); registrations are not acknowledged until space returns"
        #expect(lines.all == [full])
        #expect(health.isFailing && health.isBehind)

        clock.now += .seconds(50)
        health.commitFailed(error, logger: logger)
        #expect(lines.all == [full, full + " (100 commits failed in the last 60 s)"])

        clock.now += .seconds(5)
        health.commitSucceeded(logger: logger)
        health.commitSucceeded(logger: logger)
        #expect(
            lines.all.last
                == "notice: lease store: commits succeed again at \(error.path) after 101 failed commits over 65 s; registrations are acknowledged again"
        )
        #expect(lines.all.count == 3)
        #expect(!health.isFailing && health.isBehind, "the store still lacks what the failed commits carried")
        health.caughtUp()
        #expect(!health.isBehind)
    }

    @Test func anotherCauseIsLoggedAtOnce() {
        let lines = Lines()
        let logger = Logger(label: "test") { _ in Recorder(lines: lines) }
        let health = StoreHealth()
        health.commitFailed(Failure(), logger: logger)
        health.commitFailed(Failure(), logger: logger)
        health.commitFailed(Self.diskFull, logger: logger)
        #expect(lines.all.count == 2)
        #expect(
            lines.all.first
                == "error: lease store: commits fail at the lease store: I/O error; registrations are not acknowledged until a commit succeeds"
        )
        #expect(lines.all.last?.contains("the disk is full (ENOSPC/SQLITE_FULL)") == true)
    }
}
