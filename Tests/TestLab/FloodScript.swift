import Foundation

/// A held host as the flood sees it: what to ask about, what to hit, and whose registration to replay.
public struct FloodTarget: Sendable, Hashable, Encodable {
    /// `["bench3", "local"]`: labels, so that names with spaces or dots need no escaping.
    public var hostLabels: [String]
    /// `["bench3 SSH", "_ssh", "_tcp", "local"]`.
    public var instanceLabels: [String]
    /// `["_ssh", "_tcp", "local"]`.
    public var serviceLabels: [String]
    public var ipv4: String
    public var ipv6: String?
    /// The OWNER option's primary MAC and sequence number it registered with.
    public var ownerMAC: String
    public var ownerSequence: Int
    /// Its registration datagram, as hex: replayed verbatim and cut short by the flood.
    public var registration: String

    public init(
        hostLabels: [String], instanceLabels: [String], serviceLabels: [String], ipv4: String, ipv6: String?,
        ownerMAC: String, ownerSequence: Int, registration: [UInt8]
    ) {
        self.hostLabels = hostLabels
        self.instanceLabels = instanceLabels
        self.serviceLabels = serviceLabels
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.ownerMAC = ownerMAC
        self.ownerSequence = ownerSequence
        self.registration = FloodScript.hex(registration)
    }
}

/// What the waker sends, and how fast. Of every 7,000 frames: 5,000 mDNS queries for held names (nine in ten
/// legacy unicast from random ports, the rest from port 5353), 300 malformed or forged mDNS messages (random
/// bytes, a valid header over garbage, held records announced or said goodbye to with the held host's OWNER),
/// 300 registration datagrams (random bytes, truncated and verbatim copies of held registrations, a few of 9,500
/// bytes in IPv4 fragments), 300 TCP SYNs to held addresses on ports no service uses, 500 SYNs to addresses
/// nobody holds, 300 ARP frames (gratuitous for unheld addresses from random MACs, requests for held ones) and 300
/// Neighbour Solicitations (for unheld targets, duplicate address detection for unheld targets, for held ones).
public struct FloodPlan: Sendable, Hashable, Encodable {
    public var framesPerSecond: Int
    public var seconds: Double
    public var seed: Int
    public var targets: [FloodTarget]
    /// Addresses on the link that nobody holds or uses, for SYNs and gratuitous ARP.
    public var unheldIPv4: [String]
    /// A held IPv4 address that a stranger's gratuitous ARP claims `conflictFrames` times, half a second apart,
    /// from `conflictAfter` seconds on: an address conflict, for which the proxy correctly wakes its host.
    public var conflictAddress: String?
    public var conflictFrames: Int
    public var conflictAfter: Double
    var interface = Lab.interfaceName
    var wakerMAC = ""
    var wakerIPv4 = ""
    var wakerLinkLocal = ""
    var wakerULA = ""
    var proxyMAC = ""
    var proxyIPv4 = ""
    var registrationPort = 5354

    public init(
        framesPerSecond: Int = 7_000, seconds: Double = 60, seed: Int = 7, targets: [FloodTarget],
        unheldIPv4: [String] = (150..<250).map { "10.77.0.\($0)" }, conflictAddress: String? = nil,
        conflictFrames: Int = 3, conflictAfter: Double = 2
    ) {
        self.framesPerSecond = framesPerSecond
        self.seconds = seconds
        self.seed = seed
        self.targets = targets
        self.unheldIPv4 = unheldIPv4
        self.conflictAddress = conflictAddress
        self.conflictFrames = conflictFrames
        self.conflictAfter = conflictAfter
    }
}

/// What the flood generator reports when it is done.
public struct FloodReport: Sendable, Hashable, Decodable {
    /// Frames handed to the kernel, and frames it refused (a full send buffer).
    public var sent: Int
    public var failed: Int
    /// How long it sent.
    public var seconds: Double
    /// Frames sent of each kind: `query`, `mdns`, `registration`, `syn-held`, `syn-other`, `arp`, `ns`, `conflict`.
    public var kinds: [String: Int]

    public var framesPerSecond: Double { seconds > 0 ? Double(sent) / seconds : 0 }
}

/// One question of the paced querier.
public struct FloodQuestion: Sendable, Hashable, Encodable {
    public var labels: [String]
    /// The numeric type: 1 A, 12 PTR, 16 TXT, 28 AAAA, 33 SRV.
    public var type: Int

