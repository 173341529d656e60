import DNSWire
import FixtureSupport
import NetworkAddresses
import SleepProxyCore
import Testing

/// The keepalive records Macs register (PROTOCOL.md section 3.8): the writer against texts built by hand the way
/// mDNSResponder's `UpdateKeepaliveRData` prints them, and the parser against every way such a record can be wrong.
@Suite("Keepalive records")
struct KeepaliveRecordTests {
    static let mac = MACAddress(0xA4, 0x2B, 0xB0, 0xC1, 0xD2, 0xE3)

    static func connection(local: String, _ localPort: UInt16, remote: String, _ remotePort: UInt16)
        -> KeepaliveConnection
    {
        KeepaliveConnection(
            interval: 20, local: Endpoint(address: IPAddress(local)!, port: localPort),
            remote: Endpoint(address: IPAddress(remote)!, port: remotePort), remoteMAC: mac, sequence: 1_839_410_022,
            acknowledgment: 3_304_011_297, window: 2048)
    }

    /// The text of an IPv4 record as a Mac writes it.
    static let ipv4Text =
        "t=20 i=30 c=10 h=192.168.1.20 d=17.57.144.10 l=60438 r=5223 m=A4:2B:B0:C1:D2:E3 s=1839410022 a=3304011297 w=2048"
    static let ipv4Connection = connection(local: "192.168.1.20", 60438, remote: "17.57.144.10", 5223)

    /// The text of an IPv6 record as a Mac writes it.
    static let ipv6Text =
        "t=20 i=30 c=10 H=fe80::aede:48ff:fe00:1122 D=2001:db8::8a2e:370:7334 l=49152 r=443 m=A4:2B:B0:C1:D2:E3 "
        + "s=1839410022 a=3304011297 w=2048"
    static let ipv6Connection = connection(
        local: "fe80::aede:48ff:fe00:1122", 49152, remote: "2001:db8::8a2e:370:7334", 443)

    /// RDATA framing a text: length byte (text plus NUL), text, NUL; or, without the NUL, length byte and text.
    static func framed(_ text: String, nul: Bool = true) -> [UInt8] {
        let bytes = Array(text.utf8)
        return nul ? [UInt8(bytes.count + 1)] + bytes + [0] : [UInt8(bytes.count)] + bytes
    }

    static let keepaliveName: DNSName = "6249._keepalive._dns-sd._udp.local."

    static func record(_ rdata: [UInt8], name: DNSName = keepaliveName) -> DNSRecord {
        DNSRecord(name: name, ttl: 120, cacheFlush: true, rdata: .null(rdata))
    }

    /// `text` with the pair for `key` given `value` (or removed, for nil), other pairs untouched.
    static func replacing(_ key: String, in text: String, with value: String?) -> String {
        text.split(separator: " ").compactMap { pair -> String? in
            guard pair.hasPrefix("\(key)=") else { return String(pair) }
            return value.map { "\(key)=\($0)" }
        }.joined(separator: " ")
    }

    // MARK: Writing and reading back

    struct RoundTrip: Sendable, CustomTestStringConvertible {
        var label: String
        var connection: KeepaliveConnection
        /// The text mDNSResponder prints for `connection`.
        var text: String
        var testDescription: String { label }
    }

    static func v6(_ local: String, _ remote: String, text localText: String, _ remoteText: String) -> RoundTrip {
        RoundTrip(
            label: "IPv6 \(localText) to \(remoteText)",
            connection: connection(local: local, 49152, remote: remote, 443),
            text: "t=20 i=30 c=10 H=\(localText) D=\(remoteText) l=49152 r=443 m=A4:2B:B0:C1:D2:E3 s=1839410022 "
                + "a=3304011297 w=2048")
    }

