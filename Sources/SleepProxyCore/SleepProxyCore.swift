import DNSWire
import NetworkAddresses

/// The sleep proxy's state machine: what is held, for whom, until when.
///
/// It has no sockets, clock or threads. The shell feeds it inputs stamped with the current time and carries out
/// the actions it returns, in order.
///
/// Where things are: registrations in `Registration.swift`, when a host is let go in `Release.swift`, conflicts
/// over held names in `Conflicts.swift`, answers in `Answers.swift`, multicast timing in
/// `MulticastScheduling.swift`, addresses in `Takeover.swift`, wakes in `Wake.swift`.
public struct SleepProxyCore: Sendable {
    public private(set) var configuration: CoreConfiguration
    public internal(set) var links: [InterfaceName: Link] = [:]
    /// Every held host, with its records and what the proxy does for it.
    var hosts = HostTable() {
        didSet { forgetAnswers() }
    }
    /// Each host's earliest take-over step, keepalive, probe end or wake round (on a served link), and the same
    /// ordered by time: `hostDeadline` is the first of them.
    private var hostSteps: [OwnerKey: UnixTime] = [:]
    /// While set (during a restore or a batch of registrations), interfaces whose held addresses changed, announced
    /// once at the end.
    var deferredAddressChanges: Set<InterfaceName>?
    private var hostStepQueue = ExpiryQueue()
    /// Records held by all owners together.
    public private(set) var recordCount = 0
    /// Unique names (see `HeldRecord.claimsUniqueName`), by digest, to the owners whose records claim them, in
    /// the order they came: the first that still claims it holds it (`uniqueHolder`).
    private var uniqueNames: [NameDigest: Holders] = [:]
    /// Every held name, by digest (interface and name folded to lower case), to the owners holding records with
    /// it, for answering queries: an entry is a number and a list, not a copy of the name.
    var heldNames: [NameDigest: Holders] = [:] {
        didSet { forgetAnswers() }
    }
    /// Answers to recent questions (see `cachedAnswer`), emptied whenever held hosts, held names or the
    /// advertisement change in any way: a query asked again and again is looked up once.
    var answerCache: [AnswerCacheKey: CachedAnswer] = [:]
    static let answerCacheLimit = 4_096

    mutating func forgetAnswers() {
        if !answerCache.isEmpty { answerCache = [:] }
    }
    /// Every held record, by its digest (`RecordDigest`), with the owners holding it (once per copy), so that a
    /// scheduled response or a goodbye finds in one lookup whether a record is still held and by whom, however
    /// many hosts share its name (`_ssh._tcp.local.` is held by every host with ssh). The digest keeps the index
    /// small (an entry is a number and a list, not a copy of the record); the holders' own records are checked.
    var heldRecords: [RecordDigest: Holders] = [:]
    /// Held addresses to their owner, for the per-packet check.
    var heldAddresses: [NeighbourKey: OwnerKey] = [:]
    /// The same addresses per interface, sorted: the list the capture watches, kept up to date as addresses
    /// come and go rather than sorted again for every registration.
    var proxiedLists: [InterfaceName: [IPAddress]] = [:]
    /// Lists appended to, unsorted, while address changes are deferred (a restore, a batch of registrations):
    /// sorted once at the end, not shifted for every address.
    var unsortedProxiedLists: Set<InterfaceName> = []
    /// Held addresses per solicited-node group: two addresses can share one, joined once.
    var groupUsers: [GroupKey: Int] = [:]
    /// Multicast responses and announcements waiting for their time (random delays, the second announcement).
    var pendingResponses = PendingResponses()
    /// When each record was last multicast, per interface and family, for the once-a-second limit and for
    /// answering QU questions by multicast when a record has not been multicast for a while.
    var lastMulticast: [MulticastKey: UnixTime] = [:]
    var random: CoreRandom
    /// The earliest take-over step, record probe or wake round due, kept up to date where they change.
    var hostDeadline: UnixTime?
    /// The proxy's own `_sleep-proxy._udp` service, per interface.
    var advertisements: [InterfaceName: Advertisement] = [:] {
        didSet { forgetAnswers() }
    }
    /// Each owner's lease expiry (its earliest record expiry), and the same ordered by time.
    private var expiries: [OwnerKey: UnixTime] = [:]
    private var expiryQueue = ExpiryQueue()
    /// Refusals are logged at most `refusalLogLimit` times a minute, so that a misbehaving client cannot flood
    /// the log (Apple's proxy caps these messages too); every refusal is still recorded in the event history.
    var refusalLog = (windowStart: UnixTime(nanoseconds: 0), logged: 0, suppressed: 0)
    static let refusalLogLimit = 100
    /// Each recent source's registration allowance (`CoreConfiguration.registrationRate`); sources whose bucket
    /// is full again are forgotten, so the table stays as small as the set of busy sources.
    var registrationBuckets: [IPAddress: TokenBucket] = [:]
    /// When each source's rate-limited refusals were last recorded as an event (one a minute per source).
    var rateLimitRecorded: [IPAddress: UnixTime] = [:]
    /// Refusal events recorded per source in its current minute.
    var refusalEvents: [IPAddress: RefusalRecord] = [:]
    static let refusalEventsPerSource = 20

