// Benchmarks print `figure: value` lines. Run them with `make bench` (a release build, no other load).
//
//   SleepProxyBenchmarks                 the standard set (about half an hour on two cores)
//   SleepProxyBenchmarks decode mdns     some: decode, encode, roundtrip, registrations, store, wakecore,
//                                        mdnscore, seen, mdns, wake, scaling
//   SleepProxyBenchmarks capture         a SYN flood past 4,096 held addresses; only when named
//   SCALING_HOSTS=100,10000 ...          the scaling figures with other numbers of held hosts
//   SleepProxyBenchmarks flood           hostile traffic for FLOOD_SECONDS (60); only when named (`make flood`)
//   SleepProxyBenchmarks soak            churn, faults and restarts for SOAK_MINUTES (60); only when named
//                                        (`make soak`)
import DNSWire
import FixtureSupport
import Foundation
import NetworkAddresses

/// The OS X 10.9 Mac mini registration (tests: pub-mac-sps-registration-osx10.9.txt, source A): 22 records and
/// the OPT with Lease 7200 and an 8-byte OWNER, written as a Mac writes it (SRV targets in full).
func osx109Registration() throws -> DNSMessage {
    let host: DNSName = "fanboy.local."
    var records: [DNSRecord] = [
        DNSRecord(
            name: "fanboy._device-info._tcp.local.", ttl: 4500,
            rdata: .txt(try TXTData(["model=Macmini3,1", "osxvers=13"])))
    ]
    for service in ["_ssh", "_sftp-ssh", "_smb", "_eppc"] {
        let type = try DNSName(labels: [service, "_tcp", "local"])
        let instance = try DNSName(labels: ["fanboy", service, "_tcp", "local"])
        records += [
            DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData([""]))),
            DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr(type)),
            DNSRecord(name: type, ttl: 4500, rdata: .ptr(instance)),
        ]
    }
    records.append(
        DNSRecord(
            name: "_kerberos.fanboy.local.", ttl: 4500,
            rdata: .txt(try TXTData(["LKDC:SHA1.066C0CD4E8093DBC5E5FFE9B87D23C7C82B53BC5"]))))
    for (service, port) in [("_ssh", 22), ("_sftp-ssh", 22), ("_smb", 445), ("_eppc", 3031)] {
        records.append(
            DNSRecord(
                name: try DNSName(labels: ["fanboy", service, "_tcp", "local"]), ttl: 120, cacheFlush: true,
                rdata: .srv(SRVData(port: UInt16(port), target: host))))
    }
    records += [
        DNSRecord(
            name: "9.3.D.9.E.D.E.F.F.F.0.2.A.9.6.D.0.0.0.0.0.0.0.0.0.0.0.0.0.8.E.F.ip6.arpa.", ttl: 120,
            cacheFlush: true,
            rdata: .ptr(host)),
        DNSRecord(name: "15.2.2.10.in-addr.arpa.", ttl: 120, cacheFlush: true, rdata: .ptr(host)),
        DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fe80::d69a:20ff:fede:9d39")!)),
        DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 2, 2, 15))),
    ]
    let opt = ClientMessage.registrationOPT(
        owner: OwnerOption(sequence: 21, primaryMAC: MACAddress("d4:9a:20:de:9d:38")!))
    return DNSMessage(
        id: 45342, flags: DNSFlags(response: false, opcode: .update), authorities: records, additionals: [opt])
}

/// Runs `body` repeatedly for about `seconds`, in batches, and returns operations per second.
func measure(seconds: Double = 2.0, batch: Int = 10_000, _ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    // Warm up.
    for _ in 0..<batch { try body() }
    var operations = 0
    let start = clock.now
    var elapsed = Duration.zero
    while elapsed < .milliseconds(Int(seconds * 1000)) {
        for _ in 0..<batch { try body() }
        operations += batch
        elapsed = clock.now - start
    }
    let (s, attoseconds) = elapsed.components
    return Double(operations) / (Double(s) + Double(attoseconds) / 1e18)
}

@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