    static let roundTrips: [RoundTrip] = [
        RoundTrip(label: "IPv4", connection: ipv4Connection, text: ipv4Text),
        RoundTrip(
            label: "IPv4, largest values",
            connection: KeepaliveConnection(
                interval: 4_294_967_295, local: Endpoint(address: .v4(IPv4Address(255, 255, 255, 254)), port: 65535),
                remote: Endpoint(address: .v4(IPv4Address(1, 0, 0, 1)), port: 1),
                remoteMAC: MACAddress(0xFF, 0xFE, 0x0A, 0x00, 0x01, 0x0F), sequence: 4_294_967_295,
                acknowledgment: 1, window: 65535),
            text:
                "t=4294967295 i=30 c=10 h=255.255.255.254 d=1.0.0.1 l=65535 r=1 m=FF:FE:0A:00:01:0F s=4294967295 a=1 "
                + "w=65535"),
        RoundTrip(label: "IPv6, link-local to compressed", connection: ipv6Connection, text: ipv6Text),
        v6(
            "2001:db8:1:2:3:4:5:6", "2a00:1450:4001:82a:ffff:ffff:ffff:200e", text: "2001:db8:1:2:3:4:5:6",
            "2a00:1450:4001:82a:ffff:ffff:ffff:200e"),
        v6("0:0:0:0:0:0:0:1", "2001:db8::1", text: "::1", "2001:db8::1"),
        v6("fe80::", "2001:db8:1::", text: "fe80::", "2001:db8:1::"),
        v6("2001:db8:0:1:1:1:1:1", "2001:0:0:1:0:0:0:1", text: "2001:db8:0:1:1:1:1:1", "2001:0:0:1::1"),
        v6("1:0:0:2:0:0:3:4", "FE80::ABCD", text: "1::2:0:0:3:4", "fe80::abcd"),
    ]

    @Test(arguments: roundTrips)
    func writesAsAMacAndReadsBack(_ roundTrip: RoundTrip) {
        let rdata = KeepaliveRecord.rdata(roundTrip.connection)
        #expect(rdata == Self.framed(roundTrip.text))
        #expect(KeepaliveRecord.parse(Self.record(rdata)) == .success(roundTrip.connection))
    }

    @Test func retryValuesAreWrittenAsGiven() {
        let rdata = KeepaliveRecord.rdata(Self.ipv4Connection, retryInterval: 5, retryCount: 0)
        let text =
            "t=20 i=5 c=0 h=192.168.1.20 d=17.57.144.10 l=60438 r=5223 m=A4:2B:B0:C1:D2:E3 s=1839410022 a=3304011297 w=2048"
        #expect(rdata == Self.framed(text))
    }

    @Test func recordIsNamedAndFlaggedAsAMacRegistersIt() {
        let record = KeepaliveRecord.record(Self.ipv4Connection)
        // 192 + 168 + 1 + 20, plus port 60438 (0xEC16) with its bytes swapped (0x16EC = 5868).
        #expect(record.name == "6249._keepalive._dns-sd._udp.local.")
        #expect(record.type == .null)
        #expect(record.recordClass == .internet)
        #expect(record.cacheFlush)
        #expect(record.ttl == 120)
        #expect(record.rdata == .null(Self.framed(Self.ipv4Text)))
        #expect(KeepaliveRecord.record(Self.ipv4Connection, ttl: 4500).ttl == 4500)

        let v6 = KeepaliveRecord.record(Self.ipv6Connection)
        // fe80::aede:48ff:fe00:1122 sums to 1410; port 49152 (0xC000) swapped is 0x00C0 = 192.
        #expect(v6.name == "1602._keepalive._dns-sd._udp.local.")
        #expect(KeepaliveRecord.parse(v6) == .success(Self.ipv6Connection))
    }

    // MARK: Liberal reading

    struct Accepted: Sendable, CustomTestStringConvertible {
        var label: String
        var rdata: [UInt8]
        var connection: KeepaliveConnection
        var testDescription: String { label }
    }

