import NetworkAddresses

/// What the proxy remembers of each sender, bounded. An entry is kept while it matters; when the table is full,
/// the entries that no longer matter (`isSpent`) are dropped, at most once a second; a key that still finds it
/// full shares one entry with every other such key. A flood from invented senders therefore costs one shared
/// entry, never memory or a pass over the table per datagram.
struct SenderTable<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private(set) var entries: [Key: Value] = [:]
    /// The entry shared by keys that found the table full.
    private var shared: Value?
    private var lastPrune: UnixTime?
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count + (shared == nil ? 0 : 1) }

    subscript(key: Key) -> Value? { entries[key] }

    /// Changes `key`'s entry (made by `fresh` if there is none), or the shared one when the table is full.
    mutating func update<Result>(
        _ key: Key, now: UnixTime, fresh: () -> Value, isSpent: (Value) -> Bool, change: (inout Value) -> Result
    ) -> Result {
        if let index = entries.index(forKey: key) { return change(&entries.values[index]) }
        if entries.count >= capacity, lastPrune.map({ now < $0 || now - $0 >= .seconds(1) }) ?? true {
            lastPrune = now
            entries = entries.filter { !isSpent($0.value) }
            if let kept = shared, isSpent(kept) { shared = nil }
        }
        guard entries.count < capacity else {
            var value = shared ?? fresh()
            defer { shared = value }
            return change(&value)
        }
        var value = fresh()
        defer { entries[key] = value }
        return change(&value)
    }
}

/// The proxy's allowances: how much each sender may have of it, and how much of it the log may have. Every table
/// is a `SenderTable`, bounded and pruned the same way.
///
/// - Registration datagrams per source address (`CoreConfiguration.registrationRate`).
/// - mDNS queries answered per source address (`queryRate`) and per sending MAC (`queryRatePerMAC`).
/// - Refusals: one stored event a minute per source for rate-limited ones, `refusalEventsPerSource` events a
///   minute per source in all, `refusalLogLimit` log lines a minute in all (Apple's proxy caps these messages
///   too); every refusal beyond is counted and the count said once the minute is over.
/// - Warnings that a limit was hit, and notes that a source said goodbye to held records: one a minute each.
struct Allowances: Sendable {
    static let sendersKept = 4_096
    static let refusalLogLimit = 100
    static let refusalEventsPerSource = 20
    static let window: Duration = .seconds(60)

    private var registrations = SenderTable<IPAddress, TokenBucket>(capacity: sendersKept)
    private var queries = SenderTable<IPAddress, TokenBucket>(capacity: sendersKept)
    private var queryMACs = SenderTable<MACAddress, TokenBucket>(capacity: sendersKept)
    /// When each source's rate-limited refusals were last recorded as an event.
    private var rateLimitRecorded = SenderTable<IPAddress, UnixTime?>(capacity: sendersKept)
    /// Refusal events recorded per source in its current minute.
    private var refusalEvents = SenderTable<IPAddress, RefusalWindow>(capacity: sendersKept)
    /// When each limit was last logged as hit.
    private var limitLog = SenderTable<String, UnixTime?>(capacity: 256)
    /// When each source's goodbyes for held records were last logged.
    private var goodbyeLog = SenderTable<IPAddress, UnixTime?>(capacity: sendersKept)
    /// Refusals logged in the current minute, for all sources together.
    private var refusalLog: RefusalWindow?

    /// The entries of every table together: at most about seven times `sendersKept`, whatever is sent.
    var entryCount: Int {
        registrations.count + queries.count + queryMACs.count + rateLimitRecorded.count + refusalEvents.count
            + limitLog.count + goodbyeLog.count
    }

    struct RefusalWindow: Hashable, Sendable {
        var windowStart: UnixTime
        var recorded = 0
        var suppressed = 0
    }

    /// What to say of one refusal (all false and zero: a rate-limited refusal from a source already recorded this
    /// minute, only counted).
    struct RefusalNotice: Hashable, Sendable {
        /// Refusals of this source not recorded in its last minute, to be recorded as one event now.
        var unrecordedBefore = 0
        var record = false
        /// Refusals not logged in the last minute, to be said in one line now.
        var unloggedBefore = 0
        var log = false
    }