let message = try osx109Registration()
let wire = try message.encoded(compression: .exceptSRVTargets)
let decodedOnce = try DNSMessage(decoding: wire)
precondition(decodedOnce == message, "registration does not round-trip")

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.count == 2, arguments[0] == "restore" {
    // The second half of the registrations benchmark, in a fresh process.
    try runRestoreBenchmark(directory: arguments[1])
    printAims()
    exit(0)
}
let selected = Set(arguments)
let standard: Set = [
    "decode", "encode", "roundtrip", "registrations", "store", "wakecore", "mdnscore", "seen", "mdns", "wake",
    "scaling",
]
let unknown = selected.subtracting(standard).subtracting(["capture", "flood", "soak"])
guard unknown.isEmpty else {
    FileHandle.standardError.write(
        Data(
            "unknown benchmark \(unknown.sorted().joined(separator: ", ")); known: \(standard.sorted().joined(separator: ", ")), capture, flood, soak\n"
                .utf8))
    exit(2)
}
func wanted(_ name: String) -> Bool { selected.isEmpty ? standard.contains(name) : selected.contains(name) }

printMachine()
print("registration_bytes: \(wire.count)")
print("registration_records: \(message.updates.count)")
if wanted("decode") {
    let decodes = try measure {
        blackHole(try DNSMessage(decoding: wire))
    }
    print("decode_osx109_registration_per_second: \(Int(decodes))")
    judge("decode_osx109_registration_per_second", decodes, ">=", 1_000_000)
}
if wanted("encode") {
    let encodes = try measure {
        blackHole(try message.encoded(compression: .exceptSRVTargets))
    }
    print("dns_encode_osx109_registration_per_second: \(Int(encodes))")
}
if wanted("roundtrip") {
    let roundTrips = try measure {
        blackHole(try DNSMessage(decoding: wire).encoded(compression: .exceptSRVTargets))
    }
    print("dns_decode_and_reencode_osx109_registration_per_second: \(Int(roundTrips))")
}
if wanted("registrations") {
    let directory = try runRegistrationBenchmark()
    try forgetExtraOwners(directory: directory)
    let restore = Process()
    restore.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    restore.arguments = ["restore", directory]
    try restore.run()
    restore.waitUntilExit()
    // SLEEPPROXY_BENCH_KEEP_STATE=DIR keeps a copy of the 10,000-host state directory, to run `restore DIR` again
    // (on a copy: a restore rewrites its store) while its leases last (about two hours).
    if let keep = ProcessInfo.processInfo.environment["SLEEPPROXY_BENCH_KEEP_STATE"] {
        do {
            try? FileManager.default.removeItem(atPath: keep)
            try FileManager.default.copyItem(atPath: directory, toPath: keep)
            print("state kept in \(keep)")
        } catch {
            print("state not kept in \(keep): \(error)")
        }
    }
    try? FileManager.default.removeItem(atPath: directory)
}
if wanted("store") {
    try runLeaseStoreBenchmarks()
}
if wanted("wakecore") {
    try runWakeCoreBenchmark()
}
if wanted("mdnscore") {
    try runMDNSCoreBenchmark()
    try runMDNSBrowseBenchmark()
}
if wanted("seen") {
    try runSeenBenchmark()
}
// The lab benchmarks need root (network namespaces) and say so, and what else is missing, when they skip.
if wanted("mdns") {
    try await runMDNSComparison()
}
if wanted("wake") {
    try await runWakeFigures()
}
if wanted("scaling") {
    try await runScaling()
}
if wanted("capture") {
    try await runCaptureCapacityBenchmark()
}
if wanted("flood") {
    try await runFloodBenchmark()
}
if wanted("soak") {
    try await runSoakBenchmark()
}
printAims()

/// The verdict on each figure with an aim that this run measured.
func printAims() {
    for line in aims { print(line) }
    aims = []
}

/// The machine, kernel and versions the figures were measured with.
func printMachine() {
    func firstLine(_ arguments: [String]) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        guard (try? process.run()) != nil else { return "not installed" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        return text.split(separator: "\n").first.map(String.init) ?? "unknown"
    }
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let model =
        cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?
        .split(separator: ":", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces) ?? "unknown"
    let memory = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8))?.split(separator: "\n").first?
        .split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) }
    print(
        "machine: \(model), \(ProcessInfo.processInfo.activeProcessorCount) cores, \(String(format: "%.0f", (memory ?? 0) / 1_048_576)) GiB"
    )
    print("kernel: \(firstLine(["uname", "-sr"]))")
    print("os: \(firstLine(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]))")
    print("swift: \(firstLine(["swift", "--version"]))")
    print("libpcap: \(firstLine(["sh", "-c", "dpkg-query -W -f '${Version}' libpcap0.8 2>/dev/null || echo unknown"]))")
    print("avahi: \(firstLine(["avahi-daemon", "--version"]))")
    print(
        "dnsperf: \(firstLine(["sh", "-c", "dpkg-query -W -f '${Version}' dnsperf 2>/dev/null || echo not installed"]))"
    )
}
