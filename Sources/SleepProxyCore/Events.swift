public import DNSWire
public import NetworkAddresses

/// Why a registration datagram was refused. Refusals are silent on the wire (Macs ignore RCODE and would sleep
/// believing they are proxied), so the reason lives in the log and the event history.
public struct RefusalReason: Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
        case malformed
        case notAnUpdate = "not-an-update"
        case noOwner = "no-owner"
        case noLease = "no-lease"
        case zeroLease = "zero-lease"
        case ownerVersion = "owner-version"
        case zeroPrimaryMAC = "zero-primary-mac"
        case sourceOffLink = "source-off-link"
        case ownerRecordLimit = "owner-record-limit"
        case totalRecordLimit = "total-record-limit"
        case nameHijack = "name-hijack"
        case addressHijack = "address-hijack"
        case tooLarge = "too-large"
        case hostLimit = "host-limit"
        case rateLimited = "rate-limited"
        case unknownInterface = "unknown-interface"
    }
    private let code: Code

    /// The message does not decode.
    public static let malformed = RefusalReason(code: .malformed)
    /// The message decodes but is not a DNS UPDATE request.
    public static let notAnUpdate = RefusalReason(code: .notAnUpdate)
    /// No OPT record carries an OWNER option.
    public static let noOwner = RefusalReason(code: .noOwner)
    /// No OPT record carries an Update Lease option together with OWNER.
    public static let noLease = RefusalReason(code: .noLease)
    /// The requested lease is 0 (not a deregistration: Apple has none).
    public static let zeroLease = RefusalReason(code: .zeroLease)
    /// OWNER version other than 0.
    public static let ownerVersion = RefusalReason(code: .ownerVersion)
    /// OWNER primary MAC all zero (Apple checks its first four bytes).
    public static let zeroPrimaryMAC = RefusalReason(code: .zeroPrimaryMAC)
    /// The source address is not on the receiving interface's link.
    public static let sourceOffLink = RefusalReason(code: .sourceOffLink)
    /// The owner would hold more records than the per-owner limit.
    public static let ownerRecordLimit = RefusalReason(code: .ownerRecordLimit)
    /// The proxy would hold more records than the total limit.
    public static let totalRecordLimit = RefusalReason(code: .totalRecordLimit)
    /// A unique name is held for a different owner.
    public static let nameHijack = RefusalReason(code: .nameHijack)
    /// An address record or reverse mapping claims an address held for a different owner.
    public static let addressHijack = RefusalReason(code: .addressHijack)
    /// The datagram is larger than `CoreConfiguration.maximumRegistrationBytes`.
    public static let tooLarge = RefusalReason(code: .tooLarge)
    /// A new host would make the interface hold more than `CoreConfiguration.maximumHostsPerInterface`.
    public static let hostLimit = RefusalReason(code: .hostLimit)
    /// The source sent registrations faster than `CoreConfiguration.registrationRate` allows.
    public static let rateLimited = RefusalReason(code: .rateLimited)
    /// The datagram arrived on an interface the proxy does not serve.
    public static let unknownInterface = RefusalReason(code: .unknownInterface)

    /// Every reason, for documentation and tests.
    public static let all: [RefusalReason] = [
        .malformed, .notAnUpdate, .noOwner, .noLease, .zeroLease, .ownerVersion, .zeroPrimaryMAC, .sourceOffLink,
        .ownerRecordLimit, .totalRecordLimit, .nameHijack, .addressHijack, .unknownInterface, .tooLarge, .hostLimit,
        .rateLimited,
    ]

    /// A stable identifier (`no-owner`), used in the event history and logs.
    public var identifier: String { code.rawValue }

    public init?(identifier: String) {
        guard let code = Code(rawValue: identifier) else { return nil }
        self.code = code
    }

    private init(code: Code) { self.code = code }

    public var description: String { identifier }
}

/// Something that happened to a held host, kept in the event history.
public struct Event: Hashable, Sendable {
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: String, Hashable, Sendable {
            case registered, renewed, replaced, refused, expired, released, conflict, takeover, wake
            case wakeCancelled = "wake-cancelled"
            case wakeIgnored = "wake-ignored"
            case wouldWake = "would-wake"
            case keepalive
            case asleep
        }
        private let code: Code

