// Minimal byte-level views of captured frames for the capture tests.

/// The EtherType of an untagged Ethernet frame.
func etherType(_ frame: [UInt8]) -> UInt16? {
    frame.count >= 14 ? bigEndian16(frame, 12) : nil
}

func bigEndian16(_ bytes: [UInt8], _ offset: Int) -> UInt16 {
    UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
}

let broadcastMAC: [UInt8] = Array(repeating: 0xFF, count: 6)

/// An Ethernet/IPv4 ARP packet.
struct ARPView: Equatable {
    var destinationMAC: [UInt8]
    var sourceMAC: [UInt8]
    var operation: UInt16
    var senderMAC: [UInt8]
    var senderIP: [UInt8]
    var targetMAC: [UInt8]
    var targetIP: [UInt8]

    init?(_ frame: [UInt8]) {
        guard etherType(frame) == 0x0806, frame.count >= 42 else { return nil }
        // Hardware type Ethernet, protocol IPv4, address lengths 6 and 4.
        guard bigEndian16(frame, 14) == 1, bigEndian16(frame, 16) == 0x0800, frame[18] == 6, frame[19] == 4 else {
            return nil
        }
        destinationMAC = Array(frame[0..<6])
        sourceMAC = Array(frame[6..<12])
        operation = bigEndian16(frame, 20)
        senderMAC = Array(frame[22..<28])
        senderIP = Array(frame[28..<32])
        targetMAC = Array(frame[32..<38])
        targetIP = Array(frame[38..<42])
    }
}

/// A TCP segment in an untagged Ethernet/IPv4 frame.
struct TCPView: Equatable {
    static let fin: UInt8 = 0x01
    static let syn: UInt8 = 0x02
    static let rst: UInt8 = 0x04
    static let ack: UInt8 = 0x10

    var destinationMAC: [UInt8]
    var sourceMAC: [UInt8]
    var sourceIP: [UInt8]
    var destinationIP: [UInt8]
    var sourcePort: UInt16
    var destinationPort: UInt16
    var flags: UInt8

    init?(_ frame: [UInt8]) {
        guard etherType(frame) == 0x0800, frame.count >= 34, frame[14] >> 4 == 4 else { return nil }
        let headerLength = Int(frame[14] & 0x0F) * 4
        guard frame[23] == 6, frame.count >= 14 + headerLength + 20 else { return nil }
        let tcp = 14 + headerLength
        destinationMAC = Array(frame[0..<6])
        sourceMAC = Array(frame[6..<12])
        sourceIP = Array(frame[26..<30])
        destinationIP = Array(frame[30..<34])
        sourcePort = bigEndian16(frame, tcp)
        destinationPort = bigEndian16(frame, tcp + 2)
        flags = frame[tcp + 13]
    }

    var isSYN: Bool { flags & Self.syn != 0 && flags & Self.ack == 0 }
}

/// A Wake-on-LAN frame (EtherType 0x0842): 6 × 0xFF, then the target MAC 16 times.
func magicPacketFrame(from source: [UInt8], to target: [UInt8]) -> [UInt8] {
    var frame = target + source + [0x08, 0x42]
    frame += Array(repeating: 0xFF, count: 6)
    for _ in 0..<16 { frame += target }
    return frame
}

/// `aa:bb:…` for messages.
func hex(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let digits = String(byte, radix: 16)
        return byte < 0x10 ? "0" + digits : digits
    }.joined(separator: ":")
}