    /// A minute has passed since `time` (or it never happened).
    private static func spent(_ time: UnixTime?, now: UnixTime) -> Bool { time.map { now - $0 >= window } ?? true }

    /// Takes a registration token of `source`.
    mutating func admitRegistration(from source: IPAddress, rate: Rate, now: UnixTime) -> Bool {
        registrations.update(
            source, now: now, fresh: { TokenBucket(rate: rate, now: now) }, isSpent: { $0.isFull(rate, now: now) },
            change: { $0.take(rate, now: now) })
    }

    /// Takes a query token of `source` and of the MAC that sent it (none for our own host's programs).
    mutating func admitQuery(from source: IPAddress, mac: MACAddress?, rate: Rate, perMAC: Rate, now: UnixTime)
        -> Bool
    {
        let allowed = queries.update(
            source, now: now, fresh: { TokenBucket(rate: rate, now: now) }, isSpent: { $0.isFull(rate, now: now) },
            change: { $0.take(rate, now: now) })
        guard allowed, let mac else { return allowed }
        return queryMACs.update(
            mac, now: now, fresh: { TokenBucket(rate: perMAC, now: now) }, isSpent: { $0.isFull(perMAC, now: now) },
            change: { $0.take(perMAC, now: now) })
    }

    /// Counts a refusal from `source` and says what of it is to be recorded and logged.
    mutating func noteRefusal(from source: IPAddress, rateLimited: Bool, now: UnixTime) -> RefusalNotice {
        var notice = RefusalNotice()
        if rateLimited {
            let first = rateLimitRecorded.update(
                source, now: now, fresh: { nil }, isSpent: { Self.spent($0, now: now) },
                change: { Self.due(&$0, now: now) })
            // Counted among the unlogged, said once the minute is over.
            guard first else {
                refusalLog?.suppressed += 1
                return notice
            }
        }
        notice.record = refusalEvents.update(
            source, now: now, fresh: { RefusalWindow(windowStart: now) },
            isSpent: { Self.spent($0.windowStart, now: now) },
            change: { window -> Bool in
                if Self.spent(window.windowStart, now: now) {
                    notice.unrecordedBefore = window.suppressed
                    window = RefusalWindow(windowStart: now)
                }
                guard window.recorded < Self.refusalEventsPerSource else {
                    window.suppressed += 1
                    return false
                }
                window.recorded += 1
                return true
            })
        var log = refusalLog ?? RefusalWindow(windowStart: now)
        if Self.spent(log.windowStart, now: now) {
            notice.unloggedBefore = log.suppressed
            log = RefusalWindow(windowStart: now)
        }
        if log.recorded < Self.refusalLogLimit {
            log.recorded += 1
            notice.log = true
        } else {
            log.suppressed += 1
        }
        refusalLog = log
        return notice
    }

    /// Whether a warning that `limit` was hit is to be logged now (once a minute per limit).
    mutating func noteLimit(_ limit: String, now: UnixTime) -> Bool {
        limitLog.update(
            limit, now: now, fresh: { nil }, isSpent: { Self.spent($0, now: now) },
            change: { Self.due(&$0, now: now) })
    }

    /// Whether goodbyes from `source` for held records are to be logged now (once a minute per source).
    mutating func noteGoodbyes(from source: IPAddress, now: UnixTime) -> Bool {
        goodbyeLog.update(
            source, now: now, fresh: { nil }, isSpent: { Self.spent($0, now: now) },
            change: { Self.due(&$0, now: now) })
    }

    /// A once-a-minute entry: due when never used or a minute old; then it counts from `now`.
    private static func due(_ last: inout UnixTime?, now: UnixTime) -> Bool {
        guard Self.spent(last, now: now) else { return false }
        last = now
        return true
    }

    /// The clock stepped: the current minute of the refusal log moves with it.
    mutating func clockStepped(by step: Duration) {
        if let start = refusalLog?.windowStart { refusalLog?.windowStart = start + step }
    }
}
