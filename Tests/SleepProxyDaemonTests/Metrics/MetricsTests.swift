import DNSWire
import FixtureSupport
import Foundation
import Frames
import LeaseStore
import Logging
import NetworkAddresses
import SleepProxyCore
import SleepProxyDaemon
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The exposition, driven through the core and the action performer with an injected clock: each metric moves
/// when its event happens; the text passes `promtool check metrics`.
@Suite struct MetricsTests {
    static let interface: InterfaceName = "eth0"
    static let proxyMAC = MACAddress(0x02, 0x66, 0, 0, 0, 1)
    static let sleeperMAC = MACAddress(0x02, 0x66, 0, 0, 0, 2)
    static let wakerMAC = MACAddress(0x02, 0x66, 0, 0, 0, 3)
    static let proxy = IPv4Address(10, 66, 0, 1)
    static let sleeper = IPv4Address(10, 66, 0, 2)
    static let waker = IPv4Address(10, 66, 0, 3)

    /// A core serving eth0, a recording store and effects, the metrics, and a clock the test moves.
    final class Rig: @unchecked Sendable {
        var core: SleepProxyCore
        var now = UnixTime(seconds: 1_900_000_000)
        let metrics = DaemonMetrics(version: "9.9.9-test")
        let journal = ActionPerformerTests.Journal()
        let store: ActionPerformerTests.RecordingStore
        let effects: ActionPerformerTests.RecordingEffects
        /// The wall clock the performer reads.
        let clock = TestClock()

        init(configuration: CoreConfiguration = CoreConfiguration()) {
            core = SleepProxyCore(configuration: configuration)
            core.setLink(
                Link(
                    name: MetricsTests.interface, macAddress: MetricsTests.proxyMAC,
                    prefixes: [Link.Prefix(address: .v4(MetricsTests.proxy), length: 24)]))
            store = ActionPerformerTests.RecordingStore(journal: journal)
            effects = ActionPerformerTests.RecordingEffects(journal: journal, name: "eth0")
        }

        func perform(_ actions: [Action], inputTime: Duration? = nil) {
            let effects = self.effects
            ActionPerformer(
                store: store, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
                effects: { $0 == MetricsTests.interface ? effects : nil }, metrics: metrics, inputTime: inputTime,
                clock: { [clock] in clock.read() }
            ).perform(actions)
        }

        func register(_ bytes: [UInt8]) {
            perform(
                core.handleRegistration(
                    RegistrationDatagram(
                        interface: MetricsTests.interface,
                        source: Endpoint(address: .v4(MetricsTests.sleeper), port: 5353),
                        destination: Endpoint(address: .v4(MetricsTests.proxy), port: 5354), bytes: bytes),
                    now: now))
        }

        func advance(_ duration: Duration) {
            let until = now + duration
            while let deadline = core.nextDeadline, deadline <= until {
                now = max(now, deadline)
                perform(core.tick(now: now))
            }
            now = until
        }

        /// The exposition as series text (`name{labels}`) to value.
        func scrape() -> [String: Double] {
            MetricsTests.parse(
                metrics.exposition(
                    MetricsSnapshot(statistics: core.statistics, held: core.heldCounts, capture: [:])))
        }
    }

