import DNSWire
import NetworkAddresses

/// One sleeping host as the proxy holds it: its records (the `Owner` the lease store mirrors) and everything the
/// proxy does for it, with one explicit lifecycle.
///
/// A host enters with its first accepted registration and leaves through `SleepProxyCore.drop(_:reason:)` only:
/// released (it is back), forgotten (the administrator), or after a wake it never answered.
struct HeldHost: Sendable {
    enum State: Hashable, Sendable {
        /// Its records are answered and its addresses taken over (each address has its own take-over phase).
        case proxying
        /// Being woken: magic packets every 2 s, then goodbyes. What the wake withdraws is in the sequence.
        case waking(WakeSequence)
    }

    var owner: Owner
    var state: State = .proxying
    /// The take-over of each held address (from the reverse-mapping PTRs).
    var takeovers: [IPAddress: AddressTakeover] = [:]
    /// Held addresses for which our own host's neighbour entry points at the sleeping host's MAC.
    var neighbourEntries: Set<IPAddress> = []
    /// Unique records in silent probing (after the registration or a conflict), not answered until verified.
    var probes: [RecordIdentity: RecordProbe] = [:]
    /// Message IDs of this sequence's datagrams that were answered: the client counts every record sent with
    /// such an ID as registered, so a later datagram with one is kept in part rather than refused whole.
    var answeredIDs: Set<UInt16> = []
    /// When an OWNER of this host from another MAC was last logged (one line a minute).
    var lastForgedOwnerLog: UnixTime?
    /// The TCP connections kept alive for it, from its keepalive records.
    var keepalives: [KeepaliveConnection.Key: KeptConnection] = [:]
    /// When the wake policy last recorded an ignored or a dry-run wake for this host (its rate limit).
    var policyMemory = WakePolicyMemory()
    /// Held as a declared host (found asleep from the wire), not through a registration: never stored, no lease.
    var declared = false

    var key: OwnerKey { owner.key }

    var wake: WakeSequence? {
        if case .waking(let wake) = state { wake } else { nil }
    }

    /// Whether the host as a whole is being woken: nothing of it is answered, no address defended.
    var isWakingWhole: Bool { wake?.scope == .host }

    /// Whether `record` is answered at `now`: held, verified, not withdrawn by a wake.
    func answers(_ record: DNSRecord, at now: UnixTime) -> Bool {
        if !probes.isEmpty, let probe = probes[RecordIdentity(record)], probe.isProbing(at: now) { return false }
        switch wake?.scope {
        case nil: return true
        case .host: return false
        case .records(let withdrawn): return !withdrawn.contains(RecordIdentity(record))
        }
    }
}

/// A record as the proxy tells records apart: name (folded to lower case), type, class and RDATA.
struct RecordIdentity: Hashable, Sendable {
    var name: DNSName
    var type: DNSType
    var recordClass: DNSClass
    var rdata: RData

    init(_ record: DNSRecord) {
        name = record.name.lowercased()
        type = record.type
        recordClass = record.recordClass
        rdata = Self.folded(record.rdata)
    }

    /// RDATA with the names inside it folded to lower case, so that equality here is `HeldRecord.identical`.
    static func folded(_ rdata: RData) -> RData {
        switch rdata {
        case .ptr(let name):
            return .ptr(name.lowercased())
        case .srv(var srv):
            srv.target = srv.target.lowercased()
            return .srv(srv)
        case .nsec(var nsec):
            nsec.nextName = nsec.nextName.lowercased()
            return .nsec(nsec)
        default:
            return rdata
        }
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
