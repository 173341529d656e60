import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// The public third-party packets: every one decodes, and its OWNER option says what its source says.
@Suite("Public vectors with OWNER")
struct PublicVectorTests {
    struct Expected: Sendable, CustomTestStringConvertible {
        var file: String
        var index: Int
        /// Whether the file holds whole Ethernet frames (true) or bare DNS payloads.
        var isFrame: Bool
        var sequence: UInt8
        var primary: String
        var wake: String?
        var counts: (Int, Int, Int, Int)
        var testDescription: String { "\(file)#\(index)" }
    }

    static let vectors: [Expected] = [
        Expected(
            file: "pub-mac-mdns-announce-with-owner-opt.hex", index: 0, isFrame: true, sequence: 193,
            primary: "26:a2:e1:90:a9:5d", wake: "24:a2:e1:90:a9:5d", counts: (0, 3, 0, 4)),
        Expected(
            file: "pub-ios-mdns-announce-with-owner-opt-ipv6.hex", index: 0, isFrame: true, sequence: 207,
            primary: "26:e3:14:4d:84:c0", wake: "24:e3:14:4d:84:c0", counts: (0, 11, 0, 6)),
        Expected(
            file: "pub-appletv-mdns-responses-with-owner-opt.hex", index: 0, isFrame: false, sequence: 38,
            primary: "90:dd:5d:b5:95:65", wake: "90:dd:5d:ac:28:5b", counts: (0, 6, 0, 1)),
        Expected(
            file: "pub-appletv-mdns-responses-with-owner-opt.hex", index: 1, isFrame: false, sequence: 118,
            primary: "90:dd:5d:b5:95:65", wake: "90:dd:5d:ac:28:5b", counts: (0, 6, 0, 1)),
        Expected(
            file: "pub-appletv-mdns-responses-with-owner-opt.hex", index: 2, isFrame: false, sequence: 81,
            primary: "90:dd:5d:b5:95:65", wake: "90:dd:5d:ac:28:5b", counts: (0, 8, 0, 3)),
        Expected(
            file: "pub-mdns-qu-query-with-owner-opt.hex", index: 0, isFrame: false, sequence: 100,
            primary: "7a:7b:8a:36:9c:7a", wake: "46:84:2c:ca:51:ff", counts: (1, 0, 0, 1)),
    ]

    static func payload(_ vector: Expected) throws -> [UInt8] {
        let packets = try Fixture.hexPackets(vector.file)
        let packet = packets[vector.index]
        guard vector.isFrame else { return packet }
        let udp = try #require(UDPPayload(frame: packet))
        #expect(udp.sourcePort == 5353 && udp.destinationPort == 5353)
        return udp.payload
    }

    @Test(arguments: vectors)
    func decodesWithOwner(_ vector: Expected) throws {
        let message = try DNSMessage(decoding: Self.payload(vector))
        #expect(message.questions.count == vector.counts.0)
        #expect(message.answers.count == vector.counts.1)
        #expect(message.authorities.count == vector.counts.2)
        #expect(message.additionals.count == vector.counts.3)
        #expect(message.optRecords.count == 1)
        let opt = try #require(message.optRecords.first)
        #expect(opt.ednsHeader == EDNSHeader(udpPayloadSize: 1440, flags: 0x1194))
        let owner = try #require(opt.optData?.owner)
        #expect(owner.version == 0)
        #expect(owner.sequence == vector.sequence)
        #expect(owner.primaryMAC == MACAddress(vector.primary))
        #expect(owner.wakeMAC == vector.wake.flatMap { MACAddress($0) })
        #expect(owner.password == nil)
        #expect(owner.encodedLength == 14)
    }

    @Test func appleTVFilesHaveThreeEpochs() throws {
        #expect(try Fixture.hexPackets("pub-appletv-mdns-responses-with-owner-opt.hex").count == 3)
    }

