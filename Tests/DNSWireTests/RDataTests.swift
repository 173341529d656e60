import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

@Suite("Typed RDATA")
struct RDataTests {
    @Test func txtKeepsEmptyRDataAndEmptyStringApart() throws {
        let empty = try TXTData(strings: [])
        let oneEmptyString = try TXTData([""])
        #expect(empty != oneEmptyString)
        #expect(empty.rdata == [])
        #expect(oneEmptyString.rdata == [0])
        #expect(oneEmptyString.strings == [[]])
        let two = try TXTData(["model=Macmini3,1", "osxvers=13"])
        #expect(two.strings == [Array("model=Macmini3,1".utf8), Array("osxvers=13".utf8)])
        #expect(two.rdata.count == 1 + 16 + 1 + 10)
    }

    @Test func txtStringsLongerThan255BytesAreRefused() {
        let error = #expect(throws: DNSWireError.self) {
            try TXTData(strings: [[], [UInt8](repeating: 0x61, count: 256)])
        }
        #expect(error?.kind == .badRDataLength)
        #expect(error?.field == "TXT string[1]")
    }

    @Test func txtDecodedFromAMessageEqualsOneBuiltByHand() throws {
        let built = try TXTData(["spc=1", "u=test"])
        let message = DNSMessage(
            id: 9, flags: DNSFlags(response: true, opcode: .query),
            answers: [DNSRecord(name: "x.local.", ttl: 4500, rdata: .txt(built))])
        let decoded = try DNSMessage(decoding: message.encoded())
        let rdata = try #require(decoded.answers.first?.rdata)
        #expect(rdata == .txt(built))
        var hasher = Hasher()
        hasher.combine(rdata)
        var other = Hasher()
        other.combine(RData.txt(built))
        #expect(hasher.finalize() == other.finalize())
    }

    @Test func nsecTypeBitmap() {
        let nsec = NSECData(nextName: "host.local.", types: [.aaaa, .a, .a, DNSType(300)])
        // Window 0: A (1) and AAAA (28) in 4 bytes; window 1: type 300 = 256 + 44 in 6 bytes.
        #expect(nsec.bitmap == HexDump.bytes("00 04 40000008 01 06 000000000008"))
        #expect(nsec.types == [.a, .aaaa, DNSType(300)])
    }

    @Test func ownerLengthsFollowTheFields() {
        let primary = MACAddress(0x02, 0, 0, 0, 0, 1)
        #expect(OwnerOption(sequence: 1, primaryMAC: primary).encodedLength == 8)
        #expect(OwnerOption(sequence: 1, primaryMAC: primary, wakeMAC: .broadcast).encodedLength == 14)
        #expect(
            OwnerOption(sequence: 1, primaryMAC: primary, wakeMAC: .broadcast, password: [1, 2, 3, 4]).encodedLength
                == 18)
        #expect(
            OwnerOption(sequence: 1, primaryMAC: primary, wakeMAC: .broadcast, password: [1, 2, 3, 4, 5, 6])
                .encodedLength == 20)
        #expect(OwnerOption(sequence: 1, primaryMAC: primary).effectiveWakeMAC == primary)
        #expect(OwnerOption(sequence: 1, primaryMAC: primary, wakeMAC: .broadcast).effectiveWakeMAC == .broadcast)
    }

    /// The worked example of a registration and its reply, byte for byte.
    @Test func workedRegistrationExample() throws {
        let request = HexDump.bytes(
            """
            4B2E 2800 0000 0000 0001 0001
            04 6D616331 05 6C6F63616C 00 0001 8001 00000078 0004 C0A8010A
            00 0029 05A0 00001194 0014 0002 0004 00001C20 0004 0008 00 15 D49A20DE9D38
            """)
        let message = try DNSMessage(decoding: request)
        #expect(message.id == 0x4B2E)
        #expect(
            message.updates == [
                DNSRecord(name: "mac1.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(192, 168, 1, 10)))
            ])
        #expect(message.optRecords.first?.optData?.updateLease == UpdateLease(lease: 7200))
        #expect(try message.encoded(compression: .exceptSRVTargets) == request)

        let reply = DNSMessage(
            id: message.id, flags: DNSFlags(response: true, opcode: .update),
            additionals: [
                .opt(EDNSHeader(udpPayloadSize: 1440, flags: 0x1194), options: [.updateLease(UpdateLease(lease: 7200))])
            ])
        #expect(
            try reply.encoded()
                == HexDump.bytes("4B2E A800 0000 0000 0000 0001 00 0029 05A0 00001194 0008 0002 0004 00001C20"))
    }

    /// RDATA that DNS calls the same (names inside compared ignoring ASCII case) hashes alike when hashed ignoring
    /// case; other data, and a different field beside the name, does not.
    @Test func rdataHashedIgnoringCaseFoldsOnlyTheNamesInside() throws {
        func folded(_ rdata: RData) -> Int {
            var hasher = Hasher()
            rdata.hashIgnoringCase(into: &hasher)
            return hasher.finalize()
        }
        #expect(folded(.ptr("Fanboy._ssh._tcp.local.")) == folded(.ptr("fanboy._SSH._tcp.LOCAL.")))
        #expect(folded(.ptr("fanboy._ssh._tcp.local.")) != folded(.ptr("fanboz._ssh._tcp.local.")))
        let srv = SRVData(port: 22, target: "FANBOY.local.")
        #expect(folded(.srv(srv)) == folded(.srv(SRVData(port: 22, target: "fanboy.LOCAL."))))
        #expect(folded(.srv(srv)) != folded(.srv(SRVData(port: 23, target: "fanboy.local."))))
        #expect(folded(.srv(srv)) != folded(.ptr("fanboy.local.")))
        let nsec = NSECData(nextName: "Fanboy.local.", types: [.a, .aaaa])
        #expect(folded(.nsec(nsec)) == folded(.nsec(NSECData(nextName: "fanboy.local.", types: [.aaaa, .a]))))
        #expect(folded(.nsec(nsec)) != folded(.nsec(NSECData(nextName: "fanboy.local.", types: [.a]))))
        // Data without names is hashed as it is: case in a TXT string is data.
        #expect(folded(.txt(try TXTData(["a=B"]))) != folded(.txt(try TXTData(["a=b"]))))
        #expect(folded(.a(IPv4Address(10, 2, 2, 15))) == folded(.a(IPv4Address(10, 2, 2, 15))))
    }
}
