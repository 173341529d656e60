import DNSWire
import Glibc
import LeaseStore
import NetworkAddresses
import SleepProxyCore

/// Lease store figures, printed as `figure: value` lines:
///
/// - `store_apply_owner25_batched_per_second`: 25-record owners saved 64 to a transaction, with one event each
///   (the daemon's group commit).
/// - `store_apply_owner25_single_per_second`: the same, one owner and its event per transaction.
/// - `store_restore_10000_owners_x25_seconds`: opening a store of 10,000 such owners and loading them all.
/// - `store_restore_rss_mb`: the process's resident memory with those 10,000 owners loaded and kept
///   (`store_restore_rss_before_load_mb`: the same just before opening the store).
/// - `store_file_10000_owners_x25_mb`: the size of that database file.
///
/// `STORE_PAGE_CACHE_KIB` sets the stores' page cache (`LeaseStore.Configuration.pageCacheKiB`), to compare sizes.
///
/// Each figure uses a fresh store in a temporary directory, removed afterwards. Owners are generated batch by
/// batch and dropped once saved, so that the resident memory after the restore is mostly the restored owners.
func runLeaseStoreBenchmarks() throws {
    let batched = try LeaseStoreBenchmark.applyRate(owners: 6_400, batchSize: 64)
    print("store_apply_owner25_batched_per_second: \(LeaseStoreBenchmark.format(batched, decimals: 0))")
    let single = try LeaseStoreBenchmark.applyRate(owners: 2_000, batchSize: 1)
    print("store_apply_owner25_single_per_second: \(LeaseStoreBenchmark.format(single, decimals: 0))")
    try LeaseStoreBenchmark.restore(owners: 10_000)
}

private enum LeaseStoreBenchmark {
    static let start = UnixTime(seconds: 1_700_000_000)
    static let configuration: LeaseStore.Configuration = {
        var configuration = LeaseStore.Configuration()
        if let set = getenv("STORE_PAGE_CACHE_KIB").flatMap({ Int(String(cString: $0)) }) {
            configuration.pageCacheKiB = set
        }
        return configuration
    }()

    /// Owners per second saved with `batchSize` owners (and as many events) per `apply`.
    static func applyRate(owners: Int, batchSize: Int) throws -> Double {
        try withStore { store, _ in
            let clock = ContinuousClock()
            var elapsed = Duration.zero
            for first in stride(from: 0, to: owners, by: batchSize) {
                let changes = batch(first..<min(first + batchSize, owners))
                elapsed += try clock.measure { try store.apply(changes) }
            }
            return Double(owners) / seconds(elapsed)
        }
    }

    /// Fills a store with `owners` owners, reopens it, loads them all and reports the time and memory it took.
    static func restore(owners: Int) throws {
        try withStore { store, directory in
            for first in stride(from: 0, to: owners, by: 64) {
                try store.apply(batch(first..<min(first + 64, owners)))
            }
            store.close()
            let before = residentMegabytes()
            let clock = ContinuousClock()
            var loaded = LoadedOwners(owners: [], problems: [])
            let elapsed = try clock.measure {
                let reopened = try LeaseStore(directory: directory, configuration: configuration)
                loaded = try reopened.loadOwners()
                reopened.close()
            }
            guard loaded.owners.count == owners, loaded.problems.isEmpty,
                loaded.owners.allSatisfy({ $0.records.count == 25 })
            else {
                throw BenchmarkFailure(
                    reason: "restored \(loaded.owners.count) owners with \(loaded.problems.count) problems")
            }
            let rss = residentMegabytes()
            withExtendedLifetime(loaded) {
                print("store_restore_\(owners)_owners_x25_seconds: \(format(seconds(elapsed), decimals: 3))")
                print("store_restore_rss_mb: \(format(rss, decimals: 1))")
                print("store_restore_rss_before_load_mb: \(format(before, decimals: 1))")
            }
            var info = stat()
            if stat(directory + "/" + LeaseStore.fileName, &info) == 0 {
                print("store_file_\(owners)_owners_x25_mb: \(format(Double(info.st_size) / 1_048_576, decimals: 1))")
            }
        }
    }

