import CaptureStream
import DNSWire
import Foundation
import Frames
import NetworkAddresses
import SleepProxyControl
import SleepProxyCore
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// TCP keepalive offload against real kernels: the sleeper holds a real connection to the waker and registers it
/// as a Mac does (its sequence, acknowledgment and window read from its own kernel), then sleeps. The waker's
/// kernel probes the idle connection with TCP keepalive every second; only the proxy's answers keep it
/// established. Then data, or a RST, from the waker wakes the sleeper.
@Suite(.requiresLab(tools: ["python3", "ss"]))
struct KeepaliveLabTests {
    static let peerPort: UInt16 = 4_000
    static let localPort: UInt16 = 50_000
    /// Seconds between the proxy's keepalives (the record's `t`).
    static let interval: UInt32 = 4

    /// The waker's side: accepts one connection, answers "hello" with "world", then waits for orders in
    /// `command`: "probe" turns TCP keepalive on with short timers (probe after 1 s idle, every second, give up
    /// after 2 unanswered probes: a dead peer is noticed within 3 s); "data" sends data; "rst" resets the
    /// connection. It prints what happens, one line each.
    static let peerScript = #"""
        import os, socket, struct, sys, time
        command = sys.argv[1]
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", 4000))
        server.listen(1)
        print("listening", flush=True)
        conn, peer = server.accept()
        print("accepted", peer, flush=True)
        assert conn.recv(5) == b"hello"
        conn.sendall(b"world")
        conn.setblocking(False)
        while True:
            try:
                data = conn.recv(100)
                print("closed by peer" if data == b"" else "received", data, flush=True)
                if data == b"":
                    break
            except BlockingIOError:
                pass
            except OSError as error:
                print("connection error", error.errno, error.strerror, flush=True)
                break
            if os.path.exists(command):
                order = open(command).read().strip()
                os.remove(command)
                if order == "probe":
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 2)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                    print("probing", flush=True)
                elif order == "data":
                    conn.sendall(b"new data for the sleeper")
                    print("sent data", flush=True)
                elif order == "rst":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()
                    print("sent rst", flush=True)
                    break
            time.sleep(0.05)
        time.sleep(30)
        """#

    /// The sleeper's side: connects from port 50000, says "hello", reads "world", then reads from its kernel what
    /// a Mac's mDNSResponder puts in the keepalive record (`mDNSPlatformRetrieveTCPInfo`): the next sequence
    /// number to send, the next expected, and the receive window (unscaled, as it goes in the header). Prints
    /// `s a w`, keeps the socket open.
    static let hostScript = #"""
        import socket, struct, sys, time
        TCP_REPAIR, TCP_REPAIR_QUEUE, TCP_QUEUE_SEQ, TCP_REPAIR_WINDOW = 19, 20, 21, 29
        TCP_RECV_QUEUE, TCP_SEND_QUEUE = 1, 2
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((sys.argv[1], 50000))
        s.connect((sys.argv[2], 4000))
        s.sendall(b"hello")
        assert s.recv(5) == b"world"
        time.sleep(0.3)
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        receive_scale = info[6] >> 4
        s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
        s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, TCP_SEND_QUEUE)
        send_next = s.getsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ)
        s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR_QUEUE, TCP_RECV_QUEUE)
        receive_next = s.getsockopt(socket.IPPROTO_TCP, TCP_QUEUE_SEQ)
        window = struct.unpack("5I", s.getsockopt(socket.IPPROTO_TCP, TCP_REPAIR_WINDOW, 20))[3]
        s.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 0)
        print((send_next - 1) % 2**32, receive_next % 2**32, min(window >> receive_scale, 65535), flush=True)
        time.sleep(600)
        """#

    struct Connection {
        var host: LabProcess
        var peer: LabProcess
        var record: DNSRecord
        var command: String
    }

    /// Opens the connection and builds the record a Mac would register for it.
    func connect(_ lab: Lab) async throws -> Connection {
        let command = lab.workDirectory + "/peer-command"
        let peer = try lab.spawn(.waker, ["python3", "-c", Self.peerScript, command])
        _ = try await eventually("the peer listening", within: .seconds(10)) {
            peer.stdout.contains("listening") ? true : nil
        }
        let sleeper = lab.host(.sleeper)
        let waker = lab.host(.waker)
        let host = try lab.spawn(.sleeper, ["python3", "-c", Self.hostScript, sleeper.ipv4, waker.ipv4])
        let numbers = try await eventually("the host's sequence numbers", within: .seconds(10)) { () -> [UInt32]? in
            if host.hasExited { throw TimeoutError("the host's script exited: \(host.stderr)") }
            let fields = host.stdout.split(separator: "\n").first?.split(separator: " ").compactMap { UInt32($0) }
            return fields?.count == 3 ? fields : nil
        }
        let connection = KeepaliveConnection(
            interval: Self.interval, local: Endpoint(address: try ip(sleeper.ipv4), port: Self.localPort),
            remote: Endpoint(address: try ip(waker.ipv4), port: Self.peerPort),
            remoteMAC: try #require(MACAddress(waker.macString)), sequence: numbers[0], acknowledgment: numbers[1],
            window: UInt16(numbers[2]))
        return Connection(host: host, peer: peer, record: KeepaliveRecord.record(connection), command: command)
    }

    /// The waker's view of the connection: `ss` with its keepalive timer (`timer:(keepalive,...,N)`, N being the
    /// probes sent and not answered yet), or nil when it is no longer established.
    func peerSocket(_ lab: Lab) async throws -> String? {
        let result = try await lab.run(.waker, ["ss", "-tnoH", "state", "established", "( sport = :4000 )"])
        let line = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return line.isEmpty ? nil : line
    }

    func detail(_ lab: Lab) async throws -> HostDetail {
        let result = try await lab.run(
            .proxy,
            [
                try OperationsLabTests.ctlPath(), "--socket", lab.workDirectory + "/control.sock", "show",
                lab.host(.sleeper).ipv4, "--json",
            ])
        return try ControlProtocol.decoder().decode(HostDetail.self, from: Data(result.stdout.utf8))
    }

    /// Gives the waker's script an order and waits until it is taken.
    func order(_ connection: Connection, _ text: String) async throws {
        try text.write(toFile: connection.command, atomically: true, encoding: .utf8)
        _ = try await eventually("the order \(text) taken", within: .seconds(5)) {
            FileManager.default.fileExists(atPath: connection.command) ? nil : true
        }
    }

    /// The daemon started, the connection open, and the sleeper registered with its record, asleep and taken
    /// over; with a capture of the magic packets at the sleeper's NIC from then on.
    func heldWithConnection(_ lab: Lab) async throws -> (daemon: LabProcess, connection: Connection, nic: CaptureStream)
    {
        let daemon = try RegistrationDaemonLabTests().startDaemon(lab, state: lab.workDirectory + "/state")
        let connection = try await connect(lab)
        try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon, extra: [connection.record])
        return (daemon, connection, try magicPackets(lab))
    }

    /// Held for several keepalive periods while the waker's kernel probes every second, then woken by data.
    @Test func theConnectionStaysUpThenDataWakesTheHost() async throws {
        try await Lab.withLab { lab in
            let (daemon, connection, nic) = try await heldWithConnection(lab)
            defer { daemon.signal(SIGTERM) }
            defer { nic.close() }

            // The waker's kernel starts probing; without answers it would drop the connection within 3 s. Then
            // three keepalive periods.
            try await order(connection, "probe")
            let heldFor: Duration = .seconds(Int64(Self.interval) * 3 + 2)
            let start = ContinuousClock.now
            var samples: [String] = []
            while ContinuousClock.now - start < heldFor {
                let socket = try await peerSocket(lab)
                #expect(socket != nil, "the waker's connection is still established: \(connection.peer.stdout)")
                if let socket { samples.append(socket) }
                try await Task.sleep(for: .seconds(1))
            }
            #expect(samples.contains { $0.contains("keepalive") }, "the waker's kernel was probing: \(samples)")
            #expect(!connection.peer.stdout.contains("connection error"), "\(connection.peer.stdout)")
            let kept = try #require(try await detail(lab).connections?.first, "show lists the connection")
            #expect(kept.remote == "\(lab.host(.waker).ipv4):4000" && kept.local == "\(lab.host(.sleeper).ipv4):50000")
            #expect(kept.keepalivesSent >= 3, "\(kept)")
            #expect(kept.probesAnswered >= 5, "\(kept)")
            #expect(!kept.silent)
            print(
                "keepalive lab: held \(heldFor) with the peer probing every second: \(kept.keepalivesSent) keepalives sent, \(kept.probesAnswered) probes answered; last ss line: \(samples.last ?? "-")"
            )
            #expect(!daemon.stderr.contains("waking"), "no wake while only keepalives and probes came")

            try await order(connection, "data")
            try await expectMagicPacketForSleeper(lab, at: nic)
            let events = try await lab.run(
                .proxy,
                [
                    try OperationsLabTests.ctlPath(), "--socket", lab.workDirectory + "/control.sock", "events",
                    "--json",
                ])
            let reports = try ControlProtocol.decoder().decode([EventReport].self, from: Data(events.stdout.utf8))
            let wake = try #require(reports.last { $0.kind == "wake" }, "\(reports)")
            #expect(wake.detail.hasPrefix("TCP data") && wake.detail.contains("kept-alive connection"), "\(wake)")
            #expect(wake.sourceAddress == lab.host(.waker).ipv4 && wake.sourcePort == 4_000, "\(wake)")
            #expect(reports.contains { $0.kind == "keepalive" && $0.detail.contains("alive every 4 s") })
        }
    }

    /// A RST from the waker wakes the host too.
    @Test func aResetWakesTheHost() async throws {
        try await Lab.withLab { lab in
            let (daemon, connection, nic) = try await heldWithConnection(lab)
            defer { daemon.signal(SIGTERM) }
            defer { nic.close() }
            try await Task.sleep(for: .seconds(3))
            #expect(try await peerSocket(lab) != nil, "\(connection.peer.stdout)")

            try await order(connection, "rst")
            try await expectMagicPacketForSleeper(lab, at: nic)
            try await daemon.waitUntilLogged(
                "TCP RST from \(lab.host(.waker).ipv4):4000 on the kept-alive connection", "the wake logged",
                within: .seconds(5))
        }
    }
}
