public import DNSWire
public import NetworkAddresses

/// One TCP connection a sleeping host asks the proxy to keep alive (PROTOCOL.md section 3.8).
public struct KeepaliveConnection: Hashable, Sendable {
    /// `t`: seconds between keepalive segments.
    public var interval: UInt32
    /// `h`/`H` and `l`: the sleeping host's end.
    public var local: Endpoint
    /// `d`/`D` and `r`: the peer's end.
    public var remote: Endpoint
    /// `m`: where frames to the peer go (its MAC, or the gateway's).
    public var remoteMAC: MACAddress
    /// `s`: the host's next sequence number minus one.
    public var sequence: UInt32
    /// `a`: the next sequence number the host expects from the peer.
    public var acknowledgment: UInt32
    /// `w`: the host's receive window.
    public var window: UInt16

    public init(
        interval: UInt32, local: Endpoint, remote: Endpoint, remoteMAC: MACAddress, sequence: UInt32,
        acknowledgment: UInt32, window: UInt16
    ) {
        self.interval = interval
        self.local = local
        self.remote = remote
        self.remoteMAC = remoteMAC
        self.sequence = sequence
        self.acknowledgment = acknowledgment
        self.window = window
    }
}

/// Why a keepalive record cannot be used: the field (`s`, `H`, ...) and what is wrong with it.
public struct KeepaliveRecordProblem: Error, Hashable, Sendable, CustomStringConvertible {
    /// The key the problem is about, or `rdata` for the framing (length byte, NUL, characters, pair syntax).
    public var field: String
    /// What is wrong, with the offending text and, for framing, its offset in the RDATA.
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "field \(field): \(message)" }
}

/// The NULL records `<n>._keepalive._dns-sd._udp.local.` that Macs register for TCP connections they want kept
/// alive while asleep (PROTOCOL.md section 3.8).
///
/// The RDATA is one length byte, then ASCII `key=value` pairs separated by single spaces, then a NUL; the length
/// byte counts the text and the NUL. A Mac writes
/// `t=20 i=30 c=10 h=192.168.1.20 d=17.57.144.10 l=60438 r=5223 m=A4:2B:B0:C1:D2:E3 s=1839410022 a=3304011297 w=2048`
/// for IPv4, and `H=` and `D=` with RFC 5952 text for IPv6.
///
/// What the parser accepts:
/// - The length byte must equal the number of bytes after it. The trailing NUL may be missing. Every other byte
///   must be printable ASCII or a space.
/// - Pairs are separated by exactly one space. Each key appears at most once, and `h` never together with `H`
///   (nor `d` with `D`).
/// - Required and non-zero: `t`, `h` or `H`, `d` or `D` (the same family as the local address), `l`, `r`, `m`,
///   `s`, `a`, `w`. A proxy needs all of them to build and match segments, and it builds the Ethernet frames itself,
///   so it also needs the peer's MAC. `i` and `c` (retry interval and count, for offload in the network card) must
///   be decimal but are otherwise ignored.
/// - Numbers are decimal digits only (leading zeros allowed). `t`, `s` and `a` must fit in 32 bits; `l`, `r` and
///   `w` in 16 bits.
/// - IPv4 addresses are four decimal parts of at most 255. IPv6 addresses are one to four hex digits per group
///   (either case), with at most one `::`. There is no single leading or trailing colon, no embedded dotted quad
///   and no zone. A leading or trailing `::` is accepted, because the Mac's own writer produces it (`::1`, `fe80::`).
/// - The MAC is six groups of one or two hex digits (either case) separated by colons.
/// - An unknown key (any key other than the ones above) ends the reading, as on a Mac: the rest of the text is
///   skipped. The record is still usable when every required field came before it. Otherwise the problem names
///   the first missing field and says where the reading stopped.
public enum KeepaliveRecord {
    /// The second label of every keepalive record.
    static let serviceLabel: [UInt8] = Array("_keepalive".utf8)

    /// Whether `record` is a keepalive record: type NULL and second label `_keepalive` (case-insensitive), as
    /// mDNSResponder's `mDNS_KeepaliveRecord`.
    public static func isKeepalive(_ record: DNSRecord) -> Bool {
        guard record.type == .null, let label = record.name.label(at: 1), label.count == serviceLabel.count else {
            return false
        }
        return zip(label, serviceLabel).allSatisfy { lowercasedASCII($0) == $1 }
    }

