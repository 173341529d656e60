import LeaseStore
import Logging
import SleepProxyCore

/// After failed commits the store lacks what the core changed meanwhile (registrations held but not acknowledged,
/// renewals, hosts let go). Catching up writes the difference, so that a restart restores what the daemon holds.
/// The daemon runs it after the first commit that succeeds again, and from its refresh timer while commits fail,
/// which also notices that space has returned when no registration arrives.
struct StoreCatchUp {
    let store: LeaseStore
    let health: StoreHealth
    let metrics: DaemonMetrics
    let logger: Logger

    /// What the store must be told to match the core: owners saved (new or changed), owners removed, the
    /// wakes whose progress differs from the stored one, and the declared hosts whose learned records differ
    /// (none: deleted).
    struct Difference {
        var saved: [Owner] = []
        var removed: [OwnerKey] = []
        var wakes: [(key: OwnerKey, wake: StoredWake?)] = []
        var learned: [(key: OwnerKey, records: [LearnedRecord])] = []

        var isEmpty: Bool { saved.isEmpty && removed.isEmpty && wakes.isEmpty && learned.isEmpty }

        var changes: [StoreChange] {
            saved.map { .saveOwner($0) } + removed.map { .removeOwner($0) } + wakes.map { .saveWake($0.key, $0.wake) }
                + learned.map { .saveLearned($0.key, $0.records) }
        }
    }

    /// The difference between what the store holds (`stored`, `storedLearned`) and what the core holds: `held`,
    /// its stored owners (declared hosts are held but never stored), their `wakes`, and the records `learned` from
    /// declared hosts.
    static func difference(
        stored: LoadedOwners, held: [Owner], wakes: [OwnerKey: StoredWake],
        storedLearned: [OwnerKey: [LearnedRecord]] = [:], learned: [OwnerKey: [LearnedRecord]] = [:]
    ) -> Difference {
        let storedOwners = Dictionary(stored.owners.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        let held = Dictionary(held.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        return Difference(
            saved: held.values.filter { storedOwners[$0.key] != $0 }.sorted { $0.key < $1.key },
            removed: storedOwners.keys.filter { held[$0] == nil }.sorted(),
            wakes: held.keys.filter { wakes[$0] != stored.wakes[$0] }.sorted().map { ($0, wakes[$0]) },
            learned: Set(storedLearned.keys).union(learned.keys).filter { storedLearned[$0] != learned[$0] }.sorted()
                .map { ($0, learned[$0] ?? []) })
    }

    /// Writes what the store lacks of `core`, if a commit failed since it last caught up.
    func run(holding core: SleepProxyCore) {
        guard health.isBehind else { return }
        do {
            let difference = Self.difference(
                stored: try store.loadOwners(), held: core.storedOwners, wakes: core.storedWakes,
                storedLearned: try store.loadLearned().records, learned: core.storedLearned)
            guard !difference.isEmpty else {
                health.caughtUp()
                return
            }
            let started = ContinuousClock.now
            try store.apply(difference.changes)
            metrics.storeCommitted(in: ContinuousClock.now - started)
            health.commitSucceeded(logger: logger)
            health.caughtUp()
            logger.notice(
                "lease store: caught up with what is held: \(difference.saved.count) hosts written, \(difference.removed.count) removed, the learned records of \(difference.learned.count) declared hosts written"
            )
        } catch {
            metrics.storeFailed(error)
            health.commitFailed(error, logger: logger)
        }
    }
}
