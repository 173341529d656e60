import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// Hand-made bad input: each error is the specific one, names its field and offset, and nothing traps.
@Suite("Malformed input")
struct MalformedInputTests {
    static let header = HexDump.bytes("1234 0000 0000 0001 0000 0000")

    /// A message with one answer whose name and RDATA follow the header.
    static func answer(name: String, type: String, rdata: String, class: String = "0001") -> [UInt8] {
        let rd = HexDump.bytes(rdata)
        return header + HexDump.bytes(name) + HexDump.bytes(type + `class` + "00000078")
            + [UInt8(rd.count >> 8), UInt8(rd.count & 0xFF)] + rd
    }

    static func error(_ bytes: [UInt8]) -> DNSWireError? {
        do {
            _ = try DNSMessage(decoding: bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func everyTruncationOfRealPacketsFailsCleanly() throws {
        var packets = try Fixture.hexPackets("pub-appletv-mdns-responses-with-owner-opt.hex")
        packets.append(try Fixture.hexPackets("pub-mdns-qu-query-with-owner-opt.hex")[0])
        for packet in packets {
            for length in 0..<packet.count {
                let error = try #require(Self.error(Array(packet[0..<length])), "prefix \(length) decoded")
                #expect(
                    [.truncated, .badRDataLength].contains(error.kind),
                    "prefix \(length): \(error)")
                #expect(error.offset >= 0 && error.offset <= length)
            }
        }
    }

    @Test func shortHeader() {
        let error = Self.error([0x12, 0x34, 0x00])
        #expect(error?.kind == .truncated)
        #expect(error?.description == "DNS decode: header at offset 0: truncated: expected 12 bytes, found 3")
    }

    @Test func pointerLoopIsRejected() {
        // Name at 12 is a pointer to itself.
        let error = Self.error(Self.answer(name: "c00c", type: "0001", rdata: "0a000001"))
        #expect(error?.kind == .forwardPointer)
        #expect(error?.field == "answer[0].name")
        #expect(error?.offset == 12)
        // Two names pointing at each other: the second points back at the first, which points forward.
        var twoNames = Self.header
        twoNames[5] = 2
        twoNames[7] = 0
        twoNames += HexDump.bytes("03616263 c012 0001 0001")  // abc + pointer to 18 (forward)
        twoNames += HexDump.bytes("c00c 0001 0001")
        #expect(Self.error(twoNames)?.kind == .forwardPointer)
    }

    @Test func pointersMustStrictlyDescend() {
        // At 12: label "a" + pointer to 16; at 16: pointer to 12. Following 12 -> 16 is forward and rejected;
        // a backward chain that revisits a target is a loop.
        var bytes = Self.header
        bytes[5] = 2
        bytes[7] = 0
        // question 0 at 12: "a" then end (12..14), type/class (15..18)
        bytes += HexDump.bytes("0161 00 0001 0001")
        // question 1 at 19: "b" + pointer to 12, type/class
        bytes += HexDump.bytes("0162 c00c 0001 0001")
        #expect(Self.error(bytes) == nil)
        // A chain that comes back to a position after a lower target: at 27 pointer to 21 (the pointer inside
        // question 1's name), which points to 12: descending, fine.
        var chain = bytes
        chain[5] = 3
        chain += HexDump.bytes("c015 0001 0001")
        #expect(Self.error(chain) == nil)
        // A name whose pointer leads back to its own start: "a" then a pointer to 12, forever.
        var loop = Self.header
        loop[5] = 1
        loop[7] = 0
        loop += HexDump.bytes("0161 c00c 0001 0001")
        let error = Self.error(loop)
        #expect(error?.kind == .pointerLoop)
        #expect(error?.offset == 14)
        #expect(error?.field == "question[0].name")
    }

    @Test func pointerIntoHeader() {
        let error = Self.error(Self.answer(name: "c004", type: "0001", rdata: "0a000001"))
        #expect(error?.kind == .pointerIntoHeader)
    }

    @Test func reservedLabelTypes() {
        #expect(Self.error(Self.answer(name: "4100", type: "0001", rdata: "0a000001"))?.kind == .badLabelType)
        #expect(Self.error(Self.answer(name: "8100", type: "0001", rdata: "0a000001"))?.kind == .badLabelType)
    }

    @Test func nameLongerThan255Bytes() {
        // Five 63-byte labels: 5 * 64 + 1 = 321 bytes.
        let label = "3f" + String(repeating: "61", count: 63)
        let error = Self.error(
            Self.answer(name: String(repeating: label, count: 5) + "00", type: "0001", rdata: "0a000001"))
        #expect(error?.kind == .nameTooLong)
    }

    @Test(arguments: [
        ("0001", "0a0000"), ("001c", "00"), ("0021", "00000000"), ("0021", "000000000016026161"), ("000d", "0161"),
    ])
    func badRDataLengths(type: String, rdata: String) {
        let error = Self.error(Self.answer(name: "00", type: type, rdata: rdata))
        #expect(error.map { [.badRDataLength, .truncated].contains($0.kind) } == true, "\(String(describing: error))")
        #expect(error?.field.hasPrefix("answer[0].rdata(") == true)
    }

    @Test func rdLengthPastTheEnd() {
        var bytes = Self.answer(name: "00", type: "0001", rdata: "0a000001")
        bytes[bytes.count - 6] = 0x10  // RDLENGTH 0x1004
        let error = Self.error(bytes)
        #expect(error?.kind == .badRDataLength)
        #expect(error?.description.contains("RDLENGTH 4100") == true)
    }

    @Test func ptrTargetMustFillRData() {
        // PTR RDATA "a." followed by a stray byte.
        let error = Self.error(Self.answer(name: "00", type: "000c", rdata: "016100ff"))
        #expect(error?.kind == .badRDataLength)
        #expect(error?.field == "answer[0].rdata(PTR).target")
    }

    @Test func nameInRDataMayNotRunPastIt() {
        // PTR with RDLENGTH 2 whose name "abc." would continue past the RDATA.
        var bytes = Self.answer(name: "00", type: "000c", rdata: "0361")
        bytes += HexDump.bytes("626300")
        #expect(Self.error(bytes)?.kind == .truncated)
    }

    @Test func nsecBitmapWindows() {
        #expect(Self.error(Self.answer(name: "00", type: "002f", rdata: "00 0001 40")) == nil)
        #expect(Self.error(Self.answer(name: "00", type: "002f", rdata: "00 0000"))?.kind == .badRData)
        #expect(
            Self.error(Self.answer(name: "00", type: "002f", rdata: "00 0021" + String(repeating: "00", count: 33)))?
                .kind == .badRData)
        #expect(Self.error(Self.answer(name: "00", type: "002f", rdata: "00 0101 40 0001 40"))?.kind == .badRData)
    }

    /// OWNER lengths other than 8, 14, 18 and 20 are errors naming the option and its length.
    @Test(arguments: 0...24)
    func ownerLengths(length: Int) {
        let data = String(repeating: "11", count: length)
        let rdata = "0004" + String(format4(length)) + data
        let opt =
            HexDump.bytes("00 0029 05a0 00001194") + [UInt8((rdata.count / 2) >> 8), UInt8((rdata.count / 2) & 0xFF)]
            + HexDump.bytes(rdata)
        var bytes = Self.header
        bytes[7] = 0
        bytes[11] = 1
        bytes += opt
        let error = Self.error(bytes)
        if [8, 14, 18, 20].contains(length) {
            #expect(error == nil)
        } else {
            #expect(error?.kind == .badOptionLength)
            #expect(error?.field == "additional[0].rdata(OPT).option[0](OWNER)")
            #expect(error?.expected == "length 8, 14, 18 or 20, found \(length)")
        }
    }

    @Test(arguments: [0, 2, 4, 6, 8, 12])
    func leaseLengths(length: Int) {
        let rdata = "0002" + format4(length) + String(repeating: "00", count: length)
        var bytes = Self.header
        bytes[7] = 0
        bytes[11] = 1
        bytes += HexDump.bytes("00 0029 05a0 00001194") + [0, UInt8(rdata.count / 2)] + HexDump.bytes(rdata)
        let error = Self.error(bytes)
        #expect((error == nil) == (length == 4 || length == 8))
        if let error { #expect(error.kind == .badOptionLength) }
    }

    @Test func optionRunningPastRData() {
        var bytes = Self.header
        bytes[7] = 0
        bytes[11] = 1
        bytes += HexDump.bytes("00 0029 05a0 00001194 0006 fde9 0008 0000")
        let error = Self.error(bytes)
        #expect(error?.kind == .truncated)
        #expect(error?.field == "additional[0].rdata(OPT).option[0] data (code 65001)")
    }

    @Test func trailingBytes() {
        let bytes = Self.answer(name: "00", type: "0001", rdata: "0a000001") + [0]
        #expect(Self.error(bytes)?.kind == .trailingBytes)
    }

    @Test func hugeCountsDoNotAllocateOrTrap() {
        let bytes = HexDump.bytes("0000 0000 ffff ffff ffff ffff")
        #expect(Self.error(bytes)?.kind == .truncated)
    }

    @Test func emptyRDataOnlyForUpdateDeletions() throws {
        // Class ANY with empty RDATA is an RFC 2136 "delete RRset": kept as opaque.
        let deletion = Self.answer(name: "00", type: "0001", rdata: "", class: "00ff")
        #expect(try DNSMessage(decoding: deletion).answers.first?.rdata == .opaque([]))
        #expect(Self.error(Self.answer(name: "00", type: "0001", rdata: ""))?.kind == .badRDataLength)
    }

    @Test func encoderRejectsBadOwnerPassword() {
        let message = DNSMessage(
            id: 1, flags: DNSFlags(rawValue: 0),
            additionals: [
                .opt(
                    EDNSHeader(udpPayloadSize: 1440),
                    options: [
                        .owner(
                            OwnerOption(sequence: 1, primaryMAC: .broadcast, wakeMAC: .broadcast, password: [1, 2, 3]))
                    ])
            ])
        #expect(throws: DNSWireError.self) { try message.encoded() }
    }
}

private func format4(_ value: Int) -> String {
    let hex = String(value, radix: 16)
    return String(repeating: "0", count: 4 - hex.count) + hex
}
