import CaptureStream
import DNSWire
import Foundation
import Frames
import NetworkAddresses
import SleepProxyDaemon
import TestLab

#if canImport(Glibc)
    import Glibc
#endif

func durationSeconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func synFrame(from lab: Lab, to address: IPAddress, sourcePort: UInt16) -> [UInt8] {
    let waker = lab.host(.waker)
    let wakerMAC = MACAddress(waker.macString)!
    let proxyMAC = MACAddress(lab.host(.proxy).macString)!
    let segment = TCPSegment(sourcePort: sourcePort, destinationPort: 22, sequenceNumber: 1, flags: .syn)
    switch address {
    case .v4(let v4):
        return EthernetFrame.tcp(
            segment, sourceAddress: IPv4Address(waker.ipv4)!, destinationAddress: v4, source: wakerMAC,
            destination: proxyMAC
        ).serialized()
    case .v6(let v6):
        return EthernetFrame.tcp(
            segment, sourceAddress: IPv6Address(waker.ula)!, destinationAddress: v6, source: wakerMAC,
            destination: proxyMAC
        ).serialized()
    }
}

/// Capture capacity: 4,096 held IPv6 addresses, a flood of SYNs to addresses that are not held at `rate` per
/// second for `seconds`, and one SYN to a held host in the middle of it.
func runCaptureCapacityBenchmark(held: Int = 4_096, rate: Int = 10_000, seconds: Int = 10) async throws {
    if let reason = Lab.unsupportedReason {
        print("capture benchmark skipped: \(reason)")
        return
    }
    try await Lab.withLab { lab in
        let daemon = try await startLabDaemon(lab)
        let profile = HeldHostsProfile(count: held)
        let clock = ContinuousClock()
        let registrationStart = clock.now
        do {
            try register(profile, in: lab)
        } catch {
            let saved = "/tmp/sleepproxy-capture-benchmark-daemon.log"
            try? daemon.stderr.write(toFile: saved, atomically: true, encoding: .utf8)
            FileHandle.standardError.write(
                Data("capture benchmark failed: \(error); the daemon's log is in \(saved)\n".utf8))
            throw error
        }
        print("capture_held_addresses: \(held)")
        print("capture_registration_seconds: \(String(format: "%.2f", durationSeconds(clock.now - registrationStart)))")
        // Let the 4,096 take-overs (7 frames each) run their course first.
        try await Task.sleep(for: .seconds(13))

        let injector = try lab.withNamespace(.waker) { try CaptureStream(interface: "eth0") }
        defer { injector.close() }
        var flood: [[UInt8]] = []
        for index in 0..<1_000 {
            let stranger = IPAddress.v6(IPv6Address(high: 0xFD77_0000_0000_0000, low: 0x9_0000 + UInt64(index)))
            flood.append(synFrame(from: lab, to: stranger, sourcePort: UInt16(20_000 + index)))
        }
        let heldTarget = IPAddress.v6(profile.ipv6(held / 2))
        let batch = max(1, rate / 100)
        var sent = 0
        let start = clock.now
        for tick in 0..<(seconds * 100) {
            for _ in 0..<batch {
                try injector.inject(flood[sent % flood.count])
                sent += 1
            }
            if tick == seconds * 50 {
                try injector.inject(synFrame(from: lab, to: heldTarget, sourcePort: 33_333))
            }
            let due = start + .milliseconds(10 * (tick + 1))
            if clock.now < due { try await Task.sleep(until: due, clock: clock) }
        }
        let elapsed = clock.now - start
        let achieved = Double(sent) / durationSeconds(elapsed)
        try await Task.sleep(for: .seconds(1))
        daemon.signal(SIGTERM)
        _ = daemon.wait(timeout: .seconds(10))
        let log = daemon.stderr
        try? log.write(toFile: "/tmp/sleepproxy-capture-benchmark-daemon.log", atomically: true, encoding: .utf8)
        let woke = log.contains("waking") && log.contains("port 22")
        print("capture_flood_frames_sent: \(sent)")
        print("capture_flood_rate_per_second: \(Int(achieved))")
        print("capture_held_host_woken_during_flood: \(woke ? "yes" : "no")")
        if let line = log.split(separator: "\n").last(where: { $0.contains("capture statistics") }) {
            let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            if numbers.count >= 4 {
                let tail = Array(numbers.suffix(4))
                print("capture_received: \(tail[0])")
                print("capture_dropped_by_kernel: \(tail[1])")
                print("capture_dropped_by_interface: \(tail[2])")
                print("capture_dropped_by_daemon: \(tail[3])")
            }
        } else {
            print("capture_statistics: missing from the daemon's log")
        }
    }
}
