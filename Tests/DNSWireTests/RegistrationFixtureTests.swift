import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// The OS X 10.9 registration, given as dnspython text, rebuilt as the wire bytes a Mac sends: no zone section,
/// cache-flush classes on unique records, the record TTLs, SRV targets written in full, one OPT with Lease and
/// an 8-byte OWNER.
@Suite("OS X 10.9 registration rebuilt as wire bytes")
struct RegistrationFixtureTests {
    /// One record line of the text rendering.
    struct TextRecord {
        var record: DNSRecord
        /// The RDATA bytes when dnspython printed them generically (`\# len hex`).
        var genericRData: [UInt8]?
    }

    struct TextRegistration {
        var id: UInt16
        var records: [TextRecord]
    }

    /// Splits a line into fields, keeping quoted strings (with their quotes) as one field.
    static func fields(_ line: Substring) -> [String] {
        var result: [String] = []
        var current = ""
        var quoted = false
        for character in line {
            if character == "\"" {
                quoted.toggle()
                current.append(character)
            } else if character == " " && !quoted {
                if !current.isEmpty { result.append(current) }
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty { result.append(current) }
        return result
    }

    /// Parses the "Source A" or "Source B" block of the fixture.
    static func parse(source: String) throws -> TextRegistration {
        let text = try Fixture.text("pub-mac-sps-registration-osx10.9.txt")
        let lines = text.split(separator: "\n")
        let start = try #require(lines.firstIndex { $0.contains("Source \(source) (verbatim") })
        var id: UInt16 = 0
        var records: [TextRecord] = []
        var inUpdate = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("# ----") { break }
            if line.hasPrefix("id ") { id = try #require(UInt16(line.dropFirst(3))) }
            if line == ";UPDATE" {
                inUpdate = true
                continue
            }
            if line.hasPrefix(";") {
                inUpdate = false
                continue
            }
            guard inUpdate else { continue }
            let f = fields(line)
            let name = try DNSName(f[0])
            let ttl = try #require(UInt32(f[1]))
            let unique = f[2] == "CLASS32769"
            #expect(unique || f[2] == "IN")
            let type = f[3]
            let rest = Array(f[4...])
            var generic: [UInt8]?
            if rest.first == "\\#" {
                generic = HexDump.bytes(rest[2...].joined())
                #expect(generic?.count == Int(rest[1]))
            }
            let rdata: RData
            switch type {
            case "TXT":
                rdata = .txt(try TXTData(strings: rest.map { Array($0.dropFirst().dropLast().utf8) }))
            case "PTR":
                rdata = .ptr(try DNSName(rest[0]))
            case "SRV":
                if let g = generic {
                    let target = try DNSName(labels: splitLabels(Array(g[6...])))
                    rdata = .srv(
                        SRVData(
                            priority: UInt16(g[0]) << 8 | UInt16(g[1]), weight: UInt16(g[2]) << 8 | UInt16(g[3]),
                            port: UInt16(g[4]) << 8 | UInt16(g[5]), target: target))
                } else {
                    rdata = .srv(
                        SRVData(
                            priority: UInt16(rest[0])!, weight: UInt16(rest[1])!, port: UInt16(rest[2])!,
                            target: try DNSName(rest[3])))
                }
            case "A":
                rdata = .a(try #require(generic.flatMap { IPv4Address(bytes: $0) } ?? IPv4Address(rest[0])))
            case "AAAA":
                rdata = .aaaa(try #require(generic.flatMap { IPv6Address(bytes: $0) } ?? IPv6Address(rest[0])))
            default:
                Issue.record("unexpected type \(type) in fixture")
                continue
            }
            records.append(
                TextRecord(
                    record: DNSRecord(name: name, ttl: ttl, cacheFlush: unique, rdata: rdata), genericRData: generic))
        }
        return TextRegistration(id: id, records: records)
    }

    /// Labels of an uncompressed wire name, read by hand.
    static func splitLabels(_ wire: [UInt8]) -> [[UInt8]] {
        var labels: [[UInt8]] = []
        var i = 0
        while i < wire.count, wire[i] != 0 {
            labels.append(Array(wire[(i + 1)...(i + Int(wire[i]))]))
            i += Int(wire[i]) + 1
        }
        return labels
    }

    /// The OPT as mDNSResponder logged it: "OPT Max 1440 Lease 7200 Vers 0 Seq 21 MAC D4:9A:20:DE:9D:38".
    static let opt = DNSRecord.opt(
        EDNSHeader(udpPayloadSize: 1440, flags: 0x1194),
        options: [
            .updateLease(UpdateLease(lease: 7200)),
            .owner(OwnerOption(sequence: 21, primaryMAC: MACAddress("D4:9A:20:DE:9D:38")!)),
        ])

    static func message(_ registration: TextRegistration) -> DNSMessage {
        DNSMessage(
            id: registration.id, flags: DNSFlags(response: false, opcode: .update),
            authorities: registration.records.map(\.record), additionals: [opt])
    }

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
        #expect(decoded.updates.map(\.cacheFlush) == registration.records.map(\.record.cacheFlush))
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