    static let accepted: [Accepted] = [
        Accepted(label: "no trailing NUL", rdata: framed(ipv4Text, nul: false), connection: ipv4Connection),
        Accepted(
            label: "lower-case MAC", rdata: framed(replacing("m", in: ipv4Text, with: "a4:2b:b0:c1:d2:e3")),
            connection: ipv4Connection),
        Accepted(
            label: "one-digit MAC groups",
            rdata: framed(replacing("m", in: ipv4Text, with: "2:0:b0:c1:d2:e")),
            connection: {
                var c = ipv4Connection
                c.remoteMAC = MACAddress(0x02, 0x00, 0xB0, 0xC1, 0xD2, 0x0E)
                return c
            }()),
        Accepted(
            label: "upper-case IPv6",
            rdata: framed(
                replacing(
                    "D", in: replacing("H", in: ipv6Text, with: "FE80::AEDE:48FF:FE00:1122"),
                    with: "2001:DB8::8A2E:370:7334")),
            connection: ipv6Connection),
        Accepted(
            label: "IPv6 uncompressed with leading zeros",
            rdata: framed(replacing("D", in: ipv6Text, with: "2001:0db8:0000:0000:0000:8a2e:0370:7334")),
            connection: ipv6Connection),
        Accepted(
            label: ":: for a single zero group",
            rdata: framed(replacing("D", in: ipv6Text, with: "2001:db8::1:1:1:1:1")),
            connection: {
                var c = ipv6Connection
                c.remote.address = IPAddress("2001:db8:0:1:1:1:1:1")!
                return c
            }()),
        Accepted(
            label: "leading zeros in numbers and octets",
            rdata: framed(
                replacing("l", in: replacing("h", in: ipv4Text, with: "192.168.001.020"), with: "060438")),
            connection: ipv4Connection),
        Accepted(
            label: "pairs in another order",
            rdata: framed(
                "w=2048 a=3304011297 s=1839410022 m=A4:2B:B0:C1:D2:E3 r=5223 l=60438 d=17.57.144.10 "
                    + "h=192.168.1.20 t=20"),
            connection: ipv4Connection),
        Accepted(
            label: "without i and c",
            rdata: framed(replacing("c", in: replacing("i", in: ipv4Text, with: nil), with: nil)),
            connection: ipv4Connection),
        Accepted(
            label: "large i and c", rdata: framed(replacing("i", in: ipv4Text, with: "99999999999999999999")),
            connection: ipv4Connection),
        Accepted(
            label: "unknown key after every required one",
            rdata: framed(ipv4Text + " x=1 anything at all, even = signs"), connection: ipv4Connection),
    ]

    @Test(arguments: accepted)
    func acceptsWhatAMacCouldSend(_ accepted: Accepted) {
        #expect(KeepaliveRecord.parse(Self.record(accepted.rdata)) == .success(accepted.connection))
    }

    // MARK: Records that cannot be used

    struct Malformed: Sendable, CustomTestStringConvertible {
        var label: String
        var rdata: [UInt8]
        var field: String
        var message: String
        var testDescription: String { label }

        init(_ label: String, _ rdata: [UInt8], field: String, _ message: String) {
            self.label = label
            self.rdata = rdata
            self.field = field
            self.message = message
        }

        /// The IPv4 text with `key` given `value` (or removed, for nil).
        init(_ label: String, v4 key: String, _ value: String?, field: String? = nil, _ message: String) {
            self.init(label, framed(replacing(key, in: ipv4Text, with: value)), field: field ?? key, message)
        }

        /// The IPv6 text with `key` given `value` (or removed, for nil).
        init(_ label: String, v6 key: String, _ value: String?, field: String? = nil, _ message: String) {
            self.init(label, framed(replacing(key, in: ipv6Text, with: value)), field: field ?? key, message)
        }
    }

