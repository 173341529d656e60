import Dispatch
import Foundation
import NetworkAddresses
import NetworkIO
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `DatagramSocket.multicastDNS` against real kernels: our socket in the proxy namespace next to a Python stand-in
/// for avahi-daemon, Python queriers and receivers in the waker.
@Suite(.requiresLab(tools: ["python3"]))
struct MulticastDNSSocketLabTests {
    /// When the avahi stand-in binds port 5353, relative to our socket.
    enum StartOrder: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case avahiFirst
        case avahiSecond

        var testDescription: String { self == .avahiFirst ? "avahi started first" : "avahi started second" }
    }

    static let families: [DatagramSocket.Family] = [.ipv4, .ipv6]

    // MARK: Sharing port 5353 with avahi-daemon

    /// Both sockets bind in either order. Multicast reaches both; unicast to the host's own address on 5353 goes
    /// to avahi only, because a socket bound to the group never matches a unicast destination.
    @Test(
        "multicast reaches avahi and our socket; unicast to port 5353 reaches avahi only",
        arguments: families, StartOrder.allCases)
    func sharesThePortWithAvahi(family: DatagramSocket.Family, order: StartOrder) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            var avahi: LabProcess?
            if order == .avahiFirst {
                avahi = try await startAvahiStandIn(lab, family: family)
            }
            let socket = try openSocket(lab, family)
            defer { socket.close() }
            let group = try #require(socket.group)
            if order == .avahiSecond {
                avahi = try await startAvahiStandIn(lab, family: family)
            }
            let standIn = try #require(avahi)
            defer { standIn.terminate() }

            // avahi 0.8 binds without reuse options first. Our socket sets SO_REUSEADDR, so when avahi comes
            // second its first bind fails (EADDRINUSE: "another mDNS stack running") and its retry with
            // SO_REUSEADDR and SO_REUSEPORT succeeds.
            let ready = try #require(standIn.stdout.split(separator: "\n").first)
            #expect(ready == (order == .avahiFirst ? "ready first-bind" : "ready retried"))

            // (a) A multicast query reaches both.
            let groupTarget = family == .ipv4 ? "224.0.0.251" : "ff02::fb%\(Lab.interfaceName)"
            let queryPort = try await WakerSender.send(lab, to: groupTarget, payload: "multicast-query")
            let datagram = try await nextDatagram(from: socket)
            #expect(String(decoding: datagram.bytes, as: UTF8.self) == "multicast-query")
            #expect(datagram.destination == group.address)
            #expect(datagram.destinationPort == 5353)
            #expect(datagram.interfaceIndex == socket.interfaceIndex)
            #expect(datagram.source.port == queryPort)
            let waker = lab.host(.waker)
            let wakerSource = family == .ipv4 ? waker.ipv4 : waker.ipv6LinkLocal
            #expect(datagram.source.address == (try ip(wakerSource)))
            let seen = try await avahiLine(standIn, payload: "multicast-query")
            #expect(seen.destination == (family == .ipv4 ? "224.0.0.251" : "ff02::fb"))

            // (b) A unicast datagram to the proxy's own address and port 5353 reaches avahi only. A multicast
            // marker sent after it must be the next thing our socket sees.
            let unicastTarget = family == .ipv4 ? proxy.ipv4 : proxy.ula
            _ = try await WakerSender.send(lab, to: unicastTarget, payload: "unicast-query")
            let unicast = try await avahiLine(standIn, payload: "unicast-query")
            #expect(unicast.destination == unicastTarget)
            _ = try await WakerSender.send(lab, to: groupTarget, payload: "marker")
            try await expectNextAndLast("marker", at: socket)
        }
    }

    @Test("a port 5353 held without SO_REUSEADDR gives addressInUse", arguments: families)
    func portHeldWithoutReuse(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let holder = try await startAvahiStandIn(lab, family: family, mode: "plain")
            defer { holder.terminate() }
            let index = try lab.withNamespace(.proxy) { try NetworkInterface.named(Lab.interfaceName).index }
            let error = try lab.withNamespace(.proxy) {
                #expect(throws: SystemError.self) {
                    try DatagramSocket.multicastDNS(family: family, interfaceIndex: index)
                }
            }
            let group = family == .ipv4 ? "224.0.0.251:5353" : "[ff02::fb]:5353"
            #expect(error?.code == .addressInUse)
            #expect(error?.errorNumber == EADDRINUSE)
            #expect(
                error?.description
                    == "bind UDP \(group) on eth0 (index \(index)): Address already in use "
                    + "(another socket holds port 5353 without SO_REUSEADDR)")
            #expect(error?.systemCallError?.operation == "bind UDP \(group) on eth0 (index \(index))")
        }
    }

    // MARK: Sending

    /// Multicast leaves with TTL / hop limit 255 from port 5353 and the address Linux picks for the interface
    /// (primary IPv4, IPv6 link-local); it is looped back to avahi on the same host and to our own socket.
    @Test("multicast leaves with TTL 255 from port 5353 and is looped back locally", arguments: families)
    func multicastSend(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let standIn = try await startAvahiStandIn(lab, family: family)
            defer { standIn.terminate() }
            let socket = try openSocket(lab, family)
            defer { socket.close() }
            let group = try #require(socket.group)
            let receiver = try await WakerReceiver.start(lab, family: family)
            defer { receiver.terminate() }

            for (payload, source) in [("announce-default", nil), ("announce-explicit", proxySource(proxy, family))] {
                try socket.send(Array(payload.utf8), to: group, scopeID: 0, from: source)
                let line = try await WakerReceiver.line(receiver, payload: payload)
                let expectedSource = family == .ipv4 ? proxy.ipv4 : proxy.ipv6LinkLocal
                #expect(line == "\(expectedSource) 5353 255 \(payload)")

                let looped = try await nextDatagram(from: socket)
                #expect(String(decoding: looped.bytes, as: UTF8.self) == payload)
                #expect(looped.source == Endpoint(address: try ip(expectedSource), port: 5353))
                #expect(looped.destination == group.address)
                #expect(looped.interfaceIndex == socket.interfaceIndex)
                _ = try await avahiLine(standIn, payload: payload)
            }
            #expect(try socket.receive() == nil)
        }
    }

    /// A legacy-unicast querier (like `dig`) uses a connected socket: it drops a reply from any address but the
    /// one it queried, and takes the one sent `from:` that address. The reply has TTL 255 too.
    @Test("a unicast reply from the queried address reaches a connected querier", arguments: ReplyTarget.all)
    func unicastReplyToConnectedQuerier(target: ReplyTarget) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let secondary = target.family == .ipv4 ? "10.77.0.11/24" : "fd77::11/64"
            var command = ["ip", "address", "add", secondary, "dev", Lab.interfaceName]
            if target.family == .ipv6 { command += ["nodad", "preferred_lft", "0"] }
            let added = try await lab.run(.proxy, command)
            try #require(added.succeeded, "\(added)")

            // avahi receives the query itself; without a socket on port 5353 the querier would get ECONNREFUSED.
            let standIn = try await startAvahiStandIn(lab, family: target.family)
            defer { standIn.terminate() }
            let socket = try openSocket(lab, target.family)
            defer { socket.close() }
            let querier = try lab.spawn(
                .waker, ["python3", "-c", connectedQuerierScript, target.clientTarget(proxy), "legacy-query"])
            defer { querier.terminate() }
            let port = try await waitForLine(querier, "the querier's port") { UInt16($0) }
            _ = try await avahiLine(standIn, payload: "legacy-query")

            let waker = lab.host(.waker)
            let destination = Endpoint(address: try ip(target.wakerAddress(waker)), port: port)
            let scope = target.isLinkLocal ? socket.interfaceIndex : 0
            let wrongSource = try ip(String(secondary.prefix { $0 != "/" }))
            try socket.send(Array("from-wrong-address".utf8), to: destination, scopeID: scope, from: wrongSource)
            try socket.send(
                Array("legacy-reply".utf8), to: destination, scopeID: scope, from: try ip(target.address(proxy)))
            let line = try await waitForLine(querier, "the querier's reply", skip: 1) { $0 }
            #expect(line == "\(target.address(proxy)) 5353 255 legacy-reply")
        }
    }

    /// Without a source, Linux picks the route's preferred source: the primary IPv4 address, the ULA for a ULA
    /// destination, the link-local address for a link-local one.
    @Test("a unicast send without a source leaves from the address Linux picks", arguments: ReplyTarget.all)
    func unicastDefaultSource(target: ReplyTarget) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let waker = lab.host(.waker)
            let socket = try openSocket(lab, target.family)
            defer { socket.close() }
            let listener = try lab.spawn(
                .waker, ["python3", "-c", unicastListenerScript, target.family == .ipv4 ? "4" : "6"])
            defer { listener.terminate() }
            let port = try await waitForLine(listener, "the listener's port") { UInt16($0) }
            let destination = Endpoint(address: try ip(target.wakerAddress(waker)), port: port)
            try socket.send(
                Array("qu-reply".utf8),
                to: destination,
                scopeID: target.isLinkLocal ? socket.interfaceIndex : 0,
                from: nil
            )
            let line = try await waitForLine(listener, "the listener's datagram", skip: 1) { $0 }
            #expect(line == "\(target.address(proxy)) 5353 255 qu-reply")
        }
    }

    // MARK: Several interfaces

    /// With avahi joined to the group on two interfaces, a socket bound to the group without a device (and with
    /// IP_MULTICAST_ALL on, the default) also gets the group's datagrams from the other interface. Ours is bound
    /// to its interface and sees only its own.
    @Test("our socket ignores the group's datagrams on other interfaces", arguments: families)
    func otherInterfacesAreIgnored(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let waker = lab.host(.waker)
            for (role, number) in [(Lab.Role.proxy, 1), (.waker, 3)] {
                var commands: [[String]] = []
                if role == .proxy {
                    commands.append([
                        "ip", "link", "add", "eth1", "type", "veth", "peer", "name", "eth1", "netns", waker.namespace,
                    ])
                }
                commands += [
                    ["ip", "link", "set", "eth1", "addrgenmode", "none"],
                    ["ip", "address", "add", "10.78.0.\(number)/24", "dev", "eth1"],
                    ["ip", "address", "add", "fe80::78:\(number)/64", "dev", "eth1", "nodad"],
                    ["ip", "link", "set", "eth1", "up"],
                ]
                for command in commands {
                    let result = try await lab.run(role, command)
                    try #require(result.succeeded, "\(command): \(result)")
                }
            }
            // The kernel adds the IPv6 multicast route of a new link once its carrier is up, a moment after `up`;
            // sending before then fails with "Network is unreachable".
            for role in [Lab.Role.proxy, .waker] {
                _ = try await eventually("the multicast route of eth1 in \(role)", within: .seconds(10)) {
                    let routes = try await lab.run(
                        role, ["ip", "-6", "route", "show", "table", "local", "dev", "eth1"])
                    return routes.stdout.contains("ff00::/8") ? true : nil
                }
            }

            let standIn = try await startAvahiStandIn(lab, family: family, interfaces: "eth0,eth1")
            defer { standIn.terminate() }
            var naive: LabProcess?
            if family == .ipv4 {
                naive = try await startAvahiStandIn(lab, family: family, mode: "group")
            }
            defer { naive?.terminate() }
            let socket = try openSocket(lab, family)
            defer { socket.close() }

            let groupTarget = family == .ipv4 ? "224.0.0.251" : "ff02::fb%eth1"
            _ = try await WakerSender.send(lab, to: groupTarget, payload: "via-eth1", interface: "eth1")
            let other = try await avahiLine(standIn, payload: "via-eth1")
            #expect(other.interface == "eth1")
            if let naive {
                let seen = try await avahiLine(naive, payload: "via-eth1")
                #expect(seen.interface == "eth1")
            }

            let eth0Target = family == .ipv4 ? "224.0.0.251" : "ff02::fb%eth0"
            _ = try await WakerSender.send(lab, to: eth0Target, payload: "via-eth0", interface: "eth0")
            try await expectNextAndLast("via-eth0", at: socket)
        }
    }

    /// The daemon's group sockets only send: with `discardInput()` the kernel drops what reaches them, so a
    /// multicast flood costs no reads. A second socket on the same group still gets every datagram, and what the
    /// discarding socket sends still leaves (looped back to the other).
    @Test("discardInput(): nothing arrives, sending still works", arguments: families)
    func discardInput(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let discarding = try openSocket(lab, family)
            defer { discarding.close() }
            try discarding.discardInput()
            let listening = try openSocket(lab, family)
            defer { listening.close() }
            let group = try #require(discarding.group)

            let groupTarget = family == .ipv4 ? "224.0.0.251" : "ff02::fb%\(Lab.interfaceName)"
            _ = try await WakerSender.send(lab, to: groupTarget, payload: "from-the-waker")
            let heard = try await nextDatagram(from: listening)
            #expect(String(decoding: heard.bytes, as: UTF8.self) == "from-the-waker")
            #expect(try discarding.receive() == nil)

            try discarding.send(Array("from-the-proxy".utf8), to: group, scopeID: 0, from: nil)
            let looped = try await nextDatagram(from: listening)
            #expect(String(decoding: looped.bytes, as: UTF8.self) == "from-the-proxy")
            #expect(try discarding.receive() == nil)

            discarding.close()
            let closedError = #expect(throws: SystemError.self) { try discarding.discardInput() }
            #expect(closedError?.code == .closed)
        }
    }

    // MARK: Receiving, closing, errors

    @Test("receive() returns nil when idle; close() twice is fine and later calls fail", arguments: families)
    func idleAndClose(family: DatagramSocket.Family) async throws {
        try await Lab.withLab { lab in
            let socket = try openSocket(lab, family)
            let eth0 = try lab.withNamespace(.proxy) { try NetworkInterface.named(Lab.interfaceName) }
            #expect(socket.family == family)
            #expect(socket.interfaceIndex == eth0.index)
            #expect(socket.interfaceName == "eth0")
            let group = try #require(socket.group)
            #expect(group == (family == .ipv4 ? MulticastDNS.ipv4Group : MulticastDNS.ipv6Group))
            #expect(socket.localPort == 5353)
            let descriptor = socket.fileDescriptor
            #expect(descriptor >= 0)
            #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0)
            #expect(fcntl(descriptor, F_GETFL) & O_NONBLOCK != 0)
            #expect(try socket.receive() == nil)
            #expect(try socket.receive() == nil)

            socket.close()
            socket.close()
            #expect(socket.fileDescriptor == -1)
            let receiveError = #expect(throws: SystemError.self) { try socket.receive() }
            #expect(receiveError?.code == .closed)
            #expect(
                receiveError?.description == "receive on UDP \(group) on eth0 (index \(eth0.index)): "
                    + "the socket is closed")
            let sendError = #expect(throws: SystemError.self) {
                try socket.send([1], to: group, scopeID: 0, from: nil)
            }
            #expect(sendError?.code == .closed)
        }
    }

    @Test("an unknown interface index and a wrong family are reported")
    func errors() async throws {
        try await Lab.withLab { lab in
            let missing = try lab.withNamespace(.proxy) {
                #expect(throws: SystemError.self) {
                    try DatagramSocket.multicastDNS(family: .ipv4, interfaceIndex: 9_999)
                }
            }
            #expect(missing?.code == .interfaceNotFound)
            #expect(missing?.description.contains("no interface with index 9999") == true)

            let socket = try openSocket(lab, .ipv6)
            defer { socket.close() }
            let group = try #require(socket.group)
            let mismatch = #expect(throws: SystemError.self) {
                try socket.send([1], to: Endpoint(address: try ip("224.0.0.251"), port: 5353), scopeID: 0, from: nil)
            }
            #expect(mismatch?.code == .addressFamilyMismatch)
            #expect(mismatch?.description.contains("224.0.0.251 is not an IPv6 address") == true)

            let foreign = #expect(throws: SystemError.self) {
                try socket.send([1], to: group, scopeID: 0, from: try ip("fd77::99"))
            }
            #expect(foreign?.code == .sendFailed)
            #expect(foreign?.errorNumber == EINVAL)
        }
    }
}

