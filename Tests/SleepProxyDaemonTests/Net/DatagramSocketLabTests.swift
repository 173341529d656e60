import Dispatch
import Foundation
import Logging
import NetworkAddresses
import NetworkIO
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `DatagramSocket` against real kernels: sockets in the lab's proxy namespace, a Python UDP client in the waker.
@Suite(.requiresLab(tools: ["python3"]))
struct DatagramSocketLabTests {
    /// An address of the proxy a client can target.
    ///
    /// The secondary addresses are added next to the lab's own, such that the kernel would pick the primary one as
    /// the source: only a reply that sets its source reaches the client from them.
    struct Target: Sendable, CustomTestStringConvertible {
        enum Kind: Sendable {
            case ipv4
            case ula
            case linkLocal
            case secondaryIPv4
            case secondaryULA
        }

        let kind: Kind

        var testDescription: String {
            switch kind {
            case .ipv4: "IPv4"
            case .ula: "IPv6 ULA"
            case .linkLocal: "IPv6 link-local"
            case .secondaryIPv4: "secondary IPv4"
            case .secondaryULA: "secondary IPv6 ULA"
            }
        }

        var family: DatagramSocket.Family { kind == .ipv4 || kind == .secondaryIPv4 ? .ipv4 : .ipv6 }

        /// `host`'s address of this kind; the secondary ones are the proxy's only.
        func address(of host: LabHost) -> String {
            switch (kind, host.role) {
            case (.secondaryIPv4, .proxy): "10.77.0.11"
            case (.secondaryULA, .proxy): "fd77::11"
            case (.ipv4, _), (.secondaryIPv4, _): host.ipv4
            case (.ula, _), (.secondaryULA, _): host.ula
            case (.linkLocal, _): host.ipv6LinkLocal
            }
        }

        /// The address as a client on the lab's Ethernet writes it (`fe80::…%eth0` for link-local).
        func clientTarget(_ host: LabHost) -> String {
            kind == .linkLocal ? "\(address(of: host))%\(Lab.interfaceName)" : address(of: host)
        }

        /// Adds the secondary address to the proxy (`nodad`, so it is usable at once). An IPv4 secondary address is
        /// never the kernel's choice of source while the primary exists.
        func prepare(_ lab: Lab) async throws {
            let proxy = lab.host(.proxy)
            let prefixLength: Int
            switch kind {
            case .secondaryIPv4: prefixLength = proxy.ipv4PrefixLength
            case .secondaryULA: prefixLength = proxy.ipv6PrefixLength
            case .ipv4, .ula, .linkLocal: return
            }
            var command = ["ip", "address", "add", "\(address(of: proxy))/\(prefixLength)", "dev", Lab.interfaceName]
            // Deprecated (preferred lifetime 0), so the kernel never picks it as a source on its own.
            if family == .ipv6 { command += ["nodad", "preferred_lft", "0"] }
            let result = try await lab.run(.proxy, command)
            guard result.succeeded else { throw TestFailure("cannot add \(address(of: proxy)): \(result)") }
        }
    }

    static let targets = [
        Target(kind: .ipv4), Target(kind: .ula), Target(kind: .linkLocal), Target(kind: .secondaryIPv4),
        Target(kind: .secondaryULA),
    ]
    static let families: [DatagramSocket.Family] = [.ipv4, .ipv6]

    // MARK: Receiving and replying