    static let missing: [Malformed] =
        ["t", "h", "d", "l", "r", "m", "s", "a", "w"].map { Malformed("no \($0)", v4: $0, nil, "missing") }
        + ["H", "D"].map { Malformed("no \($0)", v6: $0, nil, "missing") }

    static let zero: [Malformed] = [
        Malformed("t=0", v4: "t", "0", "0 is not allowed"),
        Malformed("l=0", v4: "l", "0", "0 is not allowed"),
        Malformed("r=00", v4: "r", "00", "00 is not allowed"),
        Malformed("s=0", v4: "s", "0", "0 is not allowed"),
        Malformed("a=0", v4: "a", "0", "0 is not allowed"),
        Malformed("w=0", v4: "w", "0", "0 is not allowed"),
        Malformed("zero MAC", v4: "m", "00:00:00:00:00:00", "00:00:00:00:00:00 is not allowed"),
        Malformed("h=0.0.0.0", v4: "h", "0.0.0.0", "0.0.0.0 is not allowed"),
        Malformed("D=::", v6: "D", "::", ":: is not allowed"),
        Malformed("H=0:0:0:0:0:0:0:0", v6: "H", "0:0:0:0:0:0:0:0", "0:0:0:0:0:0:0:0 is not allowed"),
    ]

    static let families: [Malformed] = [
        Malformed(
            "h with D", framed(replacing("d", in: ipv4Text, with: nil) + " D=2001:db8::1"), field: "D",
            "an IPv6 address, but the local address (h) is IPv4"),
        Malformed(
            "H with d", framed(replacing("D", in: ipv6Text, with: nil) + " d=17.57.144.10"), field: "d",
            "an IPv4 address, but the local address (H) is IPv6"),
        Malformed(
            "h and H", framed(ipv4Text + " H=fe80::1"), field: "H", "given together with h"),
        Malformed(
            "D and d", framed(ipv6Text + " d=17.57.144.10"), field: "d", "given together with D"),
        Malformed("t twice", framed(ipv4Text + " t=20"), field: "t", "given twice"),
    ]

