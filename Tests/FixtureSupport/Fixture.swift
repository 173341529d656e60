public import Foundation

/// The real packets in `Fixtures/` (their sources are in its README), one copy that the DNSWire and the core tests
/// both read.
public enum Fixture {
    /// The fixture file `name`; a missing one stops the test run, since every name here is a file in the package.
    public static func url(_ name: String) -> URL {
        guard let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures") else {
            fatalError("fixture \(name) is missing from FixtureSupport's resources")
        }
        return url
    }

    /// The packets of a hex dump fixture, in order.
    public static func hexPackets(_ name: String) throws -> [[UInt8]] {
        try HexDump.packets(contentsOf: url(name))
    }

    public static func pcap(_ name: String) throws -> PcapFile {
        try PcapFile(contentsOf: url(name))
    }

    public static func text(_ name: String) throws -> String {
        try String(contentsOf: url(name), encoding: .utf8)
    }

    /// The OS X 10.9 registration of `pub-mac-sps-registration-osx10.9.txt` (its source A or B).
    public static func macRegistration(_ source: String = "A") throws -> MacRegistrationText {
        try MacRegistrationText(text: text("pub-mac-sps-registration-osx10.9.txt"), source: source)
    }

    /// The third-party client's registration in the lab capture `spc-registration-answered.pcap`: the payload of
    /// the UDP datagram it sent to port 3535.
    public static func thirdPartyRegistration() throws -> [UInt8] {
        let datagrams = try pcap("spc-registration-answered.pcap").records.compactMap { UDPPayload(frame: $0.bytes) }
        guard let registration = datagrams.first(where: { $0.destinationPort == 3535 }) else {
            throw MacRegistrationText.ParseError(description: "no registration in the capture")
        }
        return registration.payload
    }
}

/// The UDP payload of an Ethernet II frame carrying IPv4 or IPv6 (no extension headers) and UDP, with the ports.
/// Deliberately independent of the Frames module, so that the DNSWire tests exercise DNSWire alone.
public struct UDPPayload: Sendable {
    public var sourcePort: UInt16
    public var destinationPort: UInt16
    public var payload: [UInt8]

    public init?(frame: [UInt8]) {
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
