import LeaseStore
import Prometheus
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The standard process metrics every Prometheus client exports (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
/// `process_start_time_seconds`), read from /proc/self at each scrape as client_golang's process collector does.
/// The unit's `ProtectProc=invisible` hides other processes, not this one.
final class ProcessMetrics: Sendable {
    private let cpu: Counter
    private let resident: Gauge
    private let virtual: Gauge
    private let openFiles: Gauge
    private let maximumFiles: Gauge
    private let startTime: Gauge
    /// CPU seconds already added to the counter (it only grows by deltas).
    private let countedCPU = Mutex(0.0)

    init(registry: PrometheusCollectorRegistry) {
        func name(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "process", metricName: name, unitName: unit, helpText: help)
        }
        cpu = registry.makeCounter(
            descriptor: name("cpu_seconds", "total", "User and system CPU time spent in seconds."))
        resident = registry.makeGauge(descriptor: name("resident_memory", "bytes", "Resident memory size in bytes."))
        virtual = registry.makeGauge(descriptor: name("virtual_memory", "bytes", "Virtual memory size in bytes."))
        openFiles = registry.makeGauge(descriptor: name("open", "fds", "Number of open file descriptors."))
        maximumFiles = registry.makeGauge(descriptor: name("max", "fds", "Maximum number of open file descriptors."))
        startTime = registry.makeGauge(
            descriptor: name("start_time", "seconds", "Start time of the process since unix epoch in seconds."))
        if let stat = Self.readStat(), let boot = Self.bootTime() {
            startTime.set(Double(boot) + Double(stat.startTicks) / Double(Self.ticksPerSecond))
        }
        update()
    }

    /// Reads the process's figures now.
    func update() {
        if let stat = Self.readStat() {
            let seconds = Double(stat.userTicks + stat.systemTicks) / Double(Self.ticksPerSecond)
            countedCPU.withLock { counted in
                if seconds > counted {
                    cpu.increment(by: seconds - counted)
                    counted = seconds
                }
            }
            resident.set(Double(stat.residentPages) * Double(Self.pageSize))
            virtual.set(Double(stat.virtualBytes))
        }
        openFiles.set(Double(Self.openDescriptors()))
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            maximumFiles.set(limit.rlim_cur == rlim_t.max ? Double(Int64.max) : Double(limit.rlim_cur))
        }
    }

    static let ticksPerSecond = max(1, sysconf(Int32(_SC_CLK_TCK)))
    static let pageSize = max(1, sysconf(Int32(_SC_PAGESIZE)))

    struct Stat {
        var userTicks: Int
        var systemTicks: Int
        var startTicks: Int
        var virtualBytes: Int
        var residentPages: Int
    }

    /// The fields of /proc/self/stat after the command name (which may hold spaces and parentheses, so the text
    /// is read from after the last ')'): utime is field 14, stime 15, starttime 22, vsize 23, rss 24 (proc(5)).
    static func parseStat(_ text: String) -> Stat? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state).
        func field(_ number: Int) -> Int? {
            let index = number - 3
            return fields.indices.contains(index) ? Int(fields[index]) : nil
        }
        guard let user = field(14), let system = field(15), let start = field(22), let virtual = field(23),
            let resident = field(24)
        else { return nil }
        return Stat(
            userTicks: user, systemTicks: system, startTicks: start, virtualBytes: virtual, residentPages: resident)
    }

    static func readStat() -> Stat? {
        readText("/proc/self/stat").flatMap(parseStat)
    }

    /// The `btime` line of /proc/stat: when the system booted, in seconds since the epoch.
    static func bootTime() -> Int? {
        guard let text = readText("/proc/stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Int(line.dropFirst(6).trimmingPrefix(" "))
        }
        return nil
    }

    static func openDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
        }
        // The descriptor opendir holds is among them.
        return max(0, count - 1)
    }

    static func readText(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer[0..<count]
            if bytes.count > 1 << 20 { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Where the daemon's memory goes, read at each scrape: what the C allocator has handed out and holds from the
/// system, and SQLite's share of what is handed out. Beside `process_resident_memory_bytes` they tell a leak (the
/// bytes allocated grow) from the allocator's heap growing around the same data (only the bytes held grow) and from
/// the lease store's page cache filling to its bound.
final class MemoryMetrics: Sendable {
    private let allocated: Gauge
    private let held: Gauge
    private let store: Gauge

    init(registry: PrometheusCollectorRegistry) {
        allocated = registry.makeGauge(
            descriptor: DaemonMetrics.name(
                "heap_allocated", unit: "bytes",
                "Bytes allocated from the C allocator now (mallinfo2), SQLite's included."))
        held = registry.makeGauge(
            descriptor: DaemonMetrics.name(
                "heap_held", unit: "bytes",
                "Bytes the C allocator holds from the system for them, allocated or kept free (mallinfo2)."))
        store = registry.makeGauge(
            descriptor: DaemonMetrics.name(
                "store_memory", unit: "bytes",
                "Bytes SQLite has allocated for the lease store: its page cache, schema and statements."))
        update()
    }

    func update() {
        let figures = AllocatorTuning.figures()
        allocated.set(Double(figures.inUse))
        held.set(Double(figures.held))
        store.set(Double(LeaseStore.sqliteMemoryBytes()))
    }
}
