import DNSWire
import FixtureSupport
import Foundation
import LeaseStore
import NetworkAddresses
import NetworkIO
import SleepProxyControl
import SleepProxyCore
import SleepProxyDaemon
import TestLab
import Testing

@testable import sleepproxyctl

#if canImport(Glibc)
    import Glibc
#endif

/// The real daemon where it can lose its state: killed with SIGKILL under a registration load, its state directory
/// on a file system that fills up, and started on a lease store that is damaged or not its own.
@Suite(.requiresLab(tools: ["dig", "nsenter", "unshare", "python3"]))
struct CrashSafetyLabTests {
    static let lease: UInt32 = 7200

    // MARK: Registrations

    /// Owner `owner`'s address: 10.77.10.1 onwards, one per owner, none on the lab's own /24.
    static func address(_ owner: Int) -> IPv4Address {
        IPv4Address(10, 77, UInt8(10 + owner / 250), UInt8(owner % 250 + 1))
    }

    static func mac(_ owner: Int) -> MACAddress {
        MACAddress(0x02, 0xC5, 0, 0, UInt8(owner >> 8), UInt8(owner & 0xFF))
    }

    /// A Mac's records (host name, address, reverse mapping, an ssh service, the service type), version `version`
    /// of them: its TXT record says `v=<version>`, so that the daemon's view tells versions apart.
    static func records(owner: Int, version: Int) throws -> [DNSRecord] {
        ClientMessage.host(
            try DNSName(labels: ["crash\(owner)", "local"]), address: .v4(address(owner)),
            instance: try DNSName(labels: ["crash\(owner) SSH", "_ssh", "_tcp", "local"]), txt: ["v=\(version)"],
            servicesEntry: true)
    }

    /// The registration a Mac sends for that version: no zone, cache-flush on unique records, SRV target in full,
    /// Lease 7200, OWNER with the version as its sequence number (a new sequence replaces the records).
    static func registration(owner: Int, version: Int, id: UInt16) throws -> [UInt8] {
        ClientMessage.update(
            id: id, records: try records(owner: owner, version: version),
            owner: OwnerOption(sequence: UInt8(version % 256), primaryMAC: mac(owner)), lease: UpdateLease(lease: lease)
        )
    }

    /// Sends registrations from the sleeper and reads the replies.
    struct Client: Sendable {
        let socket: DatagramSocket
        let proxy: Endpoint
        let source: IPAddress

        init(_ lab: Lab) throws {
            socket = try lab.withNamespace(.sleeper) {
                try DatagramSocket(family: .ipv4, interface: "eth0", port: 0)
            }
            proxy = Endpoint(address: try ip(lab.host(.proxy).ipv4), port: RegistrationDaemonLabTests.port)
            source = try ip(lab.host(.sleeper).ipv4)
        }

        func send(_ bytes: [UInt8]) throws {
            try socket.send(bytes, to: proxy, scopeID: 0, from: source, interfaceIndex: 0)
        }

        /// The IDs of the acknowledgments that arrive within `timeout` (stops at the first one if `first`).
        /// Anything but Apple's exact reply from the proxy's port is a failure.
        func replies(within timeout: Duration, first: Bool = false) throws -> [UInt16] {
            let deadline = ContinuousClock.now + timeout
            var ids: [UInt16] = []
            while true {
                while let reply = try socket.receive() {
                    let id = UInt16(reply.bytes.first ?? 0) << 8 | UInt16(reply.bytes.count > 1 ? reply.bytes[1] : 0)
                    guard reply.source == proxy,
                        reply.bytes == RegistrationDaemonLabTests.expectedReply(id: id, lease: lease)
                    else {
                        throw TestFailure("an unexpected datagram from \(reply.source): \(reply.bytes)")
                    }
                    ids.append(id)
                    if first { return ids }
                }
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else { return ids }
                var entry = pollfd(fd: socket.fileDescriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, Int32(max(1, remaining / .milliseconds(1))))
            }
        }

        func close() { socket.close() }
    }

    // MARK: The daemon

    static func controlSocket(_ lab: Lab) -> String { lab.workDirectory + "/control.sock" }