    @Test func macAnnouncementRecords() throws {
        let message = try DNSMessage(decoding: Self.payload(Self.vectors[0]))
        #expect(message.flags.rawValue == 0x8400)
        #expect(message.flags.isResponse && message.flags.authoritativeAnswer)
        let names = message.answers.map(\.name.description)
        #expect(
            names == [
                "B.9.5.9.3.4.7.3.6.7.0.2.0.D.8.1.0.0.0.0.0.0.0.0.0.0.0.0.0.8.E.F.ip6.arpa.",
                "1.A.9.4.7.E.A.4.B.A.F.B.2.1.4.0.0.6.E.F.7.1.F.2.5.3.E.0.1.0.A.2.ip6.arpa.",
                "136.0.168.192.in-addr.arpa.",
            ])
        for answer in message.answers {
            #expect(answer.type == .ptr && answer.cacheFlush && answer.recordClass == .internet && answer.ttl == 120)
            #expect(answer.rdata == .ptr("Zalmoid.local."))
        }
        // NSEC next names are compressed pointers to the owner name in Apple's traffic.
        let nsec = message.additionals[0]
        guard case .nsec(let data) = nsec.rdata else {
            Issue.record("expected NSEC, found \(nsec.rdata)")
            return
        }
        #expect(data.nextName == nsec.name)
        #expect(data.types == [.ptr])
    }

    @Test func iOSAnnouncementKeepsInstanceLabelWhole() throws {
        let message = try DNSMessage(decoding: Self.payload(Self.vectors[1]))
        let srv = try #require(message.answers.first { $0.type == .srv })
        // One label holding colons, an @ and the IPv6 text.
        #expect(srv.name.label(at: 0).map { Array($0) } == Array("24:e3:14:4d:84:c0@fe80::26e3:14ff:fe4d:84c0".utf8))
        #expect(srv.name.labelCount == 4)
        #expect(srv.rdata == .srv(SRVData(port: 32498, target: "sCapys-fLuff.local.")))
        let txt = try #require(message.answers.first { $0.type == .txt })
        #expect(txt.rdata == .txt(try TXTData([""])))
        let a = try #require(message.answers.first { $0.type == .a })
        #expect(a.rdata == .a(IPv4Address(192, 168, 0, 177)))
        let aaaa = message.answers.filter { $0.type == .aaaa }.map(\.rdata)
        #expect(
            aaaa == [
                .aaaa(IPv6Address("fe80::42a:2c03:ab2b:2f14")!),
                .aaaa(IPv6Address("2a01:e35:2f17:fe60:875:e6b4:c48b:d7fe")!),
            ])
        let shared = message.answers.filter { !$0.cacheFlush }.map(\.type)
        #expect(shared == [.ptr, .ptr, .ptr])
    }

    @Test func quQueryHasUnicastResponseBit() throws {
        let message = try DNSMessage(decoding: Self.payload(Self.vectors[5]))
        #expect(message.flags.rawValue == 0)
        #expect(
            message.questions == [
                DNSQuestion(
                    name: "_companion-link._tcp.local.", type: .ptr, questionClass: .internet, unicastResponse: true)
            ])
    }

    @Test func standaloneOPTRecordVector() throws {
        let bytes = try #require(Fixture.hexPackets("pub-opt-rr-owner-with-wakeup-mac.hex").first)
        let record = try DNSRecord(decodingStandalone: bytes)
        #expect(record.name.isRoot && record.type == .opt)
        #expect(record.ednsHeader == EDNSHeader(udpPayloadSize: 1440, flags: 0x1194))
        #expect(
            record.optData?.options == [
                .owner(
                    OwnerOption(
                        sequence: 70, primaryMAC: MACAddress("8f:5f:ef:c6:5f:7c")!,
                        wakeMAC: MACAddress("70:9f:03:1e:24:73")!))
            ])
        #expect(try record.encodedStandalone() == bytes)
    }

    /// Apple's compressor and ours agree on these packets, so they re-encode to the very same bytes.
    @Test(arguments: vectors)
    func reencodesByteForByte(_ vector: Expected) throws {
        let bytes = try Self.payload(vector)
        let message = try DNSMessage(decoding: bytes)
        let again = try message.encoded(compression: .all)
        #expect(try DNSMessage(decoding: again) == message)
        #expect(again == bytes)
    }
}
