import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import Testing

/// The lab captures in `Fixtures/` (see `Fixtures/README.md`).
enum Capture: String, CaseIterable, CustomStringConvertible {
    case lurtzWatchHost = "lurtz-watchhost-takeover-wol"
    case sleepThenSYN = "sleep-then-syn-wake"
    case selfWake = "selfwake-mdns-conflict"

    var description: String { rawValue }

    /// The frames of the capture, in order (frame N of Wireshark is `frames()[N - 1]`).
    func frames() throws -> [[UInt8]] {
        let url = try #require(
            Bundle.module.url(forResource: rawValue, withExtension: "pcap", subdirectory: "Fixtures"),
            "fixture \(rawValue).pcap is missing")
        let file = try PcapFile(contentsOf: url)
        #expect(file.linkType == 1, "\(rawValue) is not an Ethernet capture")
        return file.records.map(\.bytes)
    }

    /// Wireshark's 1-based frame `number`.
    func frame(_ number: Int) throws -> [UInt8] {
        let all = try frames()
        try #require(number >= 1 && number <= all.count, "\(rawValue) has no frame \(number)")
        return all[number - 1]
    }
}

/// The lab's addresses (captures/README.md): host N has MAC 02:77:00:00:00:0N, IPv4 10.77.0.N and
/// link-local fe80::77:ff:fe00:N.
enum Lab {
    static func mac(_ host: UInt8) -> MACAddress { MACAddress(0x02, 0x77, 0, 0, 0, host) }
    static func ipv4(_ host: UInt8) -> IPv4Address { IPv4Address(10, 77, 0, host) }
    static func ipv6(_ host: UInt8) -> IPv6Address {
        IPv6Address(high: 0xFE80_0000_0000_0000, low: 0x0077_00FF_FE00_0000 | UInt64(host))
    }

    static let proxy: UInt8 = 1
    static let sleeper: UInt8 = 2
    static let waker: UInt8 = 3
}

func hexBytes(_ hex: String) -> [UInt8] { HexDump.bytes(hex) }

/// Reads a big-endian 16-bit field of a serialised frame.
func field16(_ frame: [UInt8], _ offset: Int) -> UInt16 { UInt16(frame[offset]) << 8 | UInt16(frame[offset + 1]) }

/// Parses, expecting a `FrameError`; returns it (or nil, after recording an issue, when parsing succeeded).
func parseError(
    _ frame: [UInt8], verifying verification: ChecksumVerification = .none,
    sourceLocation: SourceLocation = #_sourceLocation
) -> FrameError? {
    do {
        let parsed = try EthernetFrame(parsing: frame, verifying: verification)
        Issue.record("expected an error, parsed \(parsed)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}