    static let badValues: [Malformed] = [
        Malformed("three octets", v4: "h", "10.0.0", "\"10.0.0\" is not an IPv4 address"),
        Malformed("octet 256", v4: "h", "10.0.0.256", "\"10.0.0.256\" is not an IPv4 address"),
        Malformed("five octets", v4: "d", "1.2.3.4.5", "\"1.2.3.4.5\" is not an IPv4 address"),
        Malformed("empty octet", v4: "d", "1..2.3", "\"1..2.3\" is not an IPv4 address"),
        Malformed("four-digit octet", v4: "d", "1.2.3.0004", "\"1.2.3.0004\" is not an IPv4 address"),
        Malformed("letters in IPv4", v4: "h", "a.b.c.d", "\"a.b.c.d\" is not an IPv4 address"),
        Malformed("IPv6 after h", v4: "h", "fe80::1", "\"fe80::1\" is not an IPv4 address"),
        Malformed("empty h", v4: "h", "", "\"\" is not an IPv4 address"),
        Malformed(":::", v6: "H", "fe80:::1", "\"fe80:::1\" is not an IPv6 address"),
        Malformed("two ::", v6: "H", "1::2::3", "\"1::2::3\" is not an IPv6 address"),
        Malformed("trailing colon", v6: "H", "fe80::1:", "\"fe80::1:\" is not an IPv6 address"),
        Malformed("leading colon", v6: "D", ":1:2:3:4:5:6:7:8", "\":1:2:3:4:5:6:7:8\" is not an IPv6 address"),
        Malformed("nine groups", v6: "D", "1:2:3:4:5:6:7:8:9", "\"1:2:3:4:5:6:7:8:9\" is not an IPv6 address"),
        Malformed("seven groups", v6: "D", "1:2:3:4:5:6:7", "\"1:2:3:4:5:6:7\" is not an IPv6 address"),
        Malformed("eight groups and ::", v6: "D", "1:2:3:4:5:6:7:8::", "\"1:2:3:4:5:6:7:8::\" is not an IPv6 address"),
        Malformed("five-digit group", v6: "D", "12345::1", "\"12345::1\" is not an IPv6 address"),
        Malformed("embedded IPv4", v6: "D", "::ffff:10.0.0.1", "\"::ffff:10.0.0.1\" is not an IPv6 address"),
        Malformed("zone", v6: "H", "fe80::1%en0", "\"fe80::1%en0\" is not an IPv6 address"),
        Malformed("signed group", v6: "H", "fe80::+1", "\"fe80::+1\" is not an IPv6 address"),
        Malformed("not hex", v6: "H", "fe80::g", "\"fe80::g\" is not an IPv6 address"),
        Malformed("single colon", v6: "D", ":", "\":\" is not an IPv6 address"),
        Malformed("empty H", v6: "H", "", "\"\" is not an IPv6 address"),
        Malformed("five MAC groups", v4: "m", "a4:2b:b0:c1:d2", "\"a4:2b:b0:c1:d2\" is not a MAC address"),
        Malformed("seven MAC groups", v4: "m", "a4:2b:b0:c1:d2:e3:f4", "\"a4:2b:b0:c1:d2:e3:f4\" is not a MAC address"),
        Malformed("zz in MAC", v4: "m", "a4:2b:zz:c1:d2:e3", "\"a4:2b:zz:c1:d2:e3\" is not a MAC address"),
        Malformed(
            "three-digit MAC group", v4: "m", "a4:2b:b0:c1:d2:e3f", "\"a4:2b:b0:c1:d2:e3f\" is not a MAC address"),
        Malformed("dashes in MAC", v4: "m", "a4-2b-b0-c1-d2-e3", "\"a4-2b-b0-c1-d2-e3\" is not a MAC address"),
        Malformed("MAC without colons", v4: "m", "a42bb0c1d2e3", "\"a42bb0c1d2e3\" is not a MAC address"),
        Malformed("signed MAC group", v4: "m", "+4:2b:b0:c1:d2:e3", "\"+4:2b:b0:c1:d2:e3\" is not a MAC address"),
        Malformed("l=70000", v4: "l", "70000", "70000 does not fit in 16 bits"),
        Malformed("r=65536", v4: "r", "65536", "65536 does not fit in 16 bits"),
        Malformed("w=100000", v4: "w", "100000", "100000 does not fit in 16 bits"),
        Malformed("s=4294967296", v4: "s", "4294967296", "4294967296 does not fit in 32 bits"),
        Malformed("a=2^64", v4: "a", "18446744073709551616", "18446744073709551616 does not fit in 32 bits"),
        Malformed(
            "t with 30 digits", v4: "t", String(repeating: "9", count: 30),
            "\(String(repeating: "9", count: 30)) does not fit in 32 bits"),
        Malformed("t=abc", v4: "t", "abc", "\"abc\" is not a decimal number"),
        Malformed("l=-1", v4: "l", "-1", "\"-1\" is not a decimal number"),
        Malformed("s=+5", v4: "s", "+5", "\"+5\" is not a decimal number"),
        Malformed("w=0x10", v4: "w", "0x10", "\"0x10\" is not a decimal number"),
        Malformed("a=1.5", v4: "a", "1.5", "\"1.5\" is not a decimal number"),
        Malformed("i=x", v4: "i", "x", "\"x\" is not a decimal number"),
        Malformed("c=-1", v4: "c", "-1", "\"-1\" is not a decimal number"),
        Malformed("r with no value", v4: "r", "", "no value"),
    ]