    /// The datagram arrives with its source, the exact destination and the interface; the reply comes from the
    /// address the client targeted.
    @Test("a reply comes from the address the client targeted", arguments: targets)
    func replyComesFromTheTargetedAddress(target: Target) async throws {
        try await Lab.withLab { lab in
            try await target.prepare(lab)
            let proxy = lab.host(.proxy)
            let waker = lab.host(.waker)
            let (socket, eth0) = try lab.withNamespace(.proxy) {
                (
                    try DatagramSocket(family: target.family, interface: Lab.interfaceName, port: 0),
                    try NetworkInterface.named(Lab.interfaceName)
                )
            }
            defer { socket.close() }
            #expect(socket.family == target.family)
            #expect(socket.localPort != 0)

            async let client = UDPClient.exchange(
                in: lab,
                to: target.clientTarget(proxy),
                port: socket.localPort,
                payload: "ping"
            )
            let datagram = try await nextDatagram(from: socket)
            try socket.send(
                Array("pong".utf8),
                to: datagram.source,
                scopeID: datagram.sourceScopeID,
                from: datagram.destination,
                interfaceIndex: datagram.interfaceIndex
            )
            let output = try await client

            #expect(datagram.bytes == Array("ping".utf8))
            #expect(!datagram.truncated)
            #expect(datagram.source == Endpoint(address: try ip(target.address(of: waker)), port: output.localPort))
            #expect(datagram.sourceScopeID == (target.kind == .linkLocal ? eth0.index : 0))
            #expect(datagram.destination == (try ip(target.address(of: proxy))))
            #expect(datagram.destinationPort == socket.localPort)
            #expect(datagram.interfaceIndex == eth0.index)

            #expect(output.replyAddress == target.clientTarget(proxy))
            #expect(output.replyPort == socket.localPort)
            #expect(output.replyPayload == "pong")
        }
    }