// MARK: - Unicast targets

extension MulticastDNSSocketLabTests {
    /// An address of the proxy a legacy-unicast querier targets, and the waker's address of the same kind.
    struct ReplyTarget: Sendable, CustomTestStringConvertible {
        enum Kind: Sendable {
            case ipv4
            case ula
            case linkLocal
        }

        let kind: Kind

        static let all = [ReplyTarget(kind: .ipv4), ReplyTarget(kind: .ula), ReplyTarget(kind: .linkLocal)]

        var testDescription: String {
            switch kind {
            case .ipv4: "IPv4"
            case .ula: "IPv6 ULA"
            case .linkLocal: "IPv6 link-local"
            }
        }

        var family: DatagramSocket.Family { kind == .ipv4 ? .ipv4 : .ipv6 }
        var isLinkLocal: Bool { kind == .linkLocal }

        func address(_ host: LabHost) -> String {
            switch kind {
            case .ipv4: host.ipv4
            case .ula: host.ula
            case .linkLocal: host.ipv6LinkLocal
            }
        }

        func wakerAddress(_ host: LabHost) -> String { address(host) }

        /// `fe80::…%eth0` for link-local.
        func clientTarget(_ host: LabHost) -> String {
            isLinkLocal ? "\(address(host))%\(Lab.interfaceName)" : address(host)
        }
    }
}

