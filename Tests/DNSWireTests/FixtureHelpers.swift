import DNSWire
import FixtureSupport
import Foundation

enum Fixture {
    static func url(_ name: String) -> URL {
        guard let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures") else {
            fatalError("fixture \(name) is missing from the test bundle")
        }
        return url
    }

    static func hexPackets(_ name: String) throws -> [[UInt8]] {
        try HexDump.packets(contentsOf: url(name))
    }

    static func pcap(_ name: String) throws -> PcapFile {
        try PcapFile(contentsOf: url(name))
    }

    static func text(_ name: String) throws -> String {
        try String(contentsOf: url(name), encoding: .utf8)
    }
}

/// The UDP payload of an Ethernet II frame carrying IPv4 or IPv6 (no extension headers) and UDP, with the ports.
/// Deliberately independent of the Frames module so that these tests exercise DNSWire alone.
struct UDPPayload {
    var sourcePort: UInt16
    var destinationPort: UInt16
    var payload: [UInt8]

    init?(frame: [UInt8]) {
        guard frame.count >= 14 else { return nil }
        let etherType = UInt16(frame[12]) << 8 | UInt16(frame[13])
        var udpAt: Int
        switch etherType {
        case 0x0800:
            guard frame.count >= 34, frame[23] == 17 else { return nil }
            udpAt = 14 + Int(frame[14] & 0x0F) * 4
        case 0x86DD:
            guard frame.count >= 62, frame[20] == 17 else { return nil }
            udpAt = 54
        default:
            return nil
        }
        guard frame.count >= udpAt + 8 else { return nil }
        sourcePort = UInt16(frame[udpAt]) << 8 | UInt16(frame[udpAt + 1])
        destinationPort = UInt16(frame[udpAt + 2]) << 8 | UInt16(frame[udpAt + 3])
        let length = Int(UInt16(frame[udpAt + 4]) << 8 | UInt16(frame[udpAt + 5]))
        guard length >= 8, udpAt + length <= frame.count else { return nil }
        payload = Array(frame[(udpAt + 8)..<(udpAt + length)])
    }
}