    public init(labels: [String], type: Int) {
        self.labels = labels
        self.type = type
    }
}

/// What the paced querier saw: each answered query's latency.
public struct PacedQueryReport: Sendable, Hashable, Decodable {
    public var sent: Int
    /// Answered within the timeout.
    public var answered: Int
    /// Answered after the timeout (not counted as answered).
    public var late: Int
    /// Microseconds from send to answer, one per answered query, in ascending order.
    public var latencies: [Int]
    /// The same for the queries sent from the third second on, past the first rush of the flood.
    public var steadyLatencies: [Int]
    /// The queries answered after more than 50 ms: seconds from the first query to this one, and microseconds.
    public var slow: [[Double]]
    /// When the queries never answered went out, in seconds from the first query.
    public var lost: [Double]

    /// The `p` quantile (0 to 1) of the latencies in microseconds (of the steady ones only if `steady`), nil
    /// without any.
    public func percentile(_ p: Double, steady: Bool = false) -> Int? {
        let sorted = steady ? steadyLatencies : latencies
        guard !sorted.isEmpty else { return nil }
        let rank = Int((Double(sorted.count) * p).rounded(.up)) - 1
        return sorted[min(sorted.count - 1, max(0, rank))]
    }
}

/// What one client action (a registration, a resolve, a connection) came to.
public struct ClientActionReport: Sendable, Hashable, Decodable {
    /// Answered (a registration acknowledged, a resolve answered); for a connection, always false.
    public var succeeded: Bool
    /// Datagrams sent (1 to the tries allowed).
    public var tries: Int
    /// From the first try to the answer.
    public var milliseconds: Double?
    /// The wall clock (nanoseconds since 1970) just before the first datagram or SYN went out.
    public var startedNanoseconds: Int
    /// The answer's RDATA for a resolve, as hex.
    public var rdata: String?
}

extension Lab {
    /// Runs the flood from the waker, at the plan's rate for its time, and returns what it sent. The frames are
    /// built once, up front, and paced in 2 ms steps through an `AF_PACKET` socket.
    public func runFlood(_ plan: FloodPlan) async throws -> FloodReport {
        var plan = plan
        let waker = host(.waker)
        let proxy = host(.proxy)
        plan.wakerMAC = waker.macString
        plan.wakerIPv4 = waker.ipv4
        plan.wakerLinkLocal = waker.ipv6LinkLocal
        plan.wakerULA = waker.ula
        plan.proxyMAC = proxy.macString
        plan.proxyIPv4 = proxy.ipv4
        let path = workDirectory + "/flood-plan-\(UInt32.random(in: 0..<UInt32.max)).json"
        try JSONEncoder().encode(plan).write(to: URL(fileURLWithPath: path))
        let result = try await run(
            .waker, ["python3", "-c", FloodScript.generator, path],
            timeout: .seconds(Int64(plan.seconds) + 60))
        guard result.succeeded else { throw LabError("the flood generator failed: \(result)") }
        return try FloodScript.decode(FloodReport.self, from: result)
    }
}

extension ExtraHost {
    /// Sends `plan`'s mix from this host instead of the waker (its MAC and addresses as the frames' source), at
    /// the proxy of `lab`, and waits for it to end.
    public func runFlood(_ plan: FloodPlan, proxy: LabHost, workDirectory: String) async throws -> FloodReport {
        var plan = plan
        plan.wakerMAC = macString
        plan.wakerIPv4 = ipv4
        plan.wakerLinkLocal = ipv6LinkLocal
        plan.wakerULA = ula
        plan.proxyMAC = proxy.macString
        plan.proxyIPv4 = proxy.ipv4
        let path = workDirectory + "/flood-plan-\(name)-\(UInt32.random(in: 0..<UInt32.max)).json"
        try JSONEncoder().encode(plan).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await run(
            ["python3", "-c", FloodScript.generator, path], timeout: .seconds(Int64(plan.seconds) + 60))
        guard result.succeeded else { throw LabError("the flood generator in \(name) failed: \(result)") }
        return try FloodScript.decode(FloodReport.self, from: result)
    }