    /// The connection `record` describes; nil when it is not a keepalive record; `.failure` naming the first
    /// problem field when it is one but cannot be used.
    public static func parse(_ record: DNSRecord) -> Result<KeepaliveConnection, KeepaliveRecordProblem>? {
        guard isKeepalive(record) else { return nil }
        switch record.rdata {
        case .null(let bytes), .opaque(let bytes):
            return parse(rdata: bytes)
        default:
            return .failure(KeepaliveRecordProblem(field: "rdata", message: "not the RDATA of a NULL record"))
        }
    }

    /// The connection the RDATA of a keepalive record describes, or the first problem in it.
    static func parse(rdata: [UInt8]) -> Result<KeepaliveConnection, KeepaliveRecordProblem> {
        do {
            var reader = Reader()
            return .success(try reader.read(rdata))
        } catch {
            return .failure(error)
        }
    }

    /// The RDATA exactly as mDNSResponder's `UpdateKeepaliveRData` writes it (length byte, text, NUL), with
    /// `i=30 c=10`. For tests and lab clients that register as a Mac does.
    ///
    /// As on a Mac, the MAC is written in upper case and IPv6 addresses in RFC 5952 form. The keys follow each
    /// address's family. A connection that mixes families therefore gives `h=` with `D=` (or `H=` with `d=`), which
    /// `parse(_:)` refuses.
    public static func rdata(_ connection: KeepaliveConnection, retryInterval: Int = 30, retryCount: Int = 10)
        -> [UInt8]
    {
        func key(_ endpoint: Endpoint, v4: String, v6: String) -> String {
            switch endpoint.address {
            case .v4: v4
            case .v6: v6
            }
        }
        let mac = connection.remoteMAC.array.map { upperHex($0) }.joined(separator: ":")
        let pairs = [
            "t=\(connection.interval)",
            "i=\(retryInterval)",
            "c=\(retryCount)",
            "\(key(connection.local, v4: "h", v6: "H"))=\(connection.local.address)",
            "\(key(connection.remote, v4: "d", v6: "D"))=\(connection.remote.address)",
            "l=\(connection.local.port)",
            "r=\(connection.remote.port)",
            "m=\(mac)",
            "s=\(connection.sequence)",
            "a=\(connection.acknowledgment)",
            "w=\(connection.window)",
        ]
        // At most about 210 bytes of text, even with 20-digit retry values, so the length always fits in a byte.
        let text = Array(pairs.joined(separator: " ").utf8)
        return [UInt8(text.count + 1)] + text + [0]
    }

    /// A whole record as a Mac registers it: `<n>._keepalive._dns-sd._udp.local.`, NULL, cache-flush, TTL 120.
    ///
    /// `n` is computed as `DNSServiceSleepKeepalive` computes it on a (little-endian) Mac: the sum of the bytes
    /// of the local address, plus the local port with its two bytes swapped. It is stable for a given local end.
    public static func record(_ connection: KeepaliveConnection, ttl: UInt32 = 120) -> DNSRecord {
        let name = try! DNSName(labels: [
            String(instanceNumber(connection.local)), "_keepalive", "_dns-sd", "_udp", "local",
        ])
        return DNSRecord(name: name, ttl: ttl, cacheFlush: true, rdata: .null(rdata(connection)))
    }

    /// The decimal first label of a keepalive record for a connection from `local`.
    static func instanceNumber(_ local: Endpoint) -> UInt32 {
        local.address.bytes.reduce(UInt32(local.port.byteSwapped)) { $0 + UInt32($1) }
    }
}

// MARK: - Reading

/// Reads the RDATA of one keepalive record, pair by pair.
private struct Reader {
    typealias Problem = KeepaliveRecordProblem

    var interval: UInt32?
    var local: (key: UInt8, address: IPAddress)?
    var remote: (key: UInt8, address: IPAddress)?
    var localPort: UInt16?
    var remotePort: UInt16?
    var mac: MACAddress?
    var sequence: UInt32?
    var acknowledgment: UInt32?
    var window: UInt16?
    /// The keys read so far, to refuse a key given twice.
    var seen: Set<UInt8> = []
    /// Where reading stopped early, at an unknown key.
    var stoppedAt: (key: String, offset: Int)?

    mutating func read(_ rdata: [UInt8]) throws(Problem) -> KeepaliveConnection {
        try readPairs(try Self.body(of: rdata))
        return try connection()
    }

