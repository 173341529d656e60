public import DNSWire
public import NetworkAddresses

/// Learns this host's records as the LAN sees them, from the answers to its own mDNS queries, whoever the
/// responder is (avahi-daemon, systemd-resolved, another): what a proxy must answer while the host sleeps.
///
/// Only responses sent from one of this host's addresses count: the responder on this host sends its answers from
/// the interface's address, and the kernel loops them back to the client's sockets. Answers from anywhere else (a
/// proxy that still holds this host, a cache) are not this host's word on what it publishes now.
///
/// The questions go two ways (``AnswerPath``). As multicast queries from port 5353, whose answers carry the
/// records' real TTLs and cache-flush bits; but a responder keeps back a multicast answer that another one has just
/// given (duplicate answer suppression, RFC 6762 section 7.4), and a proxy holding this host gives the same answers,
/// often first. And as one-shot queries from an ephemeral port (legacy unicast, section 6.7), which every responder
/// answers at once by unicast to the querier, so that nothing on the link can silence them; their TTLs are cut to
/// 10 s and their cache-flush bits cleared, so a record known only from them gets the TTL and uniqueness RFC 6762
/// section 10 and RFC 6763 give it (``standardized(_:)``) until a multicast answer brings the real ones.
///
/// The questions go from the general to the particular: the reverse mappings of the host's addresses (which name
/// the host), the service types (`_services._dns-sd._udp.local`), the instances of each type, then each instance's
/// SRV and TXT, and the host name's A and AAAA. ``questions`` lists those still unanswered; the shell asks them
/// again until none is left or its time is up.
///
/// A responder that does not publish reverse mappings (systemd-resolved does not) still leaves the host's
/// addresses known from its A and AAAA records; ``records`` then adds the PTRs a Mac would register for them
/// (upper-case nibbles, as mDNS.c `AdvertiseInterface` writes them), so that a proxy takes the addresses over.
public struct HostRecords: Sendable {
    /// How an answer reached the client.
    public struct AnswerPath: Sendable, Hashable, CustomStringConvertible {
        private enum Backing: Sendable, Hashable {
            case multicast
            case legacyUnicast
        }

        private let backing: Backing

        private init(_ backing: Backing) { self.backing = backing }

        /// A response to the group (or to port 5353): the records as published, TTLs and cache-flush bits.
        public static let multicast = AnswerPath(.multicast)
        /// A legacy-unicast answer to a one-shot query: the records' data, TTLs cut to 10 s, no cache-flush bits.
        public static let legacyUnicast = AnswerPath(.legacyUnicast)

        public var description: String {
            switch backing {
            case .multicast: "multicast"
            case .legacyUnicast: "legacy unicast"
            }
        }
    }

    /// A record learned, and whether its TTL and cache-flush bit are the published ones or ``standardized(_:)``.
    private struct Learned: Sendable {
        var record: DNSRecord
        var standardized: Bool
    }

    /// `_services._dns-sd._udp.local.`, the service type enumeration.
    public static let serviceTypes: DNSName = "_services._dns-sd._udp.local."
    /// The port of a placeholder service (`_workstation._tcp`, `_device-info`): Macs do not register for those
    /// alone (mDNS.c `mDNSCoreHaveAdvertisedMulticastServices` skips port 9).
    public static let placeholderPort: UInt16 = 9
    /// RFC 6762 section 10: the TTL of a record named by a host name or naming one in its data (A, AAAA, SRV, a
    /// reverse mapping), and of every other record.
    public static let hostNameTTL: UInt32 = 120
    public static let otherTTL: UInt32 = 4_500

    /// The host's addresses on the interface: the sources answers must come from, and what reverse mappings are
    /// asked for.
    public let addresses: [IPAddress]
    /// The host name as the system knows it (`gethostname` + `.local`), used until a reverse mapping names it.
    public let fallbackHostName: DNSName?
    private var answers: [Learned] = []
    /// Whether any response came from this host's addresses: some mDNS responder runs here.
    public private(set) var responderAnswered = false

    public init(addresses: [IPAddress], fallbackHostName: DNSName?) {
        self.addresses = addresses
        self.fallbackHostName = fallbackHostName
    }

