import CaptureStream
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

/// `MulticastMembership` against a real kernel: groups joined in the lab's proxy namespace, traffic from the waker.
@Suite(.requiresLab(tools: ["python3"]))
struct MulticastMembershipLabTests {
    /// A made-up address the proxy takes over, and its solicited-node group `ff02::1:ff00:1234`.
    static let heldAddress = IPv6Address("fd77::1234")!
    static var group: IPv6Address { heldAddress.solicitedNodeGroup }

    /// Whether `net.core.optmem_max` belongs to each network namespace: only then does a new namespace have the
    /// file (older kernels keep one value for the machine, which a test must not touch).
    static let optionMemoryIsPerNamespace: Bool = {
        guard Lab.isSupported else { return false }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        probe.arguments = ["--net", "test", "-w", "/proc/sys/net/core/optmem_max"]
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    @Test("joining lets datagrams and Neighbour Solicitations to the group in; leaving shuts them out")
    func joinAndLeave() async throws {
        try await Lab.withLab { lab in
            #expect(Self.group.description == "ff02::1:ff00:1234")
            let (membership, socket) = try lab.withNamespace(.proxy) {
                let eth0 = try NetworkInterface.named(Lab.interfaceName)
                return (
                    try MulticastMembership(interfaceIndex: eth0.index),
                    try DatagramSocket(family: .ipv6, interface: Lab.interfaceName, port: 0)
                )
            }
            defer {
                membership.close()
                socket.close()
            }
            #expect(membership.interfaceName == Lab.interfaceName)
            #expect(membership.joined.isEmpty)
            #expect(try await proxyGroups(lab).contains(Self.group) == false)

            // Not joined: the kernel drops the datagram to the group; only the marker after it arrives.
            #expect(try await groupDatagramArrives(lab, socket, payload: "before") == false)

            #expect(try membership.join(Self.group))
            #expect(try membership.join(Self.group) == false)
            #expect(membership.joined == [Self.group])
            #expect(try await proxyGroups(lab).contains(Self.group))
            #expect(try await groupDatagramArrives(lab, socket, payload: "joined"))

            // The kernel accepts (and counts) a Neighbour Solicitation for the held address.
            let solicitationsBefore = try lab.withNamespace(.proxy) { try snmp6("Icmp6InNeighborSolicits") }
            let send = try await lab.run(
                .waker, ["python3", "-c", neighbourSolicitationScript, Self.heldAddress.description])
            #expect(send.succeeded, "\(send)")
            try await waitUntil("the proxy to count the Neighbour Solicitation to \(Self.group)") {
                try lab.withNamespace(.proxy) { try snmp6("Icmp6InNeighborSolicits") } > solicitationsBefore
            }

            #expect(try membership.leave(Self.group))
            #expect(try membership.leave(Self.group) == false)
            #expect(membership.joined.isEmpty)
            #expect(try await proxyGroups(lab).contains(Self.group) == false)
            #expect(try await groupDatagramArrives(lab, socket, payload: "left") == false)
        }
    }

    /// What a switch with MLD snooping needs to forward the solicitations to the proxy's port.
    @Test("joining makes the kernel report the group with MLD")
    func joinSendsMLDReport() async throws {
        try await Lab.withLab { lab in
            let waker = lab.host(.waker)
            let capture = try lab.withNamespace(.waker) { try CaptureStream(interface: waker.interfaceName) }
            defer { capture.close() }
            // MLDv2 reports go to ff02::16, MLDv1 reports to the group itself.
            try capture.setFilter("ip6 dst ff02::16 or ip6 dst \(Self.group)")
            let membership = try lab.withNamespace(.proxy) {
                try MulticastMembership(interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
            }
            defer { membership.close() }
            try membership.join(Self.group)
            let groupBytes = Self.group.bytes
            let report = try await firstElement(of: capture.frames, "an MLD report for \(Self.group)") { frame in
                frame.bytes.count > 54 && Array(frame.bytes[6..<12]) == lab.host(.proxy).mac
                    && frame.bytes.dropFirst(54).containsSequence(groupBytes)
            }
            #expect(Array(report.bytes[12..<14]) == [0x86, 0xDD])
        }
    }

    @Test("1,000 groups join on one socket, all show in ip maddr, and close() leaves them all")
    func thousandGroups() async throws {
        try await Lab.withLab { lab in
            let groups = thousandSolicitedNodeGroups()
            let membership = try lab.withNamespace(.proxy) {
                try MulticastMembership(interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
            }
            defer { membership.close() }
            let before = try await proxyGroups(lab)
            // Should a socket fill up, join(_:) opens the next one on the calling thread: join inside the namespace.
            let fresh = try lab.withNamespace(.proxy) { try groups.filter { try membership.join($0) } }
            #expect(fresh.count == groups.count)
            let optionMemory = try lab.withNamespace(.proxy) {
                try String(contentsOfFile: "/proc/sys/net/core/optmem_max", encoding: .utf8)
            }
            if let bytes = Int(optionMemory.trimmingCharacters(in: .whitespacesAndNewlines)), bytes >= 131_072 {
                #expect(membership.socketCount == 1, "131072 bytes of option memory hold 2340 groups")
            }
            #expect(membership.joined == groups)
            let joined = try await proxyGroups(lab)
            #expect(groups.isSubset(of: joined), "missing: \(groups.subtracting(joined).sorted().prefix(5))")
            #expect(joined.count == before.count + groups.count)

            membership.close()
            membership.close()
            #expect(membership.joined.isEmpty)
            #expect(membership.socketCount == 0)
            #expect(try await proxyGroups(lab) == before)
            let error = #expect(throws: SystemError.self) { try membership.join(Self.group) }
            #expect(error?.code == .closed)
            let leaveError = #expect(throws: SystemError.self) { try membership.leave(Self.group) }
            #expect(leaveError?.code == .closed)
        }
    }

    /// Each membership is charged to its socket's option memory, up to `net.core.optmem_max`: 20480 bytes (the
    /// old default) hold 364 groups on Linux 6.18. Only where the setting is per network namespace (its file
    /// exists inside one) does the test lower it, for the proxy's namespace alone.
    @Test(
        "with little option memory per socket, 1,000 groups spread over several sockets",
        .enabled(
            if: Self.optionMemoryIsPerNamespace,
            "net.core.optmem_max is machine-wide on this kernel: the test would change the machine's value"))
    func optionMemoryOverflow() async throws {
        try await Lab.withLab { lab in
            let path = "/proc/sys/net/core/optmem_max"
            let ownBefore = try String(contentsOfFile: path, encoding: .utf8)
            let perNamespace = try lab.withNamespace(.proxy) { access(path, W_OK) == 0 }
            try #require(perNamespace, "optmem_max is not writable in the lab's proxy namespace")
            try lab.withNamespace(.proxy) { try writeFile(path, "20480\n") }
            let ownAfter = try String(contentsOfFile: path, encoding: .utf8)
            if ownAfter != ownBefore {
                try writeFile(path, ownBefore)
                Issue.record("writing optmem_max in the lab changed the machine's value; restored")
                return
            }

            let groups = thousandSolicitedNodeGroups()
            let membership = try lab.withNamespace(.proxy) {
                try MulticastMembership(interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
            }
            defer { membership.close() }
            // The sockets after the first are opened by join(_:), so join from inside the namespace.
            try lab.withNamespace(.proxy) {
                for group in groups { try membership.join(group) }
            }
            #expect(membership.joined == groups)
            #expect(membership.socketCount >= 3, "1,000 groups at 364 per socket need 3 sockets")
            let sockets = membership.socketCount
            #expect(groups.isSubset(of: try await proxyGroups(lab)))

            // Leaving empties the later sockets, which close; the first stays.
            for group in groups { try membership.leave(group) }
            #expect(membership.joined.isEmpty)
            #expect(membership.socketCount == 1, "from \(sockets) sockets")
            #expect(try await proxyGroups(lab).isDisjoint(with: groups))
        }
    }

    @Test("bad interface indexes, a vanished interface and non-multicast groups fail specifically")
    func errors() async throws {
        try await Lab.withLab { lab in
            for index: UInt32 in [0, 9_999] {
                let error = try lab.withNamespace(.proxy) {
                    #expect(throws: SystemError.self) { try MulticastMembership(interfaceIndex: index) }
                }
                #expect(error?.code == .interfaceNotFound)
                #expect(
                    error?.description == "open IPv6 multicast memberships on interface index \(index): there is "
                        + "no interface with index \(index) in this network namespace")
            }

            let add = try await lab.run(.proxy, ["ip", "link", "add", "spm0", "type", "veth", "peer", "name", "spm1"])
            #expect(add.succeeded, "\(add)")
            let membership = try lab.withNamespace(.proxy) {
                try MulticastMembership(interfaceIndex: try NetworkInterface.named("spm0").index)
            }
            defer { membership.close() }
            let unicast = #expect(throws: SystemError.self) {
                try membership.join(Self.heldAddress)
            }
            #expect(unicast?.code == .invalidGroup)
            #expect(unicast?.description.hasSuffix(": fd77::1234 is not a multicast address") == true)

            let delete = try await lab.run(.proxy, ["ip", "link", "delete", "spm0"])
            #expect(delete.succeeded, "\(delete)")
            let gone = #expect(throws: SystemError.self) { try membership.join(Self.group) }
            #expect(gone?.code == .interfaceNotFound)
            #expect(gone?.errorNumber == ENODEV)
            #expect(
                gone?.description.hasPrefix("join ff02::1:ff00:1234 (IPV6_JOIN_GROUP) on spm0 (index ") == true,
                "\(gone.map(String.init) ?? "")")
            #expect(membership.joined.isEmpty)
        }
    }
}

// MARK: - Helpers

/// The solicited-node groups of `fd77::1:0` to `fd77::1:3e7`.
private func thousandSolicitedNodeGroups() -> Set<IPv6Address> {
    Set((0..<1_000).map { IPv6Address(high: 0xFD77_0000_0000_0000, low: 0x1_0000 + UInt64($0)).solicitedNodeGroup })
}

/// The IPv6 groups of the proxy's `eth0`, from `ip -6 maddress show dev eth0`.
private func proxyGroups(_ lab: Lab) async throws -> Set<IPv6Address> {
    let result = try await lab.run(.proxy, ["ip", "-6", "maddress", "show", "dev", Lab.interfaceName])
    guard result.succeeded else { throw TestFailure("ip maddress failed: \(result)") }
    var groups = Set<IPv6Address>()
    for line in result.stdout.split(separator: "\n") {
        // `\tinet6 ff02::1:ff00:1234` (with ` users 2` when several hold it).
        let fields = line.split(whereSeparator: \.isWhitespace)
        guard fields.count >= 2, fields[0] == "inet6", let group = IPv6Address(fields[1]) else { continue }
        groups.insert(group)
    }
    return groups
}

/// Sends, from the waker, a datagram to the group on `socket`'s port and then a marker to the proxy's ULA on the
/// same port, and reads what arrives up to the marker: whether the datagram to the group came before it.
private func groupDatagramArrives(_ lab: Lab, _ socket: DatagramSocket, payload: String) async throws -> Bool {
    let group = MulticastMembershipLabTests.group
    let send = try await lab.run(
        .waker,
        [
            "python3", "-c", groupThenMarkerScript, "\(group)%\(Lab.interfaceName)", lab.host(.proxy).ula,
            "\(socket.localPort)", payload,
        ])
    guard send.succeeded else { throw TestFailure("sender failed: \(send)") }
    var sawGroup = false
    while true {
        let datagram = try await nextDatagram(from: socket)
        let text = String(decoding: datagram.bytes, as: UTF8.self)
        if text == "marker " + payload { return sawGroup }
        if text == payload {
            #expect(datagram.destination == .v6(group))
            sawGroup = true
        }
    }
}

/// `python3 -c script GROUP%IF UNICAST PORT PAYLOAD`: one datagram to the group, then `marker PAYLOAD` to the
/// unicast address, from one socket.
private let groupThenMarkerScript = """
    import socket, sys
    group, unicast, port, payload = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.sendto(payload.encode(), socket.getaddrinfo(group, port, socket.AF_INET6, socket.SOCK_DGRAM)[0][4])
    s.sendto(("marker " + payload).encode(), (unicast, port, 0, 0))
    """

/// `python3 -c script TARGET`: a Neighbour Solicitation for TARGET from the waker's `eth0`, to TARGET's
/// solicited-node group, hop limit 255, with the waker's MAC as source link-layer address. The kernel fills in the
/// checksum of a raw ICMPv6 socket.
private let neighbourSolicitationScript = """
    import socket, struct, sys
    target = socket.inet_pton(socket.AF_INET6, sys.argv[1])
    group = bytes.fromhex("ff0200000000000000000001ff") + target[13:]
    index = socket.if_nametoindex("eth0")
    mac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
    message = struct.pack("!BBHI", 135, 0, 0, 0) + target + bytes([1, 1]) + mac
    s.sendto(message, (socket.inet_ntop(socket.AF_INET6, group), 0, 0, index))
    """

/// A counter of `/proc/thread-self/net/snmp6`, for the calling thread's network namespace.
private func snmp6(_ name: String) throws -> Int {
    let text = try String(contentsOfFile: "/proc/thread-self/net/snmp6", encoding: .utf8)
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
        if let value = line.split(whereSeparator: \.isWhitespace).last.flatMap({ Int($0) }) { return value }
    }
    throw TestFailure("no counter \(name) in /proc/thread-self/net/snmp6")
}

/// Writes `text` to `path`.
private func writeFile(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { throw TestFailure("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    guard write(fd, bytes, bytes.count) == bytes.count else {
        throw TestFailure("cannot write \(path): \(String(cString: strerror(errno)))")
    }
}

extension Collection where Element == UInt8 {
    /// Whether `needle` occurs in these bytes.
    fileprivate func containsSequence(_ needle: [UInt8]) -> Bool {
        let bytes = Array(self)
        guard needle.count <= bytes.count else { return false }
        return (0...(bytes.count - needle.count)).contains { Array(bytes[$0..<($0 + needle.count)]) == needle }
    }
}