    static func daemonArguments(_ lab: Lab, state: String) throws -> [String] {
        [
            try RegistrationDaemonLabTests.daemonPath(), "--interface", "eth0", "--state-dir", state,
            "--registration-port", String(RegistrationDaemonLabTests.port), "--log-level", "debug",
            "--advertise-name", "Lab Proxy", "--control-socket", controlSocket(lab),
        ]
    }

    /// Waits (blocking) for the daemon's start line.
    static func waitForStart(_ daemon: LabProcess) throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !daemon.stderr.contains("registrations on UDP port") {
            if daemon.hasExited || ContinuousClock.now > deadline {
                throw TestFailure("sleepproxyd did not start: \(daemon.stderr)")
            }
            usleep(10_000)
        }
    }

    /// The hosts the daemon holds, from `sleepproxyctl hosts --json`, by owner MAC; retried while the control
    /// socket is not listening yet (it opens just after the start line).
    static func hosts(_ lab: Lab) throws -> [String: HostSummary] {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let result = try lab.run(
                .proxy, [try OperationsLabTests.ctlPath(), "--socket", controlSocket(lab), "hosts", "--json"])
            if result.succeeded {
                let hosts = try ControlProtocol.decoder().decode([HostSummary].self, from: Data(result.stdout.utf8))
                return Dictionary(hosts.map { ($0.ownerMAC, $0) }, uniquingKeysWith: { first, _ in first })
            }
            guard result.status == 3, ContinuousClock.now < deadline else {
                throw TestFailure("sleepproxyctl hosts failed: \(result)")
            }
            usleep(20_000)
        }
    }

    /// `show` for one host, straight over the control socket (the protocol `sleepproxyctl show --json` speaks).
    static func show(_ lab: Lab, owner: Int) throws -> HostDetail? {
        let client = ControlClient(socketPath: controlSocket(lab), timeout: .seconds(5))
        do {
            return try client.request(ControlRequest(command: .show, host: mac(owner).description)).host
        } catch {
            if error.kind == .daemon { return nil }
            throw error
        }
    }

    /// Whether `detail` holds exactly the records of `version` of `owner`, with leases that ended between
    /// `earliest` and `latest` plus the lease; a description of the difference if not.
    static func mismatch(
        _ detail: HostDetail, owner: Int, version: Int, sentAt earliest: Date, ackedBy latest: Date
    ) throws -> String? {
        let expected = try records(owner: owner, version: version)
        let held = detail.records.map { "\($0.name) \($0.type) \($0.ttl) \($0.unique)" }.sorted()
        let wanted = expected.map { "\($0.name) \($0.type) \($0.ttl) \($0.cacheFlush)" }.sorted()
        guard held == wanted else { return "records \(held), expected \(wanted)" }
        guard detail.records.contains(where: { $0.type == "A" && $0.data == address(owner).description }),
            detail.records.contains(where: { $0.type == "TXT" && txtVersion($0.data) == version })
        else { return "record data \(detail.records.map(\.data)) is not version \(version)'s" }
        let low = earliest.addingTimeInterval(Double(lease) - 2)
        let high = latest.addingTimeInterval(Double(lease) + 2)
        guard let expiry = detail.summary.leaseExpiresAt, expiry >= low, expiry <= high,
            detail.records.allSatisfy({ $0.expiresAt >= low && $0.expiresAt <= high })
        else {
            return
                "lease ends \(String(describing: detail.summary.leaseExpiresAt)), expected between \(low) and \(high)"
        }
        return nil
    }

    /// The version in a TXT record's presentation (`"v=3"`).
    static func txtVersion(_ data: String) -> Int? {
        guard let range = data.range(of: "v=") else { return nil }
        return Int(data[range.upperBound...].prefix(while: \.isNumber))
    }

    // MARK: SIGKILL at random moments

    /// A small seeded generator (SplitMix64): the same seed gives the same kill moments and the same load.
    struct SeededRandom: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// One version of an owner's registration, as sent.
    struct Sent {
        var version: Int
        var sentAt: Date
        var ackedAt: Date?
    }

    /// What the test knows of an owner: the version the daemon must hold at least (acknowledged, or seen held
    /// after a restart), and versions sent since, which it may hold if their commit beat the kill.
    struct OwnerState {
        var durable: Sent?
        var pending: [Sent] = []
    }

    /// What a run of the kill loop saw.
    struct KillLoopReport: Sendable {
        var seed: UInt64 = 0
        var kills = 0
        var acknowledged = 0
        var committedUnacknowledged = 0
        var owners = 0
        var checks = 0
        var moments: [String] = []
        var failures: [String] = []
    }

    /// Runs `kills` rounds of: restart the daemon on the same state directory, check it holds every registration
    /// acknowledged so far, load it with registrations of new owners and new versions of known ones, and SIGKILL
    /// it at a seeded moment (after the k-th acknowledgment of the round, plus up to 3 ms). Blocks: run it on a
    /// thread of its own.
    static func killLoop(_ lab: Lab, seed: UInt64, kills: Int) throws -> KillLoopReport {
        var random = SeededRandom(state: seed)
        var report = KillLoopReport(seed: seed)
        let state = lab.workDirectory + "/state"
        let client = try Client(lab)
        defer { client.close() }
        var owners: [Int: OwnerState] = [:]
        var inFlight: [UInt16: (owner: Int, version: Int)] = [:]
        var nextOwner = 0
        var nextID: UInt16 = 1
        let roundSize = 36
        let window = 16

        func fail(_ text: String) {
            if report.failures.count < 30 { report.failures.append(text) }
        }

        func acknowledge(_ id: UInt16, at time: Date) {
            guard let (owner, version) = inFlight.removeValue(forKey: id) else {
                return fail("a reply to message \(id), which is not in flight")
            }
            report.acknowledged += 1
            var known = owners[owner, default: OwnerState()]
            if let index = known.pending.firstIndex(where: { $0.version == version }) {
                var sent = known.pending[index]
                sent.ackedAt = time
                known.durable = sent
                known.pending.removeAll { $0.version <= version }
            }
            owners[owner] = known
        }

        /// Checks the restarted daemon against what was acknowledged, then takes what it holds as the new truth
        /// (a version committed but not acknowledged before the kill is held from now on; one not held is gone).
        func verify(_ daemon: LabProcess, after kill: Int) throws {
            let hosts = try hosts(lab)
            let expectedCount = owners.values.filter { $0.durable != nil || !$0.pending.isEmpty }.count
            if daemon.stderr.contains("lease store:") {
                fail("after kill \(kill): the lease store reported problems: \(daemon.stderr)")
            }
            for (owner, known) in owners.sorted(by: { $0.key < $1.key }) {
                let mac = mac(owner).description
                guard let summary = hosts[mac] else {
                    if let durable = known.durable {
                        fail(
                            "after kill \(kill): owner \(owner) (\(mac)) is gone, though version \(durable.version) was acknowledged"
                        )
                    }
                    owners[owner]?.pending = []
                    continue
                }
                report.checks += 1
                guard let detail = try show(lab, owner: owner) else {
                    fail("after kill \(kill): owner \(owner) is listed but `show` does not know it")
                    continue
                }
                let candidates = ([known.durable].compactMap { $0 } + known.pending)
                let held = detail.records.first { $0.type == "TXT" }.flatMap { txtVersion($0.data) }
                let version = candidates.first { $0.version == held }
                guard let version else {
                    fail(
                        "after kill \(kill): owner \(owner) holds \(detail.records.map(\.data)), none of versions \(candidates.map(\.version))"
                    )
                    continue
                }
                if let durable = known.durable, version.version < durable.version {
                    fail(
                        "after kill \(kill): owner \(owner) went back to version \(version.version) from \(durable.version)"
                    )
                }
                if let problem = try mismatch(
                    detail, owner: owner, version: version.version, sentAt: version.sentAt,
                    ackedBy: version.ackedAt ?? Date())
                {
                    fail("after kill \(kill): owner \(owner) version \(version.version): \(problem)")
                }
                if summary.recordCount != 6 { fail("after kill \(kill): owner \(owner) lists \(summary.recordCount)") }
                if version.ackedAt == nil, version.version != known.durable?.version {
                    report.committedUnacknowledged += 1
                }
                owners[owner] = OwnerState(durable: version)
            }
            let held = owners.values.filter { $0.durable != nil }.count
            if hosts.count != held {
                fail(
                    "after kill \(kill): the daemon holds \(hosts.count) hosts, the test knows of \(held) (\(expectedCount) sent)"
                )
            }
            let restored = "restore: holding \(owners.values.filter { $0.durable != nil }.count) owners"
            if kill > 0, !daemon.stderr.contains(restored) {
                fail("after kill \(kill): no \"\(restored)\" in the log")
            }
        }

        for kill in 0...kills {
            let daemon = try lab.spawn(.proxy, try daemonArguments(lab, state: state))
            try waitForStart(daemon)
            try verify(daemon, after: kill)
            guard kill < kills else {
                daemon.signal(SIGTERM)
                if daemon.wait(timeout: .seconds(10)) != 0 { fail("the last daemon did not stop cleanly") }
                break
            }

            // The round: new owners and new versions of known ones, in a seeded order.
            let known = owners.keys.sorted()
            let updates = min(known.count, Int(random.next() % 12))
            var round: [(owner: Int, version: Int)] = []
            var chosen = Set<Int>()
            while round.count < updates {
                let owner = known[Int(random.next() % UInt64(known.count))]
                guard chosen.insert(owner).inserted else { continue }
                let versions = owners[owner].map { ([$0.durable].compactMap { $0 } + $0.pending).map(\.version) } ?? []
                round.append((owner, (versions.max() ?? 0) + 1))
            }
            while round.count < roundSize {
                round.append((nextOwner, 1))
                nextOwner += 1
            }
            round.shuffle(using: &random)
            let killAfter = Int(random.next() % UInt64(roundSize + 1))
            let delay = Int(random.next() % 3001)

            var next = 0
            var acknowledgedInRound = 0
            func sendNext() throws {
                let (owner, version) = round[next]
                let id = nextID
                nextID &+= 1
                let bytes = try registration(owner: owner, version: version, id: id)
                owners[owner, default: OwnerState()].pending.append(Sent(version: version, sentAt: Date()))
                inFlight[id] = (owner, version)
                try client.send(bytes)
                next += 1
            }
            while next < min(window, round.count) { try sendNext() }
            var lastProgress = ContinuousClock.now
            while acknowledgedInRound < killAfter {
                let ids = try client.replies(within: .milliseconds(20), first: true)
                for id in ids {
                    acknowledge(id, at: Date())
                    acknowledgedInRound += 1
                    lastProgress = ContinuousClock.now
                    if next < round.count { try sendNext() }
                }
                if ContinuousClock.now - lastProgress > .seconds(5) {
                    fail("kill \(kill + 1): no reply for 5 s after \(acknowledgedInRound) in the round; killing anyway")
                    break
                }
            }
            usleep(useconds_t(delay))
            daemon.signal(SIGKILL)
            let killedAt = Date()
            if daemon.wait(timeout: .seconds(10)) != 128 + SIGKILL { fail("kill \(kill + 1): the daemon did not die") }
            // Replies already on their way were sent after their commit: they count as acknowledged.
            let late = try client.replies(within: .milliseconds(100))
            for id in late { acknowledge(id, at: killedAt) }
            report.kills += 1
            report.moments.append(
                "#\(kill + 1): after ack \(killAfter) of \(roundSize) + \(delay) µs (\(inFlight.count) in flight, \(late.count) late replies)"
            )
            inFlight = [:]
        }
        report.owners = owners.values.filter { $0.durable != nil }.count

        // The store itself, opened as the daemon opens it: sound, and holding what the daemon held.
        let store = try LeaseStore(directory: state)
        defer { store.close() }
        let loaded = try store.loadOwners()
        if !loaded.problems.isEmpty { fail("the store reports \(loaded.problems)") }
        if loaded.owners.count != report.owners {
            fail("the store holds \(loaded.owners.count) owners, the daemon held \(report.owners)")
        }
        return report
    }

    @Test func acknowledgedRegistrationsSurviveSIGKILLAtRandomMoments() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["SLEEPPROXY_CRASH_SEED"].flatMap { UInt64($0, radix: 16) } ?? 0x5EED_C4A5
        let kills = environment["SLEEPPROXY_CRASH_KILLS"].flatMap { Int($0) } ?? 24
        try await Lab.withLab { lab in
            let report = try await onFreshThread { try Self.killLoop(lab, seed: seed, kills: kills) }
            print(
                """
                crash safety: seed \(String(seed, radix: 16)) (SLEEPPROXY_CRASH_SEED), \(report.kills) kills, \
                \(report.acknowledged) registrations acknowledged, \(report.committedUnacknowledged) committed \
                but not acknowledged before a kill, \(report.owners) owners held at the end, \(report.checks) \
                owner checks after restarts
                """)
            for moment in report.moments { print("crash safety: kill \(moment)") }
            #expect(report.failures.isEmpty, "\(report.failures.joined(separator: "\n"))")
            #expect(report.kills == kills)
            #expect(report.acknowledged > kills * 10, "the load was too light to mean much")
        }
    }

    // MARK: A full disk

    /// Runs `arguments` in the daemon's mount namespace (where its state directory is a small tmpfs).
    static func inMountNamespace(of daemon: LabProcess, _ arguments: [String]) throws -> CommandResult {
        try Lab.runInTestNamespace(["nsenter", "-t", String(daemon.pid), "-m", "--"] + arguments)
    }

    /// Sends one registration per owner and returns the owners whose acknowledgment arrived within `timeout`.
    static func register(
        _ owners: [Int], version: Int = 1, idBase: UInt16, with client: Client, within timeout: Duration
    )
        throws -> Set<Int>
    {
        for (offset, owner) in owners.enumerated() {
            try client.send(try registration(owner: owner, version: version, id: idBase + UInt16(offset)))
        }
        let ids = try client.replies(within: timeout)
        return Set(ids.map { owners[Int($0 - idBase)] })
    }

    /// The state directory on a 4 MiB tmpfs of the daemon's own (a private mount namespace: nothing leaks, and it
    /// goes when the daemon does), filled up while the daemon runs, then freed.
    @Test func aFullDiskRefusesNewRegistrationsKeepsWhatIsHeldAndRecoversByItself() async throws {
        try await Lab.withLab { lab in
            let state = lab.workDirectory + "/state"
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
            let daemon = try lab.spawn(
                .proxy,
                [
                    "unshare", "--mount", "--propagation", "private", "sh", "-c",
                    "mount -t tmpfs -o size=4m,mode=0700 sleepproxy-full \"$0\" && exec \"$@\"", state,
                ] + (try Self.daemonArguments(lab, state: state)))
            defer { daemon.signal(SIGTERM) }
            try Self.waitForStart(daemon)
            let fileSystem = try Self.inMountNamespace(
                of: daemon, ["findmnt", "-n", "-o", "FSTYPE", "--target", state])
            #expect(fileSystem.stdout == "tmpfs\n", "\(fileSystem)")
            let outside = try Lab.runInTestNamespace(["findmnt", "-n", "-o", "FSTYPE", "--target", state])
            #expect(outside.stdout != "tmpfs\n", "the tmpfs leaked out of the daemon's mount namespace")

            let client = try Client(lab)
            defer { client.close() }
            let held = Array(0..<5)
            #expect(try Self.register(held, idBase: 0x100, with: client, within: .seconds(5)) == Set(held))
            // Once every address is taken over, the daemon writes nothing until something arrives.
            for owner in held {
                try await waitUntil("the take-over of \(Self.address(owner))", within: .seconds(20)) {
                    daemon.stderr.contains("took over \(Self.address(owner))")
                }
            }

            let fill = try Self.inMountNamespace(of: daemon, ["dd", "if=/dev/zero", "of=\(state)/filler", "bs=64k"])
            #expect(fill.stderr.contains("No space left on device"), "\(fill)")
            let refusedOwners = Array(100..<120)
            #expect(try Self.register(refusedOwners, idBase: 0x200, with: client, within: .seconds(2)) == [])
            // The Macs send again; still nothing is acknowledged.
            #expect(try Self.register(refusedOwners, idBase: 0x200, with: client, within: .seconds(2)) == [])
            let fullLine =
                "lease store: the disk is full (ENOSPC/SQLITE_FULL) at \(state)/leases.sqlite; registrations are not acknowledged until space returns"
            let log = daemon.stderr
            #expect(
                log.components(separatedBy: fullLine).count - 1 == 1, "one line for 40 refused registrations: \(log)")
            #expect(!log.contains("commits fail"), "\(log)")

            // What was held before is still listed, with its records, and still answered for.
            let listed = try Self.hosts(lab)
            for owner in held {
                #expect(
                    listed[Self.mac(owner).description]?.recordCount == 6, "owner \(owner): \(listed.keys.sorted())")
            }
            let answer = try await lab.dig(from: .waker, server: lab.host(.proxy).ipv4, name: "crash3.local", type: "A")
            #expect(answer.answered, "\(answer)")
            #expect(answer.answers.contains { $0.type == "A" && $0.data == Self.address(3).description }, "\(answer)")

            // Space returns: registrations are acknowledged again, without a restart.
            let removed = try Self.inMountNamespace(of: daemon, ["rm", "\(state)/filler"])
            #expect(removed.succeeded, "\(removed)")
            #expect(try Self.register([200], idBase: 0x300, with: client, within: .seconds(5)) == [200])
            #expect(try Self.register([100], idBase: 0x200, with: client, within: .seconds(5)) == [100])
            try await waitUntil("the store caught up", within: .seconds(15)) {
                daemon.stderr.contains("lease store: caught up with what is held")
            }
            let after = daemon.stderr
            #expect(after.components(separatedBy: fullLine).count - 1 == 1)
            #expect(
                after.contains("lease store: commits succeed again at \(state)/leases.sqlite after "), "\(after)")

            // After a clean stop, the store is sound and holds what the daemon held. (A process of the test keeps
            // the mount namespace, and with it the tmpfs, alive to copy the store out.)
            let holding = try Self.hosts(lab)
            let keeper = try lab.spawn(.proxy, ["nsenter", "-t", String(daemon.pid), "-m", "--", "sleep", "60"])
            defer { keeper.signal(SIGKILL) }
            try await waitUntil("the keeper in the daemon's mount namespace") {
                (try? Self.inMountNamespace(of: keeper, ["test", "-f", "\(state)/leases.sqlite"]).succeeded) == true
            }
            daemon.signal(SIGTERM)
            #expect(daemon.wait(timeout: .seconds(10)) == 0, "\(daemon.stderr)")
            for line in daemon.stderr.split(separator: "\n") where line.contains("lease store:") {
                print("disk full: \(line)")
            }
            let copy = lab.workDirectory + "/copy"
            let copied = try Self.inMountNamespace(of: keeper, ["cp", "-r", state, copy])
            #expect(copied.succeeded, "\(copied)")
            let store = try LeaseStore(directory: copy)
            let stored = try store.loadOwners()
            store.close()
            #expect(stored.problems == [])
            #expect(Set(stored.owners.map(\.key.primaryMAC.description)) == Set(holding.keys))
            for owner in held + [100, 200] {
                let saved = stored.owners.first { $0.key.primaryMAC == Self.mac(owner) }
                #expect(saved?.records.map(\.record) == (try Self.records(owner: owner, version: 1)), "owner \(owner)")
            }
        }
    }

    // MARK: A damaged or foreign store at start

    /// Writes a SQLite database at `path` with Python's sqlite3 (another program's, as far as the daemon knows).
    static func sqlite(_ path: String, _ script: String) throws {
        let result = try Lab.runInTestNamespace([
            "python3", "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.close()",
            path, script,
        ])
        guard result.succeeded else { throw TestFailure("python3 sqlite3 failed: \(result)") }
    }

    /// Starts the daemon on `state` and waits for it to exit (it must not start).
    static func failedStart(_ lab: Lab, state: String) throws -> (status: Int32?, log: String) {
        let process = try lab.spawn(.proxy, try daemonArguments(lab, state: state))
        let status = process.wait(timeout: .seconds(10))
        if status == nil { process.signal(SIGKILL) }
        return (status, process.stderr)
    }

    @Test func aDamagedStoreIsSetAsideWhileAForeignOrNewerOneIsRefusedUntouched() async throws {
        try await Lab.withLab { lab in
            // Random bytes where the store should be: set aside, and the daemon serves with an empty store.
            let damaged = lab.workDirectory + "/damaged"
            try FileManager.default.createDirectory(atPath: damaged, withIntermediateDirectories: false)
            let garbage = Data((0..<16_384).map { _ in UInt8.random(in: 0...255) })
            try garbage.write(to: URL(fileURLWithPath: damaged + "/leases.sqlite"))
            let daemon = try lab.spawn(.proxy, try Self.daemonArguments(lab, state: damaged))
            try Self.waitForStart(daemon)
            let log = daemon.stderr
            #expect(log.contains("lease store: \(damaged)/leases.sqlite was damaged ("), "\(log)")
            #expect(log.contains("file is not a database"), "\(log)")
            #expect(log.contains("kept it as \(damaged)/leases.sqlite.damaged-"), "\(log)")
            #expect(log.contains("started with an empty store"), "\(log)")
            let kept = try FileManager.default.contentsOfDirectory(atPath: damaged).filter { $0.contains(".damaged-") }
            #expect(kept.count == 1, "\(kept)")
            #expect(kept.first.flatMap { FileManager.default.contents(atPath: damaged + "/" + $0) } == garbage)
            let client = try Client(lab)
            defer { client.close() }
            #expect(try Self.register([1], idBase: 0x400, with: client, within: .seconds(5)) == [1])
            daemon.signal(SIGTERM)
            #expect(daemon.wait(timeout: .seconds(10)) == 0)

            // Another program's database: refused, untouched, and the message names the file and its tables.
            let foreign = lab.workDirectory + "/foreign"
            try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: false)
            try Self.sqlite(
                foreign + "/leases.sqlite",
                "CREATE TABLE lease4 (address TEXT, hwaddr BLOB, expire INTEGER); INSERT INTO lease4 VALUES ('10.0.0.9', x'02', 1);"
            )
            let foreignBytes = FileManager.default.contents(atPath: foreign + "/leases.sqlite")
            let refused = try Self.failedStart(lab, state: foreign)
            #expect(refused.status == 1, "\(refused.log)")
            #expect(
                refused.log.contains(
                    "cannot start: lease store \(foreign)/leases.sqlite: open: not a lease store: a SQLite database with schema version 0 and the tables lease4"
                ), "\(refused.log)")
            #expect(FileManager.default.contents(atPath: foreign + "/leases.sqlite") == foreignBytes)
            #expect(try FileManager.default.contentsOfDirectory(atPath: foreign) == ["leases.sqlite"])

            // A newer sleepproxyd's store: refused, untouched.
            let newer = lab.workDirectory + "/newer"
            try LeaseStore(directory: newer).apply([.saveOwner(Self.owner(7))])
            let newerVersion = LeaseStore.schemaVersion + 1
            try Self.sqlite(newer + "/leases.sqlite", "PRAGMA user_version = \(newerVersion);")
            let newerBytes = FileManager.default.contents(atPath: newer + "/leases.sqlite")
            let downgrade = try Self.failedStart(lab, state: newer)
            #expect(downgrade.status == 1, "\(downgrade.log)")
            #expect(
                downgrade.log.contains("cannot start: lease store \(newer)/leases.sqlite: open: newer schema: "),
                "\(downgrade.log)")
            #expect(downgrade.log.contains("schema version \(newerVersion)"), "\(downgrade.log)")
            #expect(FileManager.default.contents(atPath: newer + "/leases.sqlite") == newerBytes)
            #expect(try FileManager.default.contentsOfDirectory(atPath: newer) == ["leases.sqlite"])
        }
    }

    /// A held owner as the store keeps it, for seeding a store directly.
    static func owner(_ owner: Int) throws -> Owner {
        let now = Daemon.now()
        let records = try records(owner: owner, version: 1).map {
            HeldRecord(record: $0, sequence: 1, registeredAt: now, expiresAt: now + .seconds(Int64(lease)))
        }
        return Owner(
            key: OwnerKey(interface: "eth0", primaryMAC: mac(owner)), wakeMAC: mac(owner), sequence: 1,
            registeredAt: now, updatedAt: now, records: records)
    }
}
