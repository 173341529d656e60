public import NetworkAddresses

// Multicast Listener Discovery: the queries a router or a snooping switch sends (MLDv1, RFC 2710; MLDv2,
// RFC 3810) and the reports a listener answers with. Every MLD message is an ICMPv6 message behind a Hop-by-Hop
// header with the Router Alert option, sent with hop limit 1 from a link-local address.

/// An MLD query found in a captured frame.
public struct MLDQuery: Hashable, Sendable {
    public enum Version: Hashable, Sendable {
        /// RFC 2710: a 24-byte query; listeners answer with one MLDv1 report per group.
        case v1
        /// RFC 3810: a query of 28 bytes or more.
        case v2
    }

    public var version: Version
    /// The group asked about; nil for a general query (the multicast address field is `::`).
    public var group: IPv6Address?
    /// How long a listener may wait, at most, before it answers (the Maximum Response Delay or Code).
    public var maximumResponseDelay: Duration
    /// The querier's link-local address.
    public var source: IPv6Address

    public init(version: Version, group: IPv6Address?, maximumResponseDelay: Duration, source: IPv6Address) {
        self.version = version
        self.group = group
        self.maximumResponseDelay = maximumResponseDelay
        self.source = source
    }

    /// ICMPv6 Multicast Listener Query.
    public static let type: UInt8 = 130

    /// The query a frame carries, or nil if it carries none that a listener may act on. RFC 3810 section 5.1.14
    /// and RFC 2710 section 5: a query counts only with a link-local source, hop limit 1 and a Hop-by-Hop header
    /// holding the Router Alert option; its ICMPv6 checksum must be right, and an MLDv2 query's group field must
    /// be `::` or a multicast address.
    public init?(_ frame: EthernetFrame) {
        guard let packet = frame.ipv6, packet.header.nextHeader.rawValue == 0, packet.header.hopLimit == 1,
            packet.header.source.isLinkLocal, case .other(let bytes) = packet.payload
        else { return nil }
        guard let (next, icmpStart, routerAlert) = Self.hopByHop(bytes), next == IPProtocol.icmpv6.rawValue,
            routerAlert
        else { return nil }
        let length = bytes.count - icmpStart
        guard length >= 24, bytes[icmpStart] == Self.type, bytes[icmpStart + 1] == 0 else { return nil }
        var sum = PseudoHeader.ipv6(source: packet.header.source, destination: packet.header.destination)
            .start(protocol: IPProtocol.icmpv6.rawValue, length: length)
        sum.write(Array(bytes[icmpStart...]))
        guard sum.verifies else { return nil }
        let code = readU16(bytes, icmpStart + 4)
        let address = readIPv6(bytes, icmpStart + 8)
        guard address.isUnspecified || address.isMulticast else { return nil }
        if length == 24 {
            version = .v1
            maximumResponseDelay = .milliseconds(Int(code))
        } else if length >= 28 {
            version = .v2
            maximumResponseDelay = .milliseconds(Self.responseDelay(code: code))
        } else {
            return nil
        }
        group = address.isUnspecified ? nil : address
        source = packet.header.source
    }

    /// RFC 3810 section 5.1.3: a code below 32768 is milliseconds; above, a floating-point value with a 3-bit
    /// exponent and a 12-bit mantissa.
    static func responseDelay(code: UInt16) -> Int {
        guard code >= 0x8000 else { return Int(code) }
        let exponent = Int(code >> 12) & 7
        let mantissa = Int(code) & 0xFFF
        return (mantissa | 0x1000) << (exponent + 3)
    }

    /// The Hop-by-Hop header at the start of `bytes`: the next header, where it ends, and whether it holds the
    /// Router Alert option (type 5); nil if it is malformed.
    static func hopByHop(_ bytes: [UInt8]) -> (next: UInt8, end: Int, routerAlert: Bool)? {
        guard bytes.count >= 8 else { return nil }
        let end = (Int(bytes[1]) + 1) * 8
        guard end <= bytes.count else { return nil }
        var index = 2
        var routerAlert = false
        while index < end {
            let type = bytes[index]
            if type == 0 {  // Pad1
                index += 1
                continue
            }
            guard index + 1 < end else { return nil }
            let optionEnd = index + 2 + Int(bytes[index + 1])
            guard optionEnd <= end else { return nil }
            if type == 5 { routerAlert = true }
            index = optionEnd
        }
        return (bytes[0], end, routerAlert)
    }
}