    static let garbage: [Malformed] = [
        Malformed(
            "two spaces", framed("t=20  i=30"), field: "rdata",
            "an empty pair at offset 6; expected single spaces between key=value pairs"),
        Malformed(
            "leading space", framed(" " + ipv4Text), field: "rdata",
            "an empty pair at offset 1; expected single spaces between key=value pairs"),
        Malformed(
            "trailing space", framed("t=20 "), field: "rdata",
            "an empty pair at offset 6; expected single spaces between key=value pairs"),
        Malformed(
            "no equals sign", framed("t=20 garbage " + ipv4Text), field: "rdata",
            "\"garbage\" at offset 6 is not a key=value pair"),
        Malformed(
            "no key", framed("=20 " + ipv4Text), field: "rdata", "\"=20\" at offset 1 is not a key=value pair"),
        Malformed(
            "unknown key before required ones", framed("t=20 z=1 h=192.168.1.20"), field: "h",
            "missing (reading stopped at the unknown key \"z\" at offset 6)"),
        Malformed(
            "long unknown key", framed("t=20 h=192.168.1.20 d=17.57.144.10 tt=5"), field: "l",
            "missing (reading stopped at the unknown key \"tt\" at offset 36)"),
        Malformed(
            "upper-case T", framed(replacing("t", in: ipv4Text, with: nil) + " T=20"), field: "t",
            "missing (reading stopped at the unknown key \"T\" at offset 109)"),
    ]

    static let framing: [Malformed] = [
        Malformed("empty RDATA", [], field: "rdata", "empty; expected a length byte, then key=value text"),
        Malformed(
            "length byte too large", [UInt8(ipv4Text.utf8.count + 3)] + Array(ipv4Text.utf8) + [0], field: "rdata",
            "the length byte says 115 bytes follow, but 113 do"),
        Malformed(
            "length byte too small", [10] + Array(ipv4Text.utf8) + [0], field: "rdata",
            "the length byte says 10 bytes follow, but 113 do"),
        Malformed("length byte only, nonzero", [5], field: "rdata", "the length byte says 5 bytes follow, but 0 do"),
        Malformed("length byte 0 only", [0], field: "t", "missing"),
        Malformed("NUL only", [1, 0], field: "t", "missing"),
        Malformed(
            "NUL inside", framed("t=20\0 i=30"), field: "rdata",
            "a NUL byte before the end at offset 5; expected printable ASCII"),
        Malformed(
            "two NULs at the end", framed("t=20\0"), field: "rdata",
            "a NUL byte before the end at offset 5; expected printable ASCII"),
        Malformed(
            "non-ASCII byte", [7] + Array("t=2".utf8) + [0xC3, 0xA9] + Array("0".utf8) + [0], field: "rdata",
            "byte 0xC3 at offset 4; expected printable ASCII"),
        Malformed(
            "tab", framed("t=20\ti=30"), field: "rdata", "byte 0x09 at offset 5; expected printable ASCII"),
        Malformed(
            "DEL", [4, 0x74, 0x3D, 0x7F, 0], field: "rdata", "byte 0x7F at offset 3; expected printable ASCII"),
    ]

    @Test(arguments: missing + zero + families + badValues + garbage + framing)
    func refusesAndNamesTheField(_ malformed: Malformed) {
        let result = KeepaliveRecord.parse(Self.record(malformed.rdata))
        let expected = KeepaliveRecordProblem(field: malformed.field, message: malformed.message)
        #expect(result == .failure(expected))
    }

    @Test func problemDescriptionNamesTheField() {
        let problem = KeepaliveRecordProblem(field: "s", message: "missing")
        #expect(problem.description == "field s: missing")
    }

    // MARK: Which records are keepalive records

    struct Other: Sendable, CustomTestStringConvertible {
        var label: String
        var record: DNSRecord
        var testDescription: String { label }
    }