    /// Sends `perSecond` legacy-unicast queries (from an ephemeral port to 224.0.0.251:5353) for `seconds`, the
    /// questions in turn, and times each answer; one not answered within `timeout` seconds counts as lost.
    public func pacedQueries(
        _ questions: [FloodQuestion], perSecond: Int = 20, seconds: Double, timeout: Double = 1
    ) async throws -> PacedQueryReport {
        struct Arguments: Encodable {
            var interface: String
            var questions: [FloodQuestion]
            var perSecond: Int
            var seconds: Double
            var timeout: Double
        }
        let arguments = Arguments(
            interface: interfaceName, questions: questions, perSecond: perSecond, seconds: seconds, timeout: timeout)
        return try await client("query", arguments, timeout: .seconds(Int64(seconds + timeout) + 20))
    }

    /// Registers as a Mac does: sends `registration` to `address`:`port` and waits a second for the reply,
    /// trying at most `tries` times.
    public func register(
        _ registration: [UInt8], to address: String, port: Int = 5354, tries: Int = 3, interval: Double = 1
    ) async throws -> ClientActionReport {
        struct Arguments: Encodable {
            var address: String
            var port: Int
            var message: String
            var tries: Int
            var interval: Double
        }
        let arguments = Arguments(
            address: address, port: port, message: FloodScript.hex(registration), tries: tries, interval: interval)
        return try await client("register", arguments, timeout: .seconds(Int64(Double(tries) * interval) + 20))
    }

    /// Resolves as an mDNS querier does: a query from port 5353 to the group, asked again after 1 s and 2 s more
    /// (`tries` in all); answered when a response from `responder` carries a record of that name and type.
    public func resolve(
        _ question: FloodQuestion, responder: String, tries: Int = 3
    ) async throws -> ClientActionReport {
        struct Arguments: Encodable {
            var interface: String
            var question: FloodQuestion
            var responder: String
            var tries: Int
        }
        let arguments = Arguments(interface: interfaceName, question: question, responder: responder, tries: tries)
        return try await client("resolve", arguments, timeout: .seconds(30))
    }

    /// Opens a TCP connection to `address`:`port` and gives up after `seconds` (a sleeping host never answers):
    /// what a user does who opens ssh to a host that sleeps.
    public func connect(to address: String, port: Int, seconds: Double = 3) async throws -> ClientActionReport {
        struct Arguments: Encodable {
            var address: String
            var port: Int
            var seconds: Double
        }
        let arguments = Arguments(address: address, port: port, seconds: seconds)
        return try await client("connect", arguments, timeout: .seconds(Int64(seconds) + 20))
    }

    private func client<Arguments: Encodable, Report: Decodable>(
        _ mode: String, _ arguments: Arguments, timeout: Duration
    ) async throws -> Report {
        let json = String(decoding: try JSONEncoder().encode(arguments), as: UTF8.self)
        let result = try await run(["python3", "-c", FloodScript.client, mode, json], timeout: timeout)
        guard result.succeeded else { throw LabError("the \(mode) client on \(name) failed: \(result)") }
        return try FloodScript.decode(Report.self, from: result)
    }
}

/// The scripts of the flood: the hostile generator that runs on the waker, and the well-behaved client that
/// registers, resolves, queries and connects from another host meanwhile.
public enum FloodScript {
    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 0x10 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    static func decode<Report: Decodable>(_ type: Report.Type, from result: CommandResult) throws -> Report {
        guard let line = result.stdout.split(separator: "\n").last else {
            throw LabError("the flood script printed nothing: \(result)")
        }
        do {
            return try JSONDecoder().decode(type, from: Data(line.utf8))
        } catch {
            throw LabError("cannot read the flood script's report \(line.debugDescription): \(error)")
        }
    }

    /// The generator. Argument: the plan's JSON file. Prints one JSON line: sent, failed, seconds, kinds.
    public static let generator = #"""
        import json, random, signal, socket, struct, sys, time

