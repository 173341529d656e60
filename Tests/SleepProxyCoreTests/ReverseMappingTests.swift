import DNSWire
import NetworkAddresses
import SleepProxyCore
import Testing

@Suite("Reverse mapping names")
struct ReverseMappingTests {
    @Test(arguments: [
        ("15.2.2.10.in-addr.arpa.", "10.2.2.15"),
        ("15.2.2.10.IN-ADDR.ARPA.", "10.2.2.15"),
        ("9.3.D.9.E.D.E.F.F.F.0.2.A.9.6.D.0.0.0.0.0.0.0.0.0.0.0.0.0.8.E.F.ip6.arpa.", "fe80::d69a:20ff:fede:9d39"),
        ("9.3.d.9.e.d.e.f.f.f.0.2.a.9.6.d.0.0.0.0.0.0.0.0.0.0.0.0.0.8.e.f.IP6.ARPA.", "fe80::d69a:20ff:fede:9d39"),
    ])
    func parses(name: String, address: String) throws {
        let parsed = ReverseMapping.address(of: try DNSName(name))
        #expect(parsed == IPAddress(address))
    }

    @Test(arguments: [
        "2.2.10.in-addr.arpa.", "256.2.2.10.in-addr.arpa.", "01.2.2.10.in-addr.arpa.", "a.2.2.10.in-addr.arpa.",
        "15.2.2.10.in-addr.arpa.local.", "fanboy.local.", "9.3.D.9.ip6.arpa.",
        "9.3.D.9.E.D.E.F.F.F.0.2.A.9.6.D.0.0.0.0.0.0.0.0.0.0.0.0.0.8.E.G.ip6.arpa.",
        "9.3.D.9.E.D.E.F.F.F.0.2.A.9.6.D.0.0.0.0.0.0.0.0.0.0.0.0.0.8.E.FF.ip6.arpa.",
    ])
    func rejects(name: String) throws {
        #expect(ReverseMapping.address(of: try DNSName(name)) == nil)
    }

    @Test(arguments: ["10.77.0.2", "fe80::77:ff:fe00:2", "fd77::2", "2a01:e35:2f17:fe60:875:e6b4:c48b:d7fe"])
    func roundTrips(address: String) throws {
        let ip = try #require(IPAddress(address))
        #expect(ReverseMapping.address(of: ReverseMapping.name(of: ip)) == ip)
    }
}
