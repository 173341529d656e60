import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyCore

/// The core's own share of answering a LAN's multicast questions: `held` hosts taken over, the proxy advertising
/// itself (as users run it), and Macs on the link asking by multicast, 2 ms apart, for the hosts' services (shared
/// PTRs, answered after a random delay), their names and their services' SRVs (unique, answered at once). The
/// core's clock moves with the questions, so that every delayed answer goes out at its tick between them, as in
/// the daemon. No sockets, no threads: the cost of the rules and of the answer cache under ticks.
func runMDNSCoreBenchmark(held: Int = 50, questions: Int = 100_000) throws {
    let interface = BenchmarkCore.interface
    var (core, now) = try BenchmarkCore.settled(held: held)

    func query(_ name: String, _ type: DNSType) throws -> [UInt8] {
        try DNSMessage(
            id: 0, flags: DNSFlags(response: false, opcode: .query),
            questions: [DNSQuestion(name: try DNSName(name), type: type)]
        ).encoded()
    }
    var asked: [[UInt8]] = [try query("_ssh._tcp.local.", .ptr), try query("_rfb._tcp.local.", .ptr)]
    for index in 0..<held {
        asked.append(try query("host\(index).local.", .a))
        asked.append(try query("host\(index)._ssh._tcp.local.", .srv))
    }
    let asker = Endpoint(address: .v4(IPv4Address(10, 255, 0, 3)), port: 5353)
    let askerMAC = MACAddress(0x02, 0x77, 0, 0, 0, 3)
    let hitsBefore = core.statistics.answerCacheHits
    let missesBefore = core.statistics.answerCacheMisses
    var sent = 0
    let clock = ContinuousClock()
    let start = clock.now
    for number in 0..<questions {
        now = now + .milliseconds(2)
        if let deadline = core.nextDeadline, deadline <= now { sent += core.tick(now: now).count }
        let packet = MDNSPacket(
            interface: interface, source: asker, destination: .v4(.mdnsGroup), sourceMAC: askerMAC,
            bytes: asked[number % asked.count])
        sent += core.handleMDNS(packet, now: now).count
    }
    let elapsed = clock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let hits = core.statistics.answerCacheHits - hitsBefore
    let misses = core.statistics.answerCacheMisses - missesBefore
    blackHole(sent)
    print("core_mdns_multicast_questions_per_second: \(Int(Double(questions) / seconds))")
    print("core_mdns_multicast_us_per_question: \(String(format: "%.2f", seconds * 1e6 / Double(questions)))")
    print(
        "core_mdns_answer_cache_hit_share: \(String(format: "%.3f", Double(hits) / Double(max(hits + misses, 1))))")
}

/// The core's share of answering browses of a service type that all of `held` hosts offer, as a querier with a
/// cache asks again: half the instances in its known answers, so that every answer is worked out anew (a subset
/// of the cached one), by unicast (QU) and legacy unicast in turn. Each answer lists every other instance with its
/// SRV, TXT, addresses and NSECs, and keeps what fits in a packet.
func runMDNSBrowseBenchmark(held: Int = 300, questions: Int = 2_000) throws {
    let interface = BenchmarkCore.interface
    var (core, now) = try BenchmarkCore.settled(held: held)
    let type: DNSName = "_ssh._tcp.local."
    let known = try (0..<held).filter { $0 % 2 == 0 }.map { index in
        DNSRecord(name: type, ttl: 4500, rdata: .ptr(try DNSName(labels: ["host\(index)", "_ssh", "_tcp", "local"])))
    }
    func browse(unicastResponse: Bool) throws -> [UInt8] {
        try DNSMessage(
            id: unicastResponse ? 0 : 0x4242, flags: DNSFlags(response: false, opcode: .query),
            questions: [DNSQuestion(name: type, type: .ptr, unicastResponse: unicastResponse)], answers: known
        ).encoded()
    }
    let asked = [try browse(unicastResponse: true), try browse(unicastResponse: false)]
    let asker = IPAddress.v4(IPv4Address(10, 255, 0, 3))
    let askerMAC = MACAddress(0x02, 0x77, 0, 0, 0, 3)
    var sent = 0
    var bytes = 0
    let clock = ContinuousClock()
    let start = clock.now
    for number in 0..<questions {
        now = now + .milliseconds(50)
        if let deadline = core.nextDeadline, deadline <= now { sent += core.tick(now: now).count }
        // QU from port 5353, legacy from an ephemeral port.
        let packet = MDNSPacket(
            interface: interface, source: Endpoint(address: asker, port: number % 2 == 0 ? 5353 : 50_000),
            destination: .v4(.mdnsGroup), sourceMAC: askerMAC, bytes: asked[number % 2])
        for action in core.handleMDNS(packet, now: now) {
            sent += 1
            if case .sendMDNS(let transmission) = action { bytes += transmission.bytes.count }
        }
    }
    let elapsed = clock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    blackHole(sent)
    print("core_mdns_browse_\(held)_us_per_question: \(String(format: "%.1f", seconds * 1e6 / Double(questions)))")
    print("core_mdns_browse_\(held)_reply_bytes_per_question: \(bytes / questions)")
}