    /// The `key=value` text without the length byte and the trailing NUL, after checking the framing. Indices
    /// are those of `rdata`, so that offsets in messages count from the length byte.
    static func body(of rdata: [UInt8]) throws(Problem) -> ArraySlice<UInt8> {
        guard let length = rdata.first else {
            throw Problem(field: "rdata", message: "empty; expected a length byte, then key=value text")
        }
        guard Int(length) == rdata.count - 1 else {
            throw Problem(
                field: "rdata",
                message: "the length byte says \(length) bytes follow, but \(rdata.count - 1) do")
        }
        var text = rdata[1...]
        if text.last == 0 { text = text.dropLast() }
        for index in text.indices where !(0x20...0x7E).contains(text[index]) {
            let what = text[index] == 0 ? "a NUL byte before the end" : "byte 0x\(upperHex(text[index]))"
            throw Problem(field: "rdata", message: "\(what) at offset \(index); expected printable ASCII")
        }
        return text
    }

    /// Reads the pairs in order until the end of the text or an unknown key.
    mutating func readPairs(_ body: ArraySlice<UInt8>) throws(Problem) {
        guard !body.isEmpty else { return }
        for pair in body.split(separator: space, omittingEmptySubsequences: false) {
            let offset = pair.startIndex
            guard !pair.isEmpty else {
                throw Problem(
                    field: "rdata",
                    message: "an empty pair at offset \(offset); expected single spaces between key=value pairs")
            }
            guard let equals = pair.firstIndex(of: UInt8(ascii: "=")), equals > pair.startIndex else {
                throw Problem(
                    field: "rdata", message: "\(quoted(pair)) at offset \(offset) is not a key=value pair")
            }
            let keyBytes = pair[..<equals]
            let value = pair[(equals + 1)...]
            guard keyBytes.count == 1, let key = keyBytes.first, Self.knownKeys.contains(key) else {
                stoppedAt = (ascii(keyBytes), offset)
                return
            }
            try readPair(key: key, value: value)
        }
    }

    static let knownKeys = Set("tichdHDlrmsaw".utf8)

    mutating func readPair(key: UInt8, value: ArraySlice<UInt8>) throws(Problem) {
        let field = String(UnicodeScalar(key))
        guard seen.insert(key).inserted else { throw Problem(field: field, message: "given twice") }
        if let partner = Self.partner[key], seen.contains(partner) {
            throw Problem(field: field, message: "given together with \(String(UnicodeScalar(partner)))")
        }
        switch UnicodeScalar(key) {
        case "t": interval = try number(value, field: field)
        case "i", "c": _ = try digits(value, field: field)
        case "h": local = (key, .v4(try ipv4(value, field: field)))
        case "H": local = (key, .v6(try ipv6(value, field: field)))
        case "d": remote = (key, .v4(try ipv4(value, field: field)))
        case "D": remote = (key, .v6(try ipv6(value, field: field)))
        case "l": localPort = try number(value, field: field)
        case "r": remotePort = try number(value, field: field)
        case "m": mac = try macAddress(value, field: field)
        case "s": sequence = try number(value, field: field)
        case "a": acknowledgment = try number(value, field: field)
        case "w": window = try number(value, field: field)
        default: break  // not reached: the key is one of `knownKeys`
        }
    }

    /// The other spelling of the same field in the other address family.
    static let partner: [UInt8: UInt8] = [
        UInt8(ascii: "h"): UInt8(ascii: "H"), UInt8(ascii: "H"): UInt8(ascii: "h"),
        UInt8(ascii: "d"): UInt8(ascii: "D"), UInt8(ascii: "D"): UInt8(ascii: "d"),
    ]

    /// The connection once every required field is there, in the order a Mac writes them.
    func connection() throws(Problem) -> KeepaliveConnection {
        func missing(_ field: String) -> Problem {
            guard let stoppedAt else { return Problem(field: field, message: "missing") }
            return Problem(
                field: field,
                message:
                    "missing (reading stopped at the unknown key \"\(stoppedAt.key)\" at offset \(stoppedAt.offset))"
            )
        }
        // Name a missing address after the family of the other end, when that one is known.
        let localIsV6 = remote.map { $0.key == UInt8(ascii: "D") } ?? false
        let remoteIsV6 = local.map { $0.key == UInt8(ascii: "H") } ?? false
        guard let interval else { throw missing("t") }
        guard let local else { throw missing(localIsV6 ? "H" : "h") }
        guard let remote else { throw missing(remoteIsV6 ? "D" : "d") }
        guard let localPort else { throw missing("l") }
        guard let remotePort else { throw missing("r") }
        guard let mac else { throw missing("m") }
        guard let sequence else { throw missing("s") }
        guard let acknowledgment else { throw missing("a") }
        guard let window else { throw missing("w") }
        switch (local.address, remote.address) {
        case (.v4, .v6):
            throw Problem(field: "D", message: "an IPv6 address, but the local address (h) is IPv4")
        case (.v6, .v4):
            throw Problem(field: "d", message: "an IPv4 address, but the local address (H) is IPv6")
        default: break
        }
        return KeepaliveConnection(
            interval: interval, local: Endpoint(address: local.address, port: localPort),
            remote: Endpoint(address: remote.address, port: remotePort), remoteMAC: mac, sequence: sequence,
            acknowledgment: acknowledgment, window: window)
    }