    @Test("a reply sent from the received destination leaves from it", arguments: targets)
    func replyHelper(target: Target) async throws {
        try await Lab.withLab { lab in
            try await target.prepare(lab)
            let proxy = lab.host(.proxy)
            let socket = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: target.family, interface: Lab.interfaceName, port: 0)
            }
            defer { socket.close() }
            async let client = UDPClient.exchange(
                in: lab,
                to: target.clientTarget(proxy),
                port: socket.localPort,
                payload: "question"
            )
            let datagram = try await nextDatagram(from: socket)
            // A reply as the registration socket sends one: from the address the datagram was sent to.
            try socket.send(
                Array("answer".utf8), to: datagram.source, scopeID: datagram.sourceScopeID, from: datagram.destination,
                interfaceIndex: datagram.interfaceIndex)
            let output = try await client
            #expect(
                datagram.destinationEndpoint
                    == Endpoint(address: try ip(target.address(of: proxy)), port: socket.localPort))
            #expect(output.replyAddress == target.clientTarget(proxy))
            #expect(output.replyPort == socket.localPort)
            #expect(output.replyPayload == "answer")
        }
    }

    /// Registration sockets hold a burst: 4 MiB of receive buffer, past `net.core.rmem_max` with CAP_NET_ADMIN.
    @Test("a registration socket's receive buffer is enlarged", arguments: families)
    func receiveBufferIsEnlarged(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let socket = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: 0)
            }
            defer { socket.close() }
            let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
            let granted = InterfaceShell.enlargeReceiveBuffer(socket.fileDescriptor, logger: logger, what: "test")
            // The kernel reports twice what was asked.
            #expect(granted >= 2 * InterfaceShell.registrationReceiveBuffer, "\(granted)")
        }
    }

    @Test("the largest datagram a family can carry arrives whole", arguments: families)
    func largestDatagram(family: DatagramSocket.Family) async throws {
        // 65,535 minus the 8-byte UDP header, minus the 20-byte IPv4 header for IPv4.
        let size = family == .ipv4 ? 65_507 : 65_527
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let socket = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: 0)
            }
            defer { socket.close() }
            let target = family == .ipv4 ? proxy.ipv4 : proxy.ula
            let output = try await UDPClient.send(
                in: lab, to: target, port: socket.localPort, payload: "z", repeat: size)
            let datagram = try await nextDatagram(from: socket)
            #expect(datagram.bytes.count == size)
            #expect(datagram.bytes.allSatisfy { $0 == UInt8(ascii: "z") })
            #expect(!datagram.truncated)
            #expect(datagram.source.port == output.localPort)
        }
    }

    /// A batch larger than one `sendmmsg` (64) goes out whole, in order, from the given source; the one datagram
    /// of another family is reported by its index and keeps none of the others back.
    @Test("send(batch:) sends every datagram but the one it cannot, and says which", arguments: families)
    func batchSend(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let waker = lab.host(.waker)
            let sender = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: 0)
            }
            defer { sender.close() }
            let receiver = try lab.withNamespace(.waker) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: 0)
            }
            defer { receiver.close() }
            let to = try #require(IPAddress(family == .ipv4 ? waker.ipv4 : waker.ula))
            let from = try #require(IPAddress(family == .ipv4 ? proxy.ipv4 : proxy.ula))
            let elsewhere = try #require(IPAddress(family == .ipv4 ? "fd77::9" : "10.77.0.9"))
            let batch = (0..<100).map { number in
                OutgoingDatagram(
                    bytes: Array("datagram \(number)".utf8),
                    destination: Endpoint(address: number == 50 ? elsewhere : to, port: receiver.localPort),
                    source: from)
            }
            let failures = sender.send(batch: batch)
            #expect(failures.map(\.index) == [50])
            #expect(failures.first?.error.code == .addressFamilyMismatch)
            var received: [String] = []
            while received.count < 99 {
                let datagram = try await nextDatagram(from: receiver, within: .seconds(5))
                #expect(datagram.source.address == from)
                received.append(String(decoding: datagram.bytes, as: UTF8.self))
            }
            #expect(received == (0..<100).filter { $0 != 50 }.map { "datagram \($0)" })
        }
    }

    // MARK: What the socket does not see

    @Test("receive() returns nil when nothing is pending", arguments: families)
    func receiveReturnsNilWhenIdle(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let socket = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: 0)
            }
            defer { socket.close() }
            #expect(socket.fileDescriptor >= 0)
            #expect(try socket.receive() == nil)
            #expect(try socket.receive() == nil)
        }
    }

    @Test(
        "a datagram sent inside the proxy to loopback on the same port does not reach the socket on eth0",
        arguments: families)
    func loopbackTrafficIsNotReceived(family: DatagramSocket.Family) async throws {
        let loopback = family == .ipv4 ? "127.0.0.1" : "::1"
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let socket = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: 0)
            }
            defer { socket.close() }
            let noPortsBefore = try lab.withNamespace(.proxy) { try udpNoPorts(family) }

            _ = try await UDPClient.send(
                in: lab, from: .proxy, to: loopback, port: socket.localPort, payload: "loopback")
            // The kernel counts a datagram for which it finds no socket; this is how we know it arrived and was
            // not for us.
            try await waitUntil("the loopback datagram is counted as NoPorts") {
                try lab.withNamespace(.proxy) { try udpNoPorts(family) } > noPortsBefore
            }

            let target = family == .ipv4 ? proxy.ipv4 : proxy.ula
            _ = try await UDPClient.send(in: lab, to: target, port: socket.localPort, payload: "marker")
            let datagram = try await nextDatagram(from: socket)
            #expect(String(decoding: datagram.bytes, as: UTF8.self) == "marker")
            #expect(try socket.receive() == nil)
        }
    }

    // MARK: Sharing a port

    /// Linux lets two UDP sockets that both set `SO_REUSEADDR` bind the same address, port and device; each
    /// unicast datagram then goes to one of them only: the most recently bound. Closing it hands the port back.
    @Test("binding the same port twice succeeds; the newer socket gets unicast until it closes", arguments: families)
    func samePortTwice(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let target = family == .ipv4 ? proxy.ipv4 : proxy.ula
            let older = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: 0)
            }
            defer { older.close() }
            let newer = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: family, interface: Lab.interfaceName, port: older.localPort)
            }
            defer { newer.close() }
            #expect(newer.localPort == older.localPort)

            _ = try await UDPClient.send(in: lab, to: target, port: older.localPort, payload: "first")
            let first = try await nextDatagram(from: newer)
            #expect(String(decoding: first.bytes, as: UTF8.self) == "first")
            #expect(try older.receive() == nil)

            newer.close()
            _ = try await UDPClient.send(in: lab, to: target, port: older.localPort, payload: "second")
            let second = try await nextDatagram(from: older)
            #expect(String(decoding: second.bytes, as: UTF8.self) == "second")
        }
    }

    @Test("a port held by a socket without SO_REUSEADDR gives addressInUse", arguments: families)
    func portHeldWithoutReuse(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            try lab.withNamespace(.proxy) {
                let holder = try PlainSocket(family: family)
                defer { holder.close() }
                let error = #expect(throws: SystemError.self) {
                    try DatagramSocket(family: family, interface: Lab.interfaceName, port: holder.port)
                }
                let wildcard = family == .ipv4 ? "0.0.0.0:\(holder.port)" : "[::]:\(holder.port)"
                #expect(error?.code == .addressInUse)
                #expect(error?.errorNumber == EADDRINUSE)
                let index = try NetworkInterface.named(Lab.interfaceName).index
                #expect(
                    error?.description
                        == "bind UDP \(wildcard) on eth0 (index \(index)): Address already in use "
                        + "(another socket holds port \(holder.port) without SO_REUSEADDR)")
            }
        }
    }

    // MARK: Interfaces and privileges

    @Test("opening on an interface that does not exist in the namespace gives interfaceNotFound")
    func missingInterface() async throws {
        try await Lab.withLab { lab in
            for name in ["nosuch0", "", "a-name-too-long-for-linux"] {
                let error = try lab.withNamespace(.proxy) {
                    #expect(throws: SystemError.self) {
                        try DatagramSocket(family: .ipv6, interface: name, port: 0)
                    }
                }
                #expect(error?.code == .interfaceNotFound, "\(name)")
                #expect(error?.description.contains("'\(name)'") == true, "\(error.map(String.init) ?? "")")
            }
            // eth0 exists in every host, but not in the bridge's namespace.
            let error = try Lab.withNamespace(named: lab.bridgeNamespace) {
                #expect(throws: SystemError.self) {
                    try DatagramSocket(family: .ipv4, interface: Lab.interfaceName, port: 0)
                }
            }
            #expect(error?.code == .interfaceNotFound)
            #expect(error?.errorNumber == ENODEV)
            #expect(error?.description.contains("no interface 'eth0' in this network namespace") == true)
        }
    }

    /// Since Linux 5.7 an unprivileged socket may bind to a device once; only re-binding needs CAP_NET_RAW. So
    /// the daemon needs no CAP_NET_RAW for these sockets (it does for capture).
    @Test("without CAP_NET_RAW the socket opens on Linux 5.7 and later")
    func withoutNetRaw() async throws {
        try await Lab.withLab { lab in
            let namespace = lab.host(.proxy).namespace
            let outcome = try await onFreshThread {
                try Lab.withNamespace(named: namespace) { () throws -> Result<UInt16, SystemError> in
                    // Capabilities are per thread; this thread ends right after.
                    try dropEffectiveCapability(capNetRaw)
                    guard try effectiveCapabilities() & (1 << capNetRaw) == 0 else {
                        throw TestFailure("CAP_NET_RAW is still effective")
                    }
                    do {
                        let socket = try DatagramSocket(family: .ipv6, interface: Lab.interfaceName, port: 0)
                        defer { socket.close() }
                        return .success(socket.localPort)
                    } catch let error as SystemError {
                        return .failure(error)
                    }
                }
            }
            if try kernelVersion() >= [5, 7] {
                #expect(throws: Never.self) { try outcome.get() }
            } else {
                #expect(throws: SystemError.self) { try outcome.get() }
                if case .failure(let error) = outcome {
                    #expect(error.code == .permissionDenied)
                    #expect(error.description.contains("CAP_NET_RAW"))
                }
            }
        }
    }

    // MARK: Sending errors and closing

    @Test("send rejects another family, a source the host does not own and a scope that contradicts the interface")
    func sendErrors() async throws {
        try await Lab.withLab { lab in
            let (v4, v6, eth0, lo) = try lab.withNamespace(.proxy) {
                (
                    try DatagramSocket(family: .ipv4, interface: Lab.interfaceName, port: 0),
                    try DatagramSocket(family: .ipv6, interface: Lab.interfaceName, port: 0),
                    try NetworkInterface.named(Lab.interfaceName),
                    try NetworkInterface.named("lo")
                )
            }
            defer {
                v4.close()
                v6.close()
            }
            let waker = lab.host(.waker)
            let proxy = lab.host(.proxy)

            let mismatch = #expect(throws: SystemError.self) {
                try v6.send(
                    [1],
                    to: Endpoint(address: try ip(waker.ipv4), port: 9),
                    scopeID: 0,
                    from: try ip(proxy.ula),
                    interfaceIndex: eth0.index
                )
            }
            #expect(mismatch?.code == .addressFamilyMismatch)
            #expect(mismatch?.description.contains("10.77.0.3 is not an IPv6 address") == true)

            let foreignV6 = #expect(throws: SystemError.self) {
                try v6.send(
                    [1],
                    to: Endpoint(address: try ip(waker.ula), port: 9),
                    scopeID: 0,
                    from: try ip("fd77::99"),
                    interfaceIndex: eth0.index
                )
            }
            #expect(foreignV6?.code == .sendFailed)
            #expect(foreignV6?.errorNumber == EINVAL)
            #expect(foreignV6?.description.contains("from [fd77::99]:\(v6.localPort) to [fd77::3]:9") == true)

            // IPv4 looks the source up as a route: an address nobody here owns has no route (ENETUNREACH).
            let foreignV4 = #expect(throws: SystemError.self) {
                try v4.send(
                    [1],
                    to: Endpoint(address: try ip(waker.ipv4), port: 9),
                    scopeID: 0,
                    from: try ip("10.77.0.99"),
                    interfaceIndex: eth0.index
                )
            }
            #expect(foreignV4?.code == .sendFailed)
            #expect(foreignV4?.errorNumber == ENETUNREACH)

            let contradiction = #expect(throws: SystemError.self) {
                try v6.send(
                    [1],
                    to: Endpoint(address: try ip(waker.ipv6LinkLocal), port: 9),
                    scopeID: lo.index,
                    from: try ip(proxy.ipv6LinkLocal),
                    interfaceIndex: eth0.index
                )
            }
            #expect(contradiction?.code == .sendFailed)
            #expect(contradiction?.errorNumber == EINVAL)
        }
    }

    @Test("close() is idempotent and later calls fail with closed")
    func closing() async throws {
        try await Lab.withLab { lab in
            let socket = try lab.withNamespace(.proxy) {
                try DatagramSocket(family: .ipv4, interface: Lab.interfaceName, port: 0)
            }
            let descriptor = socket.fileDescriptor
            #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0)
            #expect(fcntl(descriptor, F_GETFL) & O_NONBLOCK != 0)
            socket.close()
            socket.close()
            #expect(socket.fileDescriptor == -1)
            let receiveError = #expect(throws: SystemError.self) { try socket.receive() }
            #expect(receiveError?.code == .closed)
            let sendError = #expect(throws: SystemError.self) {
                try socket.send(
                    [1],
                    to: Endpoint(address: try ip(lab.host(.waker).ipv4), port: 9),
                    scopeID: 0,
                    from: try ip(lab.host(.proxy).ipv4),
                    interfaceIndex: 0
                )
            }
            #expect(sendError?.code == .closed)
        }
    }
}

