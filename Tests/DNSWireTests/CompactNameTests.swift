import Testing

@testable import DNSWire

/// A name decoded from a message shares the message's block of names; one kept long after (a machine's host name
/// in the table of machines heard) takes a copy of its own, or it would keep the whole block alive.
struct CompactNameTests {
    static func decodedName() throws -> DNSName {
        let records = try (0..<8).map { n in
            DNSRecord(
                name: try DNSName("service \(n)._smb._tcp.local."), ttl: 120,
                rdata: .srv(SRVData(priority: 0, weight: 0, port: 445, target: "Annas-iMac.local.")))
        }
        let bytes = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records
        ).encoded()
        return try DNSMessage(decoding: bytes).answers[3].name
    }

    @Test func aDecodedNameKeepsItsMessagesNamesAliveUntilCompacted() throws {
        let name = try Self.decodedName()
        #expect(name.storageCapacity >= 512, "a decoded name's block: \(name.storageCapacity) bytes")
        let compact = name.compacted()
        #expect(compact == name)
        #expect(compact.description == "service 3._smb._tcp.local.")
        #expect(
            compact.storageCapacity <= compact.wireLength + DNSName.compactSlack,
            "\(compact.storageCapacity) bytes kept for a name of \(compact.wireLength)")
        // Already compact: the same storage, not another copy.
        #expect(compact.compacted().storage === compact.storage)
    }
}
