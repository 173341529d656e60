public import NetworkAddresses

/// An ICMPv6 message (RFC 4443): the checksum and a decoded body. Neighbour Solicitation and Advertisement with
/// code 0 are decoded; every other message is kept as type, code and body bytes.
public struct ICMPv6Message: Hashable, Sendable {
    /// The decoded content of a message.
    public enum Content: Hashable, Sendable {
        case neighborSolicitation(NeighborSolicitation)
        case neighborAdvertisement(NeighborAdvertisement)
        /// Any other message: its type, code and the bytes after the checksum.
        case other(type: UInt8, code: UInt8, body: [UInt8])
    }

    public static let neighborSolicitationType: UInt8 = 135
    public static let neighborAdvertisementType: UInt8 = 136

    /// The checksum as stored; verify it through the enclosing packet (`IPv6Packet.transportChecksumIsValid`).
    public var checksum: UInt16
    public var content: Content

    public init(checksum: UInt16 = 0, content: Content) {
        self.checksum = checksum
        self.content = content
    }

    /// Decodes a whole message; every byte is part of it.
    public init(parsing bytes: [UInt8]) throws(FrameError) {
        self = try ICMPv6Message.parse(bytes, from: 0, to: bytes.count)
    }

    public var type: UInt8 {
        switch content {
        case .neighborSolicitation: ICMPv6Message.neighborSolicitationType
        case .neighborAdvertisement: ICMPv6Message.neighborAdvertisementType
        case .other(let type, _, _): type
        }
    }

    public var code: UInt8 {
        switch content {
        case .neighborSolicitation, .neighborAdvertisement: 0
        case .other(_, let code, _): code
        }
    }

    /// The Neighbour Solicitation, if this is one.
    public var neighborSolicitation: NeighborSolicitation? {
        if case .neighborSolicitation(let solicitation) = content { return solicitation }
        return nil
    }

    /// The Neighbour Advertisement, if this is one.
    public var neighborAdvertisement: NeighborAdvertisement? {
        if case .neighborAdvertisement(let advertisement) = content { return advertisement }
        return nil
    }

    /// The message length in bytes.
    public var length: Int {
        switch content {
        case .neighborSolicitation(let solicitation): 24 + NDOption.length(of: solicitation.options)
        case .neighborAdvertisement(let advertisement): 24 + NDOption.length(of: advertisement.options)
        case .other(_, _, let body): 4 + body.count
        }
    }

    static func parse(_ bytes: [UInt8], from start: Int, to end: Int) throws(FrameError) -> ICMPv6Message {
        let available = end - start
        guard available >= 4 else {
            throw .truncated("ICMPv6 header", at: start, needed: 4, available: available)
        }
        let type = bytes[start]
        let code = bytes[start + 1]
        let checksum = readU16(bytes, start + 2)
        let isND = code == 0 && (type == neighborSolicitationType || type == neighborAdvertisementType)
        guard isND else {
            return ICMPv6Message(
                checksum: checksum, content: .other(type: type, code: code, body: copyBytes(bytes, start + 4, end)))
        }
        let name = type == neighborSolicitationType ? "Neighbour Solicitation" : "Neighbour Advertisement"
        guard available >= 24 else {
            throw .truncated(name, at: start, needed: 24, available: available)
        }
        let word = readU32(bytes, start + 4)
        let target = readIPv6(bytes, start + 8)
        let options = try NDOption.parseList(bytes, from: start + 24, to: end)
        if type == neighborSolicitationType {
            let solicitation = NeighborSolicitation(target: target, options: options, reserved: word)
            return ICMPv6Message(checksum: checksum, content: .neighborSolicitation(solicitation))
        }
        let advertisement = NeighborAdvertisement(
            flags: NeighborAdvertisement.Flags(rawValue: word), target: target, options: options)
        return ICMPv6Message(checksum: checksum, content: .neighborAdvertisement(advertisement))
    }

    func write(to sink: inout some ByteSink) {
        sink.write(type)
        sink.write(code)
        sink.write(checksum)
        switch content {
        case .neighborSolicitation(let solicitation):
            sink.write(solicitation.reserved)
            sink.write(solicitation.target)
            NDOption.write(solicitation.options, to: &sink)
        case .neighborAdvertisement(let advertisement):
            sink.write(advertisement.flags.rawValue)
            sink.write(advertisement.target)
            NDOption.write(advertisement.options, to: &sink)
        case .other(_, _, let body):
            sink.write(body)
        }
    }
}