// MARK: - Helpers

/// The kernel's count of UDP datagrams that found no socket, for the calling thread's network namespace.
private func udpNoPorts(_ family: DatagramSocket.Family) throws -> Int {
    if family == .ipv4 {
        // Two "Udp:" lines: names, then values.
        let lines = try String(contentsOfFile: "/proc/thread-self/net/snmp", encoding: .utf8)
            .split(separator: "\n").filter { $0.hasPrefix("Udp: ") }
        let names = try #require(lines.first).split(separator: " ")
        let values = try #require(lines.dropFirst().first).split(separator: " ")
        let index = try #require(names.firstIndex(of: "NoPorts"))
        return try #require(Int(values[index]))
    }
    let line = try #require(
        try String(contentsOfFile: "/proc/thread-self/net/snmp6", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("Udp6NoPorts ") }
    )
    let value = try #require(line.split(whereSeparator: \.isWhitespace).last)
    return try #require(Int(value))
}

/// A small Python UDP client run in a lab host.
private enum UDPClient {
    /// Sends `payload` repeated `repeat` times to `host` (`addr%eth0` for link-local) and `port`; prints its own
    /// port; with `reply`, waits up to 5 s for one datagram and prints where it came from (with `%interface` for
    /// a scoped address, which Python before 3.12 leaves out of the text) and what it said.
    static let script = """
        import socket, sys
        host, port, payload, repeat, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
        family, _, _, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)[0]
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(payload.encode() * repeat, address)
        print(s.getsockname()[1], flush=True)
        if mode == "reply":
            data, source = s.recvfrom(65535)
            address = source[0]
            if family == socket.AF_INET6 and source[3] and "%" not in address:
                address += "%" + socket.if_indextoname(source[3])
            print(address, source[1], data.decode(), flush=True)
        """

