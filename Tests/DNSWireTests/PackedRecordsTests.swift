import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// Records packed into a block of their own stay the same records: equal, byte for byte on the wire, case kept; the
/// fields read in place are theirs.
@Suite("Packed records")
struct PackedRecordsTests {
    @Test(arguments: ["A", "B"])
    func theOSX109RegistrationIsUnchanged(source: String) throws {
        let registration = try Fixture.macRegistration(source)
        let decoded = try DNSMessage(decoding: try registration.message.encoded(compression: .exceptSRVTargets))
        let compact = PackedRecords(decoded.updates).records
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
        let tags = records.indices.map { UInt32($0 * 100_000) }
        let packed = PackedRecords(records, tags: tags)
        #expect(packed.records == records)
        #expect(packed.records.map(\.name.description) == records.map(\.name.description))
        for (position, record) in records.enumerated() {
            #expect(try packed[position].encodedStandalone() == record.encodedStandalone())
            #expect(packed.tag(at: position) == tags[position])
            #expect(packed.type(at: position) == record.type)
            #expect(packed.cacheFlush(at: position) == record.cacheFlush)
            #expect(packed.name(at: position).wire == record.name.wire)
            #expect(packed.nameEquals(at: position, ignoringCase: record.name.lowercased()))
        }
        #expect(!packed.nameEquals(at: 0, ignoringCase: "fanboy.local.local."))
        #expect(!packed.nameEquals(at: 0, ignoringCase: "fanbox.local."))
        #expect(PackedRecords([]).records.isEmpty)
        #expect(PackedRecords([]) == PackedRecords())
        // Packing again changes nothing; without tags every tag is 0.
        let again = PackedRecords(packed.records)
        #expect(again.records == records)
        #expect(records.indices.allSatisfy { again.tag(at: $0) == 0 })
        #expect(again != packed, "the tags differ")
        #expect(again == PackedRecords(records))
    }

    /// The host name a dozen records share is kept once: the packed block is smaller than the names and RDATA
    /// written out record by record.
    @Test func aNameSharedByManyRecordsIsKeptOnce() throws {
        let host: DNSName = "a-rather-long-host-name-for-a-mac-mini.local."
        let records = (0..<12).map { port in
            DNSRecord(
                name: host, ttl: 120, cacheFlush: true,
                rdata: .srv(SRVData(port: UInt16(port), target: host)))
        }
        let packed = PackedRecords(records)
        #expect(packed.records == records)
        #expect(packed.records.allSatisfy { $0.name == host })
        // Twelve entries, the name once, twelve SRV data of 11 bytes (the target refers to the name).
        #expect(packed.byteCount >= 12 * 24 + host.wireLength + 12 * 11)
        #expect(packed.byteCount < 12 * 24 + 2 * host.wireLength + 12 * 11)
    }

    /// TXT RDATA longer than an entry's 16-bit length (only a built one can be: on the wire RDLENGTH is 16 bits) is
    /// kept beside the block, unchanged.
    @Test func aTXTLongerThanSixtyFourKilobytesIsKept() throws {
        let long = try TXTData(strings: Array(repeating: Array(repeating: UInt8(ascii: "x"), count: 255), count: 300))
        let records = [
            DNSRecord(name: "Big.local.", ttl: 120, rdata: .txt(long)),
            DNSRecord(name: "big.local.", ttl: 120, rdata: .txt(try TXTData(["small"]))),
        ]
        let packed = PackedRecords(records)
        #expect(packed.records == records)
        #expect(packed.records[0].rdata == .txt(long))
    }

    /// A large registration: past a few dozen distinct names they are found by hash, with the same result.
    @Test func manyDistinctNamesAreEachPlacedOnce() throws {
        let records = try (0..<300).map { index in
            DNSRecord(
                name: try DNSName(labels: ["host\(index % 150)", "local"]), ttl: 120,
                rdata: .ptr(try DNSName(labels: ["Target\(index % 7)", "local"])))
        }
        let packed = PackedRecords(records)
        #expect(packed.records == records)
        #expect(packed.records.map(\.rdata) == records.map(\.rdata))
    }
}
