import NetworkAddresses
import SleepProxyDaemon
import Testing

/// The kernel filter lists held addresses while few, and folds many into the narrowest prefixes that fit.
@Suite struct CaptureFilterTests {
    @Test func fewAddressesAreListedOneByOne() {
        let terms = InterfaceShell.destinationTerms(
            for: [.v4(IPv4Address(10, 77, 0, 2)), .v6(IPv6Address("fd77::2")!)], limit: 64)
        #expect(terms == ["dst host 10.77.0.2", "dst host fd77::2"])
    }

    @Test func manyAddressesAreFoldedIntoPrefixes() {
        let v6 = (0..<4096).map { IPAddress.v6(IPv6Address(high: 0xFD77_0000_0000_0000, low: 0x1_0000 + UInt64($0))) }
        let terms = InterfaceShell.destinationTerms(for: v6, limit: 64)
        #expect(terms.count == 16)
        #expect(terms.first == "dst net fd77::1:0/120")
        let v4 = (0..<200).map { IPAddress.v4(IPv4Address(10, 77, UInt8($0 % 2), UInt8($0))) }
        // 200 addresses over two /24s fold into the 26 /28 blocks they use: the narrowest that fit in 32 terms.
        let v4Terms = InterfaceShell.destinationTerms(for: v4, limit: 64)
        #expect(v4Terms.count == 26)
        #expect(v4Terms.allSatisfy { $0.hasSuffix("/28") })
        #expect(v4Terms.first == "dst net 10.77.0.0/28")
        #expect(InterfaceShell.destinationTerms(for: [], limit: 64).isEmpty)
    }
}