    static let others: [Other] = [
        Other(
            label: "NULL with another second label",
            record: record(framed(ipv4Text), name: "6249._other._dns-sd._udp.local.")),
        Other(
            label: "NULL with _keepalive first",
            record: record(framed(ipv4Text), name: "_keepalive._dns-sd._udp.local.")),
        Other(label: "NULL with one label", record: record(framed(ipv4Text), name: "_keepalive.")),
        Other(
            label: "NULL with _keepalives", record: record(framed(ipv4Text), name: "1._keepalives._dns-sd._udp.local.")),
        Other(
            label: "TXT under _keepalive",
            record: DNSRecord(name: keepaliveName, ttl: 120, rdata: .txt(try! TXTData([ipv4Text])))),
        Other(
            label: "opaque type 11 under _keepalive",
            record: DNSRecord(name: keepaliveName, type: DNSType(11), ttl: 120, rdata: .opaque(framed(ipv4Text)))),
        Other(
            label: "A under _keepalive",
            record: DNSRecord(name: keepaliveName, ttl: 120, rdata: .a(IPv4Address(10, 0, 0, 1)))),
    ]

    @Test(arguments: others)
    func otherRecordsAreNotKeepaliveRecords(_ other: Other) {
        #expect(!KeepaliveRecord.isKeepalive(other.record))
        #expect(KeepaliveRecord.parse(other.record) == nil)
    }

    @Test(arguments: ["6249._KeepAlive._dns-sd._udp.local.", "6249._KEEPALIVE._DNS-SD._UDP.LOCAL.", "x._keepalive"])
    func secondLabelIsComparedIgnoringCase(_ name: String) throws {
        let record = Self.record(Self.framed(Self.ipv4Text), name: try DNSName(name))
        #expect(KeepaliveRecord.isKeepalive(record))
        #expect(KeepaliveRecord.parse(record) == .success(Self.ipv4Connection))
    }

    @Test func opaqueRDataOfTypeNullIsRead() {
        let record = DNSRecord(
            name: Self.keepaliveName, type: .null, ttl: 120, rdata: .opaque(Self.framed(Self.ipv4Text)))
        #expect(KeepaliveRecord.parse(record) == .success(Self.ipv4Connection))
    }

    // MARK: Totality

    /// Random bytes, and valid records with random damage, so that the parser is driven past the framing checks
    /// into every value reader. Only checks that it returns.
    @Test func anyBytesGiveAnAnswer() {
        var generator = SeededGenerator(seed: 0x6B65_6570_616C_6976)
        let valid = [Self.framed(Self.ipv4Text), Self.framed(Self.ipv6Text)]
        let alphabet = Array("tichdHDlrmsawxT=:. 0123456789abcdefABCDEFz-+%\0".utf8)
        var successes = 0
        var failures = 0
        for round in 0..<4000 {
            var bytes: [UInt8]
            switch round % 4 {
            case 0:
                bytes = generator.bytes(upTo: 300)
            case 1:
                // Text from the characters the parser cares about, correctly framed.
                let text = (0..<generator.int(in: 0...200)).map { _ in
                    alphabet[generator.int(in: 0...alphabet.count - 1)]
                }
                bytes = [UInt8(text.count)] + text
            default:
                bytes = valid[generator.int(in: 0...1)]
                for _ in 0..<generator.int(in: 1...4) {
                    let index = generator.int(in: 0...bytes.count - 1)
                    switch generator.int(in: 0...2) {
                    case 0: bytes[index] = alphabet[generator.int(in: 0...alphabet.count - 1)]
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(alphabet[generator.int(in: 0...alphabet.count - 1)], at: index)
                    }
                    if bytes.isEmpty { break }
                }
                // Keep the length byte right half of the time, so that damage reaches the pairs.
                if generator.bool(), !bytes.isEmpty, bytes.count <= 256 { bytes[0] = UInt8(bytes.count - 1) }
            }
            switch KeepaliveRecord.parse(Self.record(bytes)) {
            case .success: successes += 1
            case .failure: failures += 1
            case nil: Issue.record("a NULL record under _keepalive was not taken as a keepalive record")
            }
        }
        #expect(successes + failures == 4000)
    }
}
