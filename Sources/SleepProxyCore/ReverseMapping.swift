public import DNSWire
public import NetworkAddresses

/// Reverse-mapping names: `d.c.b.a.in-addr.arpa.` and the 32-nibble `ip6.arpa.` form (either case).
public enum ReverseMapping {
    /// The address a reverse-mapping PTR record stands for, or nil when the record is not one.
    public static func address(of record: DNSRecord) -> IPAddress? {
        guard record.type == .ptr else { return nil }
        return address(of: record.name)
    }

    /// The address of a reverse-mapping name, or nil when the name is not one. Reads the wire form in place:
    /// every PTR of every registration passes through here.
    public static func address(of name: DNSName) -> IPAddress? {
        name.withWire { wire in
            // 4 one-to-three-digit labels + "in-addr" + "arpa": 4 * 2..4 + 8 + 5 + 1 bytes.
            if wire.count >= 22, wire.count <= 30, hasSuffix(wire, inAddrArpa) {
                var value: UInt32 = 0
                var i = 0
                for octet in 0..<4 {
                    let length = Int(wire[i])
                    guard (1...3).contains(length), i + length < wire.count - inAddrArpa.count else { return nil }
                    var number: UInt32 = 0
                    for k in 1...length {
                        let digit = wire[i + k]
                        guard (0x30...0x39).contains(digit), !(k == 1 && digit == 0x30 && length > 1) else {
                            return nil
                        }
                        number = number * 10 + UInt32(digit - 0x30)
                    }
                    guard number <= 255 else { return nil }
                    // The first label is the last byte of the address.
                    value |= number << (8 * UInt32(octet))
                    i += length + 1
                }
                guard i == wire.count - inAddrArpa.count else { return nil }
                return .v4(IPv4Address(value: value))
            }
            // 32 one-nibble labels + "ip6" + "arpa".
            if wire.count == 64 + ip6Arpa.count, hasSuffix(wire, ip6Arpa) {
                var high: UInt64 = 0
                var low: UInt64 = 0
                for nibble in 0..<32 {
                    guard wire[2 * nibble] == 1, let digit = hexValue(wire[2 * nibble + 1]) else { return nil }
                    // The first label is the lowest nibble of the address.
                    if nibble < 16 {
                        low |= UInt64(digit) << (4 * UInt64(nibble))
                    } else {
                        high |= UInt64(digit) << (4 * UInt64(nibble - 16))
                    }
                }
                return .v6(IPv6Address(high: high, low: low))
            }
            return nil
        }
    }

    /// `in-addr.arpa.` and `ip6.arpa.` in wire form, lower case.
    private static let inAddrArpa: [UInt8] = [7] + Array("in-addr".utf8) + [4] + Array("arpa".utf8) + [0]
    private static let ip6Arpa: [UInt8] = [3] + Array("ip6".utf8) + [4] + Array("arpa".utf8) + [0]

    /// Whether `wire` ends with `suffix` (lower-case wire form), ignoring ASCII case.
    private static func hasSuffix(_ wire: UnsafeBufferPointer<UInt8>, _ suffix: [UInt8]) -> Bool {
        let offset = wire.count - suffix.count
        for k in 0..<suffix.count {
            let byte = wire[offset + k]
            if ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) != suffix[k] { return false }
        }
        return true
    }

    /// The reverse-mapping name of an address (lower-case nibbles for IPv6).
    public static func name(of address: IPAddress) -> DNSName {
        switch address {
        case .v4(let v4):
            let labels = v4.bytes.reversed().map { String($0) } + ["in-addr", "arpa"]
            return try! DNSName(labels: labels)
        case .v6(let v6):
            let digits = Array("0123456789abcdef")
            var labels: [String] = []
            for byte in v6.bytes.reversed() {
                labels.append(String(digits[Int(byte & 0x0F)]))
                labels.append(String(digits[Int(byte >> 4)]))
            }
            return try! DNSName(labels: labels + ["ip6", "arpa"])
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
