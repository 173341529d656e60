import DNSWire
import NetworkAddresses

/// A registration datagram as the shell received it.
public struct RegistrationDatagram: Hashable, Sendable {
    public var interface: InterfaceName
    public var source: Endpoint
    /// The IPv6 scope (interface index) of a link-local source, 0 otherwise; the reply goes back with it.
    public var sourceScopeID: UInt32
    /// The address and port the client sent to: the reply leaves from there.
    public var destination: Endpoint
    public var bytes: [UInt8]

    public init(
        interface: InterfaceName, source: Endpoint, sourceScopeID: UInt32 = 0, destination: Endpoint, bytes: [UInt8]
    ) {
        self.interface = interface
        self.source = source
        self.sourceScopeID = sourceScopeID
        self.destination = destination
        self.bytes = bytes
    }
}

/// The parts of an UPDATE that make a registration, once it has passed every check.
struct Registration {
    var message: DNSMessage
    var owner: OwnerOption
    var lease: UpdateLease
    /// The update-section records to hold, in order, with duplicates inside the datagram removed.
    var records: [DNSRecord]
    /// Update-section records left out, with why (OPT-typed records with a name, TTL 0).
    var skipped: [String]
}

/// A refusal with its reason and the specific detail for the log.
struct Refusal: Error {
    var reason: RefusalReason
    var detail: String
    var owner: MACAddress?
}

extension Registration {
    /// Reads a registration out of a datagram, or says precisely why it is not one we accept.
    ///
    /// Accepted as real clients send them (PROTOCOL.md section 2): zone count 0 (Macs) or 1 (`. SOA`, third-party
    /// clients, ignored); records in the update section; compressed names anywhere; several OPT records, of which
    /// the first holding both Lease and OWNER counts; OWNER of 8, 14, 18 or 20 bytes; Lease of 4 or 8 bytes;
    /// any EDNS flag bits.
    static func parse(_ bytes: [UInt8]) -> Result<Registration, Refusal> {
        let message: DNSMessage
        do {
            message = try DNSMessage(decoding: bytes)
        } catch {
            return .failure(Refusal(reason: .malformed, detail: error.description))
        }
        guard message.flags.opcode == .update, !message.flags.isResponse else {
            return .failure(
                Refusal(
                    reason: .notAnUpdate,
                    detail:
                        "opcode \(message.flags.opcode.rawValue), \(message.flags.isResponse ? "response" : "query"): expected an UPDATE request"
                ))
        }
        let opts = message.optRecords.compactMap(\.optData)
        guard let chosen = opts.first(where: { $0.owner != nil && $0.updateLease != nil }) else {
            if let withOwner = opts.first(where: { $0.owner != nil }) {
                return .failure(
                    Refusal(
                        reason: .noLease, detail: "OWNER without an Update Lease option in \(opts.count) OPT record(s)",
                        owner: withOwner.owner?.primaryMAC))
            }
            return .failure(Refusal(reason: .noOwner, detail: "no OWNER option in \(opts.count) OPT record(s)"))
        }
        let owner = chosen.owner!
        let lease = chosen.updateLease!
        guard owner.version == 0 else {
            return .failure(
                Refusal(
                    reason: .ownerVersion, detail: "OWNER version \(owner.version), expected 0",
                    owner: owner.primaryMAC))
        }
        guard !owner.primaryMAC.isZero else {
            return .failure(Refusal(reason: .zeroPrimaryMAC, detail: "OWNER primary MAC is 00:00:00:00:00:00"))
        }
        guard lease.lease > 0 else {
            return .failure(
                Refusal(
                    reason: .zeroLease, detail: "Update Lease 0 (there is no deregistration; leases end by expiry)",
                    owner: owner.primaryMAC))
        }
        var records: [DNSRecord] = []
        var skipped: [String] = []
        for record in message.updates {
            if record.type == .opt {
                skipped.append("OPT-typed record \(record.name)")
                continue
            }
            if record.ttl == 0 {
                skipped.append("\(record.name) \(record.type) with TTL 0")
                continue
            }
            // A record repeated inside one datagram counts once; the later copy wins.
            if let index = records.firstIndex(where: { HeldRecord.identical($0, record) }) {
                records.remove(at: index)
            }
            records.append(record)
        }
        return .success(Registration(message: message, owner: owner, lease: lease, records: records, skipped: skipped))
    }
}

extension HeldRecord {
    /// Same name (ignoring ASCII case), type, class and RDATA.
    static func identical(_ a: DNSRecord, _ b: DNSRecord) -> Bool {
        a.type == b.type && a.recordClass == b.recordClass && a.name.caseInsensitiveEquals(b.name)
            && sameRData(a.rdata, b.rdata)
    }

    /// Whether this record claims a name that only one host may hold: addresses, services and reverse mappings.
    /// These are unique by their nature in DNS-SD, whether or not a client sets the cache-flush bit on them.
    static func claimsUniqueName(_ record: DNSRecord) -> Bool {
        switch record.type {
        case .a, .aaaa, .srv: true
        case .ptr: ReverseMapping.address(of: record.name) != nil
        default: false
        }
    }
}