    struct RefusalRecord: Hashable, Sendable {
        var windowStart: UnixTime
        var recorded = 0
        var suppressed = 0
    }
    static let registrationSourcesKept = 4_096
    /// Each recent querier's allowance (`CoreConfiguration.queryRate`), forgotten once full again.
    var queryBuckets: [IPAddress: TokenBucket] = [:]
    /// Each recent querying MAC's allowance (`CoreConfiguration.queryRatePerMAC`), forgotten once full again.
    var queryMACBuckets: [MACAddress: TokenBucket] = [:]
    /// When each held record was last announced again after someone's goodbye for it.
    var reannouncedAt: [RecordIdentity: UnixTime] = [:]
    /// When each limit was last logged as hit: one line a minute per limit, however often it is hit.
    var limitLog: [String: UnixTime] = [:]

    /// A warning that `limit` was hit, at most once a minute per limit.
    mutating func noteLimit(_ limit: String, _ text: @autoclosure () -> String, now: UnixTime) -> [Action] {
        if let last = limitLog[limit], now - last < .seconds(60) { return [] }
        limitLog[limit] = now
        return [.log(.warning, "limit \(limit) reached: \(text()) (logged at most once a minute)")]
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
    }

    /// `seed` makes the random answer delays repeatable; the shell passes a random one.
    public init(configuration: CoreConfiguration = CoreConfiguration(), seed: UInt64 = 0x5EED) {
        self.configuration = configuration
        random = CoreRandom(seed: seed)
    }

    /// The held hosts' records, as the lease store mirrors them.
    public var owners: [OwnerKey: Owner] { hosts.mapValues(\.owner) }

    /// Where a held host is in its lifecycle, for status output.
    public func state(of key: OwnerKey) -> HostState? {
        guard let host = hosts[key] else { return nil }
        switch host.state {
        case .waking(let wake): return .waking(reason: wake.reason, rounds: wake.rounds)
        case .proxying:
            return host.takeovers.values.contains { !$0.answers } ? .takingOver : .held
        }
    }

    /// Applies new limits and a new wake policy (a reload). Leases granted keep their length; held hosts stay.
    public mutating func reconfigure(_ configuration: CoreConfiguration) {
        self.configuration = configuration
    }

    // MARK: Links

    /// Serves `link`, or updates what is known of it (its addresses changed).
    public mutating func setLink(_ link: Link) {
        let changed = links[link.name] != link
        links[link.name] = link
        if changed, var advertisement = advertisements[link.name] {
            advertisement.buildRecords(for: link)
            advertisements[link.name] = advertisement
        }
    }

