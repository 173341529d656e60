public import DNSWire
public import NetworkAddresses
import SleepProxyCore

/// What sleep-proxy clients put on the wire, built the way they build it: the one source of registrations,
/// their OPT records and OWNER announcements for every test and benchmark.
///
/// The defaults are a Mac's (mDNSResponder's `SendSPSRegistration`): no zone, the records in the update section,
/// SRV targets written in full, one OPT with UDP size 1440, the TTL field 0x1194 and Lease 7200 s.
public enum ClientMessage {
    /// The OPT record of a registration: Update-Lease (if `lease`) and OWNER (if `owner`), in that order.
    public static func registrationOPT(
        owner: OwnerOption?, lease: UpdateLease? = UpdateLease(lease: 7200), udpPayloadSize: UInt16 = 1440,
        flags: UInt16 = 0x1194
    ) -> DNSRecord {
        var options: [EDNSOption] = []
        if let lease { options.append(.updateLease(lease)) }
        if let owner { options.append(.owner(owner)) }
        return .opt(EDNSHeader(udpPayloadSize: udpPayloadSize, flags: flags), options: options)
    }

    /// A registration: DNS UPDATE with `records` in the update section and `opts` (by default one OPT with
    /// `owner` and `lease`) in the additional section. `zone` adds the `. SOA` zone question third-party clients
    /// send. Names are compressed as a Mac compresses them (SRV targets in full) unless `compression` says
    /// otherwise.
    public static func update(
        id: UInt16, records: [DNSRecord], owner: OwnerOption?, lease: UpdateLease? = UpdateLease(lease: 7200),
        opts: [DNSRecord]? = nil,
        zone: Bool = false, flags: DNSFlags = DNSFlags(response: false, opcode: .update),
        compression: NameCompression = .exceptSRVTargets
    ) -> [UInt8] {
        let message = DNSMessage(
            id: id, flags: flags, questions: zone ? [DNSQuestion(name: .root, type: .soa)] : [],
            authorities: records, additionals: opts ?? [registrationOPT(owner: owner, lease: lease)])
        // Only a name longer than 255 bytes fails to encode, which no fixture has.
        return try! message.encoded(compression: compression)
    }

    /// An unsolicited announcement of `records` with the OWNER option, as a Mac sends while it falls asleep
    /// (the same sequence number) and when it wakes (the next one); without it (nil) as a Mac announces more
    /// than 60 s after its last wake. Reverse-mapping PTRs are left out: Macs announce those separately.
    public static func announcement(records: [DNSRecord], owner: OwnerOption?) -> [UInt8] {
        let message = DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            answers: records.filter { ReverseMapping.address(of: $0) == nil },
            additionals: owner.map { [.opt(EDNSHeader(udpPayloadSize: 1440, flags: 0), options: [.owner($0)])] } ?? [])
        return try! message.encoded()
    }

    /// A small host's records: the address record of `host`, its reverse mapping, and an ssh service (SRV to
    /// port 22, TXT, the type's PTR; the `_services._dns-sd._udp` entry if `servicesEntry`), all cache-flush
    /// unique records marked when `unique`, with a Mac's TTLs (120 s for host records and SRV, 4500 s for the rest).
    public static func host(
        _ host: DNSName, address: IPAddress, instance: DNSName, txt: [String] = [""], unique: Bool = true,
        servicesEntry: Bool = false
    ) -> [DNSRecord] {
        let addressData: RData =
            switch address {
            case .v4(let v4): .a(v4)
            case .v6(let v6): .aaaa(v6)
            }
        var records = [
            DNSRecord(name: host, ttl: 120, cacheFlush: unique, rdata: addressData),
            DNSRecord(name: ReverseMapping.name(of: address), ttl: 120, cacheFlush: unique, rdata: .ptr(host)),
            DNSRecord(name: instance, ttl: 120, cacheFlush: unique, rdata: .srv(SRVData(port: 22, target: host))),
            DNSRecord(name: instance, ttl: 4500, cacheFlush: unique, rdata: .txt(try! TXTData(txt))),
            DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(instance)),
        ]
        if servicesEntry {
            records.append(DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr("_ssh._tcp.local.")))
        }
        return records
    }

    /// ``host(_:address:instance:txt:unique:servicesEntry:)`` for `NAME.local.` with the instance
    /// `NAME._ssh._tcp.local.`.
    public static func host(named name: String, address: IPAddress, unique: Bool = true) -> [DNSRecord] {
        host(
            try! DNSName(labels: [name, "local"]), address: address,
            instance: try! DNSName(labels: [name, "_ssh", "_tcp", "local"]), unique: unique)
    }
}
