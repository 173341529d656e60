/// An IP protocol number (IPv4 protocol field, IPv6 next header).
public struct IPProtocol: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let icmp = IPProtocol(rawValue: 1)
    public static let tcp = IPProtocol(rawValue: 6)
    public static let udp = IPProtocol(rawValue: 17)
    public static let icmpv6 = IPProtocol(rawValue: 58)
    /// IPv6 "no next header".
    public static let noNextHeader = IPProtocol(rawValue: 59)

    /// True for the IPv6 extension headers (RFC 8200 and the IANA list): Hop-by-Hop 0, Routing 43, Fragment 44,
    /// ESP 50, AH 51, Destination Options 60, Mobility 135, HIP 139, Shim6 140, experimental 253 and 254.
    public var isIPv6ExtensionHeader: Bool {
        switch rawValue {
        case 0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254: true
        default: false
        }
    }

    public var description: String {
        switch rawValue {
        case 1: "ICMP"
        case 6: "TCP"
        case 17: "UDP"
        case 58: "ICMPv6"
        default: "protocol \(rawValue)"
        }
    }
}

/// What an IPv4 or IPv6 packet carries.
///
/// TCP, UDP and ICMPv6 (in IPv6 only) are decoded. Everything else is kept as bytes: other protocols, IPv4
/// fragments (the transport header of a non-first fragment is not there, and a first fragment cannot be checked),
/// and IPv6 packets whose next header is an extension header.
public enum IPPayload: Hashable, Sendable {
    case tcp(TCPSegment)
    case udp(UDPDatagram)
    case icmpv6(ICMPv6Message)
    case other([UInt8])

    /// The number of bytes the payload occupies on the wire.
    public var length: Int {
        switch self {
        case .tcp(let segment): segment.length
        case .udp(let datagram): datagram.length
        case .icmpv6(let message): message.length
        case .other(let bytes): bytes.count
        }
    }

    /// The protocol number of a decoded payload; nil for `.other`.
    public var protocolNumber: IPProtocol? {
        switch self {
        case .tcp: .tcp
        case .udp: .udp
        case .icmpv6: .icmpv6
        case .other: nil
        }
    }

    static func parse(
        _ bytes: [UInt8], from start: Int, to end: Int, protocol number: IPProtocol, allowICMPv6: Bool
    ) throws(FrameError) -> IPPayload {
        switch number {
        case .tcp: return .tcp(try TCPSegment.parse(bytes, from: start, to: end))
        case .udp: return .udp(try UDPDatagram.parse(bytes, from: start, to: end))
        case .icmpv6 where allowICMPv6: return .icmpv6(try ICMPv6Message.parse(bytes, from: start, to: end))
        default: return .other(copyBytes(bytes, start, end))
        }
    }

    func write(to sink: inout some ByteSink) {
        switch self {
        case .tcp(let segment): segment.write(to: &sink)
        case .udp(let datagram): datagram.write(to: &sink)
        case .icmpv6(let message): message.write(to: &sink)
        case .other(let bytes): sink.write(bytes)
        }
    }

    /// The checksum the payload should carry under `pseudoHeader`; nil for `.other`.
    func computedChecksum(_ pseudoHeader: PseudoHeader) -> UInt16? {
        guard let number = protocolNumber else { return nil }
        var sum = pseudoHeader.start(protocol: number.rawValue, length: length)
        var zeroed = self
        zeroed.checksum = 0
        zeroed.write(to: &sum)
        let value = sum.checksum
        // RFC 768: a computed UDP checksum of zero is sent as all ones.
        if case .udp = self, value == 0 { return 0xFFFF }
        return value
    }

    /// Whether the stored checksum is right; nil for `.other`. UDP over IPv4 with checksum 0 means "none": valid.
    func checksumIsValid(_ pseudoHeader: PseudoHeader) -> Bool? {
        guard let number = protocolNumber else { return nil }
        if case .udp(let datagram) = self, datagram.checksum == 0 {
            return pseudoHeader.isIPv4
        }
        var sum = pseudoHeader.start(protocol: number.rawValue, length: length)
        write(to: &sum)
        return sum.verifies
    }

    /// Fills in the checksum field. UDP over IPv4 with checksum 0 ("none") keeps 0 unless `replacingNone`.
    mutating func computeChecksum(_ pseudoHeader: PseudoHeader, replacingNone: Bool) {
        if !replacingNone, pseudoHeader.isIPv4, case .udp(let datagram) = self, datagram.checksum == 0 { return }
        if let value = computedChecksum(pseudoHeader) { checksum = value }
    }

    var checksum: UInt16 {
        get {
            switch self {
            case .tcp(let segment): segment.checksum
            case .udp(let datagram): datagram.checksum
            case .icmpv6(let message): message.checksum
            case .other: 0
            }
        }
        set {
            switch self {
            case .tcp(var segment):
                segment.checksum = newValue
                self = .tcp(segment)
            case .udp(var datagram):
                datagram.checksum = newValue
                self = .udp(datagram)
            case .icmpv6(var message):
                message.checksum = newValue
                self = .icmpv6(message)
            case .other: break
            }
        }
    }
}