// MARK: - Helpers

private func proxySource(_ proxy: LabHost, _ family: DatagramSocket.Family) -> IPAddress? {
    IPAddress(family == .ipv4 ? proxy.ipv4 : proxy.ipv6LinkLocal)
}

/// Our socket on the proxy's `eth0`.
private func openSocket(_ lab: Lab, _ family: DatagramSocket.Family) throws -> DatagramSocket {
    try lab.withNamespace(.proxy) {
        try DatagramSocket.multicastDNS(
            family: family, interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
    }
}

/// Waits for the next datagram at `socket`, which must carry `payload`, and finds nothing queued behind it. Sent
/// after the datagrams that must not arrive, `payload` shows that none of them did.
private func expectNextAndLast(_ payload: String, at socket: DatagramSocket) async throws {
    let next = try await nextDatagram(from: socket)
    #expect(String(decoding: next.bytes, as: UTF8.self) == payload)
    #expect(try socket.receive() == nil)
}

/// Waits (checking every 10 ms, for at most `timeout`) until `process` has printed a whole line after the first
/// `skip` lines that `parse` accepts, and returns what `parse` made of it.
private func waitForLine<Value>(
    _ process: LabProcess,
    _ what: String,
    skip: Int = 0,
    within timeout: Duration = .seconds(20),
    _ parse: (String) -> Value?
) async throws -> Value {
    let deadline = ContinuousClock.now + timeout
    while true {
        // Whether it had exited before its output is read: a helper may print its last line and exit in between.
        let exited = process.hasExited
        // Whole lines only: a line being written may be read in part ("ready " before "retried").
        let output = process.stdout
        let complete = output[..<(output.lastIndex(of: "\n") ?? output.startIndex)]
        for line in complete.split(separator: "\n").dropFirst(skip) {
            if let value = parse(String(line)) { return value }
        }
        if exited {
            throw TestFailure("\(process.arguments.first ?? "") exited before \(what): \(process.stderr)")
        }
        guard ContinuousClock.now < deadline else {
            throw TimeoutError(
                "timed out after \(timeout) waiting for \(what); stdout: \(process.stdout) stderr: \(process.stderr)")
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

// MARK: The avahi-daemon stand-in

/// Stands in for avahi-daemon 0.8 on one family, with the same socket options in the same order (as `strace`
/// shows them for avahi-daemon 0.8-10 on Debian 12): TTL 255, loop on, then `bind` to the wildcard and port 5353
/// *without* reuse options; on `EADDRINUSE` it sets `SO_REUSEADDR` and `SO_REUSEPORT` and binds again (avahi logs
/// "Detected another IPv4 mDNS stack running on this host"), otherwise it sets both right after the bind. Then it
/// joins the group on each interface and prints `ready first-bind` or `ready retried`, and for every datagram
/// `recv <source> <port> <destination> <interface> <payload>`.
///
/// Mode `group` binds to the group address instead (with both reuse options, no device), `plain` binds the
/// wildcard without any reuse option.
private let avahiStandInScript = """
    import errno, socket, struct, sys
    family, mode, names = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    v4 = family == "4"
    s = socket.socket(socket.AF_INET if v4 else socket.AF_INET6, socket.SOCK_DGRAM)
    if v4:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 255)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        address = ("224.0.0.251" if mode == "group" else "0.0.0.0", 5353)
    else:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 255)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 1)
        address = ("::", 5353, 0, 0)
    def reuse():
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    how = "first-bind"
    if mode == "group":
        reuse()
        s.bind(address)
    else:
        try:
            s.bind(address)
            if mode != "plain":
                reuse()
        except OSError as error:
            if error.errno != errno.EADDRINUSE or mode == "plain":
                raise
            how = "retried"
            reuse()
            s.bind(address)
    for name in names:
        index = socket.if_nametoindex(name)
        if v4:
            request = struct.pack("4s4si", socket.inet_aton("224.0.0.251"), bytes(4), index)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, request)
        else:
            request = struct.pack("16sI", socket.inet_pton(socket.AF_INET6, "ff02::fb"), index)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, request)
    if v4:
        s.setsockopt(socket.IPPROTO_IP, 8, 1)  # IP_PKTINFO
    else:
        s.setsockopt(socket.IPPROTO_IPV6, 49, 1)  # IPV6_RECVPKTINFO
    print("ready", how, flush=True)
    while True:
        data, ancillary, flags, source = s.recvmsg(65535, 256)
        destination, index = "?", 0
        for level, kind, value in ancillary:
            if level == socket.IPPROTO_IP and kind == 8:
                index = struct.unpack("i", value[:4])[0]
                destination = socket.inet_ntoa(value[8:12])
            elif level == socket.IPPROTO_IPV6 and kind == 50:
                destination = socket.inet_ntop(socket.AF_INET6, value[:16])
                index = struct.unpack("I", value[16:20])[0]
        name = socket.if_indextoname(index) if index else "?"
        print("recv", source[0].split("%")[0], source[1], destination, name, data.decode(), flush=True)
    """

/// Starts the stand-in in the proxy and waits until it is ready.
private func startAvahiStandIn(
    _ lab: Lab,
    family: DatagramSocket.Family,
    mode: String = "avahi",
    interfaces: String = "eth0"
) async throws -> LabProcess {
    let process = try lab.spawn(
        .proxy, ["python3", "-c", avahiStandInScript, family == .ipv4 ? "4" : "6", mode, interfaces])
    _ = try await waitForLine(process, "the avahi stand-in to bind") { $0.hasPrefix("ready ") ? $0 : nil }
    return process
}

/// One `recv` line of the stand-in.
private struct StandInLine {
    var source: String
    var port: String
    var destination: String
    var interface: String
}

/// Waits for the stand-in to report a datagram carrying `payload`.
private func avahiLine(_ process: LabProcess, payload: String) async throws -> StandInLine {
    try await waitForLine(process, "the avahi stand-in to receive \(payload)") { line in
        let fields = line.split(separator: " ").map(String.init)
        guard fields.count == 6, fields[0] == "recv", fields[5] == payload else { return nil }
        return StandInLine(source: fields[1], port: fields[2], destination: fields[3], interface: fields[4])
    }
}

// MARK: Waker-side clients

/// Sends one datagram from the waker to a target and port 5353, optionally out of a chosen interface (for IPv4
/// multicast: `IP_MULTICAST_IF`); prints its own port.
private enum WakerSender {
    static let script = """
        import socket, struct, sys
        host, payload, interface = sys.argv[1], sys.argv[2], sys.argv[3]
        family, _, _, _, address = socket.getaddrinfo(host, 5353, 0, socket.SOCK_DGRAM)[0]
        s = socket.socket(family, socket.SOCK_DGRAM)
        if family == socket.AF_INET and interface:
            request = struct.pack("4s4si", bytes(4), bytes(4), socket.if_nametoindex(interface))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, request)
        s.sendto(payload.encode(), address)
        print(s.getsockname()[1], flush=True)
        """

    static func send(_ lab: Lab, to host: String, payload: String, interface: String = "") async throws -> UInt16 {
        let result = try await lab.run(.waker, ["python3", "-c", script, host, payload, interface])
        guard result.succeeded, let port = UInt16(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw TestFailure("sender failed: \(result)")
        }
        return port
    }
}

/// A multicast listener in the waker: joins the group on `eth0`, port 5353, and prints `<source> <port> <ttl>
/// <payload>` for each datagram, the TTL / hop limit from `IP_RECVTTL` / `IPV6_RECVHOPLIMIT`.
private enum WakerReceiver {
    static let script = """
        \(reportDatagram)
        v4 = sys.argv[1] == "4"
        s = socket.socket(socket.AF_INET if v4 else socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        index = socket.if_nametoindex("eth0")
        if v4:
            s.bind(("0.0.0.0", 5353))
            request = struct.pack("4s4si", socket.inet_aton("224.0.0.251"), bytes(4), index)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, request)
            s.setsockopt(socket.IPPROTO_IP, 12, 1)  # IP_RECVTTL
        else:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind(("::", 5353, 0, 0))
            request = struct.pack("16sI", socket.inet_pton(socket.AF_INET6, "ff02::fb"), index)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, request)
            s.setsockopt(socket.IPPROTO_IPV6, 51, 1)  # IPV6_RECVHOPLIMIT
        print("ready", flush=True)
        while True:
            report(s)
        """

    static func start(_ lab: Lab, family: DatagramSocket.Family) async throws -> LabProcess {
        let process = try lab.spawn(.waker, ["python3", "-c", script, family == .ipv4 ? "4" : "6"])
        _ = try await waitForLine(process, "the waker's receiver") { $0 == "ready" ? $0 : nil }
        return process
    }

    static func line(_ process: LabProcess, payload: String) async throws -> String {
        try await waitForLine(process, "the waker to receive \(payload)") { $0.hasSuffix(" " + payload) ? $0 : nil }
    }
}

/// The Python the waker's scripts share: its imports, and `report(s)`, which receives one datagram on socket `s`
/// and prints `<source> <port> <ttl> <payload>`, the TTL / hop limit from the ancillary data `IP_RECVTTL` /
/// `IPV6_RECVHOPLIMIT` asked for.
private let reportDatagram = """
    import socket, struct, sys

    def report(s):
        data, ancillary, flags, source = s.recvmsg(65535, 256)
        ttl = -1
        for level, kind, value in ancillary:
            if (level, kind) in ((socket.IPPROTO_IP, 2), (socket.IPPROTO_IPV6, 52)):
                ttl = struct.unpack("i", value[:4])[0]
        print(source[0].split("%")[0], source[1], ttl, data.decode(), flush=True)
    """

/// Like `dig -p 5353 @address`: a UDP socket connected to the proxy's address and port 5353 sends a query,
/// prints its own port, then prints `<source> <port> <ttl> <payload>` of the first datagram the kernel hands it.
private let connectedQuerierScript = """
    \(reportDatagram)
    host, payload = sys.argv[1], sys.argv[2]
    family, _, _, _, address = socket.getaddrinfo(host, 5353, 0, socket.SOCK_DGRAM)[0]
    s = socket.socket(family, socket.SOCK_DGRAM)
    if family == socket.AF_INET:
        s.setsockopt(socket.IPPROTO_IP, 12, 1)  # IP_RECVTTL
    else:
        s.setsockopt(socket.IPPROTO_IPV6, 51, 1)  # IPV6_RECVHOPLIMIT
    s.connect(address)
    print(s.getsockname()[1], flush=True)
    s.send(payload.encode())
    s.settimeout(20)
    report(s)
    """

/// An unconnected UDP socket on an ephemeral port of the waker: prints its port, then `<source> <port> <ttl>
/// <payload>` of the first datagram.
private let unicastListenerScript = """
    \(reportDatagram)
    v4 = sys.argv[1] == "4"
    s = socket.socket(socket.AF_INET if v4 else socket.AF_INET6, socket.SOCK_DGRAM)
    if v4:
        s.bind(("0.0.0.0", 0))
        s.setsockopt(socket.IPPROTO_IP, 12, 1)  # IP_RECVTTL
    else:
        s.bind(("::", 0, 0, 0))
        s.setsockopt(socket.IPPROTO_IPV6, 51, 1)  # IPV6_RECVHOPLIMIT
    print(s.getsockname()[1], flush=True)
    s.settimeout(20)
    report(s)
    """