    // MARK: Restore

    /// Takes over the owners the lease store kept, at start-up. Owners whose lease ended while the proxy was down
    /// are dropped (and reported); expiries further away than the maximum lease are brought in to it. The hosts
    /// are probed before their addresses are claimed: some may have woken while the proxy was down.
    ///
    /// A host whose wake was in progress (`wakes`) goes on being woken from the round it had reached (the next one
    /// at once if it is overdue): it is not claimed again, and what the wake withdrew stays unanswered.
    public mutating func restore(_ saved: [Owner], wakes: [OwnerKey: StoredWake] = [:], now: UnixTime) -> [Action] {
        var actions: [Action] = []
        // One list of held addresses per interface at the end, not one per host (each as long as all of them).
        deferredAddressChanges = []
        // The indexes grow once to their size, not by doubling (each doubling rehashes every name and RDATA).
        let incoming = saved.reduce(0) { $0 + $1.records.count }
        heldRecords.reserveCapacity(heldRecords.count + incoming)
        heldNames.reserveCapacity(heldNames.count + incoming / 2)
        let latest = now + .seconds(Int64(configuration.maximumLease))
        for var owner in saved.sorted(by: { $0.key < $1.key }) {
            guard let expiry = owner.expiresAt, expiry > now else {
                let event = Event(
                    time: now, kind: .expired, interface: owner.key.interface, owner: owner.key.primaryMAC,
                    detail: "lease ended while the proxy was not running (\(owner.records.count) records dropped)")
                actions += [
                    .store(.removeOwner(owner.key)), .store(.appendEvent(event)),
                    .log(.notice, "restore: \(owner.key): \(event.detail)"),
                ]
                continue
            }
            var clamped = 0
            for index in owner.records.indices where owner.records[index].expiresAt > latest {
                owner.records[index].expiresAt = latest
                clamped += 1
            }
            if clamped > 0 {
                actions += [
                    .store(.saveOwner(owner)),
                    .log(
                        .notice,
                        "restore: \(owner.key): \(clamped) record expiries beyond the maximum lease of \(configuration.maximumLease) s brought in"
                    ),
                ]
            }
            var host = HeldHost(owner: owner)
            host.probes = Self.initialProbes(for: owner.records.map(\.record), now: now)
            if let stored = wakes[owner.key] {
                switch stored.sequence(for: owner) {
                case .success(let wake):
                    host.state = .waking(wake)
                    actions.append(
                        .log(
                            .notice,
                            "restore: \(owner.key): the wake continues (\(wake.reason)): \(wake.rounds) of \(WakeTiming.rounds) rounds sent"
                        ))
                case .failure(let error):
                    actions += [
                        .store(.saveWake(owner.key, nil)),
                        .log(
                            .error,
                            "restore: \(owner.key): its stored wake cannot go on (\(error.reason)); held instead"),
                    ]
                }
            }
            insert(host)
            actions += updateTakeovers(of: owner.key, now: now)
        }
        refreshHostDeadline()
        actions += endDeferredAddressChanges()
        actions.append(.log(.info, "restore: holding \(hosts.count) owners with \(recordCount) records"))
        return actions
    }

    // MARK: Time

    /// The earliest lease expiry of all owners, if any.
    public var nextLeaseExpiry: UnixTime? {
        expiryQueue.first?.time
    }

    /// The next time `tick` has work to do, if any. (Stale queue entries are dropped after every change, so the
    /// first entry is always a live owner's expiry.)
    public var nextDeadline: UnixTime? {
        [expiryQueue.first?.time, pendingResponses.earliestDue, advertisementDeadline, hostDeadline]
            .compactMap { $0 }.min()
    }