    // MARK: Values

    /// A non-zero decimal number that fits in `T`.
    func number<T: FixedWidthInteger & UnsignedInteger>(_ value: ArraySlice<UInt8>, field: String)
        throws(Problem) -> T
    {
        let digits = try digits(value, field: field)
        var result: T = 0
        for digit in digits {
            let (times10, overflow1) = result.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(T(digit - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else {
                throw Problem(field: field, message: "\(ascii(value)) does not fit in \(T.bitWidth) bits")
            }
            result = sum
        }
        guard result != 0 else { throw Problem(field: field, message: "\(ascii(value)) is not allowed") }
        return result
    }

    /// A value of one or more decimal digits.
    func digits(_ value: ArraySlice<UInt8>, field: String) throws(Problem) -> ArraySlice<UInt8> {
        guard !value.isEmpty else { throw Problem(field: field, message: "no value") }
        guard value.allSatisfy(isDigit) else {
            throw Problem(field: field, message: "\(quoted(value)) is not a decimal number")
        }
        return value
    }

    /// A dotted quad other than 0.0.0.0.
    func ipv4(_ value: ArraySlice<UInt8>, field: String) throws(Problem) -> IPv4Address {
        let parts = value.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        let octets = parts.map { part in
            (1...3).contains(part.count) && part.allSatisfy(isDigit)
                ? part.reduce(0) { $0 * 10 + UInt32($1 - UInt8(ascii: "0")) } : nil
        }
        guard octets.count == 4, octets.allSatisfy({ $0 != nil && $0! <= 255 }) else {
            throw Problem(field: field, message: "\(quoted(value)) is not an IPv4 address")
        }
        let result = octets.reduce(0) { $0 << 8 | $1! }
        guard result != 0 else { throw Problem(field: field, message: "\(ascii(value)) is not allowed") }
        return IPv4Address(value: result)
    }

    /// Hex groups with at most one `::`, other than `::`; no embedded dotted quad, no zone.
    func ipv6(_ value: ArraySlice<UInt8>, field: String) throws(Problem) -> IPv6Address {
        // `IPv6Address` also reads a trailing dotted quad; allowing only hex digits and colons rules that out.
        guard value.allSatisfy({ isHexDigit($0) || $0 == colon }), let address = IPv6Address(ascii(value)) else {
            throw Problem(field: field, message: "\(quoted(value)) is not an IPv6 address")
        }
        guard !address.isUnspecified else { throw Problem(field: field, message: "\(ascii(value)) is not allowed") }
        return address
    }

    /// Six groups of one or two hex digits separated by colons, not all zero.
    func macAddress(_ value: ArraySlice<UInt8>, field: String) throws(Problem) -> MACAddress {
        let groups = value.split(separator: colon, omittingEmptySubsequences: false)
        guard groups.count == 6, groups.allSatisfy({ (1...2).contains($0.count) && $0.allSatisfy(isHexDigit) }) else {
            throw Problem(field: field, message: "\(quoted(value)) is not a MAC address")
        }
        let mac = MACAddress(bytes: groups.map { $0.reduce(0) { $0 << 4 | hexValue($1) } })!
        guard !mac.isZero else { throw Problem(field: field, message: "\(ascii(value)) is not allowed") }
        return mac
    }
}

// MARK: - ASCII helpers

private let space = UInt8(ascii: " ")
private let colon = UInt8(ascii: ":")

private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

private func isHexDigit(_ byte: UInt8) -> Bool {
    isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(lowercasedASCII(byte))
}

/// The value of a hex digit (call only with one).
private func hexValue(_ byte: UInt8) -> UInt8 {
    isDigit(byte) ? byte - UInt8(ascii: "0") : lowercasedASCII(byte) - UInt8(ascii: "a") + 10
}

private func lowercasedASCII(_ byte: UInt8) -> UInt8 {
    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 : byte
}

private func upperHex(_ byte: UInt8) -> String {
    let digits = Array("0123456789ABCDEF".utf8)
    return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]], as: UTF8.self)
}

/// Text already checked to be printable ASCII.
private func ascii(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

private func quoted(_ bytes: ArraySlice<UInt8>) -> String { "\"\(ascii(bytes))\"" }
