import LeaseStore
public import Logging

/// How the lease store's commits are going, and what the log has said about it.
///
/// While commits fail, no registration is acknowledged (the reply waits for its commit), and every datagram that
/// arrives fails again. The log says so once when the failures start, once per `reminderInterval` while they last
/// (with how many failed in between), and once when a commit succeeds again; never once per datagram. A full
/// disk, the usual cause, is named as such.
///
/// Used from the daemon's queue only.
public final class StoreHealth {
    /// How often a lasting failure is logged again.
    public static let defaultReminderInterval: Duration = .seconds(60)

    private let reminderInterval: Duration
    private let clock: () -> ContinuousClock.Instant
    private var failure: Failure?
    /// Whether a commit failed since the store last caught up with the core: the store may lack changes the core
    /// made (registrations held but not acknowledged, renewals, hosts let go).
    public private(set) var isBehind = false

    private struct Failure {
        var since: ContinuousClock.Instant
        var lastLine: ContinuousClock.Instant
        var failedSinceLine = 0
        var failed = 1
        var diskFull: Bool
        var path: String
    }

    /// `clock` is read at every failure and success; tests pass their own.
    public init(
        reminderInterval: Duration = defaultReminderInterval,
        clock: @escaping () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.reminderInterval = reminderInterval
        self.clock = clock
    }

    /// Whether the last commit failed.
    public var isFailing: Bool { failure != nil }

    /// Notes a failed commit; logs it if failures start now, change cause, or the reminder is due.
    public func commitFailed(_ error: any Error, logger: Logger) {
        isBehind = true
        let now = clock()
        let storeError = error as? LeaseStoreError
        let diskFull = storeError?.kind == .diskFull
        let path = storeError?.path ?? "the lease store"
        if var failure, failure.diskFull == diskFull {
            failure.failed += 1
            failure.failedSinceLine += 1
            if now - failure.lastLine < reminderInterval {
                self.failure = failure
                return
            }
            let seconds = (now - failure.lastLine).components.seconds
            logger.error(
                "\(Self.line(error, diskFull: diskFull, path: path)) (\(failure.failedSinceLine) commits failed in the last \(seconds) s)"
            )
            failure.lastLine = now
            failure.failedSinceLine = 0
            self.failure = failure
            return
        }
        logger.error("\(Self.line(error, diskFull: diskFull, path: path))")
        failure = Failure(
            since: failure?.since ?? now, lastLine: now, failed: (failure?.failed ?? 0) + 1, diskFull: diskFull,
            path: path)
    }

    /// Notes a successful commit; logs the end of a failure.
    public func commitSucceeded(logger: Logger) {
        guard let failure else { return }
        self.failure = nil
        let seconds = (clock() - failure.since).components.seconds
        logger.notice(
            "lease store: commits succeed again at \(failure.path) after \(failure.failed) failed commits over \(seconds) s; registrations are acknowledged again"
        )
    }

    /// The store holds everything the core does again.
    public func caughtUp() {
        isBehind = false
    }

    private static func line(_ error: any Error, diskFull: Bool, path: String) -> String {
        if diskFull {
            return
                "lease store: the disk is full (ENOSPC/SQLITE_FULL) at \(path); registrations are not acknowledged until space returns"
        }
        return
            "lease store: commits fail at \(path): \(error); registrations are not acknowledged until a commit succeeds"
    }
}