        plan = json.load(open(sys.argv[1]))
        rng = random.Random(plan["seed"])
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))


        def mac(text):
            return bytes.fromhex(text.replace(":", ""))


        def v4(text):
            return socket.inet_pton(socket.AF_INET, text)


        def v6(text):
            return socket.inet_pton(socket.AF_INET6, text)


        def checksum(data):
            if len(data) % 2:
                data += b"\0"
            total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
            while total >> 16:
                total = (total & 0xFFFF) + (total >> 16)
            return ~total & 0xFFFF


        WAKER_MAC, PROXY_MAC = mac(plan["wakerMAC"]), mac(plan["proxyMAC"])
        WAKER4, PROXY4 = v4(plan["wakerIPv4"]), v4(plan["proxyIPv4"])
        WAKER_LL, WAKER_ULA = v6(plan["wakerLinkLocal"]), v6(plan["wakerULA"])
        GROUP4, GROUP4_MAC = v4("224.0.0.251"), mac("01:00:5e:00:00:fb")
        BROADCAST = b"\xff" * 6
        SERVICE_PORTS = {22, 445, 548, 3031, 3283, 5353, 5354, 5900}
        TARGETS = plan["targets"]
        UNHELD4 = [v4(a) for a in plan["unheldIPv4"]]
        STRANGER_MACS = [bytes([0x02, 0xAA]) + rng.randbytes(4) for _ in range(256)]


        def ethernet(destination, source, kind, payload):
            return destination + source + struct.pack("!H", kind) + payload


        def ipv4(source, destination, protocol, payload, ttl=64, ident=None, fragment=0x4000):
            ident = rng.randrange(65536) if ident is None else ident
            header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, fragment, ttl, protocol, 0,
                                 source, destination)
            return header[:10] + struct.pack("!H", checksum(header)) + header[12:] + payload


        def ipv6(source, destination, next_header, payload, hops=64):
            header = struct.pack("!IHBB16s16s", 0x60000000, len(payload), next_header, hops, source, destination)
            return header + payload


        def with_checksum(segment, offset, pseudo):
            value = checksum(pseudo + segment) or 0xFFFF
            return segment[:offset] + struct.pack("!H", value) + segment[offset + 2:]


        def udp4(source, destination, source_port, destination_port, data, ttl=64, mac_to=PROXY_MAC):
            """A UDP datagram over IPv4: one frame, or IPv4 fragments of 1,480 bytes when it is larger."""
            length = 8 + len(data)
            segment = with_checksum(struct.pack("!HHHH", source_port, destination_port, length, 0) + data, 6,
                                    source + destination + struct.pack("!BBH", 0, 17, length))
            if len(segment) <= 1480:
                return [ethernet(mac_to, WAKER_MAC, 0x0800, ipv4(source, destination, 17, segment, ttl))]
            ident, frames = rng.randrange(65536), []
            for offset in range(0, len(segment), 1480):
                more = 0x2000 if offset + 1480 < len(segment) else 0
                chunk = segment[offset:offset + 1480]
                frames.append(ethernet(mac_to, WAKER_MAC, 0x0800,
                                       ipv4(source, destination, 17, chunk, ttl, ident, more | offset // 8)))
            return frames


        def syn(destination, port):
            if len(destination) == 4:
                segment = struct.pack("!HHIIBBHHH", rng.randrange(32768, 61000), port, rng.getrandbits(32), 0, 0x50,
                                      0x02, 64240, 0, 0)
                segment = with_checksum(segment, 16, WAKER4 + destination + struct.pack("!BBH", 0, 6, len(segment)))
                return ethernet(PROXY_MAC, WAKER_MAC, 0x0800, ipv4(WAKER4, destination, 6, segment))
            source = WAKER_ULA
            segment = struct.pack("!HHIIBBHHH", rng.randrange(32768, 61000), port, rng.getrandbits(32), 0, 0x50, 0x02,
                                  64240, 0, 0)
            segment = with_checksum(segment, 16, source + destination + struct.pack("!I3xB", len(segment), 6))
            return ethernet(PROXY_MAC, WAKER_MAC, 0x86DD, ipv6(source, destination, 6, segment))


        def arp(operation, sender_mac, sender, target, destination=BROADCAST, target_mac=bytes(6)):
            body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, operation, sender_mac, sender, target_mac, target)
            return ethernet(destination, sender_mac, 0x0806, body)


        def solicitation(source, target, link_layer=True):
            group = v6("ff02::1:ff00:0")[:13] + target[13:]
            body = struct.pack("!BBHI16s", 135, 0, 0, 0, target) + (b"\x01\x01" + WAKER_MAC if link_layer else b"")
            body = with_checksum(body, 2, source + group + struct.pack("!I3xB", len(body), 58))
            return ethernet(b"\x33\x33" + group[12:], WAKER_MAC, 0x86DD, ipv6(source, group, 58, body, 255))


        def name(labels):
            return b"".join(bytes([len(label.encode())]) + label.encode() for label in labels) + b"\0"


        def reverse(address):
            return [str(byte) for byte in reversed(address)] + ["in-addr", "arpa"]


        def question(labels, kind, unicast=False):
            return name(labels) + struct.pack("!HH", kind, 0x8001 if unicast else 1)


        def mdns(payload, source_port=5353):
            return udp4(WAKER4, GROUP4, source_port, 5353, payload, 255, GROUP4_MAC)


        def owner_option(target, sequence):
            data = struct.pack("!BB", 0, sequence & 0xFF) + mac(target["ownerMAC"])
            return b"\0" + struct.pack("!HHIH", 41, 1440, 0, 4 + len(data)) + struct.pack("!HH", 4, len(data)) + data


        QUESTIONS = []
        for target in TARGETS:
            QUESTIONS += [(target["hostLabels"], 1), (target["hostLabels"], 255), (target["instanceLabels"], 33),
                          (target["instanceLabels"], 16), (target["serviceLabels"], 12),
                          (reverse(v4(target["ipv4"])), 12)]
            if target.get("ipv6"):
                QUESTIONS.append((target["hostLabels"], 28))


        def make_query():
            labels, kind = rng.choice(QUESTIONS)
            if rng.random() < 0.9:
                header = struct.pack("!HHHHHH", rng.randrange(65536), 0, 1, 0, 0, 0)
                return mdns(header + question(labels, kind), rng.randrange(20000, 60000))
            return mdns(struct.pack("!HHHHHH", 0, 0, 1, 0, 0, 0) + question(labels, kind))


        def make_mdns():
            choice = rng.random()
            if choice < 0.4:
                return mdns(rng.randbytes(rng.randrange(12, 512)))
            if choice < 0.7:
                header = struct.pack("!HHHHHH", rng.randrange(65536), rng.choice([0, 0x8400, rng.randrange(65536)]),
                                     rng.randrange(4), rng.randrange(4), rng.randrange(4), rng.randrange(4))
                return mdns(header + rng.randbytes(rng.randrange(0, 300)))
            # A held host's address record with its OWNER, from the waker: announced (same data) or said goodbye
            # to (TTL 0). Neither may release the host.
            target = rng.choice(TARGETS)
            ttl = 0 if rng.random() < 0.3 else 120
            answer = name(target["hostLabels"]) + struct.pack("!HHIH", 1, 0x8001, ttl, 4) + v4(target["ipv4"])
            header = struct.pack("!HHHHHH", 0, 0x8400, 0, 1, 0, 1)
            sequence = target["ownerSequence"] + rng.randrange(1, 200)
            return mdns(header + answer + owner_option(target, sequence))


        def make_registration():
            source_port = rng.randrange(20000, 60000)
            port = plan["registrationPort"]
            real = bytes.fromhex(rng.choice(TARGETS)["registration"])
            choice = rng.random()
            if choice < 0.4:
                payload = rng.randbytes(rng.randrange(0, 1400))
            elif choice < 0.8:
                payload = real[:rng.randrange(1, len(real))]
            elif choice < 0.97:
                payload = real
            else:
                payload = real + rng.randbytes(9500 - len(real))
            return udp4(WAKER4, PROXY4, source_port, port, payload)


        def unused_port():
            while True:
                port = rng.randrange(1, 65536)
                if port not in SERVICE_PORTS:
                    return port


        def make_syn_held():
            target = rng.choice(TARGETS)
            address = v6(target["ipv6"]) if target.get("ipv6") and rng.random() < 0.3 else v4(target["ipv4"])
            return [syn(address, unused_port())]


        def make_syn_other():
            if rng.random() < 0.7:
                return [syn(rng.choice(UNHELD4), rng.choice([22, 80, 443, unused_port()]))]
            return [syn(v6("fd77::f:0")[:14] + rng.randbytes(2), rng.choice([22, 445, unused_port()]))]


        def make_arp():
            choice = rng.random()
            if choice < 0.5:
                address, sender = rng.choice(UNHELD4), rng.choice(STRANGER_MACS)
                return [arp(1, sender, address, address)]
            if choice < 0.7:
                address, sender = rng.choice(UNHELD4), rng.choice(STRANGER_MACS)
                return [arp(2, sender, address, address)]
            return [arp(1, WAKER_MAC, WAKER4, v4(rng.choice(TARGETS)["ipv4"]))]


        HELD6 = [v6(target["ipv6"]) for target in TARGETS if target.get("ipv6")]


        def make_ns():
            choice = rng.random()
            stranger = v6("fd77::e:0")[:14] + rng.randbytes(2)
            if choice < 0.5 or not HELD6:
                return [solicitation(WAKER_LL, stranger)]
            if choice < 0.7:
                return [solicitation(bytes(16), stranger, link_layer=False)]
            return [solicitation(WAKER_LL, rng.choice(HELD6))]


        MAKERS = [("query", 5000, make_query), ("mdns", 300, make_mdns), ("registration", 300, make_registration),
                  ("syn-held", 300, make_syn_held), ("syn-other", 500, make_syn_other), ("arp", 300, make_arp),
                  ("ns", 300, make_ns)]
        KINDS = [kind for kind, _, _ in MAKERS] + ["conflict"]
        rate, seconds = plan["framesPerSecond"], plan["seconds"]

        # Two seconds of frames, each kind spread evenly over them, sent over and over.
        slots = []
        for index, (kind, weight, make) in enumerate(MAKERS):
            budget, frames = max(1, round(2 * rate * weight / 7000)), 0
            while frames < budget:
                item = make()
                slots.append(((frames + rng.random()) / budget, index, item))
                frames += len(item)
        slots.sort(key=lambda slot: slot[0])
        schedule = [(index, frame) for _, index, item in slots for frame in item]

        conflicts = []
        if plan.get("conflictAddress"):
            address, stranger = v4(plan["conflictAddress"]), bytes.fromhex("02bb00000001")
            conflicts = [(plan["conflictAfter"] + 0.5 * n, arp(1, stranger, address, address))
                         for n in range(plan["conflictFrames"])]

        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        sock.bind((plan["interface"], 0))
        counts = [0] * len(KINDS)
        sent = failed = position = 0
        start = time.monotonic()
        while not stop:
            elapsed = time.monotonic() - start
            if elapsed >= seconds:
                break
            due = int(elapsed * rate) + 1
            while position < due:
                index, frame = schedule[position % len(schedule)]
                position += 1
                try:
                    sock.send(frame)
                    sent += 1
                    counts[index] += 1
                except OSError:
                    failed += 1
            while conflicts and conflicts[0][0] <= elapsed:
                try:
                    sock.send(conflicts.pop(0)[1])
                    sent += 1
                    counts[-1] += 1
                except OSError:
                    failed += 1
            time.sleep(0.002)
        elapsed = time.monotonic() - start
        print(json.dumps({"sent": sent, "failed": failed, "seconds": elapsed, "kinds": dict(zip(KINDS, counts))}))
        """#

    /// The well-behaved client. Arguments: the mode (`query`, `register`, `resolve`, `connect`) and its JSON
    /// arguments. Prints one JSON line: a `PacedQueryReport` or a `ClientActionReport`.
    public static let client = #"""
        import json, random, select, socket, struct, sys, time

        mode, arguments = sys.argv[1], json.loads(sys.argv[2])
        IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)


        def name(labels):
            return b"".join(bytes([len(label.encode())]) + label.encode() for label in labels) + b"\0"


        def read_name(message, offset):
            labels, jumped, end = [], False, offset
            for _ in range(128):
                length = message[offset]
                if length >= 0xC0:
                    if not jumped:
                        end = offset + 2
                    offset, jumped = ((length & 0x3F) << 8) | message[offset + 1], True
                    continue
                offset += 1
                if length == 0:
                    break
                labels.append(message[offset:offset + length].decode("utf-8", "replace").lower())
                offset += length
            return labels, (end if jumped else offset)


        def records(message):
            """The (labels, type, rdata) of every answer, authority and additional record."""
            count = sum(struct.unpack("!HHH", message[6:12]))
            offset = 12
            for _ in range(struct.unpack("!H", message[4:6])[0]):
                offset = read_name(message, offset)[1] + 4
            found = []
            for _ in range(count):
                labels, offset = read_name(message, offset)
                kind, _, _, length = struct.unpack("!HHIH", message[offset:offset + 10])
                found.append((labels, kind, message[offset + 10:offset + 10 + length]))
                offset += 10 + length
            return found


        def group_socket(interface, port):
            index = socket.if_nametoindex(interface)
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("=4s4si", bytes(4), bytes(4), index))
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
            if port == 5353:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("0.0.0.0", port))
            if port == 5353:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                                struct.pack("=4s4si", socket.inet_aton("224.0.0.251"), bytes(4), index))
            return sock


        def paced_queries():
            sock = group_socket(arguments["interface"], 0)
            questions, rate = arguments["questions"], arguments["perSecond"]
            total, timeout = int(arguments["seconds"] * rate), arguments["timeout"]
            base, pending, latencies, late, slow, steady = random.randrange(65536), {}, [], 0, [], []

            def receive(until):
                nonlocal late
                while True:
                    wait = until - time.monotonic()
                    if wait <= 0 or not select.select([sock], [], [], wait)[0]:
                        return
                    data = sock.recv(9000)
                    arrived = time.monotonic_ns()
                    if len(data) < 12 or not data[2] & 0x80:
                        continue
                    ident = struct.unpack("!H", data[:2])[0]
                    sent = pending.pop(ident, None)
                    if sent is None:
                        continue
                    if arrived - sent <= timeout * 1e9:
                        latencies.append((arrived - sent) // 1000)
                        if sent - start_ns >= 2e9:
                            steady.append((arrived - sent) // 1000)
                    else:
                        late += 1
                    if arrived - sent > 50e6:
                        slow.append([round((sent - start_ns) / 1e9, 3), (arrived - sent) // 1000])

            start, start_ns = time.monotonic(), time.monotonic_ns()
            for n in range(total):
                receive(start + n / rate)
                question = questions[n % len(questions)]
                ident = (base + n) & 0xFFFF
                message = struct.pack("!HHHHHH", ident, 0, 1, 0, 0, 0) + name(question["labels"])
                pending[ident] = time.monotonic_ns()
                sock.sendto(message + struct.pack("!HH", question["type"], 1), ("224.0.0.251", 5353))
            receive(time.monotonic() + timeout + 0.5)
            lost = [round((sent - start_ns) / 1e9, 3) for sent in pending.values()]
            return {"sent": total, "answered": len(latencies), "late": late, "latencies": sorted(latencies),
                    "steadyLatencies": sorted(steady), "slow": slow, "lost": sorted(lost)}


        def register():
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            message = bytes.fromhex(arguments["message"])
            started, first = time.time_ns(), time.monotonic()
            for attempt in range(1, arguments["tries"] + 1):
                sock.sendto(message, (arguments["address"], arguments["port"]))
                deadline = time.monotonic() + arguments["interval"]
                while True:
                    wait = deadline - time.monotonic()
                    if wait <= 0 or not select.select([sock], [], [], wait)[0]:
                        break
                    reply = sock.recv(9000)
                    if len(reply) >= 12 and reply[:2] == message[:2] and reply[2] & 0x80 and (reply[2] >> 3) & 0xF == 5:
                        return {"succeeded": reply[3] & 0xF == 0, "tries": attempt,
                                "milliseconds": (time.monotonic() - first) * 1000, "startedNanoseconds": started}
            return {"succeeded": False, "tries": arguments["tries"], "startedNanoseconds": started}


        def resolve():
            sock = group_socket(arguments["interface"], 5353)
            wanted = arguments["question"]
            labels, kind = [label.lower() for label in wanted["labels"]], wanted["type"]
            query = struct.pack("!HHHHHH", 0, 0, 1, 0, 0, 0) + name(wanted["labels"]) + struct.pack("!HH", kind, 1)
            started, first, wait = time.time_ns(), time.monotonic(), 1.0
            for attempt in range(1, arguments["tries"] + 1):
                sock.sendto(query, ("224.0.0.251", 5353))
                deadline = time.monotonic() + wait
                wait *= 2
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
                        break
                    data, source = sock.recvfrom(9000)
                    if source[0] != arguments["responder"] or len(data) < 12 or not data[2] & 0x80:
                        continue
                    try:
                        found = [rdata for owner, rtype, rdata in records(data) if owner == labels and rtype == kind]
                    except (IndexError, struct.error):
                        continue
                    if found:
                        return {"succeeded": True, "tries": attempt, "milliseconds": (time.monotonic() - first) * 1000,
                                "startedNanoseconds": started, "rdata": found[0].hex()}
            return {"succeeded": False, "tries": arguments["tries"], "startedNanoseconds": started}


        def connect():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            started = time.time_ns()
            sock.connect_ex((arguments["address"], arguments["port"]))
            select.select([], [sock], [], arguments["seconds"])
            return {"succeeded": False, "tries": 1, "startedNanoseconds": started}


        report = {"query": paced_queries, "register": register, "resolve": resolve, "connect": connect}[mode]()
        print(json.dumps(report))
        """#
}
