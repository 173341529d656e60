import DNSWire
import Dispatch
import FixtureSupport
import Foundation
import LeaseStore
import Logging
import NetworkAddresses
import NetworkIO
import SleepProxyCore
import SleepProxyDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// A 25-record Mac-format registration for host `index`: device info, four services (TXT, browse PTRs, SRV),
/// Kerberos TXT, address records and their reverse mappings. No zone, cache-flush on unique records, SRV
/// targets in full, Lease 7200 and an 8-byte OWNER.
func macRegistration(index: Int, id: UInt16) throws -> [UInt8] {
    let mac = MACAddress(0x02, 0x42, 0, UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF))
    return try macRegistration(
        name: "host\(index)", ipv4: IPv4Address(value: 0x0A00_0000 | UInt32(index + 1)),
        ipv6: IPv6Address(high: 0xFE80_0000_0000_0000, low: 0x0200_00FF_FE00_0000 | UInt64(index + 1)), mac: mac,
        id: id)
}

/// The same 25 records for a host of the given name, addresses and MAC.
func macRegistration(name: String, ipv4: IPv4Address, ipv6: IPv6Address, mac: MACAddress, id: UInt16) throws
    -> [UInt8]
{
    let host = try DNSName(labels: [name, "local"])
    var records: [DNSRecord] = [
        DNSRecord(
            name: try DNSName(labels: [name, "_device-info", "_tcp", "local"]), ttl: 4500,
            rdata: .txt(try TXTData(["model=Macmini3,1", "osxvers=13"])))
    ]
    for (service, port) in [("_ssh", 22), ("_sftp-ssh", 22), ("_smb", 445), ("_eppc", 3031)] {
        let type = try DNSName(labels: [service, "_tcp", "local"])
        let instance = try DNSName(labels: [name, service, "_tcp", "local"])
        records += [
            DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData([""]))),
            DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr(type)),
            DNSRecord(name: type, ttl: 4500, rdata: .ptr(instance)),
            DNSRecord(
                name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: UInt16(port), target: host))),
        ]
    }
    records += [
        DNSRecord(
            name: try DNSName(labels: ["_kerberos", name, "local"]), ttl: 4500,
            rdata: .txt(try TXTData(["LKDC:SHA1.066C0CD4E8093DBC5E5FFE9B87D23C7C82B53BC5"]))),
        DNSRecord(name: ReverseMapping.name(of: .v6(ipv6)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
        DNSRecord(name: ReverseMapping.name(of: .v4(ipv4)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
        DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(ipv6)),
        DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(ipv4)),
        DNSRecord(
            name: try DNSName(labels: [name, "_rfb", "_tcp", "local"]), ttl: 4500, cacheFlush: true,
            rdata: .txt(try TXTData([""]))),
        DNSRecord(
            name: try DNSName(labels: [name, "_rfb", "_tcp", "local"]), ttl: 120, cacheFlush: true,
            rdata: .srv(SRVData(port: 5900, target: host))),
        DNSRecord(
            name: "_rfb._tcp.local.", ttl: 4500, rdata: .ptr(try DNSName(labels: [name, "_rfb", "_tcp", "local"]))),
    ]
    precondition(records.count == 25)
    return ClientMessage.update(id: id, records: records, owner: OwnerOption(sequence: 1, primaryMAC: mac))
}

func temporaryDirectory(_ name: String) -> String {
    var template = Array("/tmp/sleepproxy-bench-\(name)-XXXXXX".utf8CString)
    guard let path = mkdtemp(&template) else { fatalError("mkdtemp failed") }
    return String(cString: path)
}

/// The CPU time (user and system, every thread) this process has used, in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// This process's resident memory (`VmRSS`), or with `field: "RssAnon"` its anonymous part: the allocations,
/// without the mapped binary and libraries.
func residentMegabytes(field: String = "VmRSS") -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
        let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
    else { return -1 }
    return kilobytes / 1024
}

/// Waits until the daemon in this process is quiet after a phase of registrations, so that each phase is charged
/// its own work and none of the one before: the last host's address is probed from +1 s and announced at +4, +5,
/// +7 and +11 s (TakeoverTiming), its records announced after their silent probe; so 12 s, then until two
/// half-seconds in a row pass with under 5 ms of CPU each (at most 20 s in all). A shorter wait ended in the 4 s
/// gap before the last announcement, which then fell into the next phase: 9,000 hosts' of it in the thousand
/// registrations timed with 10,000 held.
func waitForAnnouncements() {
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(20)
    Thread.sleep(forTimeInterval: 12)
    var quiet = 0
    while clock.now < deadline, quiet < 2 {
        let before = processCPUSeconds()
        Thread.sleep(forTimeInterval: 0.5)
        quiet = processCPUSeconds() - before < 0.005 ? quiet + 1 : 0
    }
}

