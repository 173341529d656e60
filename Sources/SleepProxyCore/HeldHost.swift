import DNSWire
import NetworkAddresses

/// One sleeping host as the proxy holds it: its records (the `Owner`), how it came to be held (`HostOrigin`), and
/// everything the proxy does for it, with one explicit lifecycle.
///
/// Every host enters through `SleepProxyCore.hold(_:as:state:now:)`: registered, with its first accepted
/// registration (`Registration.swift`) or from the lease store at start-up (`restoreOwners`); declared in the
/// configuration, when it is found asleep (`takeOverDeclared`, `Declared.swift`). Every host leaves through
/// `SleepProxyCore.drop(_:reason:now:)`, counted under its `ReleaseReason`: it is back, the administrator forgot it,
/// its interface is no longer served, a wake went unanswered, its lease ended without a wake, its declaration went
/// or turned out stale, or, declared, it registered itself (`yieldDeclared`). `Release.swift` says how each rule
/// decides. The lease store mirrors registered hosts only (`isStored`).
struct HeldHost: Sendable {
    enum State: Hashable, Sendable {
        /// Its records are answered and its addresses taken over (each address has its own take-over phase).
        case proxying
        /// Being woken: magic packets every 2 s, then goodbyes. What the wake withdraws is in the sequence, kept
        /// apart (few hosts are being woken at once; the state of every held host takes 8 bytes, not 48).
        indirect case waking(WakeSequence)
    }

    var owner: Owner
    /// How it came to be held: through its registration, or declared and found asleep.
    var origin: HostOrigin
    var state: State = .proxying
    /// The take-over of each held address (from the reverse-mapping PTRs).
    var takeovers = AddressTakeovers()
    /// Held addresses for which our own host's neighbour entry points at the sleeping host's MAC.
    var neighbourEntries: Set<IPAddress> = []
    /// Unique records in silent probing (after the registration or a conflict), not answered until verified: by
    /// position in `owner.records`, which `HeldHosts.replaceRecords` keeps in step when the records change.
    var probes = RecordProbes()
    /// When an OWNER of this host from another MAC was last logged (one line a minute).
    var lastForgedOwnerLog: UnixTime?
    /// The TCP connections kept alive for it, from its keepalive records.
    var keepalives: [KeepaliveConnection.Key: KeptConnection] = [:]
    /// When the wake policy last recorded an ignored or a dry-run wake for this host (its rate limit).
    var policyMemory = WakePolicyMemory()
    /// Whether an mDNS packet from the host itself carried its OWNER option since it was held: such a host's mDNS
    /// releases it by Apple's OWNER rule only, no longer by the rule for hosts that never send OWNER
    /// (`Release.swift`). Not stored: after a restart it is learned again.
    var sendsOwner = false

    var key: OwnerKey { owner.key }

    /// Its registration, if it is held through one.
    var registration: RegistrationState? {
        if case .registered(let registration) = origin { registration } else { nil }
    }

    /// Its declaration, if it is held as a declared host.
    var declaration: DeclaredHost? {
        if case .declared(let declaration) = origin { declaration } else { nil }
    }

    var isDeclared: Bool { declaration != nil }

    /// Whether the lease store mirrors it (its owner and its wake in progress): a registered host, which the store
    /// brings back after a restart, never a declared one, which holds no lease and is found asleep again after a
    /// restart (`Declared.swift`).
    var isStored: Bool {
        switch origin {
        case .registered: true
        case .declared: false
        }
    }

    /// Where the take-over's probes for its addresses go: a registered host said itself that it sleeps, so they
    /// ask it alone, at its wake MAC (Apple's proxy); a declared host's addresses come from a configuration that
    /// may be stale, so they ask the whole link (nil).
    var takeoverProbeTarget: MACAddress? {
        switch origin {
        case .registered: owner.wakeMAC
        case .declared: nil
        }
    }

    var wake: WakeSequence? {
        if case .waking(let wake) = state { wake } else { nil }
    }

    /// Whether the host as a whole is being woken: nothing of it is answered, no address defended.
    var isWakingWhole: Bool { wake?.scope == .host }

    /// The addresses the proxy claimed for it (announced, or answered for under a lazy claim): the link sends
    /// their traffic to the proxy, so letting go of them while the host sleeps hands them back (`handBack`).
    var claimedAddresses: [IPAddress] {
        takeovers.filter(\.takeover.isClaimed).map(\.address)
    }

    /// Whether the record at `position` in `owner.records` is answered at `now`: verified, not withdrawn by a wake.
    func answers(recordAt position: Int, at now: UnixTime) -> Bool {
        if let probe = probes[position], probe.isProbing(at: now) { return false }
        switch wake?.scope {
        case nil: return true
        case .host: return false
        case .records(let withdrawn): return !withdrawn.contains(RecordIdentity(owner.records.record(at: position)))
        }
    }

