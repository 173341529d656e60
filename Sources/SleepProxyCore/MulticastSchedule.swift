import DNSWire
import NetworkAddresses

/// A multicast response or announcement waiting for its time.
struct PendingResponse: Sendable {
    var due: UnixTime
    var interface: InterfaceName
    var group: Endpoint
    var answers: [DNSRecord]
    /// The querier whose truncated query (TC) may still be followed by more known answers.
    var querier: Endpoint?
    /// Announcements go out even if the records were multicast a moment ago (the second one is ~1 s later).
    var isAnnouncement: Bool
    /// The one question whose every record this answer holds, when it does: its encoded response is cached with
    /// its answer.
    var whole: AnswerCacheKey? = nil
}

/// What goes out by multicast, and when, and the answers worked out already: the responses waiting for their
/// time (earliest first; those due at the same moment in the order they were scheduled), when each record was
/// last multicast and last re-announced, and the answer cache. The rules are in `MulticastTiming.swift` and
/// `Answers.swift`.
struct MulticastSchedule: Sendable {
    /// Multicast responses and announcements waiting for their time (random delays, the second announcement).
    private var pending = DeadlineHeap<PendingResponse>()
    /// When each record was last multicast, per interface (in the digest) and family (IPv4, IPv6), for the
    /// once-a-second limit and for answering QU questions by multicast when a record has not been multicast for a
    /// while. A table per family keeps an entry at a digest and a time (16 bytes, where a key with the family in
    /// it took 24): with 10,000 held hosts announced on both families they hold about 400,000.
    private var lastMulticastV4: [RecordDigest: UnixTime] = [:]
    private var lastMulticastV6: [RecordDigest: UnixTime] = [:]
    /// When the multicast times were last pruned.
    private var prunedAt: UnixTime?
    /// When each held record was last announced again after someone's goodbye for it.
    private var reannouncedAt: [RecordIdentity: UnixTime] = [:]
    /// Answers to recent questions (see `SleepProxyCore.cachedAnswer`), valid while what they were worked out from
    /// stays the same (`AnswerSources`): a query asked again and again is looked up once.
    var answerCache: [AnswerCacheKey: CachedAnswer] = [:]
    /// What the cached answers were worked out from.
    private var answerSources = AnswerSources(held: 0, advertised: 0)
    static let answerCacheLimit = 4_096

    // MARK: Responses

    var pendingCount: Int { pending.count }
    /// When the earliest waiting response is due.
    var earliestDue: UnixTime? { pending.first?.time }

    mutating func schedule(_ response: PendingResponse) {
        pending.push(response, at: response.due)
    }

    /// Takes out the responses due by `now`, earliest first.
    mutating func removeDue(by now: UnixTime) -> [PendingResponse] {
        pending.popDue(by: now)
    }

    /// Changes every waiting response, then drops those `isGone` says went.
    mutating func updatePending(
        _ change: (inout PendingResponse) -> Void, dropping isGone: (PendingResponse) -> Bool = { _ in false }
    ) {
        pending.update(
            { _, response in
                change(&response)
                return response.due
            }, dropping: { _, response in isGone(response) })
    }

    // MARK: Multicast times

    func lastMulticast(_ key: MulticastKey) -> UnixTime? {
        key.ipv6 ? lastMulticastV6[key.digest] : lastMulticastV4[key.digest]
    }

    mutating func noteMulticast(_ key: MulticastKey, at now: UnixTime) {
        if key.ipv6 { lastMulticastV6[key.digest] = now } else { lastMulticastV4[key.digest] = now }
    }

