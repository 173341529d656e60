public import DNSWire
import NetworkAddresses

/// The OS X 10.9 registration of `pub-mac-sps-registration-osx10.9.txt`, read from dnspython's text rendering
/// and rebuilt as the DNS UPDATE a Mac sends: no zone section, the records in the update section with the
/// cache-flush bit on unique ones (`CLASS32769`), and the OPT mDNSResponder logged for it (Lease 7200, OWNER v0
/// seq 21, 8-byte form, UDP size 1440, TTL field 4500).
public struct MacRegistrationText: Sendable {
    public struct Record: Sendable {
        public var record: DNSRecord
        /// The RDATA bytes where dnspython printed them generically (`\# len hex`).
        public var genericRData: [UInt8]?
        /// Whether the class read `CLASS32769` (IN with the cache-flush bit).
        public var unique: Bool
    }

    public struct ParseError: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    public var id: UInt16
    public var records: [Record]

    /// The OPT as mDNSResponder logged it: "OPT Max 1440 Lease 7200 Vers 0 Seq 21 MAC D4:9A:20:DE:9D:38".
    public static let opt = DNSRecord.opt(
        EDNSHeader(udpPayloadSize: 1440, flags: 0x1194),
        options: [
            .updateLease(UpdateLease(lease: 7200)),
            .owner(OwnerOption(sequence: 21, primaryMAC: MACAddress(0xD4, 0x9A, 0x20, 0xDE, 0x9D, 0x38))),
        ])

    /// Reads the block "Source `source`" (A or B) of the fixture text.
    public init(text: String, source: String) throws {
        let lines = text.split(separator: "\n")
        guard let start = lines.firstIndex(where: { $0.contains("Source \(source) (verbatim") }) else {
            throw ParseError(description: "no block for source \(source)")
        }
        var id: UInt16?
        var records: [Record] = []
        var inUpdate = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("# ----") { break }
            if line.hasPrefix("id ") { id = UInt16(line.dropFirst(3)) }
            if line.hasPrefix(";") {
                inUpdate = line == ";UPDATE"
                continue
            }
            guard inUpdate else { continue }
            records.append(try Self.record(line))
        }
        guard let id else { throw ParseError(description: "no id line for source \(source)") }
        self.id = id
        self.records = records
    }

    /// The UPDATE message, as a Mac would send it.
    public var message: DNSMessage {
        DNSMessage(
            id: id, flags: DNSFlags(response: false, opcode: .update), authorities: records.map(\.record),
            additionals: [Self.opt])
    }

    /// Wire bytes as a Mac writes them: names compressed, SRV targets in full.
    public func wireBytes() throws -> [UInt8] {
        try message.encoded(compression: .exceptSRVTargets)
    }

    static func record(_ line: Substring) throws -> Record {
        let f = fields(line)
        guard f.count >= 5, let ttl = UInt32(f[1]) else { throw ParseError(description: "bad record line: \(line)") }
        let name = try DNSName(f[0])
        let unique = f[2] == "CLASS32769"
        guard unique || f[2] == "IN" else { throw ParseError(description: "unexpected class in: \(line)") }
        let rest = Array(f[4...])
        var generic: [UInt8]?
        if rest.first == "\\#" {
            let bytes = HexDump.bytes(rest[2...].joined())
            guard bytes.count == Int(rest[1]) else { throw ParseError(description: "length mismatch in: \(line)") }
            generic = bytes
        }
        let rdata: RData
        switch f[3] {
        case "TXT":
            rdata = .txt(try TXTData(strings: rest.map { Array($0.dropFirst().dropLast().utf8) }))
        case "PTR":
            rdata = .ptr(try DNSName(rest[0]))
        case "SRV":
            if let g = generic {
                var labels: [[UInt8]] = []
                var i = 6
                while i < g.count, g[i] != 0 {
                    labels.append(Array(g[(i + 1)...(i + Int(g[i]))]))
                    i += Int(g[i]) + 1
                }
                rdata = .srv(
                    SRVData(
                        priority: UInt16(g[0]) << 8 | UInt16(g[1]), weight: UInt16(g[2]) << 8 | UInt16(g[3]),
                        port: UInt16(g[4]) << 8 | UInt16(g[5]), target: try DNSName(labels: labels)))
            } else {
                guard let priority = UInt16(rest[0]), let weight = UInt16(rest[1]), let port = UInt16(rest[2]) else {
                    throw ParseError(description: "bad SRV in: \(line)")
                }
                rdata = .srv(SRVData(priority: priority, weight: weight, port: port, target: try DNSName(rest[3])))
            }
        case "A":
            guard let address = generic.flatMap({ IPv4Address(bytes: $0) }) ?? IPv4Address(rest[0]) else {
                throw ParseError(description: "bad A in: \(line)")
            }
            rdata = .a(address)
        case "AAAA":
            guard let address = generic.flatMap({ IPv6Address(bytes: $0) }) ?? IPv6Address(rest[0]) else {
                throw ParseError(description: "bad AAAA in: \(line)")
            }
            rdata = .aaaa(address)
        default:
            throw ParseError(description: "unexpected type in: \(line)")
        }
        return Record(
            record: DNSRecord(name: name, ttl: ttl, cacheFlush: unique, rdata: rdata), genericRData: generic,
            unique: unique)
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
}