/// Registrations per second through the real daemon on loopback: UDP in, core, group commit, UDP reply out.
/// A client keeps `window` registrations outstanding and sends the next one for every reply. `owners` hosts are
/// registered into an empty table (the first 1,000 of them timed apart: the rate with nothing held), then 1,000
/// more with `owners` held.
func runRegistrationBenchmark(owners: Int = 10_000, window: Int = 64) throws -> String {
    let directory = temporaryDirectory("registrations")
    let port: UInt16 = 25_354
    let extra = 1_000
    // One client sends every owner: the per-source rate and the per-interface host limit would stop it.
    var core = CoreConfiguration(maximumRecordsPerOwner: 1_000, maximumRecordsTotal: 400_000)
    core.maximumHostsPerInterface = owners + extra
    core.registrationRate = Rate(perSecond: 1e9, burst: 1e9)
    let controlSocket = directory + "/control.sock"
    let configuration = DaemonConfiguration(
        interfaces: ["lo"], stateDirectory: directory, registrationPort: port, core: core, responder: false,
        controlSocket: controlSocket)
    let quiet = Logger(label: "benchmark") { _ in SwiftLogNoOpLogHandler() }
    let daemon = try Daemon(configuration: configuration, logger: quiet)
    let stopped = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        daemon.run()
        stopped.signal()
    }

    let messages = try (0..<owners + extra).map {
        try macRegistration(index: $0, id: UInt16(truncatingIfNeeded: $0 + 1))
    }
    let client = try DatagramSocket(family: .ipv4, interface: "lo", port: 0)
    defer { client.close() }
    let server = Endpoint(address: .v4(IPv4Address(127, 0, 0, 1)), port: port)
    let source = IPAddress.v4(IPv4Address(127, 0, 0, 1))
    var retransmitted = 0

    /// Registers `indices` and returns the seconds it took until the last was acknowledged, and the CPU time the
    /// process (daemon and client) spent on them and their announcements, in seconds: the steadier figure on a
    /// shared machine.
    func register(_ indices: Range<Int>) throws -> (seconds: Double, cpu: Double) {
        let clock = ContinuousClock()
        let start = clock.now
        let cpuAtStart = processCPUSeconds()
        var next = indices.lowerBound
        var answered = 0
        // Registrations sent and not yet acknowledged, by index (the message ID is the index plus one).
        var outstanding = Set<Int>()
        func send(_ index: Int) throws {
            try client.send(messages[index], to: server, scopeID: 0, from: source, interfaceIndex: 0)
            outstanding.insert(index)
        }
        while next < indices.upperBound, next - indices.lowerBound < window {
            try send(next)
            next += 1
        }
        var lastProgress = clock.now
        while answered < indices.count {
            if let reply = try client.receive() {
                precondition(reply.bytes.count == 31 && reply.bytes[2] == 0xA8, "unexpected reply")
                let id = Int(reply.bytes[0]) << 8 | Int(reply.bytes[1])
                // IDs wrap at 65,536; the outstanding index with this ID is the one acknowledged.
                guard let index = outstanding.first(where: { ($0 + 1) & 0xFFFF == id }) else {
                    continue  // a retransmitted registration acknowledged twice: counted once
                }
                outstanding.remove(index)
                answered += 1
                lastProgress = clock.now
                if next < indices.upperBound {
                    try send(next)
                    next += 1
                }
            } else {
                var descriptor = pollfd(fd: client.fileDescriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 100)
                // A datagram lost on the way (a full socket buffer) is sent again, as a client would.
                if clock.now - lastProgress > .milliseconds(500) {
                    lastProgress = clock.now
                    retransmitted += outstanding.count
                    for index in outstanding { try send(index) }
                }
            }
        }
        let elapsed = clock.now - start
        // The CPU is read once the phase's announcements are out, so that each phase is charged its own and none
        // of the phase before (the last registrations of 9,000 would otherwise be announced in the next).
        waitForAnnouncements()
        return (
            Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            processCPUSeconds() - cpuAtStart
        )
    }

    let first = try register(0..<extra)
    let listedFirst = try timeHostsListing(socket: controlSocket, expected: extra)
    let rest = try register(extra..<owners)
    let more = try register(owners..<owners + extra)
    let listedAll = try timeHostsListing(socket: controlSocket, expected: owners + extra)
    daemon.requestStop()
    stopped.wait()
    func microseconds(_ seconds: Double, _ count: Int) -> String {
        String(format: "%.1f", seconds * 1e6 / Double(count))
    }
    print("registrations_acknowledged: \(owners + extra) of \(owners + extra) (\(retransmitted) retransmissions)")
    print("registration_25_records_per_second: \(Int(Double(owners) / (first.seconds + rest.seconds)))")
    print("registrations_per_second_0_held: \(Int(Double(extra) / first.seconds))")
    print("registrations_per_second_\(owners / 1000)k_held: \(Int(Double(extra) / more.seconds))")
    print("registration_cpu_us_each_0_held: \(microseconds(first.cpu, extra))")
    print("registration_cpu_us_each_\(owners / 1000)k_held: \(microseconds(more.cpu, extra))")
    let empty = first.cpu * 1e6 / Double(extra)
    let full = more.cpu * 1e6 / Double(extra)
    judge("registration_cpu_us_each_0_held", empty, "<=", 60)
    judge("registration_cpu_us_each_\(owners / 1000)k_held", full, "<=", 60)
    judge("registration_cpu_us_each_\(owners / 1000)k_held over _0_held", full / empty, "<=", 1.1)
    for (count, milliseconds) in [(extra, listedFirst), (owners + extra, listedAll)] {
        if let milliseconds {
            print("ctl_hosts_\(count / 1000)k_ms: \(String(format: "%.1f", milliseconds))")
        }
    }
    fflush(nil)
    return directory
}

