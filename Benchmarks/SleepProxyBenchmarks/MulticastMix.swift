import Foundation
import TestLab

/// Multicast questions alongside dnsperf's legacy-unicast ones, as a LAN's Macs and phones ask them: from port
/// 5353 to 224.0.0.251, half of them QM (answered by multicast, at most once a second per record) and half QU
/// (answered by unicast while the record was multicast within a quarter of its TTL), for the names dnsperf asks
/// about. It runs from the waker through the responders' measurements alike, so that the machine carries the same
/// load for each; the daemon, up throughout, answers them.
struct MulticastMix {
    /// Multicast questions a second.
    static let rate = 2_000

    let process: LabProcess

    /// Starts asking the A, SRV and TXT questions of `hosts` of `profile` in turn, QM and QU alternately.
    static func start(_ lab: Lab, profile: HeldHostsProfile, hosts: [Int]) throws -> MulticastMix {
        let questions = hosts.flatMap { index in
            [
                "\(profile.name(index)).local 1", "\(profile.name(index))._ssh._tcp.local 33",
                "\(profile.name(index))._ssh._tcp.local 16",
            ]
        }
        let file = lab.workDirectory + "/multicast-mix.txt"
        try questions.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return MulticastMix(
            process: try lab.spawn(.waker, ["python3", "-c", script, Lab.interfaceName, String(rate), file]))
    }

    /// Stops the querier; what it sent and received, as `figure: value` lines under `prefix`.
    func stop(_ prefix: String) {
        process.signal(SIGTERM)
        _ = process.wait(timeout: .seconds(5))
        var figures: [String: Int] = [:]
        for line in process.stdout.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let value = Int(fields[1]) { figures[String(fields[0])] = value }
        }
        let sent = figures["sent"] ?? 0
        print(
            "\(prefix)_multicast_mix: \(sent) questions (\(Self.rate) a second, QM and QU), \(figures["multicast"] ?? 0) multicast and \(figures["unicast"] ?? 0) unicast responses"
        )
    }

    /// Asks from port 5353 (joined to the group, so multicast answers arrive too), paced in 10 ms steps, until
    /// SIGTERM; then prints `sent N`, `multicast N` and `unicast N` (responses received).
    static let script = #"""
        import select, signal, socket, struct, sys, time
        interface, rate, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        IP_PKTINFO, SO_BINDTODEVICE = 8, 25
        def wire(name, qtype, qu):
            out = b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"
            for label in name.split("."):
                out += bytes([len(label)]) + label.encode()
            return out + b"\x00" + struct.pack("!HH", qtype, 0x8001 if qu else 1)
        lines = [line.split() for line in open(path) if line.strip()]
        queries = [wire(name, int(qtype), index % 2 == 1) for index, (name, qtype) in enumerate(lines)]
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, interface.encode())
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
        sock.bind(("0.0.0.0", 5353))
        request = socket.inet_aton("224.0.0.251") + socket.inet_aton("0.0.0.0") + struct.pack("i", socket.if_nametoindex(interface))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, request)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, request)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
        sock.setblocking(False)
        counts = {"sent": 0, "multicast": 0, "unicast": 0}
        running = [True]
        signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
        step = 0.01
        per_step = max(1, rate // 100)
        next_step = time.monotonic()
        while running[0]:
            now = time.monotonic()
            if now >= next_step:
                for _ in range(per_step):
                    sock.sendto(queries[counts["sent"] % len(queries)], ("224.0.0.251", 5353))
                    counts["sent"] += 1
                next_step += step
            try:
                readable, _, _ = select.select([sock], [], [], max(0.0, next_step - time.monotonic()))
            except InterruptedError:
                continue
            while readable:
                try:
                    data, ancillary, _, _ = sock.recvmsg(9000, 64)
                except BlockingIOError:
                    break
                if len(data) < 12 or not data[2] & 0x80:
                    continue
                destination = next((socket.inet_ntoa(d[8:12]) for level, kind, d in ancillary
                                    if level == socket.IPPROTO_IP and kind == IP_PKTINFO), "")
                counts["multicast" if destination == "224.0.0.251" else "unicast"] += 1
        for key in ("sent", "multicast", "unicast"):
            print(key, counts[key])
        sys.stdout.flush()
        """#
}