    struct Output: Sendable {
        var localPort: UInt16
        var replyAddress: String?
        var replyPort: UInt16?
        var replyPayload: String?
    }

    static func send(
        in lab: Lab,
        from role: Lab.Role = .waker,
        to host: String,
        port: UInt16,
        payload: String,
        repeat count: Int = 1
    ) async throws -> Output {
        try await run(lab, role, [host, "\(port)", payload, "\(count)", "send"])
    }

    static func exchange(in lab: Lab, to host: String, port: UInt16, payload: String) async throws -> Output {
        try await run(lab, .waker, [host, "\(port)", payload, "1", "reply"])
    }

    private static func run(_ lab: Lab, _ role: Lab.Role, _ arguments: [String]) async throws -> Output {
        let result = try await lab.run(role, ["python3", "-c", script] + arguments)
        guard result.succeeded else { throw TestFailure("UDP client failed: \(result)") }
        let lines = result.stdout.split(separator: "\n")
        guard let first = lines.first, let localPort = UInt16(first) else {
            throw TestFailure("UDP client printed no port: \(result)")
        }
        var output = Output(localPort: localPort)
        if lines.count > 1 {
            let fields = lines[1].split(separator: " ", maxSplits: 2).map(String.init)
            guard fields.count == 3 else {
                throw TestFailure("cannot parse the UDP client's reply line: \(result)")
            }
            output.replyAddress = fields[0]
            output.replyPort = UInt16(fields[1])
            output.replyPayload = fields[2]
        }
        return output
    }
}

