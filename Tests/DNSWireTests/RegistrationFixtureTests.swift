import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// The OS X 10.9 registration, given as dnspython text, rebuilt as the wire bytes a Mac sends: no zone section,
/// cache-flush classes on unique records, the record TTLs, SRV targets written in full, one OPT with Lease and
/// an 8-byte OWNER.
@Suite("OS X 10.9 registration rebuilt as wire bytes")
struct RegistrationFixtureTests {
    static func parse(source: String) throws -> MacRegistrationText {
        try Fixture.macRegistration(source)
    }

    static func message(_ registration: MacRegistrationText) -> DNSMessage { registration.message }

    @Test(arguments: ["A", "B"])
    func rebuildsAndDecodesExactly(source: String) throws {
        let registration = try Self.parse(source: source)
        #expect(registration.records.count == (source == "A" ? 22 : 24))
        let message = Self.message(registration)
        let bytes = try message.encoded(compression: .exceptSRVTargets)

        // Header: the ID, flags 0x2800, ZOCOUNT 0, PRCOUNT 0, UPCOUNT n, ADCOUNT 1.
        let n = registration.records.count
        #expect(
            Array(bytes[0..<12]) == [
                UInt8(registration.id >> 8), UInt8(registration.id & 0xFF), 0x28, 0x00, 0, 0, 0, 0, 0, UInt8(n), 0, 1,
            ])
        // The OPT, as Apple writes it, closes the message.
        #expect(
            Array(bytes.suffix(31))
                == HexDump.bytes("00 0029 05A0 00001194 0014 0002 0004 00001C20 0004 0008 00 15 D49A20DE9D38"))

        let decoded = try DNSMessage(decoding: bytes)
        #expect(decoded == message)
        #expect(decoded.zones.isEmpty && decoded.prerequisites.isEmpty)
        #expect(decoded.flags.opcode == .update && !decoded.flags.isResponse)
        #expect(decoded.updates.map(\.cacheFlush) == registration.records.map(\.unique))
        #expect(decoded.updates.filter(\.cacheFlush).count == (source == "A" ? 12 : 0))
        #expect(decoded.updates.map(\.ttl) == registration.records.map(\.record.ttl))
        #expect(decoded.optRecords.first?.optData?.owner?.sequence == 21)
        #expect(decoded.optRecords.first?.optData?.updateLease == UpdateLease(lease: 7200))
    }

    /// SRV RDATA appears in the bytes exactly as the Mac sent it: RDLENGTH 20 and the target in full.
    @Test func srvTargetsAreWrittenInFull() throws {
        let registration = try Self.parse(source: "A")
        let bytes = try Self.message(registration).encoded(compression: .exceptSRVTargets)
        let srvs = registration.records.filter { $0.record.type == .srv }
        #expect(srvs.count == 4)
        for srv in srvs {
            let rdata = try #require(srv.genericRData)
            let needle = [0x00, 0x14] + rdata
            #expect(bytes.firstRange(of: needle) != nil, "SRV \(srv.record.name) rdata not found uncompressed")
        }
        // With full compression the same targets become pointers and the message shrinks, decoding the same.
        let compressed = try Self.message(registration).encoded(compression: .all)
        #expect(compressed.count < bytes.count)
        #expect(try DNSMessage(decoding: compressed) == Self.message(registration))
        for srv in srvs {
            #expect(compressed.firstRange(of: [0x00, 0x14] + srv.genericRData!) == nil)
        }
    }

    /// Unique records carry class 0x8001 on the wire; shared ones 0x0001.
    @Test func cacheFlushClassBytes() throws {
        let registration = try Self.parse(source: "A")
        let bytes = try Self.message(registration).encoded(compression: .exceptSRVTargets)
        let aRecord = try #require(registration.records.first { $0.record.type == .a })
        // TYPE A, CLASS 0x8001, TTL 120, RDLENGTH 4, 10.2.2.15
        #expect(bytes.firstRange(of: HexDump.bytes("0001 8001 00000078 0004 0a02020f")) != nil)
        #expect(aRecord.record.cacheFlush)
        // The device-info TXT is shared: TYPE TXT, CLASS 0x0001, TTL 4500.
        #expect(bytes.firstRange(of: HexDump.bytes("0010 0001 00001194")) != nil)
    }
}
