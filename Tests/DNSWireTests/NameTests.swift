import DNSWire
import Testing

/// Parses through a `String` variable: `DNSName("literal")` would use the literal initializer, which traps.
private func parse(_ text: String) throws -> DNSName {
    try DNSName(text)
}

@Suite("Names")
struct NameTests {
    @Test func dotsAndSpacesInsideOneLabel() throws {
        let name = try parse("70-35-60-63\\.1 Apple TV._sleep-proxy._udp.local.")
        #expect(name.labelCount == 4)
        #expect(name.labels[0] == Array("70-35-60-63.1 Apple TV".utf8))
        #expect(name.description == "70-35-60-63\\.1 Apple TV._sleep-proxy._udp.local.")
        let built = try DNSName(labels: ["70-35-60-63.1 Apple TV", "_sleep-proxy", "_udp", "local"])
        #expect(built == name)
    }

    @Test(arguments: [
        "fanboy.local.", "Fanboy\\032Mac.local.", "a\\\\b.local.", "\\000\\255.x.", "Mac’s Mini._smb._tcp.local.", ".",
    ])
    func presentationRoundTrips(text: String) throws {
        let name = try parse(text)
        #expect(try parse(name.description) == name)
    }

    @Test func escapesBytesThatAreNotText() throws {
        let name = try DNSName(labels: [[0x00, 0x41, 0xFF]])
        #expect(name.description == "\\000A\\255.")
    }

    @Test func caseIsKeptAndComparedSeparately() throws {
        let upper: DNSName = "B.9.5.9.ip6.ARPA."
        let lower: DNSName = "b.9.5.9.ip6.arpa."
        #expect(upper != lower)
        #expect(upper.caseInsensitiveEquals(lower))
        #expect(upper.lowercased() == lower)
        #expect(lower.lowercased() == lower)
        // Only letters fold: bytes next to them in the table (@, [, `, {) and those above 127 stay.
        let edges = try DNSName(labels: [[0x40, 0x41, 0x5A, 0x5B, 0x60, 0x61, 0x7A, 0x7B, 0xC1]])
        #expect(edges.lowercased().wire == [9, 0x40, 0x61, 0x7A, 0x5B, 0x60, 0x61, 0x7A, 0x7B, 0xC1, 0])
        // A name taken from inside a longer one folds only its own bytes.
        #expect(upper.droppingFirstLabels(4).lowercased() == "ip6.arpa.")
        func foldedHash(_ name: DNSName) -> Int {
            var hasher = Hasher()
            name.hashIgnoringCase(into: &hasher)
            return hasher.finalize()
        }
        #expect(foldedHash(upper) == foldedHash(lower) && foldedHash(lower) == lower.hashValue)
        #expect(foldedHash(upper) != foldedHash("b.9.5.8.ip6.arpa."))
        #expect(upper.hasSuffix("ip6.arpa."))
        #expect(!upper.hasSuffix("p6.arpa."))
        #expect(upper.droppingFirstLabels(4) == "ip6.ARPA.")
    }

    @Test func invalidNames() {
        #expect(throws: DNSWireError.self) { try parse("a..b") }
        #expect(throws: DNSWireError.self) { try parse(String(repeating: "a", count: 64) + ".local") }
        #expect(throws: DNSWireError.self) {
            try parse(Array(repeating: String(repeating: "a", count: 60), count: 5).joined(separator: "."))
        }
        #expect(throws: DNSWireError.self) { try parse("bad\\2") }
        #expect(throws: DNSWireError.self) { try parse("bad\\300") }
    }

    @Test func flagsKeepEveryBit() {
        for raw in [UInt16(0x2800), 0xA800, 0x8400, 0xFFFF, 0x0040] {
            var flags = DNSFlags(rawValue: raw)
            let opcode = flags.opcode
            flags.opcode = opcode
            #expect(flags.rawValue == raw)
        }
        let update = DNSFlags(response: true, opcode: .update)
        #expect(update.rawValue == 0xA800)
        var refused = update
        refused.responseCode = .refused
        #expect(refused.rawValue == 0xA805)
    }
}