        /// A host not held before registered.
        public static let registered = Kind(code: .registered)
        /// A held host sent another datagram with the same sequence number (more records, a retransmission or a
        /// renewal).
        public static let renewed = Kind(code: .renewed)
        /// A held host registered with a new sequence number; its older records were replaced.
        public static let replaced = Kind(code: .replaced)
        /// A registration was refused (silently on the wire).
        public static let refused = Kind(code: .refused)
        /// A host's lease ran out.
        public static let expired = Kind(code: .expired)
        /// A host was let go (it came back, or the administrator forgot it).
        public static let released = Kind(code: .released)
        /// Another host kept claiming one of a held host's names.
        public static let conflict = Kind(code: .conflict)
        /// The proxy claimed a held host's address (first ARP or NA announcement).
        public static let takeover = Kind(code: .takeover)
        /// A held host is being woken: the detail says why (the trigger, its source, port and service).
        public static let wake = Kind(code: .wake)
        /// A wake was called off: the host registered again while it was being woken.
        public static let wakeCancelled = Kind(code: .wakeCancelled)
        /// The wake policy kept traffic from waking a held host (`wake.ignore_sources`, `wake.never_wake`): the
        /// detail names the trigger and the rule. At most one a minute per host and source address.
        public static let wakeIgnored = Kind(code: .wakeIgnored)
        /// A dry run (`wake.dry_run`): the host would have been woken, and no magic packet was sent. The detail is
        /// what a `wake` event would say. At most one a minute per host for what traffic and conflicts decide.
        public static let wouldWake = Kind(code: .wouldWake)
        /// TCP keepalive offload: a connection is kept alive from now on, a keepalive record cannot be used (the
        /// detail names the field), or a peer stopped answering. Wakes it causes are `wake` events.
        public static let keepalive = Kind(code: .keepalive)
        /// A declared host (one that never registers) answered none of the proxy's probes: it sleeps, and the proxy
        /// takes it over. When it is back, a `released` event says what was heard from it.
        public static let asleep = Kind(code: .asleep)

        /// Every kind, for documentation and tests.
        public static let all: [Kind] = [
            .registered, .renewed, .replaced, .refused, .expired, .released, .conflict, .takeover, .wake,
            .wakeCancelled, .wakeIgnored, .wouldWake, .keepalive, .asleep,
        ]

        public var identifier: String { code.rawValue }

        public init?(identifier: String) {
            guard let code = Code(rawValue: identifier) else { return nil }
            self.code = code
        }

        private init(code: Code) { self.code = code }

        public var description: String { identifier }
    }

    public var time: UnixTime
    public var kind: Kind
    public var interface: InterfaceName
    /// The OWNER primary MAC, when known.
    public var owner: MACAddress?
    /// Where the datagram came from, for registrations and refusals.
    public var source: Endpoint?
    /// The refusal reason, for `refused`.
    public var reason: RefusalReason?
    /// A human explanation: what was registered, or what exactly was wrong.
    public var detail: String

    public init(
        time: UnixTime, kind: Kind, interface: InterfaceName, owner: MACAddress? = nil, source: Endpoint? = nil,
        reason: RefusalReason? = nil, detail: String
    ) {
        self.time = time
        self.kind = kind
        self.interface = interface
        self.owner = owner
        self.source = source
        self.reason = reason
        self.detail = detail
    }
}

/// A change the lease store must make so that it mirrors the core.
public enum StoreChange: Hashable, Sendable {
    /// Insert or replace an owner with all its records.
    case saveOwner(Owner)
    /// Forget an owner and its records.
    case removeOwner(OwnerKey)
    /// Append to the event history.
    case appendEvent(Event)
    /// Keep how far a held owner's wake has gone (nil: it has none), so that a restart continues it.
    case saveWake(OwnerKey, StoredWake?)
    /// Replace the records learned from the declared host of the key (`LearnedRecords`) with these, in order;
    /// none deletes them. Declared hosts are not stored, but what they announced while awake is: a host asleep
    /// when the proxy restarts cannot announce it again.
    case saveLearned(OwnerKey, [LearnedRecord])
}

/// A record a declared host sent about itself while awake, and when it last sent it: what the lease store keeps
/// of what was learned from it (`StoreChange.saveLearned`).
public struct LearnedRecord: Hashable, Sendable {
    /// As the host last sent it (TTL and cache-flush bit included).
    public var record: DNSRecord
    /// When the host last sent it.
    public var heard: UnixTime

    public init(record: DNSRecord, heard: UnixTime) {
        self.record = record
        self.heard = heard
    }
}
