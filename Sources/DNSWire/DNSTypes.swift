/// A resource record type (RFC 1035 TYPE), any 16-bit value.
public struct DNSType: RawRepresentable, Hashable, Sendable, Comparable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let a = DNSType(1)
    public static let ns = DNSType(2)
    public static let cname = DNSType(5)
    public static let soa = DNSType(6)
    public static let null = DNSType(10)
    public static let ptr = DNSType(12)
    public static let hinfo = DNSType(13)
    public static let mx = DNSType(15)
    public static let txt = DNSType(16)
    public static let aaaa = DNSType(28)
    public static let srv = DNSType(33)
    public static let opt = DNSType(41)
    public static let nsec = DNSType(47)
    /// QTYPE `*` (ANY).
    public static let any = DNSType(255)

    public static func < (lhs: DNSType, rhs: DNSType) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension DNSType: CustomStringConvertible {
    public var description: String {
        switch self {
        case .a: "A"
        case .ns: "NS"
        case .cname: "CNAME"
        case .soa: "SOA"
        case .null: "NULL"
        case .ptr: "PTR"
        case .hinfo: "HINFO"
        case .mx: "MX"
        case .txt: "TXT"
        case .aaaa: "AAAA"
        case .srv: "SRV"
        case .opt: "OPT"
        case .nsec: "NSEC"
        case .any: "ANY"
        default: "TYPE\(rawValue)"
        }
    }
}

/// A resource record class (RFC 1035 CLASS) without the mDNS top bit, which `DNSRecord.cacheFlush` and
/// `DNSQuestion.unicastResponse` carry. Values are 15 bits (0...0x7FFF).
public struct DNSClass: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let internet = DNSClass(1)
    /// Class NONE (254), used by UPDATE to delete an RR.
    public static let none = DNSClass(254)
    /// Class ANY (255).
    public static let any = DNSClass(255)
}

extension DNSClass: CustomStringConvertible {
    public var description: String {
        switch self {
        case .internet: "IN"
        case .none: "NONE"
        case .any: "ANY"
        default: "CLASS\(rawValue)"
        }
    }
}

/// The 4-bit OPCODE of the header.
public struct DNSOpcode: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue & 0x0F }

    public static let query = DNSOpcode(rawValue: 0)
    public static let status = DNSOpcode(rawValue: 2)
    public static let notify = DNSOpcode(rawValue: 4)
    public static let update = DNSOpcode(rawValue: 5)
}

/// The 4-bit header RCODE.
public struct DNSResponseCode: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue & 0x0F }

    public static let noError = DNSResponseCode(rawValue: 0)
    public static let formatError = DNSResponseCode(rawValue: 1)
    public static let serverFailure = DNSResponseCode(rawValue: 2)
    public static let nameError = DNSResponseCode(rawValue: 3)
    public static let notImplemented = DNSResponseCode(rawValue: 4)
    public static let refused = DNSResponseCode(rawValue: 5)
}

/// The 16-bit flags word of the header, kept whole so that every bit round-trips (including Z and any bit a
/// future RFC defines); the accessors read and write the named fields.
public struct DNSFlags: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Query (false) or response (true).
    public var isResponse: Bool {
        get { bit(15) }
        set { setBit(15, newValue) }
    }

    public var opcode: DNSOpcode {
        get { DNSOpcode(rawValue: UInt8(truncatingIfNeeded: rawValue >> 11)) }
        set { rawValue = rawValue & ~0x7800 | UInt16(newValue.rawValue) << 11 }
    }

    public var authoritativeAnswer: Bool {
        get { bit(10) }
        set { setBit(10, newValue) }
    }

    public var truncated: Bool {
        get { bit(9) }
        set { setBit(9, newValue) }
    }

    public var recursionDesired: Bool {
        get { bit(8) }
        set { setBit(8, newValue) }
    }

    public var recursionAvailable: Bool {
        get { bit(7) }
        set { setBit(7, newValue) }
    }

    /// The reserved Z bit (bit 6).
    public var zero: Bool {
        get { bit(6) }
        set { setBit(6, newValue) }
    }

    public var authenticData: Bool {
        get { bit(5) }
        set { setBit(5, newValue) }
    }

    public var checkingDisabled: Bool {
        get { bit(4) }
        set { setBit(4, newValue) }
    }

    public var responseCode: DNSResponseCode {
        get { DNSResponseCode(rawValue: UInt8(truncatingIfNeeded: rawValue)) }
        set { rawValue = rawValue & ~0x000F | UInt16(newValue.rawValue) }
    }

    /// Flags of a request or response with the given opcode and nothing else set.
    public init(
        response: Bool, opcode: DNSOpcode, authoritative: Bool = false, responseCode: DNSResponseCode = .noError
    ) {
        rawValue = 0
        isResponse = response
        self.opcode = opcode
        authoritativeAnswer = authoritative
        self.responseCode = responseCode
    }

    private func bit(_ n: Int) -> Bool { rawValue & (1 << n) != 0 }

    private mutating func setBit(_ n: Int, _ on: Bool) {
        if on { rawValue |= 1 << n } else { rawValue &= ~(1 << n) }
    }
}