/// The kind of a multicast address record in an MLDv2 report (RFC 3810 section 5.2.12). A listener with no
/// source filter (every sleep proxy group) is in EXCLUDE mode with no sources.
public enum MLDRecordType: UInt8, Hashable, Sendable {
    /// Current state, answering a query: listening.
    case modeIsExclude = 2
    /// A state change: stopped listening.
    case changeToInclude = 3
    /// A state change: started listening.
    case changeToExclude = 4
}

extension IPv6Address {
    /// `ff02::16`, where MLDv2 reports go.
    public static let allMLDv2Routers = IPv6Address(high: 0xFF02_0000_0000_0000, low: 0x16)
    /// `ff02::2`, where MLDv1 Done messages go.
    public static let allRouters = IPv6Address(high: 0xFF02_0000_0000_0000, low: 2)
}

extension EthernetFrame {
    /// MLDv2 report records that fit one frame of a 1500-byte link: (1500 − 40 IPv6 − 8 Hop-by-Hop − 8 report
    /// header) / 20 bytes per record with no sources.
    public static let mldv2RecordsPerReport = 72

    /// An MLDv2 report (ICMPv6 type 143, RFC 3810 section 5.2) of `records`, each with no sources, to `ff02::16`,
    /// from `sourceAddress` (the sender's link-local address, or `::` while it has none) with hop limit 1 behind a
    /// Hop-by-Hop header with the Router Alert option. At most `mldv2RecordsPerReport` records.
    public static func mldv2Report(
        _ records: [(type: MLDRecordType, group: IPv6Address)], sourceAddress: IPv6Address, source: MACAddress
    ) -> EthernetFrame {
        precondition(records.count <= mldv2RecordsPerReport, "an MLDv2 report holds at most 72 records")
        var body = ByteBuffer(capacity: 8 + 20 * records.count)
        body.write(UInt8(143))
        body.write(UInt8(0))
        body.write(UInt16(0))  // checksum, filled in below
        body.write(UInt16(0))  // reserved
        body.write(UInt16(records.count))
        for record in records {
            body.write(record.type.rawValue)
            body.write(UInt8(0))  // no auxiliary data
            body.write(UInt16(0))  // no sources
            body.write(record.group)
        }
        return mldFrame(
            body.bytes, sourceAddress: sourceAddress, destinationAddress: .allMLDv2Routers, source: source)
    }

    /// An MLDv1 report (type 131) for `group`, to the group itself, or a Done (type 132), to `ff02::2`
    /// (RFC 2710 section 3): for a querier that speaks only MLDv1.
    public static func mldv1Message(
        for group: IPv6Address, done: Bool, sourceAddress: IPv6Address, source: MACAddress
    ) -> EthernetFrame {
        var body = ByteBuffer(capacity: 24)
        body.write(UInt8(done ? 132 : 131))
        body.write(UInt8(0))
        body.write(UInt16(0))  // checksum
        body.write(UInt16(0))  // maximum response delay: 0 in reports
        body.write(UInt16(0))  // reserved
        body.write(group)
        return mldFrame(
            body.bytes, sourceAddress: sourceAddress, destinationAddress: done ? .allRouters : group, source: source)
    }

    /// `icmp` (its checksum field zero) behind a Hop-by-Hop header with Router Alert (value 0: MLD) and PadN.
    private static func mldFrame(
        _ icmp: [UInt8], sourceAddress: IPv6Address, destinationAddress: IPv6Address, source: MACAddress
    ) -> EthernetFrame {
        var message = icmp
        var sum = PseudoHeader.ipv6(source: sourceAddress, destination: destinationAddress)
            .start(protocol: IPProtocol.icmpv6.rawValue, length: icmp.count)
        sum.write(icmp)
        let checksum = sum.checksum
        message[2] = UInt8(checksum >> 8)
        message[3] = UInt8(checksum & 0xFF)
        let hopByHop: [UInt8] = [IPProtocol.icmpv6.rawValue, 0, 5, 2, 0, 0, 1, 0]
        let header = IPv6Header(
            nextHeader: IPProtocol(rawValue: 0), hopLimit: 1, source: sourceAddress, destination: destinationAddress)
        return EthernetFrame(
            header: EthernetHeader(
                destination: MACAddress(ipv6Multicast: destinationAddress), source: source, etherType: .ipv6),
            payload: .ipv6(IPv6Packet(header: header, payload: .other(hopByHop + message)))
        )
    }
}