    /// The host name: the target of a reverse mapping of one of the host's addresses, else the fallback.
    public var hostName: DNSName? {
        let reverseNames = addresses.map(Self.reverseName(of:))
        for record in learned where record.type == .ptr {
            guard reverseNames.contains(where: { $0.caseInsensitiveEquals(record.name) }),
                case .ptr(let target) = record.rdata
            else { continue }
            return target
        }
        return fallbackHostName
    }

    /// Takes the records of `message` if it is a response from one of the host's addresses; returns whether it was.
    /// Goodbyes (TTL 0), OPT and NSEC records are left out; a record seen again replaces the one before, except that
    /// a legacy-unicast answer does not replace the published TTL and cache-flush bit a multicast one brought.
    @discardableResult
    public mutating func received(
        _ message: DNSMessage, from source: IPAddress, via path: AnswerPath = .multicast
    ) -> Bool {
        guard message.flags.isResponse, message.flags.opcode == .query, addresses.contains(source) else {
            return false
        }
        responderAnswered = true
        for record in message.answers + message.additionals {
            guard record.ttl > 0, [.a, .aaaa, .ptr, .srv, .txt].contains(record.type) else { continue }
            let entry =
                path == .legacyUnicast
                ? Learned(record: Self.standardized(record), standardized: true)
                : Learned(record: record, standardized: false)
            if let index = answers.firstIndex(where: { $0.record.sameData(as: record) }) {
                if entry.standardized, !answers[index].standardized { continue }
                answers[index] = entry
            } else {
                answers.append(entry)
            }
        }
        return true
    }

    /// `record` with the TTL and cache-flush bit it is published with by the rules, for one known only from a
    /// legacy-unicast answer: 120 s for A, AAAA, SRV and reverse mappings, 4500 s for the rest (RFC 6762 section
    /// 10); unique (cache-flush) but for the PTRs of service browsing and type enumeration, which many hosts share
    /// (RFC 6763 section 4, RFC 6762 section 10.2). avahi-daemon publishes them so; mDNSResponder too.
    public static func standardized(_ record: DNSRecord) -> DNSRecord {
        var copy = record
        let namesHost =
            record.type == .a || record.type == .aaaa || record.type == .srv
            || (record.type == .ptr && record.name.isReverseMapping)
        copy.ttl = namesHost ? hostNameTTL : otherTTL
        copy.cacheFlush = record.type != .ptr || record.name.isReverseMapping
        return copy
    }

    /// The records learned so far.
    private var learned: [DNSRecord] { answers.map(\.record) }

    /// The questions still without an answer.
    public var questions: [DNSQuestion] {
        let learned = learned
        var questions: [DNSQuestion] = []
        func ask(_ name: DNSName, _ type: DNSType) {
            if !learned.contains(where: { $0.type == type && $0.name.caseInsensitiveEquals(name) }) {
                questions.append(DNSQuestion(name: name, type: type))
            }
        }
        for address in addresses { ask(Self.reverseName(of: address), .ptr) }
        ask(Self.serviceTypes, .ptr)
        for type in serviceTypeNames { ask(type, .ptr) }
        for instance in instanceNames {
            ask(instance, .srv)
            ask(instance, .txt)
        }
        if let hostName {
            if addresses.contains(where: \.isIPv4) { ask(hostName, .a) }
            if addresses.contains(where: { !$0.isIPv4 }) { ask(hostName, .aaaa) }
        }
        return questions
    }

    /// The services of this host: instances whose SRV names this host, with a port other than the placeholder 9.
    public var services: [DNSName] {
        instanceNames.filter { instance in
            learned.contains { record in
                guard record.name.caseInsensitiveEquals(instance), case .srv(let srv) = record.rdata,
                    let hostName
                else { return false }
                return srv.target.caseInsensitiveEquals(hostName) && srv.port != Self.placeholderPort
            }
        }
    }