/// A Neighbour Solicitation (RFC 4861 section 4.3).
public struct NeighborSolicitation: Hashable, Sendable {
    public var target: IPv6Address
    public var options: [NDOption]
    /// The reserved word after the checksum; zero when sent, kept as received.
    public var reserved: UInt32

    public init(target: IPv6Address, options: [NDOption] = [], reserved: UInt32 = 0) {
        self.target = target
        self.options = options
        self.reserved = reserved
    }

    /// The first source link-layer address option's MAC.
    public var sourceLinkLayerAddress: MACAddress? {
        for case .sourceLinkLayerAddress(let mac) in options { return mac }
        return nil
    }
}

/// A Neighbour Advertisement (RFC 4861 section 4.4).
public struct NeighborAdvertisement: Hashable, Sendable {
    /// The 32-bit word after the checksum: the R, S and O flags and 29 reserved bits (kept as received).
    public struct Flags: OptionSet, Hashable, Sendable {
        public var rawValue: UInt32

        public init(rawValue: UInt32) { self.rawValue = rawValue }

        public static let router = Flags(rawValue: 0x8000_0000)
        public static let solicited = Flags(rawValue: 0x4000_0000)
        public static let override = Flags(rawValue: 0x2000_0000)
    }

    public var flags: Flags
    public var target: IPv6Address
    public var options: [NDOption]

    public init(flags: Flags, target: IPv6Address, options: [NDOption] = []) {
        self.flags = flags
        self.target = target
        self.options = options
    }

    /// The first target link-layer address option's MAC.
    public var targetLinkLayerAddress: MACAddress? {
        for case .targetLinkLayerAddress(let mac) in options { return mac }
        return nil
    }
}

/// A Neighbour Discovery option (RFC 4861 section 4.6).
public enum NDOption: Hashable, Sendable {
    /// Type 1 with length 1: an Ethernet source link-layer address.
    case sourceLinkLayerAddress(MACAddress)
    /// Type 2 with length 1: an Ethernet target link-layer address.
    case targetLinkLayerAddress(MACAddress)
    /// Any other option: its type and the bytes after the length octet. When building, the data is padded with
    /// zeros so that the option fills a multiple of 8 bytes.
    case other(type: UInt8, data: [UInt8])

    /// The option's length on the wire, a multiple of 8.
    public var length: Int {
        switch self {
        case .sourceLinkLayerAddress, .targetLinkLayerAddress: 8
        case .other(_, let data): min(255 * 8, (2 + data.count + 7) & ~7)
        }
    }

    static func length(of options: [NDOption]) -> Int {
        var total = 0
        for option in options { total += option.length }
        return total
    }

    static func parseList(_ bytes: [UInt8], from start: Int, to end: Int) throws(FrameError) -> [NDOption] {
        var options: [NDOption] = []
        var index = start
        while index < end {
            guard end - index >= 2 else {
                throw .truncated("ND option", at: index, needed: 2, available: end - index)
            }
            let type = bytes[index]
            let units = Int(bytes[index + 1])
            guard units > 0 else {
                throw FrameError(
                    .invalidOption, at: index + 1,
                    "ND option type \(type) length 0 at offset \(index + 1): expected at least 1 (units of 8 bytes)")
            }
            let length = units * 8
            guard length <= end - index else {
                throw .truncated("ND option type \(type)", at: index, needed: length, available: end - index)
            }
            switch (type, units) {
            case (1, 1): options.append(.sourceLinkLayerAddress(readMAC(bytes, index + 2)))
            case (2, 1): options.append(.targetLinkLayerAddress(readMAC(bytes, index + 2)))
            default: options.append(.other(type: type, data: copyBytes(bytes, index + 2, index + length)))
            }
            index += length
        }
        return options
    }

    static func write(_ options: [NDOption], to sink: inout some ByteSink) {
        for option in options {
            switch option {
            case .sourceLinkLayerAddress(let mac):
                sink.write(UInt8(1))
                sink.write(UInt8(1))
                sink.write(mac)
            case .targetLinkLayerAddress(let mac):
                sink.write(UInt8(2))
                sink.write(UInt8(1))
                sink.write(mac)
            case .other(let type, let data):
                let length = option.length
                sink.write(type)
                sink.write(UInt8(length / 8))
                if data.count <= length - 2 {
                    sink.write(data)
                    sink.writeZeros(length - 2 - data.count)
                } else {
                    sink.write(Array(data.prefix(length - 2)))
                }
            }
        }
    }
}