    /// Whether `record`, one of this host's (`HeldRecord.identical`), is answered at `now`.
    func answers(_ record: DNSRecord, at now: UnixTime) -> Bool {
        if probes.isEmpty, wake == nil { return true }
        guard let position = owner.records.position(of: record) else { return false }
        return answers(recordAt: position, at: now)
    }
}

extension SleepProxyCore {
    /// The one way in, for a host of either origin that is not held yet: a registration accepted (`apply`), an owner
    /// the lease store kept (`restoreOwners`), a declared host found asleep (`takeOverDeclared`). Its unique records
    /// other than reverse mappings are probed silently from `now` before they are answered; `state` is a wake the
    /// store kept going on. Its take-over is the caller's to start (`updateTakeovers`), and what the store mirrors
    /// of it the caller's to emit (`storedOwnerChange`).
    mutating func hold(_ owner: Owner, as origin: HostOrigin, state: HeldHost.State = .proxying, now: UnixTime) {
        var host = HeldHost(owner: owner, origin: origin, state: state)
        host.probes = Self.initialProbes(for: owner.records, now: now)
        hosts.insert(host)
    }

    // MARK: What the lease store mirrors

    /// `change` to the lease store's copy of `host`, if the store mirrors it (`HeldHost.isStored`): every change
    /// to a held host's stored owner or wake goes through here, so none is ever emitted for a declared host.
    func storeChange(_ change: StoreChange, of host: HeldHost) -> [Action] {
        host.isStored ? [.store(change)] : []
    }

    /// The store's copy of the held host of `key` as it stands: its owner.
    func storedOwnerChange(of key: OwnerKey) -> [Action] {
        guard let host = hosts[key] else { return [] }
        return storeChange(.saveOwner(host.owner), of: host)
    }

    /// The store's copy of the wake of the held host of `key`: kept while it runs, cleared once the host is held
    /// again. Nothing once the host has gone: its stored wake went with its stored owner (`drop`).
    func storedWakeChange(of key: OwnerKey) -> [Action] {
        guard let host = hosts[key] else { return [] }
        return storeChange(.saveWake(key, host.wake.map { StoredWake($0, of: host.owner) }), of: host)
    }

    /// The held owners the lease store mirrors, for a store that fell behind.
    public var storedOwners: [Owner] {
        hosts.values.filter(\.isStored).map(\.owner)
    }

    /// Every stored host's wake as the store should have it, for a store that fell behind.
    public var storedWakes: [OwnerKey: StoredWake] {
        var wakes: [OwnerKey: StoredWake] = [:]
        for host in hosts.values where host.isStored {
            if let wake = host.wake { wakes[host.key] = StoredWake(wake, of: host.owner) }
        }
        return wakes
    }
}

/// How a held host came to be held, with what only that way brings. The rules that treat the two apart ask this.
enum HostOrigin: Hashable, Sendable {
    /// It registered (`Registration.swift`), or the lease store kept its registration (`restoreOwners`).
    case registered(RegistrationState)
    /// The configuration declares it, and it was found asleep from the wire (`Declared.swift`): it holds no lease.
    /// Boxed: a declaration is large and few hosts are declared, so a registered host does not carry its size.
    indirect case declared(DeclaredHost)
}

/// What a registration has that a declared host does not, beside what its `Owner` holds (the OWNER sequence, the
/// lease, the password, which the lease store mirrors).
struct RegistrationState: Hashable, Sendable {
    /// Message IDs of this sequence's datagrams that were answered: the client counts every record sent with
    /// such an ID as registered, so a later datagram with one is kept in part rather than refused whole.
    var answeredIDs: Set<UInt16> = []
}

/// A record as the proxy tells records apart: `HeldRecord.identical` (name, type, class and RDATA, with the name and
/// the names inside the RDATA compared ignoring ASCII case).
///
/// It keeps the record as it is (no lower-case copy is built: a restore makes one for every unique record of every
/// host) and folds case when it hashes.
struct RecordIdentity: Hashable, Sendable {
    let record: DNSRecord

    init(_ record: DNSRecord) {
        self.record = record
    }

    static func == (lhs: RecordIdentity, rhs: RecordIdentity) -> Bool {
        HeldRecord.identical(lhs.record, rhs.record)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(record.type)
        hasher.combine(record.recordClass)
        record.name.hashIgnoringCase(into: &hasher)
        record.rdata.hashIgnoringCase(into: &hasher)
    }
}

/// The record probes of one host, by position in its records: a probe per record at most, none for most. A restore
/// starts a probe for every unique record of every host at once, so they take a slot each beside the records, not
/// a table keyed by the records; empty once every probe has settled.
struct RecordProbes: Hashable, Sendable {
    /// Empty, or one slot per record of the owner: 0 for none, else 1 + the probe's place in `probes`. The probes
    /// a registration or a restore starts are one value, kept once.
    private var slots: [UInt32] = []
    private var probes: [RecordProbe] = []
    /// How many probes there were after the last compaction: the next comes when they have doubled.
    private var compactedCount = 0

