public import NetworkAddresses

/// The 16-bit EtherType of an Ethernet II frame.
public struct EtherType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16

    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let ipv4 = EtherType(rawValue: 0x0800)
    public static let arp = EtherType(rawValue: 0x0806)
    /// Wake-on-LAN magic packet as a raw Ethernet frame.
    public static let wakeOnLAN = EtherType(rawValue: 0x0842)
    /// The IEEE 802.1Q tag protocol identifier.
    public static let vlan = EtherType(rawValue: 0x8100)
    public static let ipv6 = EtherType(rawValue: 0x86DD)

    public var description: String { hex(rawValue) }
}

/// An IEEE 802.1Q tag: priority code point, drop eligible indicator and VLAN identifier.
public struct VLANTag: Hashable, Sendable {
    /// Priority code point, 0...7.
    public var priority: UInt8
    /// Drop eligible indicator (formerly CFI).
    public var dropEligible: Bool
    /// VLAN identifier, 0...4095.
    public var identifier: UInt16

    public init(priority: UInt8 = 0, dropEligible: Bool = false, identifier: UInt16) {
        self.priority = priority & 0x7
        self.dropEligible = dropEligible
        self.identifier = identifier & 0xFFF
    }

    /// Decodes the 16-bit tag control information.
    public init(tagControlInformation tci: UInt16) {
        priority = UInt8(tci >> 13)
        dropEligible = tci & 0x1000 != 0
        identifier = tci & 0xFFF
    }

    /// The 16-bit tag control information as on the wire.
    public var tagControlInformation: UInt16 {
        UInt16(priority & 0x7) << 13 | (dropEligible ? 0x1000 : 0) | (identifier & 0xFFF)
    }
}

/// An Ethernet II header, optionally with one 802.1Q tag (TPID 0x8100).
public struct EthernetHeader: Hashable, Sendable {
    public var destination: MACAddress
    public var source: MACAddress
    /// The 802.1Q tag, if the frame carried one.
    public var vlan: VLANTag?
    /// The EtherType after the tag (if any).
    public var etherType: EtherType

    public init(destination: MACAddress, source: MACAddress, vlan: VLANTag? = nil, etherType: EtherType) {
        self.destination = destination
        self.source = source
        self.vlan = vlan
        self.etherType = etherType
    }

    /// 14 bytes, or 18 with a VLAN tag.
    public var length: Int { vlan == nil ? 14 : 18 }

    static func parse(_ bytes: [UInt8]) throws(FrameError) -> EthernetHeader {
        guard bytes.count >= 14 else {
            throw .truncated("Ethernet header", at: 0, needed: 14, available: bytes.count)
        }
        let outerType = readU16(bytes, 12)
        var header = EthernetHeader(
            destination: readMAC(bytes, 0),
            source: readMAC(bytes, 6),
            etherType: EtherType(rawValue: outerType)
        )
        if outerType == EtherType.vlan.rawValue {
            guard bytes.count >= 18 else {
                throw .truncated("802.1Q tag", at: 14, needed: 4, available: bytes.count - 14)
            }
            header.vlan = VLANTag(tagControlInformation: readU16(bytes, 14))
            header.etherType = EtherType(rawValue: readU16(bytes, 16))
        }
        return header
    }

    func write(to sink: inout some ByteSink) {
        sink.write(destination)
        sink.write(source)
        if let vlan {
            sink.write(EtherType.vlan.rawValue)
            sink.write(vlan.tagControlInformation)
        }
        sink.write(etherType.rawValue)
    }
}
