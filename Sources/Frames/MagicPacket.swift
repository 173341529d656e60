public import NetworkAddresses

/// A SecureOn password appended to a magic packet: 4 or 6 bytes.
public struct SecureOnPassword: Hashable, Sendable {
    /// The password bytes, 4 or 6 of them.
    public let bytes: [UInt8]

    /// Nil unless `bytes` holds exactly 4 or 6 bytes.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 6 else { return nil }
        self.bytes = bytes
    }
}

/// The Wake-on-LAN magic packet payload: six 0xFF bytes, the target MAC sixteen times, then an optional SecureOn
/// password. It is the payload of an EtherType 0x0842 frame or of a UDP datagram (port 9 by convention).
public struct MagicPacket: Hashable, Sendable {
    /// The length without a password: 6 + 16 × 6.
    public static let baseLength = 102

    /// The MAC address of the machine to wake.
    public var target: MACAddress
    public var password: SecureOnPassword?

    public init(target: MACAddress, password: SecureOnPassword? = nil) {
        self.target = target
        self.password = password
    }

    /// Decodes a payload of 102, 106 or 108 bytes: the synchronisation stream, sixteen equal addresses and an
    /// optional 4- or 6-byte password.
    public init(parsing bytes: [UInt8]) throws(FrameError) {
        self = try MagicPacket.parse(bytes, from: 0, to: bytes.count)
    }

    /// The payload length: 102 plus the password.
    public var length: Int { MagicPacket.baseLength + (password?.bytes.count ?? 0) }

    /// The payload bytes.
    public var bytes: [UInt8] {
        var buffer = ByteBuffer(capacity: length)
        write(to: &buffer)
        return buffer.bytes
    }

    static func parse(_ bytes: [UInt8], from start: Int, to end: Int) throws(FrameError) -> MagicPacket {
        let available = end - start
        guard available >= baseLength else {
            throw .truncated("magic packet", at: start, needed: baseLength, available: available)
        }
        for index in start..<start + 6 where bytes[index] != 0xFF {
            throw FrameError(
                .invalidMagicPacket, at: index,
                "magic packet synchronisation byte \(hex(bytes[index], digits: 2)) at offset \(index): expected 0xff")
        }
        let target = readMAC(bytes, start + 6)
        for repetition in 1..<16 {
            let at = start + 6 + repetition * 6
            let copy = readMAC(bytes, at)
            guard copy.bytes == target.bytes else {
                throw FrameError(
                    .invalidMagicPacket, at: at,
                    "magic packet address repetition \(repetition + 1) of 16 (\(copy)) at offset \(at): "
                        + "expected \(target)")
            }
        }
        let passwordLength = available - baseLength
        guard passwordLength == 0 || passwordLength == 4 || passwordLength == 6 else {
            throw FrameError(
                .invalidMagicPacket, at: start + baseLength,
                "magic packet password of \(passwordLength) bytes at offset \(start + baseLength): "
                    + "expected 0, 4 or 6")
        }
        let password = SecureOnPassword(copyBytes(bytes, start + baseLength, end))
        return MagicPacket(target: target, password: password)
    }

    func write(to sink: inout some ByteSink) {
        for _ in 0..<6 { sink.write(UInt8(0xFF)) }
        for _ in 0..<16 { sink.write(target) }
        if let password { sink.write(password.bytes) }
    }
}