    static func registration(sequence: UInt8 = 1, extra: [DNSRecord] = []) -> [UInt8] {
        let host: DNSName = "sleepy.local."
        let records =
            [
                DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(sleeper)),
                DNSRecord(name: ReverseMapping.name(of: .v4(sleeper)), ttl: 120, cacheFlush: true, rdata: .ptr(host)),
                DNSRecord(
                    name: "sleepy._ssh._tcp.local.", ttl: 120, cacheFlush: true,
                    rdata: .srv(SRVData(priority: 0, weight: 0, port: 22, target: host))),
                DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("sleepy._ssh._tcp.local.")),
            ] + extra
        return ClientMessage.update(
            id: 0x1234, records: records, owner: OwnerOption(sequence: sequence, primaryMAC: sleeperMAC))
    }

    static func syn(port: UInt16) -> EthernetFrame {
        EthernetFrame.tcp(
            TCPSegment(sourcePort: 50_000, destinationPort: port, sequenceNumber: 1, flags: .syn, payload: []),
            sourceAddress: waker, destinationAddress: sleeper, source: wakerMAC, destination: proxyMAC)
    }

    /// A multicast query from the waker with one question per name and type.
    static func query(_ questions: [(DNSName, DNSType)]) throws -> MDNSPacket {
        MDNSPacket(
            interface: interface, source: Endpoint(address: .v4(waker), port: 5353), destination: .v4(.mdnsGroup),
            sourceMAC: wakerMAC,
            bytes: try DNSMessage(
                id: 0, flags: DNSFlags(response: false, opcode: .query),
                questions: questions.map { DNSQuestion(name: $0.0, type: $0.1) }
            ).encoded())
    }

    /// `name{labels} value` lines to a dictionary; comments left out.
    static func parse(_ bytes: [UInt8]) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            values[String(line[..<space])] = value
        }
        return values
    }

    @Test func everyMetricMovesWithItsEvent() throws {
        let rig = Rig()
        var values = rig.scrape()
        // Present from the start, at zero.
        #expect(values["sleepproxy_registrations_total{outcome=\"accepted\"}"] == 0)
        #expect(values["sleepproxy_registrations_total{outcome=\"malformed\"}"] == 0)
        #expect(values["sleepproxy_wakes_total{trigger=\"tcp-syn\"}"] == 0)
        #expect(values["sleepproxy_releases_total{reason=\"returned\"}"] == 0)
        #expect(values["sleepproxy_wake_latency_seconds_count"] == 0)
        #expect(values["sleepproxy_build_info{version=\"9.9.9-test\"}"] == 1)
        #expect(values["sleepproxy_hosts_held{interface=\"eth0\"}"] == 0)
        #expect(values["sleepproxy_keepalive_connections{interface=\"eth0\"}"] == 0)
        #expect(values["sleepproxy_lease_expiries_total"] == 0)
        #expect(values["sleepproxy_mdns_queries_rate_limited_total"] == 0)
        #expect(values["sleepproxy_mdns_answer_cache_lookups_total{result=\"hit\"}"] == 0)
        #expect(values["sleepproxy_mdns_answer_cache_lookups_total{result=\"miss\"}"] == 0)

        rig.register(Self.registration())
        values = rig.scrape()
        #expect(values["sleepproxy_registrations_total{outcome=\"accepted\"}"] == 1)
        #expect(values["sleepproxy_hosts_held{interface=\"eth0\"}"] == 1)
        #expect(values["sleepproxy_records_held{interface=\"eth0\"}"] == 4)
        #expect(values["sleepproxy_addresses_taken_over{interface=\"eth0\"}"] == 0)
        #expect(values["sleepproxy_store_commit_duration_seconds_count"] == 1)

        rig.register([0xFF, 0x00])
        #expect(rig.scrape()["sleepproxy_registrations_total{outcome=\"malformed\"}"] == 1)

        rig.advance(.seconds(12))
        #expect(rig.scrape()["sleepproxy_addresses_taken_over{interface=\"eth0\"}"] == 1)

        // Each question is looked up in the answer cache: worked out the first time, then taken from the cache
        // while nothing held changes; a second question in one query is a lookup of its own.
        let hits = "sleepproxy_mdns_answer_cache_lookups_total{result=\"hit\"}"
        let misses = "sleepproxy_mdns_answer_cache_lookups_total{result=\"miss\"}"
        rig.perform(rig.core.handleMDNS(try Self.query([("sleepy.local.", .a)]), now: rig.now))
        values = rig.scrape()
        #expect(values[hits] == 0 && values[misses] == 1, "\(values.filter { $0.key.contains("cache") })")
        #expect(values["sleepproxy_mdns_answers_sent_total{destination=\"multicast\"}"] == 1)
        rig.perform(rig.core.handleMDNS(try Self.query([("sleepy.local.", .a)]), now: rig.now))
        rig.perform(
            rig.core.handleMDNS(try Self.query([("SLEEPY.local.", .a), ("_ssh._tcp.local.", .ptr)]), now: rig.now))
        values = rig.scrape()
        #expect(values[hits] == 2 && values[misses] == 2, "\(values.filter { $0.key.contains("cache") })")
        #expect(values["sleepproxy_mdns_queries_received_total"] == 3)
        #expect(values["sleepproxy_mdns_queries_rate_limited_total"] == 0)

        // A SYN captured at T; the performer's clock reads T + 300 µs when the magic packets have gone.
        let captured = rig.clock.read()
        rig.clock.step(by: .microseconds(300))
        rig.perform(rig.core.handleFrame(Self.syn(port: 22), on: Self.interface, now: rig.now), inputTime: captured)
        rig.clock.step(by: .zero)
        values = rig.scrape()
        #expect(values["sleepproxy_wakes_total{trigger=\"tcp-syn\"}"] == 1)
        #expect(values["sleepproxy_magic_packets_sent_total"] == 2)
        #expect(values["sleepproxy_wake_latency_seconds_count"] == 1)
        #expect(values["sleepproxy_wake_latency_seconds_bucket{le=\"0.00025\"}"] == 0)
        #expect(values["sleepproxy_wake_latency_seconds_bucket{le=\"0.0005\"}"] == 1)
        let sum = try #require(values["sleepproxy_wake_latency_seconds_sum"])
        #expect(abs(sum - 0.0003) < 0.00001)
        // A SYN to a port it did not register wakes nothing.
        rig.perform(rig.core.handleFrame(Self.syn(port: 8080), on: Self.interface, now: rig.now))
        #expect(rig.scrape()["sleepproxy_wake_latency_seconds_count"] == 1)

        // The host is back: it registers with its next sequence... and the wake ends, with a release when it
        // announces itself.
        let back = ClientMessage.announcement(
            records: [DNSRecord(name: "sleepy.local.", ttl: 120, cacheFlush: true, rdata: .a(Self.sleeper))],
            owner: OwnerOption(sequence: 2, primaryMAC: Self.sleeperMAC))
        rig.perform(
            rig.core.handleMDNS(
                MDNSPacket(
                    interface: Self.interface, source: Endpoint(address: .v4(Self.sleeper), port: 5353),
                    destination: .v4(.mdnsGroup), sourceMAC: Self.sleeperMAC, bytes: back), now: rig.now))
        values = rig.scrape()
        #expect(values["sleepproxy_releases_total{reason=\"returned\"}"] == 1)
        #expect(values["sleepproxy_hosts_held{interface=\"eth0\"}"] == 0)
        #expect(values["sleepproxy_records_held{interface=\"eth0\"}"] == 0)

        // A query for a name nobody holds, and for the host let go, is counted, not answered. Neither answer
        // comes from the cache: the first was never asked, and the release changed what is held.
        let answered = rig.scrape()["sleepproxy_mdns_answers_sent_total{destination=\"multicast\"}"]
        rig.perform(
            rig.core.handleMDNS(try Self.query([("nobody.local.", .a), ("sleepy.local.", .a)]), now: rig.now))
        values = rig.scrape()
        #expect(values["sleepproxy_mdns_queries_received_total"] == 4)
        #expect(values["sleepproxy_mdns_answers_sent_total{destination=\"multicast\"}"] == answered)
        #expect(values[hits] == 2 && values[misses] == 4, "\(values.filter { $0.key.contains("cache") })")

        // A failed commit is a store error.
        rig.store.fails = true
        rig.register(Self.registration(sequence: 3))
        #expect(rig.scrape()["sleepproxy_store_errors_total{kind=\"other\"}"] == 1)
        // Process metrics are there.
        #expect((values["process_resident_memory_bytes"] ?? 0) > 0)
        #expect((values["process_open_fds"] ?? 0) > 0)
        #expect((values["process_start_time_seconds"] ?? 0) > 1_600_000_000)
    }

    /// A connection a sleeping host hands over is counted while it is kept, and no longer once the host is let go.
    @Test func keptConnectionsAreCounted() {
        let rig = Rig()
        let connection = KeepaliveConnection(
            interval: 20, local: Endpoint(address: .v4(Self.sleeper), port: 50_000),
            remote: Endpoint(address: .v4(Self.waker), port: 4_000), remoteMAC: Self.wakerMAC, sequence: 1_000,
            acknowledgment: 5_000, window: 2_048)
        rig.register(Self.registration(extra: [KeepaliveRecord.record(connection)]))
        rig.advance(.seconds(12))
        let gauge = "sleepproxy_keepalive_connections{interface=\"eth0\"}"
        #expect(rig.scrape()[gauge] == 1)
        rig.perform(
            rig.core.forget(
                OwnerKey(interface: Self.interface, primaryMAC: Self.sleeperMAC), now: rig.now, reason: "a test"))
        #expect(rig.scrape()[gauge] == 0)
    }

    /// A lease that runs out is counted once, when it ends, and starts the wake its host is owed.
    @Test func aLeaseThatRunsOutIsCounted() {
        let rig = Rig()
        rig.register(Self.registration())
        rig.advance(.seconds(7_199))
        var values = rig.scrape()
        #expect(values["sleepproxy_lease_expiries_total"] == 0)
        #expect(values["sleepproxy_wakes_total{trigger=\"lease-end\"}"] == 0)
        rig.advance(.seconds(2))
        values = rig.scrape()
        #expect(values["sleepproxy_lease_expiries_total"] == 1)
        #expect(values["sleepproxy_wakes_total{trigger=\"lease-end\"}"] == 1)
        rig.advance(.seconds(600))
        #expect(rig.scrape()["sleepproxy_lease_expiries_total"] == 1)
    }

    /// Queries past the sender's allowance are counted as such, and only those within it are looked up.
    @Test func queriesOverTheRateAreCounted() throws {
        var configuration = CoreConfiguration()
        configuration.queryRate = Rate(perSecond: 1, burst: 3)
        let rig = Rig(configuration: configuration)
        rig.register(Self.registration())
        for _ in 0..<5 {
            rig.perform(rig.core.handleMDNS(try Self.query([("sleepy.local.", .a)]), now: rig.now))
        }
        let values = rig.scrape()
        #expect(values["sleepproxy_mdns_queries_received_total"] == 5)
        #expect(values["sleepproxy_mdns_queries_rate_limited_total"] == 2)
        #expect(values["sleepproxy_mdns_answer_cache_lookups_total{result=\"miss\"}"] == 1)
        #expect(values["sleepproxy_mdns_answer_cache_lookups_total{result=\"hit\"}"] == 2)
    }

    /// The process metrics are this process's own figures, in the units their names say, read at the scrape.
    @Test func processMetricsAreThisProcesssOwn() throws {
        func cpuSeconds() -> Double {
            var time = timespec()
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
            return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
        }
        func virtualBytes() throws -> Double {
            let stat = try String(contentsOfFile: "/proc/self/stat", encoding: .utf8)
            let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
            // vsize is field 23; fields[0] is field 3.
            return try #require(Double(fields[20]))
        }
        let metrics = DaemonMetrics(version: "1")
        let cpuBefore = cpuSeconds()
        let virtualBefore = try virtualBytes()
        let values = Self.parse(
            metrics.exposition(MetricsSnapshot(statistics: CoreStatistics(), held: [:], capture: [:])))
        let cpuAfter = cpuSeconds()
        let virtualAfter = try virtualBytes()

        // /proc counts CPU time in clock ticks (10 ms), rounding down, thread by thread.
        let cpu = try #require(values["process_cpu_seconds_total"])
        #expect(cpu > cpuBefore - 0.1 - cpuBefore / 50 && cpu <= cpuAfter + 0.01, "\(cpuBefore) \(cpu) \(cpuAfter)")
        // Other tests in this process map and unmap memory meanwhile (thread stacks, buffers): a margin of a quarter.
        let virtual = try #require(values["process_virtual_memory_bytes"])
        #expect(
            virtual >= min(virtualBefore, virtualAfter) * 0.75 && virtual <= max(virtualBefore, virtualAfter) * 1.25,
            "\(virtualBefore) \(virtual) \(virtualAfter)")
        #expect(virtual > (values["process_resident_memory_bytes"] ?? .infinity))
        var limit = rlimit()
        try #require(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(values["process_max_fds"] == Double(limit.rlim_cur))
        #expect((values["process_open_fds"] ?? 0) < Double(limit.rlim_cur))
    }

    /// The memory gauges are this process's own: the bytes allocated follow an allocation made and freed between
    /// scrapes, the allocator holds at least what is allocated, and SQLite's share covers an open store's cache.
    @Test func memoryMetricsFollowWhatIsAllocated() throws {
        let metrics = DaemonMetrics(version: "1")
        func scrape() -> [String: Double] {
            Self.parse(metrics.exposition(MetricsSnapshot(statistics: CoreStatistics(), held: [:], capture: [:])))
        }
        let before = scrape()
        let allocatedBefore = try #require(before["sleepproxy_heap_allocated_bytes"])
        #expect(allocatedBefore > 0)
        #expect((before["sleepproxy_heap_held_bytes"] ?? 0) >= allocatedBefore)

        // 64 MiB, far more than other tests running beside this one allocate or free between two scrapes.
        let size = 64 << 20
        let block = try #require(malloc(size))
        memset(block, 1, size)
        let during = scrape()
        free(block)
        let after = scrape()
        let allocatedDuring = try #require(during["sleepproxy_heap_allocated_bytes"])
        let allocatedAfter = try #require(after["sleepproxy_heap_allocated_bytes"])
        let margin = Double(16 << 20)
        #expect(abs(allocatedDuring - allocatedBefore - Double(size)) < margin, "\(allocatedBefore) \(allocatedDuring)")
        #expect(abs(allocatedDuring - allocatedAfter - Double(size)) < margin, "\(allocatedDuring) \(allocatedAfter)")
        #expect((during["sleepproxy_heap_held_bytes"] ?? 0) >= allocatedDuring)

        // A store with pages written: SQLite's memory counts at least its page cache.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try LeaseStore(directory: directory.path, configuration: .init(eventHistoryLimit: 2_000))
        let time = UnixTime(seconds: 1_700_000_000)
        try store.apply(
            (0..<1_000).map { n in
                .appendEvent(
                    Event(
                        time: time + .seconds(n), kind: .registered, interface: "eth0", owner: Self.sleeperMAC,
                        source: Endpoint(address: .v4(Self.sleeper), port: 5353), detail: "event \(n)"))
            })
        let cached = try store.cachedPageBytes()
        #expect(cached > 32 << 10, "\(cached) bytes cached")
        let last = scrape()
        let storeMemory = try #require(last["sleepproxy_store_memory_bytes"])
        #expect(storeMemory >= Double(cached), "\(storeMemory) bytes for SQLite, \(cached) of them cached pages")
        // SQLite allocates from the same allocator.
        #expect(storeMemory < last["sleepproxy_heap_allocated_bytes"] ?? 0)
    }

    /// Capture counters grow by what libpcap counted since the last scrape; an interface no longer served leaves.
    @Test func captureCountsAndInterfacesComeAndGo() {
        let metrics = DaemonMetrics(version: "1")
        func scrape(_ capture: [InterfaceName: CaptureCounts], held: [InterfaceName: HeldCounts]) -> [String: Double] {
            Self.parse(metrics.exposition(MetricsSnapshot(statistics: CoreStatistics(), held: held, capture: capture)))
        }
        let counts = CaptureCounts(received: 10, droppedByKernel: 2, droppedByInterface: 0, droppedByDaemon: 1)
        var values = scrape(["eth0": counts], held: ["eth0": HeldCounts()])
        #expect(values["sleepproxy_capture_frames_received_total{interface=\"eth0\"}"] == 10)
        #expect(values["sleepproxy_capture_frames_dropped_total{interface=\"eth0\",by=\"kernel\"}"] == 2)
        #expect(values["sleepproxy_capture_frames_dropped_total{interface=\"eth0\",by=\"daemon\"}"] == 1)
        values = scrape(
            ["eth0": CaptureCounts(received: 15, droppedByKernel: 2, droppedByInterface: 0, droppedByDaemon: 1)],
            held: ["eth0": HeldCounts(), "eth1": HeldCounts(hosts: 2)])
        #expect(values["sleepproxy_capture_frames_received_total{interface=\"eth0\"}"] == 15)
        #expect(values["sleepproxy_hosts_held{interface=\"eth1\"}"] == 2)
        // libpcap's received count wraps (32 bits) while the drops do not: only the received count starts over,
        // the drops are not added again.
        values = scrape(
            ["eth0": CaptureCounts(received: 4, droppedByKernel: 3, droppedByInterface: 0, droppedByDaemon: 1)],
            held: ["eth0": HeldCounts()])
        #expect(values["sleepproxy_capture_frames_received_total{interface=\"eth0\"}"] == 19)
        #expect(values["sleepproxy_capture_frames_dropped_total{interface=\"eth0\",by=\"kernel\"}"] == 3)
        #expect(values["sleepproxy_capture_frames_dropped_total{interface=\"eth0\",by=\"daemon\"}"] == 1)
        values = scrape([:], held: ["eth1": HeldCounts(hosts: 1)])
        #expect(values["sleepproxy_capture_frames_received_total{interface=\"eth0\"}"] == nil)
        #expect(values["sleepproxy_hosts_held{interface=\"eth0\"}"] == nil)
        #expect(values["sleepproxy_hosts_held{interface=\"eth1\"}"] == 1)
    }

    /// A damaged lease store set aside at start counts as a store error of its kind.
    @Test func aDamagedStoreIsCountedAsSuch() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: directory + "/leases.sqlite"))
        let store = try LeaseStore(
            directory: directory, configuration: LeaseStore.Configuration(damagedFile: .setAside))
        defer { store.close() }
        let metrics = DaemonMetrics(version: "1")
        metrics.storeFailed(try #require(store.setAside).problem)
        let values = Self.parse(
            metrics.exposition(MetricsSnapshot(statistics: CoreStatistics(), held: [:], capture: [:])))
        #expect(values["sleepproxy_store_errors_total{kind=\"damaged\"}"] == 1)
        #expect(values["sleepproxy_store_errors_total{kind=\"disk-full\"}"] == 0)
    }

    /// promtool (Debian's prometheus package) accepts the exposition: names, types, help, histogram series.
    @Test(.enabled(if: Self.promtool != nil, "needs promtool (apt-get install prometheus)"))
    func promtoolAcceptsTheExposition() throws {
        let rig = Rig()
        rig.register(Self.registration())
        rig.advance(.seconds(12))
        rig.perform(rig.core.handleFrame(Self.syn(port: 22), on: Self.interface, now: rig.now))
        let exposition = rig.metrics.exposition(
            MetricsSnapshot(
                statistics: rig.core.statistics, held: rig.core.heldCounts,
                capture: [
                    "eth0": CaptureCounts(received: 1, droppedByKernel: 0, droppedByInterface: 0, droppedByDaemon: 0)
                ]
            ))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.promtool))
        process.arguments = ["check", "metrics"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(exposition))
        try input.fileHandleForWriting.close()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "promtool: \(said)")
        // promtool's lint speaks of problems only; it says nothing of a clean exposition.
        #expect(said.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool: \(said)")
    }

    /// A wall clock that moves by `step` at each reading.
    final class TestClock: Sendable {
        private let state = Mutex((now: Duration.seconds(1_900_000_000), step: Duration.zero))

        func read() -> Duration {
            state.withLock { state in
                state.now += state.step
                return state.now
            }
        }

        func step(by step: Duration) {
            state.withLock { $0.step = step }
        }
    }

    static let promtool: String? = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
}
