import DNSWire
import NetworkAddresses
import SleepProxyCore
import Testing

/// How a held host is named in log lines, events and `sleepproxyctl`.
@Suite("Owner naming")
struct OwnerNamingTests {
    static let mac = MACAddress(0x02, 0x0A, 0xFF, 0x00, 0x10, 0x9B)

    static func owner(_ records: [DNSRecord]) -> Owner {
        let time = UnixTime(seconds: 1_800_000_000)
        return Owner(
            key: OwnerKey(interface: "eth0", primaryMAC: mac), wakeMAC: mac, sequence: 1, registeredAt: time,
            updatedAt: time,
            records: records.map { HeldRecord(record: $0, sequence: 1, registeredAt: time, expiresAt: time) })
    }

    @Test func theFirstHostNameIsTheFirstOfAllHostNames() throws {
        let srv = DNSRecord(
            name: "iMac._ssh._tcp.local.", ttl: 120, rdata: .srv(SRVData(port: 22, target: "imac-srv.local.")))
        let aaaa = DNSRecord(name: "iMac.local.", ttl: 120, rdata: .aaaa(IPv6Address("fe80::1")!))
        let a = DNSRecord(name: "IMAC.local.", ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 2)))
        let cases: [([DNSRecord], [String])] = [
            ([srv, aaaa, a], ["iMac.local", "imac-srv.local"]),
            ([srv], ["imac-srv.local"]),
            ([], []),
        ]
        for (records, names) in cases {
            let owner = Self.owner(records)
            #expect(owner.hostNames == names)
            #expect(owner.firstHostName == names.first)
        }
    }

    @Test func macAddressesAreWrittenInLowerCaseWithColons() {
        #expect(Self.mac.description == "02:0a:ff:00:10:9b")
        #expect(MACAddress.broadcast.description == "ff:ff:ff:ff:ff:ff")
        #expect(MACAddress(Self.mac.description) == Self.mac)
    }
}