    /// Forgets multicast times that no longer matter to any rule once a family's table outgrows the held records.
    mutating func pruneMulticastTimes(recordCount: Int, now: UnixTime) {
        // Entries older than a TTL's quarter no longer matter; keep a few minutes' worth.
        let limit = 2 * recordCount + 512
        guard lastMulticastV4.count > limit || lastMulticastV6.count > limit else { return }
        // After thousands of hosts went at once the tables stay over the limit until their times age out: looked
        // at once a minute then, not at every response.
        if let prunedAt, now - prunedAt < .seconds(60), now >= prunedAt { return }
        prunedAt = now
        if lastMulticastV4.count > limit {
            lastMulticastV4 = lastMulticastV4.filter { now - $0.value < .seconds(1200) }
        }
        if lastMulticastV6.count > limit {
            lastMulticastV6 = lastMulticastV6.filter { now - $0.value < .seconds(1200) }
        }
    }

    /// The records of `records` that may be announced again after a goodbye (at most once a second each, RFC 6762
    /// section 6), noted as announced at `now`.
    mutating func reannounce(_ records: [DNSRecord], recordCount: Int, now: UnixTime) -> [DNSRecord] {
        let allowed = records.filter { record in
            reannouncedAt[RecordIdentity(record)].map { now - $0 >= .seconds(1) } ?? true
        }
        for record in allowed { reannouncedAt[RecordIdentity(record)] = now }
        if reannouncedAt.count > 4 * max(recordCount, 1_024) {
            reannouncedAt = reannouncedAt.filter { now - $0.value < .seconds(1) }
        }
        return allowed
    }

    /// Moves every time by `step` (the clock stepped).
    mutating func clockStepped(by step: Duration) {
        updatePending { $0.due = $0.due + step }
        lastMulticastV4 = lastMulticastV4.mapValues { $0 + step }
        lastMulticastV6 = lastMulticastV6.mapValues { $0 + step }
        prunedAt = prunedAt.map { $0 + step }
    }

    // MARK: The answer cache

    /// The cache's one validity rule: its answers are kept while `sources` are those they were worked out from,
    /// and emptied as soon as they are not.
    mutating func keepAnswers(workedOutFrom sources: AnswerSources) {
        guard sources != answerSources else { return }
        answerSources = sources
        if !answerCache.isEmpty { answerCache = [:] }
    }

    /// Keeps an answer; a full cache (a querier asking random names) starts over rather than grows.
    mutating func cache(_ answer: CachedAnswer, for key: AnswerCacheKey) {
        if answerCache.count >= Self.answerCacheLimit { answerCache.removeAll() }
        answerCache[key] = answer
    }
}

/// What every answer is worked out from: the held hosts (`HeldHosts.generation` moves with every change to held
/// records, wakes and record probes, and when a probe ends) and the proxy's own advertisements
/// (`Advertisements.generation` moves when what they answer changes). Nothing else changes an answer.
struct AnswerSources: Equatable, Sendable {
    var held: UInt64
    var advertised: UInt64
}

/// A question as the answer cache knows it: interface, name folded to lower case, type.
struct AnswerCacheKey: Hashable, Sendable {
    var interface: InterfaceName
    var name: DNSName
    var type: DNSType
}

struct CachedAnswer: Sendable {
    var records: [DNSRecord]
    /// The additional records for all of `records`, once a reply needed them.
    var additionals: [DNSRecord]?
    /// The encoded legacy-unicast reply to the one question asked exactly so (name in the case it was asked),
    /// without known answers: the next such query gets a copy with its own ID.
    var legacyReply: (question: DNSQuestion, bytes: [UInt8])?
    /// The encoded mDNS response holding `records` and all their additional records (ID 0, no question): what a
    /// multicast answer sends, and a unicast one to a QU question without known answers.
    var response: [[UInt8]]?
}

/// A record as the once-a-second multicast limit sees it: its digest (interface, name in lower case, type, RDATA)
/// and the family it went to. A digest, not a copy of the record: at 10,000 held hosts the tables hold hundreds of
/// thousands of entries. Two different records with the same digest (among a million records, a chance of about 3 in 100 million
/// that any two do; the hasher's seed is random per process, so it cannot be aimed at) would share a time: one of
/// them might skip a multicast answer for a second, or answer a QU question by unicast, both harmless.
struct MulticastKey: Hashable, Sendable {
    var digest: RecordDigest
    var ipv6: Bool
}
