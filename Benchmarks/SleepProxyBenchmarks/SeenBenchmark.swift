import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyCore

/// What the table of machines heard (`sleepproxyctl seen`) costs: a full table of machines, each announcing a host
/// name, its address and two services as a Mac does, fed to a core of its own as the capture delivers them; the
/// anonymous resident memory before and after (`RssAnon`), per machine, over `cores` full tables so that pages
/// do not blur the figure.
func runSeenBenchmark(machines: Int = 512, cores: Int = 16) throws {
    let now = UnixTime(seconds: 1_800_000_000)
    var responses: [MDNSPacket] = []
    for index in 0..<machines {
        let address = IPv4Address(10, 1, UInt8(index >> 8), UInt8(index & 0xFF))
        let host = try DNSName(labels: ["Machine-\(index)", "local"])
        var answers = [DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(address))]
        for (type, port) in [("_smb", 445), ("_rfb", 5900)] {
            let instance = try DNSName(labels: ["Machine \(index)", type, "_tcp", "local"])
            answers += [
                DNSRecord(name: try DNSName(labels: [type, "_tcp", "local"]), ttl: 4_500, rdata: .ptr(instance)),
                DNSRecord(
                    name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: UInt16(port), target: host))),
                DNSRecord(name: instance, ttl: 4_500, cacheFlush: true, rdata: .txt(try TXTData(["txtvers=1"]))),
            ]
        }
        let bytes = try DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: answers
        ).encoded()
        responses.append(
            MDNSPacket(
                interface: BenchmarkCore.interface, source: Endpoint(address: .v4(address), port: 5353),
                destination: .v4(.mdnsGroup),
                sourceMAC: MACAddress(0x3C, 0x22, 0xFB, 0, UInt8(index >> 8), UInt8(index & 0xFF)),
                bytes: bytes))
    }
    var filled: [SleepProxyCore] = []
    let before = residentMegabytes(field: "RssAnon")
    for _ in 0..<cores {
        var core = SleepProxyCore()
        core.setLink(
            Link(
                name: BenchmarkCore.interface, macAddress: BenchmarkCore.proxyMAC,
                prefixes: [Link.Prefix(address: .v4(IPv4Address(10, 255, 255, 254)), length: 8)]))
        for packet in responses { _ = core.handleMDNS(packet, now: now) }
        filled.append(core)
    }
    let after = residentMegabytes(field: "RssAnon")
    let heard = filled.map(\.seenMachineCount).reduce(0, +)
    let listed = filled[0].seenMachines
    let bytes = (after - before) * 1_048_576 / Double(max(1, heard))
    print("seen_machines_per_table: \(filled[0].seenMachineCount)")
    print("seen_services_per_machine: \(listed.map(\.services.count).reduce(0, +) / max(1, listed.count))")
    print("seen_bytes_per_machine: \(Int(bytes))")
    print("seen_full_table_kib: \(Int(bytes * Double(filled[0].seenMachineCount) / 1024))")
    withExtendedLifetime(filled) {}
}
