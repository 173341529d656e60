import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyControl
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A forger on another port of the bridge sends frames with a declared host's MAC as their source: mDNS responses
/// with more records than the limit, address records for the host name another machine answers for (the waker's
/// avahi host name), addresses off the link, goodbyes, and ARP, at a high rate, while the real host is awake
/// and again while it sleeps and is held. The proxy cannot tell the forger from the host, and takes its frames for
/// the host's (it lets go when they come while it holds it); what it must do is stay up and answering, keep what
/// it learns within the limit, log the refusals once a minute, keep its memory flat, and never answer for a name
/// another awake machine answers for.
@Suite(.requiresLab(tools: ["python3", "avahi-daemon", "dbus-daemon"]))
struct ForgedSenderLabTests {
    /// `limits.maximum_records_per_host`: what the sleeper's own avahi announces fits, with room for the forger.
    static let limit = 24
    static let framesPerSecond = 1_000
    static let seconds = 6.0
    /// The waker's avahi host name.
    static let otherHostName = "waker"
    static let refusal = "records that are not kept"

    @Test func aForgerWithTheSleepersMACIsBoundedAndLendsTheProxyNoOtherHostsName() async throws {
        try await Lab.withLab { lab in
            let sleeper = lab.host(.sleeper)
            let proxy = lab.host(.proxy)
            let waker = lab.host(.waker)
            let path = lab.workDirectory + "/sleepproxy.toml"
            try """
            [limits]
            maximum_records_per_host = \(Self.limit)

            [hosts.sleeper]
            mac = "\(sleeper.macString)"
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let daemon = try RegistrationDaemonLabTests().startDaemon(
                lab, state: lab.workDirectory + "/state", extraArguments: ["--config", path])
            defer { daemon.signal(SIGTERM) }
            let client = try lab.addHost("client", number: 4)
            let other = try await lab.startAvahi(on: .waker, hostName: Self.otherHostName)
            defer { other.stop(graceful: false) }
            let own = try await lab.startAvahi(
                on: .sleeper, hostName: "sleeper",
                services: [AvahiService(name: "Sleeper Files", type: "_smb._tcp", port: 445)])
            defer { own.stop(graceful: false) }

            // Before the forger: the sleeper's own records are learned, and the waker is heard with its name.
            let learned = try await eventually("the sleeper's own records learned", within: .seconds(20)) {
                try await Self.learnedRecords(lab).flatMap { $0 > 0 ? $0 : nil }
            }
            _ = try await eventually("the waker heard with its host name", within: .seconds(20)) {
                try await Self.seen(lab).contains {
                    $0.mac == waker.macString && $0.hostName?.hasPrefix("\(Self.otherHostName).local") == true
                } ? true : nil
            }
            let started = ContinuousClock.now
            let rssBefore = try Self.residentKilobytes(daemon)

            // The first burst, while the sleeper is awake; a bystander registers meanwhile, and the CLI answers.
            let awakeBurst = Task { try await Self.forge(lab, seed: 1) }
            let (registration, _) = try RegistrationDaemonLabTests.registration(index: 40, id: 0x4040)
            let registered = try await client.register(registration, to: proxy.ipv4)
            let status = try await OperationsLabTests().ctl(lab, ["status"])
            let first = try await awakeBurst.value
            #expect(registered.succeeded, "a registration during the first burst: \(registered)")
            #expect(status.status == 0, "sleepproxyctl status during the first burst: \(status)")
            try await Self.expectBounded(lab, daemon, after: first, since: started)
            let rssAfterFirst = try Self.residentKilobytes(daemon)

            // It sleeps: held with what was kept, and never with the names of others.
            own.freeze()
            try lab.sleep(.sleeper)
            try await daemon.waitUntilLogged("took over \(sleeper.ipv4)", "the take-over", within: .seconds(40))
            #expect(
                daemon.stderr.contains("\(Self.otherHostName).local. A is the host name \(waker.macString) announces"),
                "the take-over leaves out the waker's name: \(daemon.stderr.suffix(3_000))")
            try await Self.expectNoOtherHostsName(client, proxy: proxy.ipv4, waker: waker.ipv4)
            let service = try await client.multicastQuery(name: "_smb._tcp.local", type: "PTR")
            #expect(
                service.contains { $0.source == proxy.ipv4 && $0.contains(Array("Sleeper Files".utf8)) },
                "the sleeper's own service, learned before the forger, is answered: \(service)")

            // The second burst, while it is held: its frames are the host's as far as the proxy can tell, so it
            // lets go; when the forger falls silent, the host is found asleep and held again.
            let heldBurst = Task { try await Self.forge(lab, seed: 2) }
            let statusWhileHeld = try await OperationsLabTests().ctl(lab, ["status"])
            let second = try await heldBurst.value
            #expect(statusWhileHeld.status == 0, "sleepproxyctl status during the second burst: \(statusWhileHeld)")
            try await Self.expectBounded(lab, daemon, after: second, since: started)
            let rssAfterSecond = try Self.residentKilobytes(daemon)
            _ = try await eventually("the sleeper held again", within: .seconds(45)) {
                daemon.stderr.components(separatedBy: "took over \(sleeper.ipv4)").count > 2 ? true : nil
            }
            try await Self.expectNoOtherHostsName(client, proxy: proxy.ipv4, waker: waker.ipv4)
            try await Self.expectBounded(lab, daemon, after: nil, since: started)

            let refusals = daemon.stderr.components(separatedBy: Self.refusal).count - 1
            let lines = daemon.stderr.split(separator: "\n").count
            print("forged_log_lines: \(lines)")
            print("forged_frames_sent: \(first.sent + second.sent)")
            print("forged_frames_kinds: \(first.kinds) \(second.kinds)")
            print("forged_refusal_lines: \(refusals)")
            print("forged_learned_records: \(learned) before, \(try await Self.learnedRecords(lab) ?? -1) after")
            print(
                "forged_rss_kb: \(rssBefore) before, \(rssAfterFirst) after the first, \(rssAfterSecond) after the second"
            )
            // The whole log, at debug level, is a few dozen lines: nothing is said per frame.
            #expect(lines < 200, "\(lines) log lines for \(first.sent + second.sent) forged frames")
            // Unbounded learning would cost tens of megabytes a burst: every forged message names new records.
            #expect(
                rssAfterSecond - rssAfterFirst < 8 * 1_024,
                "RSS \(rssAfterFirst) kB after the first burst, \(rssAfterSecond) kB after the second")
        }
    }

    // MARK: Checks

    /// The daemon runs, what it learned of the sleeper is within the limit, the refusals were logged at most once a
    /// minute since `started`, and the table of machines heard is bounded.
    static func expectBounded(
        _ lab: Lab, _ daemon: LabProcess, after burst: ForgerReport?, since started: ContinuousClock.Instant
    ) async throws {
        #expect(!daemon.hasExited, "the daemon died: \(daemon.stderr.suffix(2_000))")
        if let burst {
            #expect(
                burst.sent >= Int(Double(framesPerSecond) * seconds * 0.8), "the forger sent too little: \(burst)")
        }
        let learned = try #require(try await learnedRecords(lab), "the sleeper is not listed")
        #expect(learned <= limit, "\(learned) records learned, limit \(limit)")
        let log = daemon.stderr
        let refusals = log.components(separatedBy: refusal).count - 1
        let minutes = Int((ContinuousClock.now - started).components.seconds / 60)
        #expect(refusals >= 1, "the refused records are not logged")
        #expect(refusals <= minutes + 1, "\(refusals) refusal lines in \(minutes + 1) minutes")
        let machines = try await seen(lab)
        #expect(machines.count <= 16, "\(machines.count) machines seen: \(machines.map(\.mac))")
        let forged = try #require(machines.first { $0.mac == lab.host(.sleeper).macString })
        #expect(forged.addresses.count <= 8 && forged.services.count <= 16, "\(forged)")
    }

    /// Asked from the client, the waker's host name is answered by the waker's avahi (still its own: not renamed
    /// over a conflict with the proxy), never by the proxy.
    static func expectNoOtherHostsName(_ client: ExtraHost, proxy: String, waker: String) async throws {
        let wakerName = try await client.multicastQuery(name: "\(otherHostName).local", type: "A")
        #expect(wakerName.contains { $0.source == waker }, "the waker's avahi answers for its name: \(wakerName)")
        let fromProxy = wakerName.filter { $0.source == proxy }
        #expect(fromProxy.isEmpty, "the proxy answered for the waker's name: \(fromProxy)")
    }

    // MARK: Reading the daemon

    /// What `sleepproxyctl hosts --json` says the proxy kept of the sleeper's announcements.
    static func learnedRecords(_ lab: Lab) async throws -> Int? {
        let hosts = try await OperationsLabTests().ctl(lab, ["hosts", "--json"])
        guard hosts.status == 0 else { throw LabError("sleepproxyctl hosts: \(hosts)") }
        let summaries = try ControlProtocol.decoder().decode([HostSummary].self, from: Data(hosts.stdout.utf8))
        return summaries.first { $0.declared == "sleeper" }?.learnedRecords
    }

    /// `sleepproxyctl seen --json`.
    static func seen(_ lab: Lab) async throws -> [SeenReport] {
        let seen = try await OperationsLabTests().ctl(lab, ["seen", "--json"])
        guard seen.status == 0 else { throw LabError("sleepproxyctl seen: \(seen)") }
        return try ControlProtocol.decoder().decode([SeenReport].self, from: Data(seen.stdout.utf8))
    }

    /// The daemon's resident set, from `/proc/PID/status`.
    static func residentKilobytes(_ daemon: LabProcess) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(daemon.pid)/status", encoding: .utf8)
        let lines = status.split(separator: "\n")
        guard lines.contains(where: { $0.hasPrefix("Name:") && $0.hasSuffix("sleepproxyd") }),
            let line = lines.first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { throw LabError("no VmRSS of sleepproxyd in /proc/\(daemon.pid)/status: \(status)") }
        return kilobytes
    }

    // MARK: The forger

    /// What the forger sent: frames, frames the kernel refused, for how long, and of each kind.
    struct ForgerReport: Decodable, CustomStringConvertible {
        var sent: Int
        var failed: Int
        var seconds: Double
        var kinds: [String: Int]

        var description: String { "\(sent) frames (\(failed) refused) in \(seconds) s: \(kinds)" }
    }

    /// Runs the forger on the waker for `seconds` at `framesPerSecond`.
    static func forge(_ lab: Lab, seed: Int) async throws -> ForgerReport {
        struct Arguments: Encodable {
            var interface: String
            var sleeperMAC: String
            var sleeperIPv4: String
            var otherName: String
            var framesPerSecond: Int
            var seconds: Double
            var seed: Int
        }
        let sleeper = lab.host(.sleeper)
        let arguments = Arguments(
            interface: Lab.interfaceName, sleeperMAC: sleeper.macString, sleeperIPv4: sleeper.ipv4,
            otherName: otherHostName, framesPerSecond: framesPerSecond, seconds: seconds, seed: seed)
        let json = String(decoding: try JSONEncoder().encode(arguments), as: UTF8.self)
        let result = try await lab.run(
            .waker, ["python3", "-c", forger, json], timeout: .seconds(Int64(seconds) + 30))
        guard result.succeeded, let line = result.stdout.split(separator: "\n").last else {
            throw LabError("the forger failed: \(result)")
        }
        return try JSONDecoder().decode(ForgerReport.self, from: Data(line.utf8))
    }

    /// Sends raw frames with the sleeper's MAC and IPv4 address as their source through an `AF_PACKET` socket, in
    /// turn: `many` (an mDNS response of 21 records, services never sent before among them, and service types for
    /// the enumeration), `other` (an address record giving the sleeper's address to the other host's name, and a
    /// service pointing at that name), `offlink` (address records and a reverse mapping of addresses off the link),
    /// `goodbye` (TTL 0 for records sent earlier) and `arp` (gratuitous, and requests from an address off the
    /// link). Prints one JSON line: sent, failed, seconds, kinds.
    static let forger = #"""
        import json, random, socket, struct, sys, time

        arguments = json.loads(sys.argv[1])
        rng = random.Random(arguments["seed"])
        MAC = bytes.fromhex(arguments["sleeperMAC"].replace(":", ""))
        SOURCE = socket.inet_aton(arguments["sleeperIPv4"])
        GROUP, GROUP_MAC = socket.inet_aton("224.0.0.251"), bytes.fromhex("01005e0000fb")
        OTHER = arguments["otherName"]


        def checksum(data):
            total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
            while total >> 16:
                total = (total & 0xFFFF) + (total >> 16)
            return ~total & 0xFFFF


        def name(*labels):
            return b"".join(bytes([len(label.encode())]) + label.encode() for label in labels) + b"\0"


        def record(owner, kind, rdata, ttl=120, flush=False):
            return owner + struct.pack("!HHIH", kind, 0x8001 if flush else 1, ttl, len(rdata)) + rdata


        def mdns(records):
            payload = struct.pack("!HHHHHH", 0, 0x8400, 0, len(records), 0, 0) + b"".join(records)
            datagram = struct.pack("!HHHH", 5353, 5353, 8 + len(payload), 0) + payload
            header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(datagram), rng.randrange(65536), 0x4000, 255, 17,
                                 0, SOURCE, GROUP)
            header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
            return GROUP_MAC + MAC + b"\x08\x00" + header + datagram


        def service(instance, kind, target, port):
            owner = name(instance, kind, "_tcp", "local")
            return [record(name(kind, "_tcp", "local"), 12, owner),
                    record(owner, 33, struct.pack("!HHH", 0, 0, port) + name(target, "local"), flush=True),
                    record(owner, 16, b"\x06forged", flush=True)]


        counter = 0
        sent_services = []


        def many():
            global counter
            records = [record(name("forger", "local"), 1, SOURCE, flush=True)]
            for _ in range(6):
                counter += 1
                instance = "Forged %d" % counter
                sent_services.append(instance)
                records += service(instance, "_forged", "forger", 9000 + counter % 1000)
            for _ in range(2):
                kind = "_f%d" % rng.randrange(64)
                records.append(record(name("_services", "_dns-sd", "_udp", "local"), 12, name(kind, "_tcp", "local")))
            return mdns(records)


        def other():
            records = [record(name(OTHER, "local"), 1, SOURCE, flush=True)]
            records += service("Stolen", "_smb", OTHER, 445)
            return mdns(records)


        def offlink():
            host = rng.randrange(1, 255)
            address = bytes([192, 0, 2, host])
            v6 = bytes.fromhex("20010db8") + bytes(11) + bytes([host])
            reverse = name(str(host), "2", "0", "192", "in-addr", "arpa")
            return mdns([record(name("far", "local"), 1, address, flush=True),
                         record(name("far", "local"), 28, v6, flush=True),
                         record(reverse, 12, name("forger", "local"), flush=True)])


        def goodbye():
            chosen = rng.sample(sent_services, min(3, len(sent_services)))
            records = []
            for instance in chosen:
                owner = name(instance, "_forged", "_tcp", "local")
                records.append(record(name("_forged", "_tcp", "local"), 12, owner, ttl=0))
            records.append(record(name(OTHER, "local"), 1, SOURCE, ttl=0, flush=True))
            return mdns(records)


        def arp():
            if rng.random() < 0.5:
                sender, target, destination = SOURCE, SOURCE, b"\xff" * 6
            else:
                sender, target, destination = bytes([192, 0, 2, rng.randrange(1, 255)]), SOURCE, b"\xff" * 6
            body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, MAC, sender, bytes(6), target)
            return destination + MAC + b"\x08\x06" + body


        KINDS = [("other", other), ("many", many), ("many", many), ("offlink", offlink), ("many", many),
                 ("arp", arp), ("many", many), ("other", other), ("goodbye", goodbye), ("arp", arp)]
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        sock.bind((arguments["interface"], 0))
        rate, seconds = arguments["framesPerSecond"], arguments["seconds"]
        counts = {}
        sent = failed = position = 0
        start = time.monotonic()
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= seconds:
                break
            due = int(elapsed * rate) + 1
            while position < due:
                kind, make = KINDS[position % len(KINDS)]
                position += 1
                try:
                    sock.send(make())
                    sent += 1
                    counts[kind] = counts.get(kind, 0) + 1
                except OSError:
                    failed += 1
            time.sleep(0.002)
        print(json.dumps({"sent": sent, "failed": failed, "seconds": time.monotonic() - start, "kinds": counts}))
        """#
}

extension DNSRecord {
    /// The address an A or AAAA record gives.
    fileprivate var givenAddress: IPAddress? {
        switch rdata {
        case .a(let v4): .v4(v4)
        case .aaaa(let v6): .v6(v6)
        default: nil
        }
    }
}
