import DNSWire
import Foundation
import Frames
import NetworkAddresses
import SleepProxyCore

/// The core's own share of a wake: `held` hosts registered and taken over, then one TCP SYN to port 22 of each
/// (the first SYN of a wake), timed from the parsed frame to the actions. No sockets, no threads: the part of
/// `wake_p50_us` that is the proxy's own code.
func runWakeCoreBenchmark(held: Int = 1_000) throws {
    let interface = BenchmarkCore.interface
    let proxyMAC = BenchmarkCore.proxyMAC
    var (core, now) = try BenchmarkCore.settled(held: held)
    let waker = MACAddress(0x02, 0x77, 0, 0, 0, 3)
    let frames = try (0..<held).map { index in
        try EthernetFrame(
            parsing: EthernetFrame.tcp(
                TCPSegment(sourcePort: 50_000, destinationPort: 22, sequenceNumber: 1, flags: .syn),
                sourceAddress: IPv4Address(10, 255, 0, 3),
                destinationAddress: IPv4Address(value: 0x0A00_0000 | UInt32(index + 1)),
                source: waker, destination: proxyMAC
            ).serialized())
    }
    let clock = ContinuousClock()
    var times: [Double] = []
    var woken = 0
    for frame in frames {
        let start = clock.now
        let actions = core.handleFrame(frame, on: interface, now: now)
        let elapsed = clock.now - start
        times.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
        if case .injectFrame = actions.first { woken += 1 }
    }
    times.sort()
    print("core_wake_started: \(woken) of \(held)")
    print("core_wake_us_p50: \(String(format: "%.1f", times[times.count / 2]))")
    print("core_wake_us_p99: \(String(format: "%.1f", times[times.count * 99 / 100]))")
}

/// The core as the in-process benchmarks start it: one link (10/8 and a link-local prefix), advertising itself as
/// the daemon does unless told not to, `held` Mac-style hosts registered, and the clock past the probes and
/// announcements of every address.
enum BenchmarkCore {
    static let interface: InterfaceName = "eth0"
    static let proxyMAC = MACAddress(0x02, 0x77, 0, 0, 0, 1)

    static func settled(held: Int) throws -> (core: SleepProxyCore, now: UnixTime) {
        var configuration = CoreConfiguration(maximumRecordsTotal: 100_000)
        configuration.maximumHostsPerInterface = held
        configuration.registrationRate = Rate(perSecond: 1e9, burst: 1e9)
        var core = SleepProxyCore(configuration: configuration)
        core.setLink(
            Link(
                name: interface, macAddress: proxyMAC,
                prefixes: [
                    Link.Prefix(address: .v4(IPv4Address(10, 255, 255, 254)), length: 8),
                    Link.Prefix(address: .v6(IPv6Address(high: 0xFE80_0000_0000_0000, low: 1)), length: 64),
                ]))
        let start = UnixTime(seconds: 1_800_000_000)
        _ = core.startAdvertising(
            on: interface, configuration: AdvertisementConfiguration(name: "Benchmark", hostName: "benchmark"),
            port: 5354, now: start)
        let client = Endpoint(address: .v4(IPv4Address(10, 255, 0, 1)), port: 49_152)
        let proxy = Endpoint(address: .v4(IPv4Address(10, 255, 255, 254)), port: 5354)
        for index in 0..<held {
            _ = core.handleRegistration(
                RegistrationDatagram(
                    interface: interface, source: client, destination: proxy,
                    bytes: try macRegistration(index: index, id: UInt16(truncatingIfNeeded: index + 1))),
                now: start)
        }
        let settled = start + .seconds(20)
        while let deadline = core.nextDeadline, deadline <= settled {
            _ = core.tick(now: deadline)
        }
        return (core, settled)
    }
}