/// How long `sleepproxyctl hosts --json` takes against the daemon holding `expected` hosts, in milliseconds, from
/// the command's start to its exit (the best of three), as an administrator runs it. Nil, with a line that says so,
/// when `sleepproxyctl` was not built beside the benchmark.
func timeHostsListing(socket: String, expected: Int) throws -> Double? {
    let ctl = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("sleepproxyctl").path
    guard FileManager.default.isExecutableFile(atPath: ctl) else {
        print("ctl_hosts benchmark skipped: \(ctl) is not built (swift build -c release --product sleepproxyctl)")
        return nil
    }
    var best = Double.infinity
    for _ in 0..<3 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ctl)
        process.arguments = ["hosts", "--json", "--socket", socket]
        let output = Pipe()
        process.standardOutput = output
        let clock = ContinuousClock()
        let start = clock.now
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let elapsed = clock.now - start
        guard process.terminationStatus == 0 else {
            fatalError("sleepproxyctl hosts exited \(process.terminationStatus)")
        }
        let hosts = try JSONSerialization.jsonObject(with: data) as? [Any]
        guard hosts?.count == expected else {
            fatalError("sleepproxyctl hosts listed \(hosts?.count ?? -1) hosts, not \(expected)")
        }
        best = min(best, Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
    }
    return best
}

/// Forgets the hosts registered after the first `owners` (the registrations benchmark's extra 1,000), so that the
/// restore benchmark restores `owners`. Runs in the parent: memory this reading and deleting leaves behind is not
/// charged to the restored state.
func forgetExtraOwners(directory: String, keeping owners: Int = 10_000) throws {
    let store = try LeaseStore(directory: directory)
    defer { store.close() }
    let extra = try store.loadOwners().owners.filter { owner in
        let bytes = owner.key.primaryMAC.bytes
        return Int(bytes.3) << 16 | Int(bytes.4) << 8 | Int(bytes.5) >= owners
    }
    try store.apply(extra.map { .removeOwner($0.key) })
}

/// Restores a state directory the way the daemon starts: open the store, load every owner, hand them to the core.
/// Runs in a process of its own (see main.swift), so that its resident memory is that of the held state alone.
func runRestoreBenchmark(directory: String, owners: Int = 10_000) throws {
    let before = residentMegabytes()
    let anonymousBefore = residentMegabytes(field: "RssAnon")
    let clock = ContinuousClock()
    let start = clock.now
    let store = try LeaseStore(directory: directory)
    let loaded = try store.loadOwners()
    let loadedAt = clock.now
    let loadedMegabytes = residentMegabytes()
    var core = SleepProxyCore(configuration: CoreConfiguration(maximumRecordsTotal: 400_000))
    _ = core.restore(loaded.owners, now: UnixTime(seconds: Int64(time(nil))))
    let end = clock.now
    func milliseconds(_ duration: Duration) -> Int {
        Int((Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18) * 1000)
    }
    print("restore_owners: \(core.owners.count)")
    print("restore_records: \(core.recordCount)")
    print("restore_\(owners / 1000)k_ms: \(milliseconds(end - start))")
    print("restore_\(owners / 1000)k_load_ms: \(milliseconds(loadedAt - start))")
    print("restore_rss_mb_before_load: \(String(format: "%.1f", before))")
    print("restore_rss_mb_after_load: \(String(format: "%.1f", loadedMegabytes))")
    print("held_rss_mb: \(String(format: "%.1f", residentMegabytes()))")
    print("restore_rss_anon_mb_before_load: \(String(format: "%.1f", anonymousBefore))")
    print("held_rss_anon_mb: \(String(format: "%.1f", residentMegabytes(field: "RssAnon")))")
    judge("restore_\(owners / 1000)k_ms", Double(milliseconds(end - start)), "<=", 200)
    judge("held_rss_mb", residentMegabytes(), "<=", 50)
    withExtendedLifetime(core) {}
    store.close()
}
