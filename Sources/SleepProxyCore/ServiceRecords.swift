import DNSWire
import NetworkAddresses

/// The records a DNS-SD responder publishes for one service instance and its host, with the TTLs mDNSResponder
/// gives them (`kStandardTTL` 4500 s for PTR and TXT, `kHostNameTTL` 120 s for SRV and addresses). Used for the
/// proxy's own `_sleep-proxy._udp` service and for the services declared for hosts that do not register.
enum ServiceRecords {
    static let serviceEnumeration: DNSName = "_services._dns-sd._udp.local."
    static let standardTTL: UInt32 = 4500
    static let hostNameTTL: UInt32 = 120

    /// The browse entry of the type, the instance's PTR, SRV and TXT (shared PTRs, unique SRV and TXT).
    static func service(instance: DNSName, type: DNSName, port: UInt16, target: DNSName, txt: TXTData) -> [DNSRecord] {
        [
            DNSRecord(name: serviceEnumeration, ttl: standardTTL, rdata: .ptr(type)),
            DNSRecord(name: type, ttl: standardTTL, rdata: .ptr(instance)),
            DNSRecord(
                name: instance, ttl: hostNameTTL, cacheFlush: true, rdata: .srv(SRVData(port: port, target: target))),
            DNSRecord(name: instance, ttl: standardTTL, cacheFlush: true, rdata: .txt(txt)),
        ]
    }

    /// The host name's A and AAAA records, unique.
    static func addresses(of host: DNSName, _ addresses: [IPAddress]) -> [DNSRecord] {
        addresses.map { address in
            switch address {
            case .v4(let v4): DNSRecord(name: host, ttl: hostNameTTL, cacheFlush: true, rdata: .a(v4))
            case .v6(let v6): DNSRecord(name: host, ttl: hostNameTTL, cacheFlush: true, rdata: .aaaa(v6))
            }
        }
    }
}