    /// Does what is due by `now`: lease expiries, responses, take-over steps, record probes, wake rounds and the
    /// proxy's own advertisement.
    public mutating func tick(now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        actions += advanceHosts(now: now)
        actions += sendDueResponses(now: now)
        for interface in advertisements.keys.sorted() {
            actions += advance(interface, now: now)
        }
        return actions
    }

    /// Steps every held host whose time has come: its take-overs, its record probes and its wake.
    mutating func advanceHosts(now: UnixTime) -> [Action] {
        guard let deadline = hostDeadline, deadline <= now else { return [] }
        var actions: [Action] = []
        // Only the hosts with a step due: with thousands held, most have nothing to do at any moment.
        for key in hostSteps.compactMap({ $0.value <= now ? $0.key : nil }).sorted() {
            actions += advanceTakeovers(of: key, now: now)
            actions += advanceKeepalives(of: key, now: now)
            settleProbes(of: key, now: now)
            actions += advanceWake(of: key, now: now)
        }
        refreshHostDeadline()
        return actions
    }

    mutating func refreshHostDeadline() {
        for key in hosts.takeChanged() {
            let step = hosts[key].flatMap { links[key.interface] != nil ? $0.nextStep : nil }
            guard hostSteps[key] != step else { continue }
            hostSteps[key] = step
            if let step { hostStepQueue.push(key, at: step) }
        }
        if hostStepQueue.count > 4 * hostSteps.count + 64 { hostStepQueue.compact(current: hostSteps) }
        hostStepQueue.dropStale { hostSteps[$0] }
        hostDeadline = hostStepQueue.first?.time
    }

    /// The same after a change that concerns every host (a link served or not any more, a clock step).
    mutating func refreshAllHostDeadlines() {
        hostSteps = [:]
        _ = hosts.takeChanged()
        for host in hosts.values where links[host.key.interface] != nil {
            if let step = host.nextStep { hostSteps[host.key] = step }
        }
        hostStepQueue.compact(current: hostSteps)
        hostDeadline = hostStepQueue.first?.time
    }

    /// Ends the leases due by `now`. Apple's proxy wakes a host whose lease ends (PROTOCOL.md section 3.7); the
    /// wake policy may keep it from that: a `neverWake` host, or any host in a dry run (after a `would-wake`
    /// event), is dropped at once as expired, with goodbyes, since nothing is held past its lease. A host already
    /// being woken as a whole keeps its wake.
    mutating func expire(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        var expired: [OwnerKey] = []
        while true {
            expiryQueue.dropStale { expiries[$0] }
            guard let first = expiryQueue.first, first.time <= now, hosts[first.key] != nil else { break }
            expiryQueue.popFirst()
            // The owner stays while it is woken: its lease no longer counts.
            expiries[first.key] = nil
            expired.append(first.key)
        }
        let policy = configuration.wakePolicy
        for key in expired.sorted() {
            guard let host = hosts[key] else { continue }
            let count = host.owner.records.count
            if !host.isWakingWhole, policy.neverWakes(host.owner) {
                let name = Self.displayName(of: host.owner)
                actions += drop(
                    key,
                    reason: .expiredUnwoken(
                        "lease ended; \(name) is in wake.never_wake, so it is not woken: \(count) records dropped"),
                    now: now)
                continue
            }
            if !host.isWakingWhole, policy.dryRun {
                actions += wouldWake(key, now: now, reason: "lease expired", limited: false)
                actions += drop(
                    key,
                    reason: .expiredUnwoken(
                        "lease ended; wake.dry_run is on, so it is not woken: \(count) records dropped"),
                    now: now)
                continue
            }
            let event = Event(
                time: now, kind: .expired, interface: key.interface, owner: key.primaryMAC,
                detail: "lease ended; waking the host so that it registers again")
            actions += [.store(.appendEvent(event)), .log(.notice, "expired \(key): \(event.detail)")]
            actions += startWake(key, now: now, reason: "lease expired", limited: false)
        }
        return actions
    }

    // MARK: Bookkeeping

