public import NetworkAddresses

/// SRV RDATA (RFC 2782).
public struct SRVData: Hashable, Sendable {
    public var priority: UInt16
    public var weight: UInt16
    public var port: UInt16
    public var target: DNSName

    public init(priority: UInt16 = 0, weight: UInt16 = 0, port: UInt16, target: DNSName) {
        self.priority = priority
        self.weight = weight
        self.port = port
        self.target = target
    }
}

/// TXT RDATA: a sequence of character-strings, kept as the RDATA bytes (each string prefixed by its length).
///
/// An empty RDATA and one empty string (a single zero byte) are different on the wire and stay different here.
public struct TXTData: Hashable, Sendable {
    let bytes: SharedBytes

    /// The RDATA: length-prefixed strings.
    public var rdata: [UInt8] { bytes.array }

    init(validatedRData: SharedBytes) {
        bytes = validatedRData
    }

    /// Builds TXT RDATA from strings of at most 255 bytes each.
    public init(strings: [[UInt8]]) throws(DNSWireError) {
        var out: [UInt8] = []
        for (index, string) in strings.enumerated() {
            guard string.count <= 255 else {
                throw DNSWireError(
                    .badRDataLength, field: "TXT string[\(index)]", offset: -1,
                    expected: "at most 255 bytes, not \(string.count)")
            }
            out.append(UInt8(string.count))
            out += string
        }
        bytes = SharedBytes(copying: out)
    }

    /// Builds TXT RDATA from text strings (UTF-8), e.g. `["model=Macmini3,1", "osxvers=13"]`.
    public init(_ strings: [String]) throws(DNSWireError) {
        try self.init(strings: strings.map { Array($0.utf8) })
    }

    /// The strings, in order.
    public var strings: [[UInt8]] {
        bytes.withUnsafeBufferPointer { rdata in
            var result: [[UInt8]] = []
            var i = 0
            while i < rdata.count {
                let count = Int(rdata[i])
                result.append(Array(rdata[(i + 1)..<min(i + 1 + count, rdata.count)]))
                i += 1 + count
            }
            return result
        }
    }
}

/// HINFO RDATA: two character-strings.
public struct HINFOData: Hashable, Sendable {
    public var cpu: [UInt8]
    public var os: [UInt8]

    public init(cpu: [UInt8], os: [UInt8]) {
        self.cpu = cpu
        self.os = os
    }
}

/// NSEC RDATA (RFC 4034 section 4): the next name and the type bitmap, kept as received.
public struct NSECData: Hashable, Sendable {
    public var nextName: DNSName
    /// The type bitmap in wire form: (window, length, bitmap bytes) blocks.
    public var bitmap: [UInt8]

    /// Builds the bitmap from a list of types (duplicates ignored).
    public init(nextName: DNSName, types: some Sequence<DNSType>) {
        self.nextName = nextName
        var windows: [UInt8: [UInt8]] = [:]
        for type in types {
            let window = UInt8(type.rawValue >> 8)
            let low = Int(type.rawValue & 0xFF)
            var bits = windows[window] ?? []
            if bits.count <= low / 8 { bits += [UInt8](repeating: 0, count: low / 8 + 1 - bits.count) }
            bits[low / 8] |= 0x80 >> UInt8(low % 8)
            windows[window] = bits
        }
        var out: [UInt8] = []
        for window in windows.keys.sorted() {
            let bits = windows[window]!
            out.append(window)
            out.append(UInt8(bits.count))
            out += bits
        }
        bitmap = out
    }

    /// Keeps `bitmap` exactly as given; the decoder has validated it.
    public init(nextName: DNSName, bitmap: [UInt8]) {
        self.nextName = nextName
        self.bitmap = bitmap
    }

    /// The types the bitmap lists, in ascending order.
    public var types: [DNSType] {
        var result: [DNSType] = []
        var i = 0
        while i + 1 < bitmap.count {
            let window = UInt16(bitmap[i])
            let length = Int(bitmap[i + 1])
            let end = min(i + 2 + length, bitmap.count)
            for (byteIndex, byte) in bitmap[(i + 2)..<end].enumerated() {
                for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 {
                    result.append(DNSType(window << 8 | UInt16(byteIndex * 8 + bit)))
                }
            }
            i = end
        }
        return result
    }
}

/// The RDATA of a record: typed for the types the proxy reads, opaque bytes for everything else.
///
/// Names inside typed RDATA (PTR and SRV targets, the NSEC next name) are decompressed, so that a record can be
/// stored and later written into any message.
public enum RData: Hashable, Sendable {
    case a(IPv4Address)
    case aaaa(IPv6Address)
    case ptr(DNSName)
    case srv(SRVData)
    case txt(TXTData)
    case hinfo(HINFOData)
    case nsec(NSECData)
    case null([UInt8])
    case opt(OPTData)
    /// RDATA of any other type, byte for byte.
    case opaque([UInt8])

    /// The record type this RDATA belongs to, or nil for `.opaque`, which fits any type.
    public var impliedType: DNSType? {
        switch self {
        case .a: .a
        case .aaaa: .aaaa
        case .ptr: .ptr
        case .srv: .srv
        case .txt: .txt
        case .hinfo: .hinfo
        case .nsec: .nsec
        case .null: .null
        case .opt: .opt
        case .opaque: nil
        }
    }
}

extension RData {
    /// Feeds the RDATA to `hasher` with the names inside it (PTR and SRV targets, the NSEC next name) folded to
    /// lower case, without building them: RDATA that DNS calls the same (names compared ignoring ASCII case, RFC
    /// 4343) hash alike. Other RDATA hashes as `hash(into:)` does.
    public func hashIgnoringCase(into hasher: inout Hasher) {
        switch self {
        case .ptr(let name):
            hasher.combine(0 as UInt8)
            name.hashIgnoringCase(into: &hasher)
        case .srv(let srv):
            hasher.combine(1 as UInt8)
            hasher.combine(srv.priority)
            hasher.combine(srv.weight)
            hasher.combine(srv.port)
            srv.target.hashIgnoringCase(into: &hasher)
        case .nsec(let nsec):
            hasher.combine(2 as UInt8)
            nsec.nextName.hashIgnoringCase(into: &hasher)
            hasher.combine(nsec.bitmap)
        default:
            hasher.combine(3 as UInt8)
            hasher.combine(self)
        }
    }
}
