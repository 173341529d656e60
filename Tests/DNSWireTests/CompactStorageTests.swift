import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// Records moved into a block of their own stay the same records: equal, byte for byte on the wire, case kept.
@Suite("Records in compact storage")
struct CompactStorageTests {
    @Test(arguments: ["A", "B"])
    func theOSX109RegistrationIsUnchanged(source: String) throws {
        let registration = try MacRegistrationText(
            text: Fixture.text("pub-mac-sps-registration-osx10.9.txt"), source: source)
        let decoded = try DNSMessage(decoding: try registration.message.encoded(compression: .exceptSRVTargets))
        let compact = decoded.updates.withCompactStorage()
        #expect(compact == decoded.updates)
        for (moved, original) in zip(compact, decoded.updates) {
            #expect(moved.name.wire == original.name.wire)
            #expect(moved.rdata == original.rdata)
        }
        var rebuilt = decoded
        rebuilt.updates = compact
        for compression in [NameCompression.none, .all, .exceptSRVTargets] {
            #expect(try rebuilt.encoded(compression: compression) == decoded.encoded(compression: compression))
        }
    }

    @Test func everyKindOfRDataAndCaseSurvive() throws {
        let records = [
            DNSRecord(name: "Fanboy.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 2, 2, 15))),
            DNSRecord(name: "fanboy.local.", ttl: 120, rdata: .aaaa(IPv6Address("fe80::1")!)),
            DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("Fanboy._ssh._tcp.local.")),
            DNSRecord(
                name: "Fanboy._ssh._tcp.local.", ttl: 120, cacheFlush: true,
                rdata: .srv(SRVData(priority: 1, weight: 2, port: 22, target: "FANBOY.local."))),
            DNSRecord(name: "Fanboy._ssh._tcp.local.", ttl: 4500, rdata: .txt(try TXTData(["a=B", ""]))),
            DNSRecord(name: "empty.local.", ttl: 4500, rdata: .txt(try TXTData(strings: []))),
            DNSRecord(
                name: "Fanboy.local.", ttl: 120, cacheFlush: true,
                rdata: .nsec(NSECData(nextName: "Fanboy.local.", types: [.a, .aaaa]))),
            DNSRecord(name: "Fanboy.local.", ttl: 120, rdata: .hinfo(HINFOData(cpu: [1, 2], os: [3]))),
            DNSRecord(name: "x.local.", type: DNSType(65_280), ttl: 5, rdata: .opaque([9, 8, 7])),
            DNSRecord(name: ".", ttl: 0, rdata: .null([])),
        ]
        let compact = records.withCompactStorage()
        #expect(compact == records)
        #expect(compact.map(\.name.description) == records.map(\.name.description))
        #expect([DNSRecord]().withCompactStorage().isEmpty)
        // Compacting again changes nothing.
        #expect(compact.withCompactStorage() == records)
    }

    /// A large registration: past a few dozen distinct names they are found by hash, with the same result.
    @Test func manyDistinctNamesAreEachPlacedOnce() throws {
        let records = try (0..<300).map { index in
            DNSRecord(
                name: try DNSName(labels: ["host\(index % 150)", "local"]), ttl: 120,
                rdata: .ptr(try DNSName(labels: ["Target\(index % 7)", "local"])))
        }
        let compact = records.withCompactStorage()
        #expect(compact == records)
        #expect(compact.map(\.rdata) == records.map(\.rdata))
    }
}