    /// Adds a host to the table and to every index.
    mutating func insert(_ host: HeldHost) {
        let owner = host.owner
        hosts[owner.key] = host
        recordCount += owner.records.count
        let mac = owner.key.primaryMAC
        for held in owner.records {
            let name = NameDigest(held.record.name, interface: owner.key.interface)
            heldRecords[RecordDigest(held.record, name: name), default: []].append(mac)
            heldNames[name, default: []].appendUnlessLast(mac)
            if HeldRecord.claimsUniqueName(held.record) { uniqueNames[name, default: []].appendUnlessLast(mac) }
        }
        if let expiry = owner.expiresAt {
            expiries[owner.key] = expiry
            expiryQueue.push(owner.key, at: expiry)
            if expiryQueue.count > 4 * expiries.count + 64 { expiryQueue.compact(current: expiries) }
        }
        expiryQueue.dropStale { expiries[$0] }
    }

    /// Takes a host out of the table and every index; its take-overs are the caller's to stop first.
    @discardableResult
    mutating func remove(_ key: OwnerKey) -> HeldHost? {
        guard let host = hosts.removeValue(forKey: key) else { return nil }
        let owner = host.owner
        let mac = key.primaryMAC
        recordCount -= owner.records.count
        var names = Set<NameDigest>()
        var claimed = Set<NameDigest>()
        for held in owner.records {
            let name = NameDigest(held.record.name, interface: key.interface)
            names.insert(name)
            if HeldRecord.claimsUniqueName(held.record) { claimed.insert(name) }
            let digest = RecordDigest(held.record, name: name)
            heldRecords[digest]?.removeFirst(mac)
            if heldRecords[digest]?.isEmpty == true { heldRecords[digest] = nil }
        }
        for name in names {
            heldNames[name]?.removeAll(mac)
            if heldNames[name]?.isEmpty == true { heldNames[name] = nil }
        }
        for name in claimed {
            uniqueNames[name]?.removeAll(mac)
            if uniqueNames[name]?.isEmpty == true { uniqueNames[name] = nil }
        }
        expiries[key] = nil
        expiryQueue.dropStale { expiries[$0] }
        return host
    }

    /// Replaces a held host's records, keeping what the proxy does for it (take-overs, probes, wake).
    mutating func replaceRecords(of key: OwnerKey, with owner: Owner) {
        guard var host = remove(key) else { return }
        host.owner = owner
        let identities = Set(owner.records.map { RecordIdentity($0.record) })
        host.probes = host.probes.filter { identities.contains($0.key) }
        insert(host)
    }

    /// The owner holding the unique `name` on `interface`, if any.
    func uniqueHolder(of name: DNSName, on interface: InterfaceName) -> OwnerKey? {
        guard let claimants = uniqueNames[NameDigest(name, interface: interface)] else { return nil }
        return claimants.keys(on: interface).first { hosts.claims(name, key: $0) }
    }

    /// The owners holding records named `name` (in any case) on `interface`; some may hold only names with the
    /// same digest, so each holder's records are to be checked for the name.
    func holders(of name: DNSName, on interface: InterfaceName) -> LazyMapSequence<Holders, OwnerKey> {
        (heldNames[NameDigest(name, interface: interface)] ?? []).keys(on: interface)
    }

    /// The owners holding a record of digest `digest` on `interface` (once per copy); each holder's records are to
    /// be checked for the record.
    func holders(of digest: RecordDigest, on interface: InterfaceName) -> LazyMapSequence<Holders, OwnerKey> {
        (heldRecords[digest] ?? []).keys(on: interface)
    }
}

/// Where a held host is, as the administrator sees it.
public enum HostState: Hashable, Sendable {
    /// Its addresses are being probed before they are claimed.
    case takingOver
    /// Answered for, its addresses claimed.
    case held
    /// Magic packets are going out.
    case waking(reason: String, rounds: Int)
}
