public import NetworkAddresses

/// An ARP packet for Ethernet hardware addresses and IPv4 protocol addresses (RFC 826), 28 bytes.
public struct ARPPacket: Hashable, Sendable {
    /// The ARP opcode.
    public struct Operation: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: UInt16

        public init(rawValue: UInt16) { self.rawValue = rawValue }

        public static let request = Operation(rawValue: 1)
        public static let reply = Operation(rawValue: 2)

        public var description: String {
            switch rawValue {
            case 1: "request"
            case 2: "reply"
            default: "operation \(rawValue)"
            }
        }
    }

    /// The length of an Ethernet/IPv4 ARP packet.
    public static let length = 28

    public var operation: Operation
    public var senderHardwareAddress: MACAddress
    public var senderProtocolAddress: IPv4Address
    public var targetHardwareAddress: MACAddress
    public var targetProtocolAddress: IPv4Address

    public init(
        operation: Operation,
        senderHardwareAddress: MACAddress,
        senderProtocolAddress: IPv4Address,
        targetHardwareAddress: MACAddress,
        targetProtocolAddress: IPv4Address
    ) {
        self.operation = operation
        self.senderHardwareAddress = senderHardwareAddress
        self.senderProtocolAddress = senderProtocolAddress
        self.targetHardwareAddress = targetHardwareAddress
        self.targetProtocolAddress = targetProtocolAddress
    }

    /// Decodes the first 28 bytes of `bytes`; anything after them (Ethernet padding) is ignored.
    public init(parsing bytes: [UInt8]) throws(FrameError) {
        self = try ARPPacket.parse(bytes, at: 0)
    }

    /// An ARP probe (RFC 5227): sender protocol address 0.0.0.0.
    public var isProbe: Bool { operation == .request && senderProtocolAddress.isUnspecified }

    /// A gratuitous ARP: sender and target protocol addresses are equal (announcement or gratuitous reply).
    public var isGratuitous: Bool {
        !senderProtocolAddress.isUnspecified && senderProtocolAddress == targetProtocolAddress
    }

    static func parse(_ bytes: [UInt8], at start: Int) throws(FrameError) -> ARPPacket {
        guard bytes.count - start >= length else {
            throw .truncated("ARP packet", at: start, needed: length, available: bytes.count - start)
        }
        let hardwareType = readU16(bytes, start)
        guard hardwareType == 1 else {
            throw FrameError(
                .unsupportedAddressFormat, at: start,
                "ARP hardware type \(hardwareType) at offset \(start): expected 1 (Ethernet)")
        }
        let protocolType = readU16(bytes, start + 2)
        guard protocolType == 0x0800 else {
            throw FrameError(
                .unsupportedAddressFormat, at: start + 2,
                "ARP protocol type \(hex(protocolType)) at offset \(start + 2): expected 0x0800 (IPv4)")
        }
        let hardwareLength = bytes[start + 4]
        guard hardwareLength == 6 else {
            throw FrameError(
                .unsupportedAddressFormat, at: start + 4,
                "ARP hardware address length \(hardwareLength) at offset \(start + 4): expected 6")
        }
        let protocolLength = bytes[start + 5]
        guard protocolLength == 4 else {
            throw FrameError(
                .unsupportedAddressFormat, at: start + 5,
                "ARP protocol address length \(protocolLength) at offset \(start + 5): expected 4")
        }
        return ARPPacket(
            operation: Operation(rawValue: readU16(bytes, start + 6)),
            senderHardwareAddress: readMAC(bytes, start + 8),
            senderProtocolAddress: readIPv4(bytes, start + 14),
            targetHardwareAddress: readMAC(bytes, start + 18),
            targetProtocolAddress: readIPv4(bytes, start + 24)
        )
    }

    func write(to sink: inout some ByteSink) {
        sink.write(UInt16(1))
        sink.write(UInt16(0x0800))
        sink.write(UInt8(6))
        sink.write(UInt8(4))
        sink.write(operation.rawValue)
        sink.write(senderHardwareAddress)
        sink.write(senderProtocolAddress)
        sink.write(targetHardwareAddress)
        sink.write(targetProtocolAddress)
    }

    /// The 28 bytes of the packet.
    public var bytes: [UInt8] {
        var buffer = ByteBuffer(capacity: ARPPacket.length)
        write(to: &buffer)
        return buffer.bytes
    }
}
