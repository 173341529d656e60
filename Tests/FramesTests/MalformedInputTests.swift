import FixtureSupport
import Frames
import NetworkAddresses
import Testing

@Suite("Malformed input")
struct MalformedInputTests {
    /// Real frames of each kind, by (capture, Wireshark frame number).
    static let samples: [(Capture, Int)] = [
        (.lurtzWatchHost, 2),  // ARP request
        (.lurtzWatchHost, 1),  // ICMP echo request
        (.lurtzWatchHost, 23),  // TCP SYN with options
        (.lurtzWatchHost, 35),  // 0x0842 magic packet
        (.lurtzWatchHost, 50),  // MLDv2 behind Hop-by-Hop
        (.sleepThenSYN, 1),  // mDNS over IPv6
        (.sleepThenSYN, 89),  // DAD Neighbour Solicitation
        (.selfWake, 2),  // mDNS over IPv4
    ]

    @Test("every prefix of a real frame throws `truncated` or parses the shorter frame", arguments: 0..<samples.count)
    func everyPrefix(sample: Int) throws {
        let (capture, number) = Self.samples[sample]
        let frame = try capture.frame(number)
        var failures = 0
        for length in 0..<frame.count {
            let prefix = Array(frame[..<length])
            do {
                let parsed = try EthernetFrame(parsing: prefix)
                #expect(parsed.serialized(checksums: .preserve) == prefix)
            } catch {
                failures += 1
                #expect(error.code == .truncated, "\(length) bytes: \(error)")
                #expect(error.offset <= length, "\(length) bytes: \(error)")
            }
        }
        // None of these frames has padding, so every shorter prefix is missing part of a layer.
        #expect(failures == frame.count)
    }

