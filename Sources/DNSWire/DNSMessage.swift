/// One entry of the question section (the zone section of an UPDATE).
public struct DNSQuestion: Hashable, Sendable {
    public var name: DNSName
    public var type: DNSType
    /// The class without the top bit.
    public var questionClass: DNSClass
    /// The mDNS "QU" bit (top bit of the class, RFC 6762 section 5.4).
    public var unicastResponse: Bool

    public init(name: DNSName, type: DNSType, questionClass: DNSClass = .internet, unicastResponse: Bool = false) {
        self.name = name
        self.type = type
        self.questionClass = questionClass
        self.unicastResponse = unicastResponse
    }
}

/// A resource record.
///
/// The top bit of the CLASS field is `cacheFlush` (RFC 6762 section 10.2; in a sleep proxy registration it marks
/// a unique record). The exception is OPT, whose CLASS is the UDP payload size: for OPT all 16 bits are kept in
/// `recordClass` and `cacheFlush` is always false.
public struct DNSRecord: Hashable, Sendable {
    public var name: DNSName
    public var type: DNSType
    public var recordClass: DNSClass
    public var cacheFlush: Bool
    public var ttl: UInt32
    public var rdata: RData

    public init(
        name: DNSName, type: DNSType, recordClass: DNSClass = .internet, cacheFlush: Bool = false, ttl: UInt32,
        rdata: RData
    ) {
        self.name = name
        self.type = type
        self.recordClass = recordClass
        self.cacheFlush = cacheFlush
        self.ttl = ttl
        self.rdata = rdata
    }

    /// A record whose type follows from typed RDATA (`.opaque` needs the other initializer).
    public init(name: DNSName, ttl: UInt32, cacheFlush: Bool = false, recordClass: DNSClass = .internet, rdata: RData) {
        precondition(rdata.impliedType != nil, "opaque RDATA needs an explicit type")
        self.init(
            name: name, type: rdata.impliedType!, recordClass: recordClass, cacheFlush: cacheFlush, ttl: ttl,
            rdata: rdata)
    }

    /// An OPT pseudo-record with the root name.
    public static func opt(_ header: EDNSHeader, options: [EDNSOption]) -> DNSRecord {
        DNSRecord(
            name: .root, type: .opt, recordClass: DNSClass(header.udpPayloadSize), cacheFlush: false,
            ttl: header.ttlField, rdata: .opt(OPTData(options: options)))
    }

    /// The EDNS header fields when this is an OPT record.
    public var ednsHeader: EDNSHeader? {
        guard type == .opt else { return nil }
        return EDNSHeader(udpPayloadSize: recordClass.rawValue, ttlField: ttl)
    }

    /// The options when this is an OPT record whose RDATA decoded as options.
    public var optData: OPTData? {
        if case .opt(let data) = rdata { return data }
        return nil
    }
}

/// A DNS message: header and the four sections, kept losslessly.
public struct DNSMessage: Hashable, Sendable {
    public var id: UInt16
    public var flags: DNSFlags
    public var questions: [DNSQuestion]
    public var answers: [DNSRecord]
    public var authorities: [DNSRecord]
    public var additionals: [DNSRecord]

    public init(
        id: UInt16, flags: DNSFlags, questions: [DNSQuestion] = [], answers: [DNSRecord] = [],
        authorities: [DNSRecord] = [], additionals: [DNSRecord] = []
    ) {
        self.id = id
        self.flags = flags
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    // UPDATE (RFC 2136) names for the same four sections.

    /// The zone section of an UPDATE (the question section).
    public var zones: [DNSQuestion] {
        get { questions }
        set { questions = newValue }
    }

    /// The prerequisite section of an UPDATE (the answer section).
    public var prerequisites: [DNSRecord] {
        get { answers }
        set { answers = newValue }
    }

    /// The update section of an UPDATE (the authority section).
    public var updates: [DNSRecord] {
        get { authorities }
        set { authorities = newValue }
    }

    /// The OPT pseudo-records of the additional section, in order (some senders put one per interface).
    public var optRecords: [DNSRecord] {
        additionals.filter { $0.type == .opt && $0.name.isRoot }
    }
}
