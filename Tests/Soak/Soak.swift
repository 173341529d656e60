import CaptureStream
import DNSWire
import FixtureSupport
import Foundation
import Frames
import NetworkAddresses
import NetworkIO
import SleepProxyControl
import SleepProxyDaemon
import Synchronization
public import TestLab

#if canImport(Glibc)
    import Glibc
#endif

/// How long and how hard to soak, and what. `fromEnvironment` reads `SOAK_MINUTES` (60), `SOAK_SEED` (random),
/// `SOAK_HOSTS` (300), `SOAK_LEASE` (120 s), `SOAK_ACTIONS_PER_SECOND` (4), `SOAK_FAULT_SECONDS` (90: the mean
/// time between a reload or a full disk, each gap drawn between half and one and a half times it),
/// `SOAK_RESTART_SECONDS` (600: the same for a restart or a crash) and `SOAK_DECLARED` (3).
public struct SoakOptions: Sendable {
    public var minutes: Double
    public var seed: UInt64
    /// Mac-style hosts, at 10.78.1.10 and up: at most 1,000.
    public var hosts: Int
    /// The lease each registration asks for, in seconds.
    public var lease: UInt32
    /// Random actions (queries, connections, wakes, forgets) a second, on average.
    public var actionsPerSecond: Double
    /// The mean time between reloads and full disks, in seconds.
    public var faultSeconds: Double
    /// The mean time between restarts and crashes, in seconds: long enough for the daemon's memory to be judged
    /// within each run of it.
    public var restartSeconds: Double
    /// How soon a held host's name must be answered.
    public var answerWithin: Duration
    /// Machines declared in the configuration, at 10.77.0.10 and up: at most 10.
    public var declaredHosts: Int
    public var daemonPath: String
    public var ctlPath: String
    /// A file to write every answer and wake latency, fault and resource sample to, one a line, for a closer look
    /// (`SOAK_LATENCY_LOG`).
    public var latencyLog: String?
    /// A file to write the daemon's log to at the end, every run of it in turn (`SOAK_DAEMON_LOG`): the lab's
    /// directory, where it is written meanwhile, goes with the lab.
    public var daemonLog: String?

    public init(
        minutes: Double, seed: UInt64, hosts: Int, lease: UInt32, actionsPerSecond: Double, faultSeconds: Double,
        restartSeconds: Double = 600, answerWithin: Duration = .seconds(1), declaredHosts: Int = 3,
        daemonPath: String, ctlPath: String
    ) {
        self.minutes = minutes
        self.seed = seed
        self.hosts = min(max(hosts, 1), 1_000)
        self.lease = lease
        self.actionsPerSecond = actionsPerSecond
        self.faultSeconds = faultSeconds
        self.restartSeconds = restartSeconds
        self.answerWithin = answerWithin
        self.declaredHosts = min(max(declaredHosts, 0), 10)
        self.daemonPath = daemonPath
        self.ctlPath = ctlPath
    }

    public static func fromEnvironment(daemonPath: String, ctlPath: String) -> SoakOptions {
        let environment = ProcessInfo.processInfo.environment
        var options = SoakOptions(
            minutes: environment["SOAK_MINUTES"].flatMap(Double.init) ?? 60,
            seed: environment["SOAK_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max)),
            hosts: environment["SOAK_HOSTS"].flatMap { Int($0) } ?? 300,
            lease: environment["SOAK_LEASE"].flatMap { UInt32($0) } ?? 120,
            actionsPerSecond: environment["SOAK_ACTIONS_PER_SECOND"].flatMap(Double.init) ?? 4,
            faultSeconds: environment["SOAK_FAULT_SECONDS"].flatMap(Double.init) ?? 90,
            restartSeconds: environment["SOAK_RESTART_SECONDS"].flatMap(Double.init) ?? 600,
            declaredHosts: environment["SOAK_DECLARED"].flatMap { Int($0) } ?? 3,
            daemonPath: daemonPath, ctlPath: ctlPath)
        options.latencyLog = environment["SOAK_LATENCY_LOG"].flatMap { $0.isEmpty ? nil : $0 }
        options.daemonLog = environment["SOAK_DAEMON_LOG"].flatMap { $0.isEmpty ? nil : $0 }
        return options
    }
}

/// The programs a soak runs in the lab besides the daemon and `sleepproxyctl`.
public let soakTools = [
    "nc", "python3", "nsenter", "arping", "avahi-daemon", "dbus-daemon", "avahi-resolve", "avahi-browse",
]

/// What a soak saw: its figures (`soak_...` names and values, in order) and every violation of an invariant.
public struct SoakReport: Sendable {
    public var seed: UInt64
    public var figures: [(name: String, value: String)]
    public var violations: [String]

    /// The issue's aims, judged: `aim soak ... : value, met|missed`. Slopes and the last tenth against the first
    /// mean something only in a run of tens of minutes.
    public var aims: [String] {
        let figure = Dictionary(figures.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        func verdict(_ met: Bool?) -> String { met.map { $0 ? "met" : "missed" } ?? "not measured" }
        func number(_ name: String) -> Double? {
            figure[name].flatMap { Double($0.split(separator: " ").first ?? "") }
        }
        var aims = ["aim soak violations (0): \(violations.count), \(verdict(violations.isEmpty))"]
        let rss = number("soak_rss_anon_mb_per_hour")
        aims.append(
            "aim soak RssAnon slope after warm-up (< 1 MB/h; within each run of the daemon after its first two minutes, from the first tenth on and once the store is full (minute \(figure["soak_store_full_minute"] ?? "n/a")); \(figure["soak_slope_runs"] ?? "0") runs, \(figure["soak_slope_minutes"] ?? "0") min): \(figure["soak_rss_anon_mb_per_hour"] ?? "n/a") MB/h, \(verdict(rss.map { $0 < 1 }))"
        )
        let fds = number("soak_fds_per_hour")
        aims.append(
            "aim soak descriptors after warm-up (flat, |slope| < 1/h): \(figure["soak_fds_per_hour"] ?? "n/a")/h, \(verdict(fds.map { abs($0) < 1 }))"
        )
        let events = number("soak_store_events_max")
        aims.append(
            "aim soak store events within event_history (10,000): \(figure["soak_store_events_max"] ?? "n/a"), \(verdict(events.map { $0 <= 10_000 }))"
        )
        for kind in ["answer", "wake"] {
            let first = number("soak_\(kind)_p99_ms_first_tenth")
            let last = number("soak_\(kind)_p99_ms_last_tenth")
            let met: Bool? = if let first, let last { last <= first } else { nil }
            aims.append(
                "aim soak \(kind) p99, last tenth no worse than the first: \(last.map { String(format: "%.2f", $0) } ?? "n/a") against \(first.map { String(format: "%.2f", $0) } ?? "n/a") ms, \(verdict(met))"
            )
        }
        return aims
    }
}

/// The state the wire watchers and the background jobs share with the schedule.
private final class SoakShared: Sendable {
    let model: Mutex<SoakModel>
    /// The proxy's answers the waker heard.
    let heard = SoakAnswersHeard()
    /// Events counted by background jobs, added to the schedule's own.
    let counts = Mutex<[String: Int]>([:])
    /// avahi tools running now.
    let avahiJobs = Mutex(0)
    /// When the last fault (a reload, a stop, a crash, a full disk) began: a job that spans one is not judged.
    let lastFault = Mutex(Duration.zero)
    /// When the last stop or crash began: the proxy takes its hosts over again after the start.
    let lastRestart = Mutex(Duration.zero)
    /// Whether the store lags what the daemon holds (the disk full, or freed and not caught up yet), and the hosts
    /// it let go meanwhile (returns and forgets; Mac-style and Linux): a crash now brings them back from the store.
    let storeLags = Mutex(false)
    let lettingGoUnstored = Mutex<(mac: Set<Int>, linux: Set<Int>)>(([], []))
    /// Connections to a declared host in `wake.never_wake` still trying (their SYNs may yet reach the proxy), and
    /// when the last one gave up: a reload meanwhile could take the host out of `never_wake` before its SYN
    /// arrives, and the proxy would rightly wake it.
    let neverWakeConnections = Mutex<(trying: Int, lastEnded: Duration)>((0, .zero))
    /// The declared hosts, and the Linux hosts that register.
    let declared: Mutex<SoakDeclaredModel>
    let linux: Mutex<SoakLinuxModel>
    init(hosts: Int, declared: SoakDeclaredModel, linux: SoakLinuxModel) {
        model = Mutex(SoakModel(count: hosts))
        self.declared = Mutex(declared)
        self.linux = Mutex(linux)
    }