    /// What to register, in the order a Mac's record list has them (PROTOCOL.md section 2.3): for each service,
    /// its TXT, the type enumeration PTR, the type's PTR and the SRV; then the reverse mappings; then the host's
    /// A and AAAA. Only instances whose SRV names this host are taken, and only the types that have one.
    public var records: [DNSRecord] {
        guard let hostName else { return [] }
        let learned = learned
        var records: [DNSRecord] = []
        func add(_ record: DNSRecord) {
            if !records.contains(where: { $0.sameData(as: record) }) { records.append(record) }
        }
        for instance in instanceNames {
            guard
                let srv = learned.first(where: { record in
                    guard record.name.caseInsensitiveEquals(instance), case .srv(let data) = record.rdata else {
                        return false
                    }
                    return data.target.caseInsensitiveEquals(hostName)
                })
            else { continue }
            let type = instance.droppingFirstLabels(1)
            learned.filter { $0.type == .txt && $0.name.caseInsensitiveEquals(instance) }.forEach(add)
            learned.filter { $0.isPTR(from: Self.serviceTypes, to: type) }.forEach(add)
            learned.filter { $0.isPTR(from: type, to: instance) }.forEach(add)
            add(srv)
        }
        // Only this interface's addresses: a responder may announce the host's others too, and they are not for a
        // proxy on this link to take over (PROTOCOL.md section 2.1: address records go to their own interface).
        let addressRecords = learned.filter { record in
            guard let address = record.address else { return false }
            return record.name.caseInsensitiveEquals(hostName) && addresses.contains(address)
        }
        for record in addressRecords {
            guard let address = record.address else { continue }
            let reverse = Self.reverseName(of: address)
            let published = learned.filter { $0.type == .ptr && $0.name.caseInsensitiveEquals(reverse) }
            if published.isEmpty {
                add(DNSRecord(name: reverse, ttl: record.ttl, cacheFlush: true, rdata: .ptr(hostName)))
            } else {
                published.forEach(add)
            }
        }
        addressRecords.forEach(add)
        return records
    }

    /// The service types this host enumerates.
    private var serviceTypeNames: [DNSName] {
        learned.compactMap { record in
            guard record.name.caseInsensitiveEquals(Self.serviceTypes), case .ptr(let type) = record.rdata else {
                return nil
            }
            return type
        }
    }

    /// The instances this host lists under its types.
    private var instanceNames: [DNSName] {
        var names: [DNSName] = []
        for type in serviceTypeNames {
            for record in learned where record.name.caseInsensitiveEquals(type) {
                if case .ptr(let instance) = record.rdata,
                    !names.contains(where: { $0.caseInsensitiveEquals(instance) })
                {
                    names.append(instance)
                }
            }
        }
        return names
    }

    /// The reverse-mapping name of `address`: `d.c.b.a.in-addr.arpa.`, or the 32 nibbles of an IPv6 address in
    /// upper case, lowest first, under `ip6.arpa.`, as a Mac writes them.
    public static func reverseName(of address: IPAddress) -> DNSName {
        let bytes = address.bytes
        let labels: [String]
        if bytes.count == 4 {
            labels = bytes.reversed().map { String($0) } + ["in-addr", "arpa"]
        } else {
            let digits = Array("0123456789ABCDEF")
            labels =
                bytes.reversed().flatMap { [String(digits[Int($0 & 0xF)]), String(digits[Int($0 >> 4)])] }
                + ["ip6", "arpa"]
        }
        // Every label is short and plain: this cannot fail.
        return (try? DNSName(labels: labels)) ?? .root
    }
}

extension IPAddress {
    var isIPv4: Bool { bytes.count == 4 }
}

extension DNSName {
    /// Whether the name is under `in-addr.arpa.` or `ip6.arpa.`.
    public var isReverseMapping: Bool {
        hasSuffix("in-addr.arpa.") || hasSuffix("ip6.arpa.")
    }
}

extension DNSRecord {
    /// Same name (any case), type, class and RDATA: the same record, whatever its TTL and cache-flush bit.
    func sameData(as other: DNSRecord) -> Bool {
        type == other.type && recordClass == other.recordClass && rdata == other.rdata
            && name.caseInsensitiveEquals(other.name)
    }

    func isPTR(from name: DNSName, to target: DNSName) -> Bool {
        guard self.name.caseInsensitiveEquals(name), case .ptr(let value) = rdata else { return false }
        return value.caseInsensitiveEquals(target)
    }

    /// The address of an A or AAAA record.
    public var address: IPAddress? {
        switch rdata {
        case .a(let address): .v4(address)
        case .aaaa(let address): .v6(address)
        default: nil
        }
    }
}