    /// The changes that save owners `range` and append one event per owner.
    static func batch(_ range: Range<Int>) -> [StoreChange] {
        var changes: [StoreChange] = []
        changes.reserveCapacity(range.count * 2)
        for n in range {
            let owner = self.owner(n)
            changes.append(.saveOwner(owner))
            changes.append(
                .appendEvent(
                    Event(
                        time: owner.updatedAt, kind: .registered, interface: owner.key.interface,
                        owner: owner.key.primaryMAC, source: owner.lastSource,
                        detail: "registered \(owner.records.count) records, lease 7200 s")))
        }
        return changes
    }

    /// A Mac as it registers: addresses, reverse mappings, six services (PTR, SRV, TXT each) and the service
    /// enumeration record, 25 records in all.
    static func owner(_ n: Int) -> Owner {
        let host = try! DNSName(labels: ["Mac-\(n)", "local"])
        let v4 = IPv4Address(10, UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(n & 0xFF))
        let v6a = IPv6Address(high: 0xFE80_0000_0000_0000, low: 0x0200_00FF_FE00_0000 | UInt64(n))
        let v6b = IPv6Address(high: 0xFD00_0000_0000_0001, low: 0x0200_00FF_FE00_0000 | UInt64(n))
        var records = [
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(v4)),
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(v6a)),
            DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .aaaa(v6b)),
            DNSRecord(name: ReverseMapping.name(of: .v4(v4)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
            DNSRecord(name: ReverseMapping.name(of: .v6(v6a)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
            DNSRecord(name: ReverseMapping.name(of: .v6(v6b)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
            DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr("_ssh._tcp.local.")),
        ]
        let services = [
            "_ssh._tcp", "_sftp-ssh._tcp", "_smb._tcp", "_afpovertcp._tcp", "_rfb._tcp", "_device-info._tcp",
        ]
        for (index, service) in services.enumerated() {
            let type = try! DNSName(service + ".local.")
            let instance = try! DNSName(
                labels: ["Mac \(n)"] + service.split(separator: ".").map(String.init) + ["local"])
            records.append(DNSRecord(name: type, ttl: 4500, rdata: .ptr(instance)))
            records.append(
                DNSRecord(
                    name: instance, ttl: 120, cacheFlush: true,
                    rdata: .srv(SRVData(port: UInt16(22 + index), target: host))))
            records.append(
                DNSRecord(
                    name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try! TXTData(["model=Mac14,\(n % 16)"]))))
        }
        let registeredAt = start + .milliseconds(n)
        let held = records.map {
            HeldRecord(record: $0, sequence: 21, registeredAt: registeredAt, expiresAt: registeredAt + .seconds(7200))
        }
        let primary = MACAddress(
            0x02, 0x42, UInt8(truncatingIfNeeded: n >> 24), UInt8(truncatingIfNeeded: n >> 16),
            UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n))
        return Owner(
            key: OwnerKey(interface: "eth0", primaryMAC: primary), wakeMAC: primary, sequence: 21,
            registeredAt: registeredAt, updatedAt: registeredAt, lastSource: Endpoint(address: .v4(v4), port: 5353),
            records: held)
    }

    /// Runs `body` with a store in a new temporary directory, then removes the directory.
    static func withStore<R>(_ body: (LeaseStore, String) throws -> R) throws -> R {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((base + "/lease-store-benchmark-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BenchmarkFailure(reason: "mkdtemp in \(base): \(String(cString: strerror(errno)))")
        }
        let directory = String(cString: made)
        defer {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                unlink(directory + "/" + LeaseStore.fileName + suffix)
            }
            rmdir(directory)
        }
        let store = try LeaseStore(directory: directory, configuration: configuration)
        defer { store.close() }
        return try body(store, directory)
    }

    /// VmRSS from /proc/self/status, in MiB.
    static func residentMegabytes() -> Double {
        guard let file = fopen("/proc/self/status", "r") else { return -1 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("VmRSS:") else { continue }
            let kilobytes = text.split(separator: " ").compactMap { Double($0) }.first ?? -1
            return kilobytes / 1024
        }
        return -1
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Fixed-point text without Foundation.
    static func format(_ value: Double, decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = Int64((abs(value) * scale).rounded())
        let whole = scaled / Int64(scale)
        let fraction = String(scaled % Int64(scale))
        let sign = value < 0 ? "-" : ""
        guard decimals > 0 else { return "\(sign)\(whole)" }
        return "\(sign)\(whole)." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }
}

private struct BenchmarkFailure: Error, CustomStringConvertible {
    let reason: String
    var description: String { "lease store benchmark: \(reason)" }
}