    var isEmpty: Bool { slots.isEmpty }

    /// The probe of the record at `position`, if it is in one.
    subscript(position: Int) -> RecordProbe? {
        guard position < slots.count, slots[position] != 0 else { return nil }
        return probes[Int(slots[position]) - 1]
    }

    /// The probes, in the order of the records.
    var values: [RecordProbe] { slots.indices.compactMap { self[$0] } }

    /// The probes, each value once or a few times (those started together are one), in no particular order: a few
    /// for a host, however many records it has.
    var distinctValues: [RecordProbe] { probes }

    /// Puts the record at `position` of `count` records in `probe`.
    mutating func set(_ probe: RecordProbe, at position: Int, of count: Int) {
        if slots.isEmpty { slots = Array(repeating: 0, count: count) }
        // Probes started together are the same value; a new one is looked for among the last few only.
        if let place = probes.indices.suffix(8).last(where: { probes[$0] == probe }) {
            slots[position] = UInt32(place + 1)
        } else {
            probes.append(probe)
            slots[position] = UInt32(probes.count)
        }
        if probes.count > max(8, 2 * compactedCount) { compact() }
    }

    /// Forgets the probes `done` says are over.
    mutating func removeAll(where done: (RecordProbe) -> Bool) {
        for position in slots.indices where self[position].map(done) == true { slots[position] = 0 }
        compact()
    }

    /// Every probe changed by `change`.
    mutating func update(_ change: (inout RecordProbe) -> Void) {
        for place in probes.indices { change(&probes[place]) }
    }

    /// Keeps only the probes some record is in; none at all when no record is probed.
    private mutating func compact() {
        var kept: [RecordProbe] = []
        var places: [UInt32: UInt32] = [:]
        for position in slots.indices where slots[position] != 0 {
            let old = slots[position]
            if let place = places[old] {
                slots[position] = place
                continue
            }
            kept.append(probes[Int(old) - 1])
            let place = UInt32(kept.count)
            places[old] = place
            slots[position] = place
        }
        if kept.isEmpty {
            slots = []
            probes = []
        } else {
            probes = kept
        }
        compactedCount = probes.count
    }

    static func == (lhs: RecordProbes, rhs: RecordProbes) -> Bool {
        lhs.slots.count == rhs.slots.count && lhs.slots.indices.allSatisfy { lhs[$0] == rhs[$0] }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(slots.count)
        for position in slots.indices { hasher.combine(self[position]) }
    }

    /// The probes of `old` records moved to where the same records (`RecordIdentity`) are among `new`; records not
    /// among them lose theirs.
    func moved(from old: HeldRecords, to new: HeldRecords) -> RecordProbes {
        guard !slots.isEmpty else { return self }
        var byIdentity: [RecordIdentity: RecordProbe] = [:]
        for position in slots.indices {
            if let probe = self[position] { byIdentity[RecordIdentity(old.record(at: position))] = probe }
        }
        var result = RecordProbes()
        for position in new.indices {
            if let probe = byIdentity[RecordIdentity(new.record(at: position))] {
                result.set(probe, at: position, of: new.count)
            }
        }
        return result
    }
}

/// The silent probing a unique held record goes through before it is answered: three ticks 250 ms apart with no
/// probe on the wire (the host itself may still be answering), then announcements (PROTOCOL.md section 3.1).
struct RecordProbe: Hashable, Sendable {
    /// When the silent probe began; conflicts before its first tick are ignored.
    var started: UnixTime
    /// Multicast conflicts forgiven during this probe (Apple forgives one, with a one-second pause). The counts are
    /// narrow: a restore starts a probe for every unique record of every host at once.
    var forgiven: UInt8 = 0
    /// Announcements once verified: 2 after a registration, 4 after a conflict.
    var announcements: UInt8
    /// Whether this probe follows a conflict: a further conflict before the record has settled wakes the owner.
    var afterConflict: Bool

    static let tick: Duration = .milliseconds(250)
    static let ticks = 3
    static let conflictPause: Duration = .seconds(1)

    /// The re-announcements after a conflict: 4 at 0, 1, 3 and 7 s after the record is verified again.
    static let conflictAnnouncementGaps: [Duration] = [.seconds(1), .seconds(2), .seconds(4)]

    var firstTick: UnixTime { started + Self.tick }
    var verifiedAt: UnixTime { started + Self.tick * Self.ticks }
    /// When the record has settled: verified, and after a conflict also re-announced.
    var settledAt: UnixTime {
        afterConflict ? verifiedAt + Self.conflictAnnouncementGaps.reduce(.zero, +) : verifiedAt
    }

    func isProbing(at now: UnixTime) -> Bool { now < verifiedAt }
}