    @Test("truncation messages name the layer, the offset and the expected size")
    func truncationMessages() throws {
        let syn = try Capture.lurtzWatchHost.frame(23)
        #expect(
            parseError(Array(syn[..<10]))?.description
                == "Ethernet header at offset 0 truncated: expected 14 bytes, 10 available")
        #expect(
            parseError(Array(syn[..<30]))?.description
                == "IPv4 header at offset 14 truncated: expected 20 bytes, 16 available")
        #expect(
            parseError(Array(syn[..<73]))?.description
                == "IPv4 datagram at offset 14 truncated: expected 60 bytes, 59 available")
    }

    @Test("IPv4 header length below 5 words")
    func badIHL() throws {
        var syn = try Capture.lurtzWatchHost.frame(23)
        syn[14] = 0x44
        let error = try #require(parseError(syn))
        #expect(error.code == .invalidLength)
        #expect(error.offset == 14)
        #expect(error.description == "IPv4 header length 4 words at offset 14: expected at least 5")

        // 15 words: the 40 "option" bytes swallow the TCP header, which is then missing.
        syn[14] = 0x4F
        let swallowed = try #require(parseError(syn))
        #expect(swallowed.code == .truncated)
        #expect(swallowed.description == "TCP header at offset 74 truncated: expected 20 bytes, 0 available")
    }

    @Test("IPv4 total length shorter than the header, and a wrong version")
    func badIPv4Lengths() throws {
        var syn = try Capture.lurtzWatchHost.frame(23)
        syn[16] = 0
        syn[17] = 19
        let error = try #require(parseError(syn))
        #expect(error.code == .invalidLength)
        #expect(error.description == "IPv4 total length 19 at offset 16: expected at least 20 (the header length)")

        var v6in4 = try Capture.lurtzWatchHost.frame(23)
        v6in4[14] = 0x65
        #expect(parseError(v6in4)?.code == .invalidVersion)

        var v4in6 = try Capture.sleepThenSYN.frame(89)
        v4in6[14] = 0x40
        #expect(parseError(v4in6)?.description == "IPv6 version 4 at offset 14: expected 6")
    }

    @Test("IPv4 header checksum: reported always, rejected on request")
    func ipv4HeaderChecksum() throws {
        var syn = try Capture.lurtzWatchHost.frame(23)
        syn[24] ^= 0x01
        let frame = try EthernetFrame(parsing: syn)
        #expect(frame.ipv4?.headerChecksumIsValid == false)
        let error = try #require(parseError(syn, verifying: .ipv4Header))
        #expect(error.code == .checksumMismatch)
        #expect(error.offset == 24)
        #expect(error.description == "IPv4 header checksum 0xb760 at offset 24: expected 0xb660")
    }

    @Test("ARP for other hardware or protocol formats", arguments: [(14, 6), (16, 0x86), (18, 8), (19, 16)])
    func arpFormat(offset: Int, value: UInt8) throws {
        var frame = try Capture.lurtzWatchHost.frame(2)
        frame[offset] = value
        let error = try #require(parseError(frame))
        #expect(error.code == .unsupportedAddressFormat)
        #expect(error.offset == offset)
    }

    @Test("ARP hardware address length 8")
    func arpHardwareLength() throws {
        var frame = try Capture.lurtzWatchHost.frame(2)
        frame[18] = 8
        #expect(
            parseError(frame)?.description == "ARP hardware address length 8 at offset 18: expected 6")
    }

    @Test("magic packet with one wrong repetition, a broken sync stream or a stray tail")
    func badMagic() throws {
        let good = try Capture.lurtzWatchHost.frame(35)
        var repetition = good
        repetition[14 + 6 + 6 * 6 + 5] = 0x03  // the 7th copy of the MAC ends in 03
        let error = try #require(parseError(repetition))
        #expect(error.code == .invalidMagicPacket)
        #expect(error.offset == 56)
        #expect(
            error.description
                == "magic packet address repetition 7 of 16 (02:77:00:00:00:03) at offset 56: expected 02:77:00:00:00:02"
        )

        var sync = good
        sync[17] = 0xFE
        #expect(parseError(sync)?.offset == 17)

        #expect(parseError(good + [1, 2, 3])?.code == .invalidMagicPacket)
        #expect(try EthernetFrame(parsing: good + [1, 2, 3, 4]).magicPacket?.password?.bytes == [1, 2, 3, 4])

        #expect(throws: FrameError.self) { try MagicPacket(parsing: Array(repetition[14...])) }
        #expect(try MagicPacket(parsing: Array(good[14...])).target == Lab.mac(Lab.sleeper))
        // An all-ones target is not confused with the synchronisation stream.
        #expect(try MagicPacket(parsing: MagicPacket(target: .broadcast).bytes).target == .broadcast)
    }

    @Test("Neighbour Solicitation with a zero-length option")
    func zeroLengthOption() throws {
        var frame = try Capture.sleepThenSYN.frame(89)
        #expect(frame[78] == 14 && frame[79] == 1)  // the Nonce option
        frame[79] = 0
        let error = try #require(parseError(frame))
        #expect(error.code == .invalidOption)
        #expect(error.offset == 79)
        #expect(
            error.description == "ND option type 14 length 0 at offset 79: expected at least 1 (units of 8 bytes)")

        var long = try Capture.sleepThenSYN.frame(89)
        long[79] = 2
        #expect(parseError(long)?.code == .truncated)
    }

    @Test("Neighbour Advertisement shorter than its fixed part")
    func shortAdvertisement() throws {
        let na = EthernetFrame.neighborAdvertisement(
            for: Lab.ipv6(Lab.sleeper), flags: .override, targetLinkLayerAddress: nil,
            sourceAddress: Lab.ipv6(Lab.proxy), source: Lab.mac(Lab.proxy))
        var bytes = na.serialized()
        bytes.removeLast(4)
        bytes[19] = 20  // IPv6 payload length
        let error = try #require(parseError(bytes))
        #expect(error.code == .truncated)
        #expect(error.description.hasPrefix("Neighbour Advertisement at offset 54 truncated"))
    }

    @Test("NS and NA with a non-zero code are not Neighbour Discovery")
    func nonZeroCode() throws {
        var frame = try Capture.sleepThenSYN.frame(89)
        frame[55] = 1
        let message = try #require(try EthernetFrame(parsing: frame).icmpv6)
        #expect(message.neighborSolicitation == nil)
        #expect(message.type == 135 && message.code == 1)
    }

    @Test("UDP and TCP lengths")
    func transportLengths() throws {
        var mdns = try Capture.selfWake.frame(2)
        #expect(try EthernetFrame(parsing: mdns).udp != nil)
        let udpLength = Int(field16(mdns, 38))
        mdns[38] = UInt8((udpLength - 1) >> 8)
        mdns[39] = UInt8((udpLength - 1) & 0xFF)
        let short = try #require(parseError(mdns))
        #expect(short.code == .invalidLength)
        #expect(short.offset == 38)
        mdns[38] = 0
        mdns[39] = 7
        #expect(parseError(mdns)?.description == "UDP length 7 at offset 38: expected at least 8")

        var syn = try Capture.lurtzWatchHost.frame(23)
        syn[46] = 0x40
        #expect(parseError(syn)?.description == "TCP data offset 4 words at offset 46: expected at least 5")
        syn[46] = 0xF0
        #expect(parseError(syn)?.code == .truncated)
    }

    @Test("IPv4 fragments are not decoded as TCP", arguments: [(UInt8(0x20), UInt8(0x00)), (0x00, 0x10), (0x40, 0x01)])
    func fragments(flagsByte: UInt8, offsetByte: UInt8) throws {
        var syn = try Capture.lurtzWatchHost.frame(23)
        syn[20] = flagsByte
        syn[21] = offsetByte
        let frame = try EthernetFrame(parsing: syn)
        let ip = try #require(frame.ipv4)
        #expect(ip.header.isFragment)
        #expect(frame.tcp == nil)
        #expect(ip.payload == .other(Array(syn[34...])))
        #expect(ip.transportChecksumIsValid == nil)
        #expect(frame.serialized(checksums: .preserve) == syn)
    }

    @Test(
        "IPv6 extension headers are detected and not decoded",
        arguments: [0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254])
    func extensionHeaders(nextHeader: UInt8) throws {
        var udp = try Capture.sleepThenSYN.frame(1)
        #expect(try EthernetFrame(parsing: udp).udp != nil)
        udp[20] = nextHeader
        let frame = try EthernetFrame(parsing: udp)
        let ip = try #require(frame.ipv6)
        #expect(ip.header.hasExtensionHeader)
        #expect(frame.udp == nil)
        #expect(ip.payload == .other(Array(udp[54...])))
        #expect(frame.serialized() == udp)
    }

    @Test("protocols that are not extension headers", arguments: [6, 17, 58, 59, 1, 132])
    func notExtensionHeaders(number: UInt8) {
        #expect(!IPProtocol(rawValue: number).isIPv6ExtensionHeader)
    }

    @Test("802.1Q: a hand-written tagged ARP frame, and a tag cut short")
    func vlanBytes() throws {
        let tagged = hexBytes(
            "ffffffffffff 027700000002 8100 a07b 0806 0001 0800 0604 0001 027700000002 0a4d0002 000000000000 0a4d0001"
                + "0000 0000 0000 0000 0000 0000 0000")
        let frame = try EthernetFrame(parsing: tagged)
        #expect(frame.header.vlan == VLANTag(priority: 5, dropEligible: false, identifier: 0x07B))
        #expect(frame.header.etherType == .arp)
        #expect(frame.arp?.targetProtocolAddress == Lab.ipv4(Lab.proxy))
        #expect(frame.padding.count == 14)
        #expect(frame.serialized() == tagged)

        let error = try #require(parseError(Array(tagged[..<16])))
        #expect(error.description == "802.1Q tag at offset 14 truncated: expected 4 bytes, 2 available")
    }

    @Test("unknown EtherTypes are kept as bytes")
    func unknownEtherType() throws {
        let frame = hexBytes("027700000002 027700000001 88cc 0102030405")
        let parsed = try EthernetFrame(parsing: frame)
        #expect(parsed.payload == .other([1, 2, 3, 4, 5]))
        #expect(parsed.serialized() == frame)
    }

    @Test("mutated real frames never trap")
    func mutations() throws {
        var random = SeededGenerator(seed: 0x5EED)
        var outcomes = (parsed: 0, rejected: 0)
        for (capture, number) in Self.samples {
            let original = try capture.frame(number)
            for _ in 0..<400 {
                var frame = original
                for _ in 0..<random.int(in: 1...4) {
                    frame[random.int(in: 0...(frame.count - 1))] = random.byte()
                }
                if random.int(in: 0...3) == 0 { frame.removeLast(random.int(in: 0...(frame.count - 1))) }
                do {
                    let parsed = try EthernetFrame(parsing: frame, verifying: .all)
                    #expect(parsed.serialized(checksums: .preserve) == frame)
                    outcomes.parsed += 1
                } catch {
                    #expect(!error.description.isEmpty)
                    outcomes.rejected += 1
                }
            }
        }
        #expect(outcomes.parsed > 0)
        #expect(outcomes.rejected > 0)
    }

    @Test("random bytes never trap")
    func randomBytes() {
        var random = SeededGenerator(seed: 42)
        for _ in 0..<3000 {
            var frame = (0..<random.int(in: 0...120)).map { _ in random.byte() }
            // Steer the EtherType towards the decoded ones.
            if frame.count >= 14 {
                let types: [UInt16] = [0x0800, 0x0806, 0x86DD, 0x0842, 0x8100]
                let type = types[random.int(in: 0...4)]
                frame[12] = UInt8(type >> 8)
                frame[13] = UInt8(type & 0xFF)
            }
            if let parsed = try? EthernetFrame(parsing: frame) {
                #expect(parsed.serialized(checksums: .preserve) == frame)
            }
        }
    }
}