/// A UDP socket bound to the wildcard address and an ephemeral port without `SO_REUSEADDR` or a device.
private struct PlainSocket {
    let descriptor: Int32
    let port: UInt16

    init(family: DatagramSocket.Family) throws {
        let addressFamily = family == .ipv4 ? AF_INET : AF_INET6
        let descriptor = socket(addressFamily, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var storage = sockaddr_storage()
        storage.ss_family = sa_family_t(addressFamily)
        let length = socklen_t(
            addressFamily == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size
        )
        let bound = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                var nameLength = length
                return bind(descriptor, address, length) == 0 && getsockname(descriptor, address, &nameLength) == 0
            }
        }
        guard bound else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw TestFailure("bind: \(reason)")
        }
        self.descriptor = descriptor
        // sin_port and sin6_port both sit at offset 2, in network order.
        self.port = withUnsafeBytes(of: storage) { UInt16($0[2]) << 8 | UInt16($0[3]) }
    }

    func close() {
        Glibc.close(descriptor)
    }
}

// MARK: Kernel

/// The running kernel's major and minor version.
private func kernelVersion() throws -> [Int] {
    var name = utsname()
    guard uname(&name) == 0 else { throw TestFailure("uname: \(String(cString: strerror(errno)))") }
    let release = withUnsafeBytes(of: name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
    guard numbers.count == 2 else { throw TestFailure("cannot parse the kernel release \(release)") }
    return numbers
}

extension [Int] {
    fileprivate static func >= (lhs: [Int], rhs: [Int]) -> Bool {
        !lhs.lexicographicallyPrecedes(rhs)
    }
}