    func count(_ kind: String, _ amount: Int = 1) { counts.withLock { $0[kind, default: 0] += amount } }
    func violation(_ text: String) { model.withLock { $0.violations.append(text) } }
}

/// Runs the soak in `lab`: the daemon in the proxy host, the hosts' registrations and returns from the sleeper's
/// port of the bridge, the queries and connections from the waker. Stops at the first violation. `say` hears what
/// happens, a line at a time.
public func runSoak(_ options: SoakOptions, in lab: Lab, say: @escaping (String) -> Void) async throws
    -> SoakReport
{
    // Separate streams, so that a replay draws the same faults, the same actions and the same behaviour of each host
    // however the timing of the run moves what happens between them.
    var faultRandom = SeededGenerator(seed: options.seed ^ 0x5EED_FA17)
    var actionRandom = SeededGenerator(seed: options.seed ^ 0x5EED_AC71)
    var hostRandom = (0..<options.hosts).map { SeededGenerator(seed: options.seed &+ UInt64($0 + 1) &* 0x9E37_79B9) }
    var idRandom = SeededGenerator(seed: options.seed ^ 0x5EED_1D5)
    say("seed \(options.seed) (SOAK_SEED=\(options.seed) replays this schedule)")
    // Machines that never register, declared in the configuration, each a host of its own at 10.77.0.10 and up.
    var declaredRandom = SeededGenerator(seed: options.seed ^ 0x5EED_DEC1)
    let declaredHosts = try (0..<options.declaredHosts).map { index -> SoakDeclaredModel.Host in
        let extra = try lab.addHost("decl\(index)", number: UInt8(10 + index))
        guard let mac = MACAddress(extra.macString), let ipv4 = IPv4Address(extra.ipv4) else {
            throw LabError("the addresses of \(extra.name)")
        }
        return .init(
            index: index, name: extra.name, lab: extra, mac: mac, ipv4: ipv4, state: .awake(since: soakNow()),
            due: .zero)
    }
    let declaredConfiguration = SoakDeclaredModel.configurations(declaredHosts)
    // The Mac-style hosts live on a second network of the link, 10.78.0.0/16; the proxy, the sleeper and the
    // waker get an address on it before the daemon starts.
    for role in [Lab.Role.proxy, .sleeper, .waker] {
        let added = try await lab.run(
            role, ["ip", "address", "add", "10.78.0.\(role.number)/16", "dev", "eth0"])
        guard added.succeeded else { throw LabError("a second network for \(role.rawValue): \(added)") }
    }
    let daemon = try await SoakDaemon(
        lab: lab, daemonPath: options.daemonPath, ctlPath: options.ctlPath, stateMegabytes: 32,
        declared: declaredConfiguration.tables, neverWake: declaredConfiguration.neverWake)
    // Linux machines that register before they sleep (see SoakLinuxModel), at 10.77.0.20 and up.
    var linuxRandom = SeededGenerator(seed: options.seed ^ 0x5EED_1105)
    let linuxKinds: [(kind: SoakLinuxModel.Host.Kind, name: String)] = [(.client, "client0"), (.avahiOnly, "linux0")]
    let linuxHosts = try linuxKinds.enumerated().map { index, spec -> SoakLinuxModel.Host in
        let extra = try lab.addHost(spec.name, number: UInt8(20 + index))
        guard let mac = MACAddress(extra.macString), let ipv4 = IPv4Address(extra.ipv4) else {
            throw LabError("the addresses of \(extra.name)")
        }
        return .init(
            index: index, name: spec.name, kind: spec.kind, lab: extra, mac: mac, ipv4: ipv4,
            state: .awake(since: soakNow()))
    }
    let shared = SoakShared(
        hosts: options.hosts, declared: SoakDeclaredModel(hosts: declaredHosts),
        linux: SoakLinuxModel(hosts: linuxHosts))
    var linuxResponders: [AvahiInstance] = []
    for host in linuxHosts {
        linuxResponders.append(
            try await lab.startAvahi(
                on: host.lab, hostName: host.name,
                services: [AvahiService(name: host.name, type: "_ssh._tcp", port: 22)]))
    }
    let linuxAvahi = linuxResponders
    defer { for avahi in linuxAvahi { avahi.stop(graceful: false) } }
    let clientPath = URL(fileURLWithPath: options.daemonPath).deletingLastPathComponent()
        .appendingPathComponent("sleepproxy-client").path
    try "".write(toFile: lab.workDirectory + "/soak-client.toml", atomically: true, encoding: .utf8)
    @Sendable func clientArguments(_ command: String, _ host: SoakLinuxModel.Host) -> [String] {
        [
            clientPath, command, "--interface", "eth0", "--skip-wake-on-lan-check", "--state-directory",
            lab.workDirectory + "/soak-client-state-\(host.name)", "--config", lab.workDirectory + "/soak-client.toml",
        ]
    }
    let proxy = lab.host(.proxy)
    let proxyAddress = try requireAddress(proxy.ipv4)

    // The sleeper's port of the bridge carries the hosts: their registrations (as the flood's do, from the
    // sleeper's address), their returns (frames with their own MAC and address), and what the proxy sends them.
    let registrar = try lab.withNamespace(.sleeper) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
    defer { registrar.close() }
    let wire = try lab.withNamespace(.sleeper) { try CaptureStream(interface: "eth0") }
    defer { wire.close() }
    try wire.setFilter("ether proto 0x0842 or udp port 9")
    let querier = try lab.withNamespace(.waker) { try DatagramSocket(family: .ipv4, interface: "eth0", port: 0) }
    defer { querier.close() }
    guard let proxyMAC = MACAddress(proxy.macString), let wakerMAC = MACAddress(lab.host(.waker).macString),
        case .v4(let proxyIPv4) = proxyAddress, let wakerIPv4 = IPv4Address(lab.host(.waker).ipv4)
    else { throw LabError("the lab's addresses") }
    // The waker hears the proxy's answers, multicast and unicast, and asks as a full mDNS querier from port 5353.
    let wakerWire = try lab.withNamespace(.waker) { try CaptureStream(interface: "eth0") }
    defer { wakerWire.close() }
    try wakerWire.setFilter("udp src port 5353 and ether src \(proxy.macString)")
    // A real querier beside: avahi-daemon in the waker, asked through avahi-resolve and avahi-browse. Its log must
    // show no conflict.
    let avahi = try await lab.startAvahi(on: .waker, hostName: "soakwaker")
    defer { avahi.stop(graceful: true) }
    // A hostile sender on a host of its own, at a modest rate throughout: malformed and forged mDNS, registration
    // datagrams, SYNs and ARP for three decoys of its own and for addresses nobody holds.
    let hostile = try lab.addHost("hostile", number: 90)
    let decoys = (0..<3).map { number -> FloodTarget in
        let name = "decoy\(number)"
        let address = IPv4Address(bytes: [10, 77, 0, UInt8(50 + number)])!
        let mac = MACAddress(bytes: [0x02, 0xDE, 0x00, 0x00, 0x00, UInt8(number)])!
        let registration = ClientMessage.update(
            id: UInt16(0xDE00 + number), records: ClientMessage.host(named: name, address: .v4(address)),
            owner: OwnerOption(sequence: 1, primaryMAC: mac), lease: UpdateLease(lease: 60))
        return FloodTarget(
            hostLabels: [name, "local"], instanceLabels: [name, "_ssh", "_tcp", "local"],
            serviceLabels: ["_ssh", "_tcp", "local"], ipv4: "\(address)", ipv6: nil, ownerMAC: "\(mac)",
            ownerSequence: 1, registration: registration)
    }

    let watcher = Task {
        for await frame in wire.frames {
            // The proxy's magic packets; the waker's own, sent for the test, are judged where they are sent.
            guard let parsed = try? EthernetFrame(parsing: frame.bytes), parsed.header.source == proxyMAC,
                let target = parsed.magicPacket?.target ?? parsed.udp?.magicPacket?.target
            else { continue }
            shared.model.withLock { model in
                if let violation = model.magicPacket(for: target, at: frame.timestamp) {
                    model.violations.append(violation)
                }
            }
        }
    }
    defer { watcher.cancel() }
    let answerWatcher = Task {
        for await frame in wakerWire.frames {
            guard let parsed = try? EthernetFrame(parsing: frame.bytes),
                let answers = SoakWire.answers(in: parsed, from: proxyMAC)
            else { continue }
            for record in answers.records {
                if let index = SoakWire.index(record.name, prefix: "soak"), index < options.hosts {
                    shared.heard.add(
                        index, .init(time: frame.timestamp, address: record.address, multicast: answers.multicast))
                    if let violation = shared.model.withLock({
                        $0.answered(index, address: record.address, at: frame.timestamp)
                    }) {
                        shared.violation(violation)
                    }
                } else if let index = shared.linux.withLock({ $0.index(name: record.name) }) {
                    let (host, mustNot) = shared.linux.withLock {
                        ($0.hosts[index], $0.mustNotBeAnswered(index, at: frame.timestamp))
                    }
                    if record.address != host.ipv4 {
                        shared.violation(
                            "the Linux host \(host.name) answered for with \(record.address), not \(host.ipv4)")
                    } else if mustNot {
                        shared.violation(
                            "the Linux host \(host.name) answered for at \(SoakModel.text(frame.timestamp)), yet it is \(SoakLinuxModel.describe(host.state))"
                        )
                    }
                } else if let index = SoakWire.index(record.name, prefix: "decl"), index < options.declaredHosts {
                    let (host, mustNot) = shared.declared.withLock {
                        ($0.hosts[index], $0.mustNotBeAnswered(index, at: frame.timestamp))
                    }
                    if record.address != host.ipv4 {
                        shared.violation(
                            "the declared host \(host.name) answered for with \(record.address), not \(host.ipv4)")
                    } else if mustNot {
                        shared.violation(
                            "the declared host \(host.name) answered for at \(SoakModel.text(frame.timestamp)), yet it is \(SoakDeclaredModel.describe(host.state))\(shared.declared.withLock { $0.declaredSince[index] == nil } ? " and no longer declared" : "")"
                        )
                    }
                }
            }
        }
    }
    defer { answerWatcher.cancel() }
    // Each declared and Linux host's NIC: the proxy's magic packets for it.
    var nics: [CaptureStream] = []
    defer { for nic in nics { nic.close() } }
    var nicWatchers: [Task<Void, Never>] = []
    defer { for watcher in nicWatchers { watcher.cancel() } }
    func watchMagicPackets(
        at host: ExtraHost, for mac: MACAddress, judge: @escaping @Sendable (MACAddress, Duration) -> String?
    ) throws {
        let nic = try host.withNamespace { try CaptureStream(interface: "eth0") }
        nics.append(nic)
        try nic.setFilter("ether src \(proxy.macString) and (ether proto 0x0842 or udp port 9)")
        nicWatchers.append(
            Task {
                for await frame in nic.frames {
                    guard let parsed = try? EthernetFrame(parsing: frame.bytes),
                        let target = parsed.magicPacket?.target ?? parsed.udp?.magicPacket?.target, target == mac
                    else { continue }
                    if let violation = judge(target, frame.timestamp) { shared.violation(violation) }
                }
            })
    }
    for host in declaredHosts {
        try watchMagicPackets(at: host.lab, for: host.mac) { target, time in
            shared.declared.withLock { $0.magicPacket(for: target, at: time) }
        }
    }
    for host in linuxHosts {
        try watchMagicPackets(at: host.lab, for: host.mac) { target, time in
            shared.linux.withLock { $0.magicPacket(for: target, at: time) }
        }
    }

    try await daemon.start()
    shared.declared.withLock { $0.configure(0, at: soakNow()) }
    let hostileEnd = soakNow() + .milliseconds(Int(options.minutes * 60_000))
    let hostileSender = Task {
        var round = 0
        while !Task.isCancelled, hostileEnd - soakNow() > .seconds(5) {
            let plan = FloodPlan(
                framesPerSecond: 50, seconds: min(30, seconds(hostileEnd - soakNow())),
                seed: Int(options.seed % 1_000_000) + round, targets: decoys,
                unheldIPv4: (60..<100).map { "10.77.0.\($0)" })
            round += 1
            do {
                let report = try await hostile.runFlood(plan, proxy: proxy, workDirectory: lab.workDirectory)
                shared.count("hostile_frames", report.sent)
            } catch {
                if !Task.isCancelled { shared.violation("the hostile sender failed: \(error)") }
                return
            }
        }
    }
    defer { hostileSender.cancel() }
    var counts: [String: Int] = [:]
    func count(_ kind: String) { counts[kind, default: 0] += 1 }
    var samples: [SoakSample] = []
    var answerLatencies: [(at: Duration, latency: Duration)] = []
    var queryID: UInt16 = 1

    func violation(_ text: String) {
        shared.model.withLock { $0.violations.append(text) }
    }
    func uniform(_ low: Double, _ high: Double, _ random: inout SeededGenerator) -> Duration {
        .milliseconds(Int((low + (high - low) * Double(random.next() % 1_000_000) / 1_000_000) * 1000))
    }

    /// The host's records: its name's A, the reverse mapping, an ssh service on port 22, and for every third
    /// host Apple Remote Desktop's UDP service on port 3283.
    func records(_ host: SoakModel.Host) -> [DNSRecord] {
        let name = try! DNSName(labels: [host.name, "local"])
        var records = ClientMessage.host(
            name, address: .v4(host.ipv4), instance: try! DNSName(labels: [host.name, "_ssh", "_tcp", "local"]),
            servicesEntry: true)
        if host.offersUDPService {
            let instance = try! DNSName(labels: [host.name, "_net-assistant", "_udp", "local"])
            records += [
                DNSRecord(name: instance, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 3283, target: name))),
                DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try! TXTData([""]))),
                DNSRecord(name: "_net-assistant._udp.local.", ttl: 4500, rdata: .ptr(instance)),
            ]
        }
        return records
    }

    /// Registers `host` with its sequence number; the granted lease, or nil without an answer in 2 s.
    func register(_ host: SoakModel.Host) throws -> UInt32? {
        let id = UInt16(truncatingIfNeeded: idRandom.next())
        let bytes = ClientMessage.update(
            id: id, records: records(host), owner: OwnerOption(sequence: host.sequence, primaryMAC: host.mac),
            lease: UpdateLease(lease: options.lease))
        try registrar.send(
            bytes, to: Endpoint(address: proxyAddress, port: 5354), scopeID: 0,
            from: try requireAddress(lab.host(.sleeper).ipv4), interfaceIndex: 0)
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            guard let reply = try registrar.receive() else {
                usleep(2_000)
                continue
            }
            guard let message = try? DNSMessage(decoding: reply.bytes), message.id == id else { continue }
            guard message.flags.responseCode == .noError else { return nil }
            return message.optRecords.first?.optData?.updateLease?.lease ?? options.lease
        }
        return nil
    }

    /// The host is back: its announcement with the next sequence number, from its own MAC and address.
    func announceReturn(_ host: SoakModel.Host) throws { try announce(host, withOwner: true) }
    /// An announcement of the host's records from its own MAC and address, with OWNER and its sequence number or
    /// without.
    func announce(_ host: SoakModel.Host, withOwner: Bool) throws {
        let payload = ClientMessage.announcement(
            records: records(host),
            owner: withOwner ? OwnerOption(sequence: host.sequence, primaryMAC: host.mac) : nil)
        let frame = EthernetFrame.udp(
            UDPDatagram(sourcePort: 5353, destinationPort: 5353, payload: payload), sourceAddress: host.ipv4,
            destinationAddress: IPv4Address(bytes: [224, 0, 0, 251])!, source: host.mac,
            destination: MACAddress(bytes: [0x01, 0x00, 0x5E, 0x00, 0x00, 0xFB])!)
        try wire.inject(frame.serialized())
    }

    /// A legacy-unicast question for the host's A record from the waker; the answer's addresses and how long it
    /// took, or nil without an answer within `wait`. The time is the wire's, as for the other questions: from
    /// just before the question was sent to the reply's capture at the waker, so that how soon this loop got to
    /// read it does not count.
    func ask(_ host: SoakModel.Host, wait: Duration) throws -> (addresses: [IPv4Address], latency: Duration)? {
        let sent = soakNow()
        guard let answer = try ask(name: host.name, wait: wait) else { return nil }
        let deadline = ContinuousClock.now + .milliseconds(200)
        while ContinuousClock.now < deadline {
            if let heard = shared.heard.firstUnicast(host.index, since: sent) {
                return (answer.addresses, max(heard.time - sent, .zero))
            }
            usleep(1_000)
        }
        return answer
    }
    func ask(name: String, wait: Duration) throws -> (addresses: [IPv4Address], latency: Duration)? {
        queryID &+= 1
        let id = queryID
        let question = DNSMessage(
            id: id, flags: DNSFlags(response: false, opcode: .query),
            questions: [DNSQuestion(name: try DNSName(labels: [name, "local"]), type: .a)])
        let started = ContinuousClock.now
        try querier.send(
            try question.encoded(), to: Endpoint(address: proxyAddress, port: 5353), scopeID: 0,
            from: try requireAddress(lab.host(.waker).ipv4), interfaceIndex: 0)
        while case let left = wait - (ContinuousClock.now - started), left > .zero {
            guard let reply = try querier.receive() else {
                // A resolver blocks until its answer comes: looking every millisecond instead added up to one to
                // the latency of every answer timed here.
                var waiting = pollfd(fd: querier.fileDescriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&waiting, 1, Int32((left / .milliseconds(1)).rounded(.up)))
                continue
            }
            guard let message = try? DNSMessage(decoding: reply.bytes), message.id == id else { continue }
            let addresses = message.answers.compactMap { record -> IPv4Address? in
                if case .a(let address) = record.rdata { return address }
                return nil
            }
            return (addresses, ContinuousClock.now - started)
        }
        return nil
    }

    /// A question from the waker's port 5353, asked as `asking`; how long until the proxy's answer was heard, or nil
    /// without one within `answerWithin`.
    func askOnWire(_ host: SoakModel.Host, _ asking: SoakWire.Asking) async throws -> Duration? {
        let sent = soakNow()
        try wakerWire.inject(
            SoakWire.question(
                try DNSName(labels: [host.name, "local"]), asking: asking, source: (wakerMAC, wakerIPv4),
                proxy: (proxyMAC, proxyIPv4)))
        let deadline = ContinuousClock.now + options.answerWithin
        while ContinuousClock.now < deadline {
            let multicastSince: Duration? = asking == .multicast ? sent - .seconds(1) : nil
            if let heard = shared.heard.first(host.index, since: sent, multicastSince: multicastSince) {
                return max(heard.time - sent, .zero)
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }

    /// Whether host `index`, held since `since`, stayed held from `began` (a job's start) to now with no fault in
    /// between (or, `acrossReloads`, no stop or crash: a reload or a full disk must not interrupt what the proxy
    /// answers): only then is the job's result judged.
    @Sendable func heldThroughout(_ index: Int, since: Duration, began: Duration, acrossReloads: Bool = false) -> Bool {
        let fault = acrossReloads ? shared.lastRestart.withLock { $0 } : shared.lastFault.withLock { $0 }
        guard fault < began - .seconds(5) else { return false }
        return shared.model.withLock { model in
            let host = model.hosts[index]
            guard !host.registrationPending, case .held(let now, let leaseEnd) = host.state, now == since else {
                return false
            }
            return leaseEnd - soakNow() > .seconds(3)
        }
    }

    /// avahi-resolve of a held host's name, in the background: it must give the host's address.
    func avahiResolve(_ host: SoakModel.Host) {
        guard case .held(let since, _) = host.state else { return }
        shared.avahiJobs.withLock { $0 += 1 }
        let began = soakNow()
        Task.detached {
            defer { shared.avahiJobs.withLock { $0 -= 1 } }
            let result = try? await avahi.run(
                ["avahi-resolve", "-4", "--name", "\(host.name).local"], timeout: .seconds(20))
            guard heldThroughout(host.index, since: since, began: began) else { return }
            shared.count("avahi_resolves_judged")
            guard let result, result.stdout.contains("\(host.name).local\t\(host.ipv4)") else {
                shared.violation(
                    "avahi-resolve of \(host.name).local, held throughout, did not give \(host.ipv4): \(result.map { "\($0)" } ?? "no result")"
                )
                return
            }
        }
    }

    /// avahi-browse of the ssh services, in the background: every host held throughout must be found. Browsing
    /// alone, as a file browser lists what it finds: resolving every one of a few hundred services at once (on both
    /// IP versions, two thousand questions and more from one address) goes beyond `limits.queries_per_second`, and
    /// the proxy rightly leaves some unanswered; avahi-resolve asks for the hosts' names one at a time.
    func avahiBrowse(_ held: [SoakModel.Host]) {
        shared.avahiJobs.withLock { $0 += 1 }
        let began = soakNow()
        Task.detached {
            defer { shared.avahiJobs.withLock { $0 -= 1 } }
            // For 20 s, then interrupted as a user would: under churn, services come and go all the time and
            // `--terminate` waits for a quiet moment that may never come.
            let result: CommandResult
            do {
                result = try await avahi.run(
                    [
                        "timeout", "-s", "INT", "20", "avahi-browse", "--parsable", "--no-db-lookup", "_ssh._tcp",
                    ], timeout: .seconds(40))
            } catch {
                shared.violation("avahi-browse of _ssh._tcp in the waker: \(error)")
                return
            }
            let entries = AvahiBrowseEntry.parse(result.stdout).filter { $0.event == .added }
            var judged = 0
            for host in held {
                guard case .held(let since, _) = host.state,
                    heldThroughout(host.index, since: since, began: began, acrossReloads: true)
                else { continue }
                judged += 1
                if !entries.contains(where: { $0.name == host.name }) {
                    shared.violation(
                        "avahi-browse of _ssh._tcp did not find \(host.name), held throughout (\(entries.count) found; exit \(result.status), \(result.stderr.suffix(300)))"
                    )
                }
            }
            shared.count("avahi_browse_hosts_judged", judged)
        }
    }

    /// A connection attempt from the waker's own TCP stack (it sends SYNs, the proxy answers none), in the
    /// background.
    func connect(_ host: SoakModel.Host, port: Int) { connect(host.ipv4, port: port) }
    func connect(_ address: IPv4Address, port: Int, toNeverWake: Bool = false) {
        let address = "\(address)"
        if toNeverWake { shared.neverWakeConnections.withLock { $0.trying += 1 } }
        Task.detached {
            _ = try? await lab.run(.waker, ["nc", "-z", "-w", "1", address, String(port)])
            if toNeverWake { shared.neverWakeConnections.withLock { $0 = ($0.trying - 1, soakNow()) } }
        }
    }
    /// No connection to a `never_wake` host is trying, nor gave up within the last second (its last SYN is on
    /// its way, or in the proxy's capture buffer): the configuration may change.
    func neverWakeQuiet(_ now: Duration) -> Bool {
        shared.neverWakeConnections.withLock { $0.trying == 0 && now - $0.lastEnded > .seconds(1) }
    }

    // A fault every SOAK_FAULT_SECONDS on average, spread evenly between half and one and a half times that.
    let start = soakNow()
    let end = start + .milliseconds(Int(options.minutes * 60_000))
    var nextFault = start + uniform(0.5 * options.faultSeconds, 1.5 * options.faultSeconds, &faultRandom)
    var nextRestart = start + uniform(0.5 * options.restartSeconds, 1.5 * options.restartSeconds, &faultRandom)
    /// What `SOAK_LATENCY_LOG` gets: `start UNIXTIME` (to line up with the daemon's log), then `answer KIND AT MS`,
    /// `fault KIND AT`, `sample GENERATION AT RSSANON_KB [HEAP_ALLOCATED_KB HEAP_HELD_KB STORE_MEMORY_KB]`, with AT in
    /// seconds since the start.
    var latencyLines: [String] = []
    func noteAnswer(_ kind: String, at: Duration, _ latency: Duration) {
        answerLatencies.append((at, latency))
        latencyLines.append(
            "answer \(kind) " + String(format: "%.3f %.3f", seconds(at - start), seconds(latency) * 1000))
    }
    // Actions come as a Poisson process of SOAK_ACTIONS_PER_SECOND.
    func actionGap() -> Duration {
        let uniform = Double(actionRandom.next() % 1_000_000 + 1) / 1_000_001
        return .microseconds(Int(-log(uniform) / options.actionsPerSecond * 1_000_000))
    }
    var nextAction = start + .seconds(5) + actionGap()
    // The hosts fall asleep over the first twenty seconds; the declared ones stay awake a little longer.
    shared.model.withLock { model in
        for index in model.hosts.indices { model.hosts[index].due = start + uniform(0, 20, &hostRandom[index]) }
    }
    shared.declared.withLock { model in
        for index in model.hosts.indices { model.hosts[index].due = start + uniform(10, 40, &declaredRandom) }
    }

    /// A Linux host goes to sleep, in the background: `sleepproxy-client register`, or a registration as
    /// SleepProxyClient sends it; once acknowledged, it keeps talking for `talk` (the waker's avahi resolves its
    /// name: the host answers, and so does the proxy), then suspends (avahi frozen, addresses gone).
    @Sendable func goToSleep(_ host: SoakLinuxModel.Host, talk: Duration, sleepFor: Duration) async {
        let avahiThere = linuxAvahi[host.index]
        var acknowledged = false
        switch host.kind {
        case .client:
            let result = try? await host.lab.run(clientArguments("register", host), timeout: .seconds(30))
            acknowledged = result?.status == 0
        case .avahiOnly:
            let update = ClientMessage.update(
                id: UInt16(host.sequence) << 8 | UInt16(host.index),
                records: ClientMessage.host(named: host.name, address: .v4(host.ipv4)),
                owner: OwnerOption(sequence: host.sequence, primaryMAC: host.mac), lease: UpdateLease(lease: 7200))
            acknowledged =
                (try? await runOffCooperativePool {
                    try host.lab.withNamespace {
                        let socket = try DatagramSocket(family: .ipv4, interface: "eth0", port: 0)
                        defer { socket.close() }
                        try socket.send(
                            update, to: Endpoint(address: proxyAddress, port: 5354), scopeID: 0, from: .v4(host.ipv4),
                            interfaceIndex: 0)
                        let deadline = ContinuousClock.now + .seconds(2)
                        while ContinuousClock.now < deadline {
                            guard let reply = try socket.receive() else {
                                usleep(2_000)
                                continue
                            }
                            if let message = try? DNSMessage(decoding: reply.bytes), message.flags.isResponse {
                                return message.flags.responseCode == .noError
                            }
                        }
                        return false
                    }
                }) ?? false
        }
        let acknowledgedAt = soakNow()
        guard acknowledged else {
            shared.linux.withLock { model in
                model.hosts[host.index].pending = true
                model.hosts[host.index].busy = false
                model.hosts[host.index].due = soakNow() + .seconds(15)
            }
            shared.count("linux_registrations_unacknowledged")
            return
        }
        let talking = Task { _ = try? await avahi.run(["avahi-resolve", "-4", "--name", "\(host.name).local"]) }
        try? await Task.sleep(for: talk)
        talking.cancel()
        avahiThere.freeze()
        try? lab.sleep(host.lab)
        shared.linux.withLock { model in
            model.hosts[host.index].state = .asleep(since: acknowledgedAt)
            model.hosts[host.index].registeredOnce = true
            model.hosts[host.index].pending = false
            model.hosts[host.index].busy = false
            model.hosts[host.index].due = soakNow() + sleepFor
            if host.kind == .avahiOnly { model.hosts[host.index].sequence &+= 1 }
        }
        shared.count("linux_sleeps_\(host.kind.rawValue)")
    }

    /// A Linux host comes back, in the background: addresses again, avahi thawed (it probes its names again), and
    /// `sleepproxy-client return` for the client.
    @Sendable func comeBack(_ host: SoakLinuxModel.Host, awakeFor: Duration) async {
        try? lab.wake(host.lab)
        linuxAvahi[host.index].thaw()
        if host.kind == .client {
            let result = try? await host.lab.run(clientArguments("return", host), timeout: .seconds(30))
            if result?.status != 0 { shared.count("client_returns_failed") }
        }
        if shared.storeLags.withLock({ $0 }) { shared.lettingGoUnstored.withLock { _ = $0.linux.insert(host.index) } }
        shared.linux.withLock { model in
            model.hosts[host.index].state = .awake(since: soakNow())
            model.hosts[host.index].wake = nil
            model.hosts[host.index].firstMagic = nil
            model.hosts[host.index].wakeUncertain = false
            model.hosts[host.index].busy = false
            model.hosts[host.index].due = soakNow() + awakeFor
        }
        shared.count("linux_returns_\(host.kind.rawValue)")
    }

    /// A declared host comes back: its addresses again, and a first frame of its own (an ARP for its gateway), as a
    /// PC's network comes up after a resume; it sends no mDNS.
    func comeBack(_ host: inout SoakDeclaredModel.Host, at now: Duration) throws {
        try lab.wake(host.lab)
        let extra = host.lab
        Task.detached { _ = try? await extra.run(["arping", "-c", "1", "-w", "1", "-I", "eth0", Lab.gatewayIPv4]) }
        host.state = .awake(since: now)
        host.wake = nil
        host.firstMagic = nil
        host.returnAt = nil
        host.wakeUncertain = false
        host.due = now + uniform(20, 60, &declaredRandom)
    }
    var nextListingCheck = start + .seconds(5)
    var nextSample = start
    let tick = Duration.milliseconds(50)
    var lastReturn = Duration.zero
    var storeEventsMax = 0
    /// When the store was first seen holding event_history's 10,000 events: until then it grows, and the daemon's
    /// memory with it.
    var storeFullAt: Duration?
    var lastProgress = start
    // While the disk is full the store lags what the daemon holds, until the daemon says it caught up.
    var diskFullUntil: Duration?
    var diskFreedAt: Duration?
    let caughtUp = "lease store: caught up with what is held"
    var caughtUpBefore = 0
    var storeChecksAfter: Duration? = start

    func daemonSettled(_ now: Duration, _ seconds: Int = 5) -> Bool {
        guard let up = daemon.upSince else { return false }
        return now - up > .seconds(seconds)
    }

    /// The first violation and what the daemon said of its host then, for whoever replays the seed.
    func tellFirstViolation() -> Bool {
        guard let first = shared.model.withLock({ $0.violations.first }) else { return false }
        say("violation at \(SoakModel.text(soakNow())): \(first)")
        let log = daemon.process?.stderr ?? ""
        let names = shared.model.withLock { $0.hosts.map { ($0.name, "\($0.mac)") } }
        if let (name, mac) = names.first(where: { first.contains($0.0 + " ") || first.contains($0.0 + ",") }) {
            let lines = log.split(separator: "\n").filter {
                $0.contains(name + ".") || $0.lowercased().contains(mac.lowercased())
            }
            for line in lines.suffix(20) { say("daemon: \(line)") }
        }
        for line in log.split(separator: "\n").filter({ $0.contains(" limit ") }).suffix(5) {
            say("daemon (limits): \(line)")
        }
        for line in log.split(separator: "\n").suffix(15) { say("daemon (last lines): \(line)") }
        return true
    }

    /// What a Mac says between its registration and its sleep (PROTOCOL.md section 6, item 18): its records
    /// announced again, up to 4 times, 1, 2 and 4 s apart; with OWNER and the registered sequence number within
    /// 60 s of its last wake, without it otherwise. The proxy must hold on through all of it.
    var talks: [(at: Duration, index: Int, since: Duration, withOwner: Bool)] = []
    func scheduleTalk(_ host: SoakModel.Host, awakeSince: Duration?, acknowledged: Duration) {
        let announcements = 1 + Int(hostRandom[host.index].next() % 4)
        let withOwner = awakeSince.map { acknowledged - $0 < .seconds(60) } ?? false
        for offset in [0.05, 1.05, 3.05, 7.05].prefix(announcements) {
            talks.append((acknowledged + .milliseconds(Int(offset * 1000)), host.index, acknowledged, withOwner))
        }
    }
    func talk(_ now: Duration) throws {
        let due = talks.filter { $0.at <= now }
        guard !due.isEmpty else { return }
        talks.removeAll { $0.at <= now }
        for talk in due {
            let host = shared.model.withLock { $0.hosts[talk.index] }
            // Woken, forgotten or registered again meanwhile: it no longer talks as a host falling asleep.
            guard case .held(let since, _) = host.state, since == talk.since else { continue }
            try announce(host, withOwner: talk.withOwner)
            count(talk.withOwner ? "talk_announcements_owner" : "talk_announcements_plain")
        }
    }

    var browsedGeneration = 0
    var told = false
    while soakNow() < end {
        if tellFirstViolation() {
            told = true
            break
        }
        var now = soakNow()
        try talk(now)

        // Faults, never within 2 s of a return: the release comes from an announcement nobody acknowledges, and a
        // proxy killed before it saw it would rightly hold the host again. Nor while a connection to a `never_wake`
        // host may still reach the proxy (`neverWakeQuiet`).
        if let until = diskFullUntil, now >= until {
            try daemon.freeDisk()
            diskFullUntil = nil
            diskFreedAt = now
            caughtUpBefore = SoakDaemon.count(caughtUp, in: daemon.process?.stderr ?? "")
            storeChecksAfter = now + .seconds(30)
            say("disk freed")
        }
        if now >= nextFault || now >= nextRestart, now - lastReturn > .seconds(2), diskFullUntil == nil,
            neverWakeQuiet(now)
        {
            // 0: a reload, 1: a full disk (a reload twice as often), 2: a restart, 3: a crash.
            let fault: UInt64
            if now >= nextRestart {
                nextRestart = now + uniform(0.5 * options.restartSeconds, 1.5 * options.restartSeconds, &faultRandom)
                fault = 2 + faultRandom.next() % 2
            } else {
                nextFault = now + uniform(0.5 * options.faultSeconds, 1.5 * options.faultSeconds, &faultRandom)
                fault = faultRandom.next() % 3 == 2 ? 1 : 0
            }
            shared.lastFault.withLock { $0 = now }
            latencyLines.append("fault \(fault) " + String(format: "%.3f", seconds(now - start)))
            if fault >= 2 {
                shared.lastRestart.withLock { $0 = now }
                // Hosts let go while the store lagged come back from it with the start, held as they were until
                // they register again (a real host would speak up sooner: its address is claimed): they are not
                // judged until then, as after an unacknowledged registration, and may be woken.
                let unstored = shared.lettingGoUnstored.withLock { $0 }
                shared.model.withLock { model in
                    // Those registered again since were acknowledged, and stored.
                    for index in unstored.mac {
                        switch model.hosts[index].state {
                        case .awake, .forgotten: break
                        case .held, .waking, .expired: continue
                        }
                        model.hosts[index].registrationPending = true
                        model.hosts[index].wakeAllowedUntil = max(
                            model.hosts[index].wakeAllowedUntil, now + .seconds(Int(options.lease)) + .seconds(60))
                    }
                }
                shared.linux.withLock { model in
                    for index in unstored.linux {
                        if case .awake = model.hosts[index].state { model.hosts[index].pending = true }
                    }
                }
                shared.storeLags.withLock { $0 = false }
                shared.lettingGoUnstored.withLock { $0 = ([], []) }
                if !unstored.mac.isEmpty || !unstored.linux.isEmpty {
                    say(
                        "\(unstored.mac.count + unstored.linux.count) hosts let go while the store lagged: not judged until they register again"
                    )
                }
            }
            switch fault {
            case 0:
                try await daemon.reload()
                shared.declared.withLock { $0.configure(daemon.configurationIndex, at: soakNow()) }
                count("reloads")
                say("reload (SIGHUP) \(counts["reloads"] ?? 0)")
            case 2:
                let took = try await daemon.stop(SIGTERM)
                try await daemon.start()
                shared.declared.withLock { $0.started(at: soakNow()) }
                count("restarts")
                say("restart (SIGTERM): stopped in \(took)")
            case 3:
                _ = try await daemon.stop(SIGKILL)
                try await daemon.start()
                shared.declared.withLock { $0.started(at: soakNow()) }
                count("crashes")
                say("crash (SIGKILL) and start")
            default:
                // The state directory full for a while: registrations go unacknowledged, what is held stays held.
                try daemon.fillDisk()
                shared.storeLags.withLock { $0 = true }
                let length = uniform(10, 30, &faultRandom)
                diskFullUntil = now + length
                storeChecksAfter = nil
                count("disk_full")
                say("disk full for \(length)")
            }
            shared.model.withLock { model in
                for index in model.hosts.indices {
                    if case .waking = model.hosts[index].state, model.hosts[index].firstMagic == nil {
                        model.hosts[index].wakeUncertain = true
                    }
                }
            }
            shared.declared.withLock { model in
                for index in model.hosts.indices where model.hosts[index].wake != nil {
                    if model.hosts[index].firstMagic == nil { model.hosts[index].wakeUncertain = true }
                }
            }
            shared.linux.withLock { model in
                for index in model.hosts.indices where model.hosts[index].wake != nil {
                    if model.hosts[index].firstMagic == nil { model.hosts[index].wakeUncertain = true }
                }
            }
            continue
        }

        // What each host does on its own: sleep (register), renew, let its lease run out, return after a wake.
        if daemonSettled(now, 1) {
            // Unacknowledged registrations (a full disk) each wait their 2 s: the rest waits for the next round.
            for index in 0..<options.hosts where soakNow() - now < .seconds(1) {
                var host = shared.model.withLock { $0.hosts[index] }
                let before = host
                switch host.state {
                case .awake, .forgotten, .expired:
                    guard now >= host.due else { break }
                    if case .awake = host.state {} else { host.sequence &+= 1 }
                    // The proxy holds it, and answers for it, before the acknowledgement arrives.
                    shared.model.withLock { $0.hosts[index].registrationPending = true }
                    if let granted = try register(host) {
                        let acknowledged = soakNow()
                        let leaseEnd = acknowledged + .seconds(Int(granted))
                        host.registeredOnce = true
                        host.registrationPending = false
                        host.state = .held(since: acknowledged, leaseEnd: leaseEnd)
                        host.skipsRenewal = hostRandom[index].next() % 7 == 0
                        host.due =
                            host.skipsRenewal ? leaseEnd : acknowledged + .milliseconds(Int(granted) * 800)
                        count("registrations")
                        if case .awake(let since) = before.state {
                            scheduleTalk(host, awakeSince: since == .zero ? nil : since, acknowledged: acknowledged)
                        } else {
                            scheduleTalk(host, awakeSince: nil, acknowledged: acknowledged)
                        }
                    } else {
                        if case .awake = before.state {} else { host.sequence = before.sequence }
                        host.due = now + .seconds(2)
                        // Unacknowledged (a full disk): the daemon may hold it all the same, and wake it when that
                        // lease ends.
                        host.registrationPending = true
                        host.wakeAllowedUntil = max(
                            host.wakeAllowedUntil, now + .seconds(Int(options.lease)) + .seconds(60))
                    }
                case .held(let since, let leaseEnd):
                    guard now >= host.due else { break }
                    if now >= leaseEnd {
                        host.state = .expired(at: leaseEnd)
                        host.wakeAllowedUntil = leaseEnd + .seconds(60)
                        host.due = leaseEnd + .seconds(65)
                        count("expiries")
                    } else if let granted = try register(host) {
                        let acknowledged = soakNow()
                        host.registrationPending = false
                        host.state = .held(since: since, leaseEnd: acknowledged + .seconds(Int(granted)))
                        host.due = acknowledged + .milliseconds(Int(granted) * 800)
                        count("renewals")
                    } else {
                        host.due = now + .seconds(1)
                        // An unacknowledged renewal may still have extended the lease in the daemon.
                        host.registrationPending = true
                        host.wakeAllowedUntil = max(
                            host.wakeAllowedUntil, now + .seconds(Int(options.lease)) + .seconds(60))
                    }
                case .waking(let at, let trigger):
                    if let returnAt = host.returnAt, now >= returnAt {
                        host.sequence &+= 1
                        host.leaseEndWhileWaking = nil
                        try announceReturn(host)
                        if shared.storeLags.withLock({ $0 }) {
                            shared.lettingGoUnstored.withLock { _ = $0.mac.insert(index) }
                        }
                        host.state = .awake(since: soakNow())
                        host.wakeAllowedUntil = soakNow() + .seconds(3)
                        host.firstMagic = nil
                        host.returnAt = nil
                        host.wakeUncertain = false
                        host.due = now + uniform(5, 30, &hostRandom[index])
                        lastReturn = soakNow()
                        count("returns")
                    } else if let first = host.firstMagic, host.returnAt == nil {
                        // Booting: back between half a second and two after the first magic packet.
                        host.returnAt = first + uniform(0.5, 2, &hostRandom[index])
                    } else if host.firstMagic == nil, now - at > .seconds(10), daemonSettled(now, 10) {
                        if host.wakeUncertain {
                            // The request died with the daemon: the host sleeps on, held.
                            host.state = .held(since: at, leaseEnd: host.leaseEndWhileWaking ?? at)
                            host.leaseEndWhileWaking = nil
                            host.wakeUncertain = false
                            host.wakeAllowedUntil = now + .seconds(5)
                            host.due = now
                            count("wakes_lost_to_a_fault")
                        } else {
                            violation("\(host.name) was not woken within 10 s of \(trigger)")
                        }
                    }
                }
                if host.state != before.state || host.due != before.due || host.returnAt != before.returnAt
                    || host.sequence != before.sequence
                {
                    shared.model.withLock { model in
                        // The watcher may have seen the first magic packet meanwhile.
                        let seen = model.hosts[index].firstMagic
                        model.hosts[index] = host
                        if case .waking = host.state, host.firstMagic == nil { model.hosts[index].firstMagic = seen }
                    }
                }
            }
        }

        // What each declared host does on its own: sleeps, comes back after a magic packet (or by itself, as when
        // someone opens its lid).
        for index in 0..<options.declaredHosts {
            var host = shared.declared.withLock { $0.hosts[index] }
            switch host.state {
            case .awake:
                guard now >= host.due else { break }
                try lab.sleep(host.lab)
                host.state = .asleep(since: now)
                host.due = now + uniform(90, 240, &declaredRandom)
                count("declared_sleeps")
            case .asleep:
                if let first = host.firstMagic, host.returnAt == nil {
                    host.returnAt = first + uniform(0.5, 2, &declaredRandom)
                }
                if let returnAt = host.returnAt, now >= returnAt {
                    try comeBack(&host, at: now)
                    count("declared_returns_when_woken")
                } else if host.wake == nil, now >= host.due {
                    try comeBack(&host, at: now)
                    count("declared_returns_by_themselves")
                } else if let wake = host.wake, host.firstMagic == nil, now - wake.at > .seconds(10),
                    daemonSettled(now, 10)
                {
                    if host.wakeUncertain {
                        host.wake = nil
                        host.wakeUncertain = false
                        count("wakes_lost_to_a_fault")
                    } else {
                        violation("the declared host \(host.name) was not woken within 10 s of \(wake.trigger)")
                        host.wake = nil
                    }
                }
            }
            shared.declared.withLock { model in
                // The NIC's watcher may have seen the first magic packet meanwhile.
                let seen = model.hosts[index].firstMagic
                model.hosts[index] = host
                if host.wake != nil, host.firstMagic == nil { model.hosts[index].firstMagic = seen }
            }
        }

        // What each Linux host does on its own: sleeps after registering, comes back a second after the first magic
        // packet of a wake, or by itself.
        for index in linuxHosts.indices {
            let host = shared.linux.withLock { $0.hosts[index] }
            guard !host.busy else { continue }
            switch host.state {
            case .awake:
                guard now >= host.due, daemonSettled(now, 5) else { break }
                let talk = uniform(1, 3, &linuxRandom)
                let sleepFor = uniform(60, 180, &linuxRandom)
                shared.linux.withLock { $0.hosts[index].busy = true }
                Task.detached { await goToSleep(host, talk: talk, sleepFor: sleepFor) }
            case .asleep:
                let comesBack: Bool
                if let first = host.firstMagic {
                    comesBack = now - first > .seconds(1)
                } else if let wake = host.wake, now - wake.at > .seconds(10), daemonSettled(now, 10) {
                    if host.wakeUncertain {
                        shared.linux.withLock { $0.hosts[index].wake = nil }
                        count("wakes_lost_to_a_fault")
                    } else {
                        violation("the Linux host \(host.name) was not woken within 10 s of \(wake.trigger)")
                    }
                    comesBack = false
                } else {
                    comesBack = host.wake == nil && now >= host.due
                }
                guard comesBack else { break }
                let awakeFor = uniform(20, 60, &linuxRandom)
                shared.linux.withLock { $0.hosts[index].busy = true }
                Task.detached { await comeBack(host, awakeFor: awakeFor) }
            }
        }

        // Space back for 30 s: every registration unacknowledged meanwhile has been acknowledged since.
        if diskFullUntil == nil, let freed = diskFreedAt, now - freed > .seconds(30), daemonSettled(now, 30) {
            // Hosts that retry every second or two; one whose lease ran out meanwhile sleeps again only later.
            let stuck = shared.model.withLock { model in
                model.hosts.filter { host in
                    if case .expired = host.state { return false }
                    return host.registrationPending
                }.map(\.name)
            }
            if !stuck.isEmpty {
                violation(
                    "registrations of \(stuck.joined(separator: ", ")) still unacknowledged 30 s after space returned")
            }
        }

        // Random actions on hosts in a steady state, judged by the time now.
        now = soakNow()
        if now >= nextAction, daemonSettled(now) {
            nextAction = now + actionGap()
            let snapshot = shared.model.withLock { $0.hosts }
            let held = snapshot.filter {
                guard !$0.registrationPending else { return false }
                if case .held(let since, let leaseEnd) = $0.state {
                    return now - since > .seconds(2) && leaseEnd - now > .seconds(6)
                }
                return false
            }
            let awake = snapshot.filter {
                guard !$0.registrationPending else { return false }
                if case .awake(let since) = $0.state { return $0.registeredOnce && now - since > .seconds(8) }
                return false
            }
            // A connection needs the address taken over: the proxy claims it after probing, a few seconds after
            // the registration (the waker's ARP would go unanswered before).
            let claimed = held.filter {
                if case .held(let since, _) = $0.state { return now - since > .seconds(10) }
                return false
            }
            let roll = actionRandom.next() % 100
            let pick = actionRandom.next()
            // One action in eight is on a declared host, away from a fault (a reload changes what is declared), one
            // in sixteen on a Linux host.
            let special = actionRandom.next() % 16
            func chosenIndex(_ candidates: [Int]) -> Int? {
                candidates.isEmpty ? nil : candidates[Int(pick % UInt64(candidates.count))]
            }
            /// A legacy question for `name`, held by the proxy for `what`: answered in time with `address`.
            func expectAnswer(_ name: String, _ address: IPv4Address, _ what: String) throws {
                if let answer = try ask(name: name, wait: options.answerWithin) {
                    noteAnswer("legacy-other", at: now, answer.latency)
                    if !answer.addresses.contains(address) {
                        violation("\(what) \(name) answered with \(answer.addresses), not \(address)")
                    }
                } else {
                    violation("\(what) \(name), held, was not answered within \(options.answerWithin)")
                }
            }
            /// A legacy question for `name`, awake: the proxy must have let it go.
            func expectNoAnswer(_ name: String, _ what: String) throws {
                if let answer = try ask(name: name, wait: .milliseconds(300)) {
                    violation("\(what) \(name), awake, was answered for: \(answer.addresses)")
                }
            }
            if special == 2, daemonSettled(now, 10) {
                let model = shared.linux.withLock { $0 }
                let heldLinux = model.hosts.indices.filter { model.held($0, at: now) }
                let awakeLinux = model.hosts.indices.filter {
                    if case .awake(let since) = model.hosts[$0].state, !model.hosts[$0].busy {
                        return model.hosts[$0].registeredOnce && !model.hosts[$0].pending && now - since > .seconds(15)
                    }
                    return false
                }
                switch roll % 10 {
                case 0..<5:
                    guard let index = chosenIndex(heldLinux) else { break }
                    count("linux_queries")
                    try expectAnswer(model.hosts[index].name, model.hosts[index].ipv4, "the Linux host")
                case 5:
                    guard let index = chosenIndex(awakeLinux) else { break }
                    count("linux_queries_for_awake")
                    // The host answers for itself, to port 5353 only: a legacy question from another port hears only
                    // the proxy, which must have let go.
                    try expectNoAnswer(model.hosts[index].name, "the Linux host")
                default:
                    guard let index = chosenIndex(heldLinux) else { break }
                    count("linux_connections")
                    shared.linux.withLock { $0.hosts[index].wake = (soakNow(), "a SYN to port 22") }
                    connect(model.hosts[index].ipv4, port: 22)
                }
            } else if special < 2, options.declaredHosts > 0, now - shared.lastFault.withLock({ $0 }) > .seconds(3) {
                let model = shared.declared.withLock { $0 }
                let taken = model.hosts.indices.filter { model.takenOver($0, at: now, daemonUp: daemon.upSince) }
                let awakeDeclared = model.hosts.indices.filter {
                    if case .awake(let since) = model.hosts[$0].state { return now - since > .seconds(10) }
                    return false
                }
                switch roll % 10 {
                case 0..<4:
                    guard let index = chosenIndex(taken) else { break }
                    count("declared_queries")
                    try expectAnswer(model.hosts[index].name, model.hosts[index].ipv4, "the declared host")
                case 4:
                    guard let index = chosenIndex(awakeDeclared) else { break }
                    count("declared_queries_for_awake")
                    try expectNoAnswer(model.hosts[index].name, "the declared host")
                case 5..<9:
                    guard let index = chosenIndex(taken) else { break }
                    if model.neverWake.contains(index) {
                        // wake.never_wake: answered for, never woken by traffic.
                        count("declared_connections_never_wake")
                    } else {
                        count("declared_connections")
                        shared.declared.withLock { $0.hosts[index].wake = (soakNow(), "a SYN to port 22") }
                    }
                    connect(model.hosts[index].ipv4, port: 22, toNeverWake: model.neverWake.contains(index))
                default:
                    guard let index = chosenIndex(taken) else { break }
                    count("declared_connections_to_other_ports")
                    connect(model.hosts[index].ipv4, port: 8080)
                }
            } else {
                func chosen(_ candidates: [SoakModel.Host]) -> SoakModel.Host? {
                    candidates.isEmpty ? nil : candidates[Int(pick % UInt64(candidates.count))]
                }
                /// The host is to be woken by the proxy for `trigger`, within 10 s.
                func expectWake(_ host: SoakModel.Host, for trigger: String) {
                    shared.model.withLock { model in
                        if case .held(_, let leaseEnd) = host.state {
                            model.hosts[host.index].leaseEndWhileWaking = leaseEnd
                        }
                        model.hosts[host.index].state = .waking(at: soakNow(), trigger: trigger)
                        model.hosts[host.index].wakeAllowedUntil = soakNow() + .seconds(3_600)
                        model.hosts[host.index].firstMagic = nil
                    }
                }
                // Addresses are taken over again a few seconds after a start.
                let claimedNow = daemonSettled(now, 10) ? claimed : []
                /// The hosts a browse starting now must find: held for 10 s, and for 10 s more.
                func browsable() -> [SoakModel.Host] {
                    held.filter { host in
                        if case .held(let since, let leaseEnd) = host.state {
                            return now - since > .seconds(10) && leaseEnd - now > .seconds(10)
                        }
                        return false
                    }
                }
                // A browse soon after each start of the daemon, besides those the schedule draws: a browse that
                // spans a stop or a crash is not judged, and in a short run they come often.
                if browsedGeneration != daemon.generation, daemonSettled(now, 6),
                    shared.avahiJobs.withLock({ $0 }) < 3, case let hosts = browsable(), !hosts.isEmpty
                {
                    browsedGeneration = daemon.generation
                    count("avahi_browses")
                    avahiBrowse(hosts)
                }
                switch roll {
                case 0..<30:
                    guard let host = chosen(held) else { break }
                    count("queries")
                    if let answer = try ask(host, wait: options.answerWithin) {
                        noteAnswer("legacy", at: now, answer.latency)
                        if !answer.addresses.contains(host.ipv4) {
                            violation("\(host.name) answered with \(answer.addresses), not \(host.ipv4)")
                        }
                    } else {
                        violation("\(host.name), held, was not answered within \(options.answerWithin)")
                    }
                case 30..<48:
                    // A full querier's questions: multicast (QM), multicast asking for a unicast answer (QU), and
                    // unicast to the proxy (unicast assist).
                    guard let host = chosen(held) else { break }
                    let asking: SoakWire.Asking = roll < 38 ? .multicast : roll < 43 ? .unicastResponse : .unicastAssist
                    count("queries_\(asking.rawValue)")
                    if let latency = try await askOnWire(host, asking) {
                        noteAnswer(asking.rawValue, at: now, latency)
                    } else {
                        violation(
                            "\(host.name), held, was not answered within \(options.answerWithin) of a \(asking.rawValue) question"
                        )
                    }
                case 48..<56:
                    guard let host = chosen(awake) else { break }
                    count("queries_for_awake")
                    if let answer = try ask(host, wait: .milliseconds(300)) {
                        violation("\(host.name), awake and let go, was answered for: \(answer.addresses)")
                    }
                case 56..<62:
                    guard let host = chosen(held), shared.avahiJobs.withLock({ $0 }) < 3 else { break }
                    count("avahi_resolves")
                    avahiResolve(host)
                case 62:
                    guard shared.avahiJobs.withLock({ $0 }) < 3 else { break }
                    count("avahi_browses")
                    avahiBrowse(browsable())
                case 63..<72:
                    guard let host = chosen(claimedNow) else { break }
                    count("connections_to_registered_ports")
                    expectWake(host, for: "a SYN to port 22")
                    connect(host, port: 22)
                case 72..<77:
                    guard let host = chosen(claimedNow) else { break }
                    count("connections_to_other_ports")
                    connect(host, port: 23)
                case 77..<80:
                    // Apple Remote Desktop: its wake datagram wakes a host that offers it; a console's poll to the same
                    // port does not (PROTOCOL.md, mDNS.c `mDNSCoreReceiveRawTransportPacket`).
                    guard let host = chosen(claimedNow.filter(\.offersUDPService)) else { break }
                    let wakes = roll == 77
                    count(wakes ? "remote_desktop_wakes" : "remote_desktop_polls")
                    if wakes { expectWake(host, for: "Apple Remote Desktop's wake datagram") }
                    try querier.send(
                        wakes ? [0x13, 0x88] + [UInt8](repeating: 0, count: 108) : [0x13, 0x89, 0, 0],
                        to: Endpoint(address: .v4(host.ipv4), port: 3283), scopeID: 0, from: .v4(wakerIPv4),
                        interfaceIndex: 0)
                case 80..<83:
                    guard let host = chosen(claimedNow) else { break }
                    count("datagrams_to_other_ports")
                    try querier.send(
                        Array("soak".utf8), to: Endpoint(address: .v4(host.ipv4), port: 5000), scopeID: 0,
                        from: .v4(wakerIPv4), interfaceIndex: 0)
                case 83..<85:
                    // A magic packet to the address the proxy holds reaches the proxy, not the host, which wakes the host
                    // for it as a phone app that cannot broadcast meant.
                    guard let host = chosen(claimedNow) else { break }
                    count("magic_packets_to_held_addresses")
                    expectWake(host, for: "a magic packet to its held address")
                    try querier.send(
                        MagicPacket(target: host.mac).bytes, to: Endpoint(address: .v4(host.ipv4), port: 9), scopeID: 0,
                        from: .v4(wakerIPv4), interfaceIndex: 0)
                case 85..<87:
                    // A magic packet broadcast by another machine wakes the host itself; it comes back as after any
                    // wake, and the proxy must let it go and send it nothing.
                    guard let host = chosen(held) else { break }
                    count("magic_packets_from_others")
                    let at = soakNow()
                    shared.model.withLock { model in
                        if case .held(_, let leaseEnd) = host.state {
                            model.hosts[host.index].leaseEndWhileWaking = leaseEnd
                        }
                        model.hosts[host.index].state = .waking(at: at, trigger: "a magic packet from the waker")
                        model.hosts[host.index].firstMagic = at
                        model.hosts[host.index].wakeAllowedUntil = at
                    }
                    try wakerWire.inject(
                        EthernetFrame.wakeOnLAN(
                            MagicPacket(target: host.mac), source: wakerMAC, destination: .broadcast
                        )
                        .paddedToMinimumLength().serialized())
                case 87..<89:
                    // Another machine claims a held address: the proxy wakes the host to defend it (PROTOCOL.md 3.2).
                    guard let host = chosen(claimedNow) else { break }
                    count("address_conflicts")
                    expectWake(host, for: "an address conflict")
                    let stranger = MACAddress(bytes: [0x02, 0x66, 0x00, 0x00, 0x00, UInt8(host.index & 0xFF)])!
                    try wakerWire.inject(
                        EthernetFrame.arpAnnouncement(of: host.ipv4, source: stranger).paddedToMinimumLength()
                            .serialized())
                case 89..<95:
                    guard let host = chosen(held) else { break }
                    count("manual_wakes")
                    expectWake(host, for: "sleepproxyctl wake")
                    let woken = try daemon.ctl(["wake", "\(host.mac)"])
                    if !woken.succeeded { violation("sleepproxyctl wake \(host.name) failed: \(woken)") }
                default:
                    guard let host = chosen(held) else { break }
                    count("forgets")
                    let forgotten = try daemon.ctl(["forget", "\(host.mac)"])
                    if !forgotten.succeeded { violation("sleepproxyctl forget \(host.name) failed: \(forgotten)") }
                    if shared.storeLags.withLock({ $0 }) {
                        shared.lettingGoUnstored.withLock { _ = $0.mac.insert(host.index) }
                    }
                    shared.model.withLock { model in
                        model.hosts[host.index].state = .forgotten(at: soakNow())
                        model.hosts[host.index].due = soakNow() + .seconds(10)
                    }
                }
            }
        }

        // What the daemon lists against what it must.
        if now >= nextListingCheck, daemonSettled(now) {
            nextListingCheck = now + .seconds(5)
            let expected = shared.model.withLock { $0.expectations(at: now) }
            if let listed = daemon.hosts() {
                let macs = Set(listed.map { $0.ownerMAC.lowercased() })
                let snapshot = shared.model.withLock { $0.hosts }
                for index in expected.listed where !macs.contains("\(snapshot[index].mac)".lowercased()) {
                    violation(
                        "\(snapshot[index].name) is not listed by sleepproxyctl hosts, yet it is \(SoakModel.describe(snapshot[index].state))"
                    )
                }
                for index in expected.notListed where macs.contains("\(snapshot[index].mac)".lowercased()) {
                    violation(
                        "\(snapshot[index].name) is listed by sleepproxyctl hosts, yet it is \(SoakModel.describe(snapshot[index].state))"
                    )
                }
                count("listing_checks")
                // A real responder on the link never sees a conflict with what the proxy answers.
                for instance in [avahi] + linuxAvahi {
                    if let line = instance.log.split(separator: "\n").first(where: {
                        $0.lowercased().contains("conflict")
                    }) {
                        violation(
                            "avahi-daemon in \(instance.extraHost?.name ?? "the waker") logged a conflict: \(line)")
                    }
                }
                // The store, read as another process reads it, agrees for the same hosts.
                // After a full disk, the store is judged again once the daemon says it caught up (or 30 s on).
                if let after = storeChecksAfter, after > now,
                    SoakDaemon.count(caughtUp, in: daemon.process?.stderr ?? "") > caughtUpBefore
                {
                    storeChecksAfter = now
                    shared.storeLags.withLock { $0 = false }
                    shared.lettingGoUnstored.withLock { $0 = ([], []) }
                }
                if let after = storeChecksAfter, now >= after,
                    let store = SoakStore.read(keeper: daemon.keeper.pid, directory: daemon.stateDirectory)
                {
                    // Judged as caught up from now on (30 s after space returned, if the daemon did not say so).
                    shared.storeLags.withLock { $0 = false }
                    shared.lettingGoUnstored.withLock { $0 = ([], []) }
                    for index in expected.listed where !store.owners.contains("\(snapshot[index].mac)".lowercased()) {
                        violation(
                            "\(snapshot[index].name) is listed by sleepproxyctl but not in the lease store, yet it is \(SoakModel.describe(snapshot[index].state))"
                        )
                    }
                    for index in expected.notListed where store.owners.contains("\(snapshot[index].mac)".lowercased()) {
                        violation(
                            "\(snapshot[index].name) is still in the lease store, yet it is \(SoakModel.describe(snapshot[index].state))"
                        )
                    }
                    storeEventsMax = max(storeEventsMax, store.events)
                    if store.events >= 10_000, storeFullAt == nil { storeFullAt = now }
                    // event_history (10,000 by default), with a batch's worth of slack before trimming.
                    if store.events > 10_000 + 256 {
                        violation("the store keeps \(store.events) events, above event_history (10,000)")
                    }
                    count("store_checks")
                }
            }
        }

        // Resources.
        if now >= nextSample, let pid = daemon.process?.pid {
            nextSample = now + .seconds(10)
            if var sample = SoakSample.take(
                pid: pid, generation: daemon.generation, stateDirectory: daemon.stateDirectoryHere)
            {
                sample.memory = await daemon.memoryGauges()
                samples.append(sample)
                // Every five minutes, where things stand.
                if sample.time - lastProgress >= .seconds(300) {
                    lastProgress = sample.time
                    let minutes = Int(seconds(sample.time - start) / 60)
                    let events = counts.keys.sorted().map { "\($0) \(counts[$0] ?? 0)" }.joined(separator: ", ")
                    say(
                        "\(minutes) min: RssAnon \(sample.rssAnonKB / 1024) MB, RSS \(sample.rssKB / 1024) MB, \(sample.fds) descriptors, \(sample.threads) threads, store \(sample.storeBytes / 1024) KiB; \(events)"
                    )
                }
            }
        }
        try await Task.sleep(for: tick)
    }
    if !told { _ = tellFirstViolation() }
    _ = try await daemon.stop(SIGTERM)
    watcher.cancel()
    if let path = options.daemonLog {
        try? daemon.logs.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }

    hostileSender.cancel()
    for (kind, amount) in shared.counts.withLock({ $0 }) { counts[kind, default: 0] += amount }
    let violations = shared.model.withLock { $0.violations }
    let wakes = shared.model.withLock { $0.wakeLatencies }
    if let path = options.latencyLog {
        let lines =
            ["start " + String(format: "%.3f", seconds(start))] + latencyLines
            + wakes.map {
                "wake mac " + String(format: "%.3f %.3f", seconds($0.at - start), seconds($0.latency) * 1000)
            }
            + samples.map {
                "sample \($0.generation) " + String(format: "%.3f", seconds($0.time - start)) + " \($0.rssAnonKB)"
                    + ($0.memory.map { " \($0.allocatedKB) \($0.heldKB) \($0.storeKB)" } ?? "")
            }
        try? lines.joined(separator: "\n").appending("\n").write(toFile: path, atomically: true, encoding: .utf8)
    }
    return SoakReport(
        seed: options.seed,
        figures: soakFigures(
            options: options, start: start, counts: counts, samples: samples, answers: answerLatencies,
            wakes: wakes, violations: violations.count, storeFullAt: storeFullAt) + [
                ("soak_store_events_max", "\(storeEventsMax)")
            ],
        violations: violations)
}

/// `duration` in seconds.
private func seconds(_ duration: Duration) -> Double { duration / .seconds(1) }

/// The address in `text`, or a thrown error naming it.
private func requireAddress(_ text: String) throws -> IPAddress {
    guard let address = IPAddress(text) else { throw LabError("not an address: \(text)") }
    return address
}

/// The report's figures: counts of every kind of event, the violations, the resources at the start and the end
/// and their slopes after the first tenth, and the answer and wake latency percentiles of the first and last tenth.
private func soakFigures(
    options: SoakOptions, start: Duration, counts: [String: Int], samples: [SoakSample],
    answers: [(at: Duration, latency: Duration)], wakes: [(at: Duration, latency: Duration)], violations: Int,
    storeFullAt: Duration?
) -> [(name: String, value: String)] {
    var figures: [(name: String, value: String)] = [
        ("soak_seed", "\(options.seed)"), ("soak_minutes", String(format: "%.1f", options.minutes)),
        ("soak_hosts", "\(options.hosts)"), ("soak_lease_seconds", "\(options.lease)"),
    ]
    for kind in counts.keys.sorted() { figures.append(("soak_events_\(kind)", "\(counts[kind] ?? 0)")) }
    figures.append(("soak_violations", "\(violations)"))
    let length = seconds((samples.last?.time ?? start) - start)
    // Warm: after the first tenth of the run; once the store holds all the events it keeps (before, the state
    // grows, and the memory that holds it: none of the run is warm if it never gets there); and after the first
    // two minutes of each run of the daemon (its start, the hosts restored and taken over, its caches filled).
    var generationStart: [Int: Duration] = [:]
    for sample in samples where generationStart[sample.generation] == nil {
        generationStart[sample.generation] = sample.time
    }
    let warm = samples.filter { sample in
        guard let storeFullAt, sample.time >= storeFullAt else { return false }
        return seconds(sample.time - start) >= length / 10
            && sample.time - (generationStart[sample.generation] ?? sample.time) >= .seconds(120)
    }
    figures.append(
        ("soak_store_full_minute", storeFullAt.map { String(format: "%.1f", seconds($0 - start) / 60) } ?? "never"))
    if let first = samples.first, let last = samples.last {
        figures += [
            ("soak_rss_anon_mb_start", String(format: "%.1f", Double(first.rssAnonKB) / 1024)),
            ("soak_rss_anon_mb_end", String(format: "%.1f", Double(last.rssAnonKB) / 1024)),
            ("soak_rss_mb_start", String(format: "%.1f", Double(first.rssKB) / 1024)),
            ("soak_rss_mb_end", String(format: "%.1f", Double(last.rssKB) / 1024)),
            ("soak_fds_start", "\(first.fds)"), ("soak_fds_end", "\(last.fds)"),
            ("soak_threads_start", "\(first.threads)"), ("soak_threads_end", "\(last.threads)"),
            ("soak_store_bytes_start", "\(first.storeBytes)"), ("soak_store_bytes_end", "\(last.storeBytes)"),
            ("soak_store_bytes_max", "\(samples.map(\.storeBytes).max() ?? 0)"),
            ("soak_samples", "\(samples.count)"),
        ]
        // The daemon's memory gauges, at the first and last sample whose scrape answered.
        let scraped = samples.filter { $0.memory != nil }
        figures.append(("soak_memory_scrapes", "\(scraped.count)"))
        if let first = scraped.first?.memory, let last = scraped.last?.memory {
            figures += [
                ("soak_heap_allocated_mb_start", String(format: "%.2f", Double(first.allocatedKB) / 1024)),
                ("soak_heap_allocated_mb_end", String(format: "%.2f", Double(last.allocatedKB) / 1024)),
                ("soak_heap_held_mb_start", String(format: "%.2f", Double(first.heldKB) / 1024)),
                ("soak_heap_held_mb_end", String(format: "%.2f", Double(last.heldKB) / 1024)),
                ("soak_store_memory_mb_end", String(format: "%.2f", Double(last.storeKB) / 1024)),
            ]
        }
        // CPU time over wall time, within each run of the daemon.
        var cpu = 0.0
        var wall = 0.0
        for generation in Set(samples.map(\.generation)) {
            let run = samples.filter { $0.generation == generation }
            guard let first = run.first, let last = run.last else { continue }
            cpu += last.cpuSeconds - first.cpuSeconds
            wall += seconds(last.time - first.time)
        }
        figures.append(("soak_cpu_percent", wall > 0 ? String(format: "%.2f", 100 * cpu / wall) : "n/a"))
    }
    // Slopes within each run of the daemon (a restart starts afresh) of at least three warm minutes, weighted by
    // the run's length.
    var judgedRuns = 0
    var warmMinutes = 0.0
    /// Samples where `value` is nil are left out.
    func slope(_ value: (SoakSample) -> Double?) -> String {
        var weighted = 0.0
        var weights = 0.0
        judgedRuns = 0
        for generation in Set(warm.map(\.generation)) {
            let points = warm.filter { $0.generation == generation }.compactMap { sample in
                value(sample).map { (time: seconds(sample.time - start), value: $0) }
            }
            guard let slope = slopePerHour(points), let first = points.first, let last = points.last,
                last.time - first.time >= 180
            else { continue }
            judgedRuns += 1
            weighted += slope * (last.time - first.time)
            weights += last.time - first.time
        }
        return weights > 0 ? String(format: "%.3f", weighted / weights) : "n/a"
    }
    figures.append(("soak_rss_anon_mb_per_hour", slope { Double($0.rssAnonKB) / 1024 }))
    // The daemon's own count of what it allocated, and of what the allocator holds for it: which of them follows
    // RssAnon tells live data from the heap's growth around it.
    let rssRuns = judgedRuns
    figures.append(("soak_heap_allocated_mb_per_hour", slope { $0.memory.map { Double($0.allocatedKB) / 1024 } }))
    figures.append(("soak_heap_held_mb_per_hour", slope { $0.memory.map { Double($0.heldKB) / 1024 } }))
    figures.append(("soak_store_memory_mb_per_hour", slope { $0.memory.map { Double($0.storeKB) / 1024 } }))
    judgedRuns = rssRuns
    warmMinutes = 0
    for generation in Set(warm.map(\.generation)) {
        let times = warm.filter { $0.generation == generation }.map(\.time)
        if let first = times.first, let last = times.last, last - first >= .seconds(180) {
            warmMinutes += seconds(last - first) / 60
        }
    }
    figures.append(("soak_slope_runs", "\(judgedRuns)"))
    figures.append(("soak_slope_minutes", String(format: "%.1f", warmMinutes)))
    figures.append(("soak_daemon_runs", "\(Set(samples.map(\.generation)).count)"))
    figures.append(("soak_fds_per_hour", slope { Double($0.fds) }))
    figures.append(("soak_store_bytes_per_hour", slope { Double($0.storeBytes) }))
    func tenth(_ values: [(at: Duration, latency: Duration)], last: Bool) -> String {
        let cut = length / 10
        let selected = values.filter {
            let offset = seconds($0.at - start)
            return last ? offset >= length - cut : offset < cut
        }
        guard let p99 = percentile(selected.map { seconds($0.latency) * 1000 }, 0.99)
        else { return "n/a" }
        return String(format: "%.2f", p99) + " (\(selected.count))"
    }
    figures += [
        ("soak_answer_p99_ms_first_tenth", tenth(answers, last: false)),
        ("soak_answer_p99_ms_last_tenth", tenth(answers, last: true)),
        ("soak_wake_p99_ms_first_tenth", tenth(wakes, last: false)),
        ("soak_wake_p99_ms_last_tenth", tenth(wakes, last: true)),
    ]
    return figures
}
