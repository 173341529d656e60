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

    @Test("joining adds the group's link-layer address and leaves the kernel's IPv6 groups alone; leaving drops it")
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
            let mac = MACAddress(ipv6Multicast: Self.group)
            #expect(mac.description == "33:33:ff:00:12:34")
            #expect(membership.interfaceName == Lab.interfaceName)
            #expect(membership.joined.isEmpty)
            let groupsBefore = try await proxyGroups(lab)
            #expect(try await proxyLinkAddresses(lab).contains(mac) == false)

            #expect(try membership.join(Self.group))
            #expect(try membership.join(Self.group) == false)
            #expect(membership.joined == [Self.group])
            #expect(try await proxyLinkAddresses(lab).contains(mac))
            // The IPv6 layer's list (searched for every multicast packet) does not grow, and it does not take
            // datagrams to the group: only the capture sees them.
            #expect(try await proxyGroups(lab) == groupsBefore)
            #expect(try await groupDatagramArrives(lab, socket, payload: "joined") == false)

            #expect(try membership.leave(Self.group))
            #expect(try membership.leave(Self.group) == false)
            #expect(membership.joined.isEmpty)
            #expect(try await proxyLinkAddresses(lab).contains(mac) == false)
        }
    }

    @Test("10,000 groups join, all show in ip maddr, and close() drops them all")
    func tenThousandGroups() async throws {
        try await Lab.withLab { lab in
            let groups = solicitedNodeGroups(10_000)
            let membership = try lab.withNamespace(.proxy) {
                try MulticastMembership(interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
            }
            defer { membership.close() }
            let before = try await proxyLinkAddresses(lab)
            let fresh = try groups.filter { try membership.join($0) }
            #expect(fresh.count == groups.count)
            #expect(membership.joined == groups)
            let joined = try await proxyLinkAddresses(lab)
            let macs = Set(groups.map { MACAddress(ipv6Multicast: $0) })
            #expect(macs.isSubset(of: joined), "missing: \(macs.subtracting(joined).count)")
            #expect(joined.count == before.count + groups.count)

            membership.close()
            membership.close()
            #expect(membership.joined.isEmpty)
            // The kernel drops the memberships when the last reference to the socket goes: a process another test
            // spawns at that moment holds a copy of every descriptor until it execs, which on a loaded machine
            // can take a while.
            let after = try await eventually("the memberships dropped", within: .seconds(10)) {
                let addresses = try await proxyLinkAddresses(lab)
                return addresses == before ? addresses : nil
            }
            #expect(after == before)
            let error = #expect(throws: SystemError.self) { try membership.join(Self.group) }
            #expect(error?.code == .closed)
            let leaveError = #expect(throws: SystemError.self) { try membership.leave(Self.group) }
            #expect(leaveError?.code == .closed)
        }
    }

    /// IPv6 memberships were charged to their socket's option memory (`net.core.optmem_max`: 20480 bytes held
    /// 364 groups); link-layer ones are not. Only where the setting is per network namespace (its file exists
    /// inside one) does the test lower it, for the proxy's namespace alone.
    @Test(
        "with little option memory per socket, 1,000 groups still join",
        .enabled(
            if: Self.optionMemoryIsPerNamespace,
            "net.core.optmem_max is machine-wide on this kernel: the test would change the machine's value"))
    func littleOptionMemory() async throws {
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
            let groups = solicitedNodeGroups(1_000)
            let membership = try lab.withNamespace(.proxy) {
                try MulticastMembership(interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
            }
            defer { membership.close() }
            for group in groups { try membership.join(group) }
            #expect(membership.joined == groups)
            let macs = Set(groups.map { MACAddress(ipv6Multicast: $0) })
            #expect(macs.isSubset(of: try await proxyLinkAddresses(lab)))
            for group in groups { try membership.leave(group) }
            #expect(membership.joined.isEmpty)
            #expect(try await proxyLinkAddresses(lab).isDisjoint(with: macs))
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
                    error?.description == "open multicast memberships on interface index \(index): there is "
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
                gone?.description.hasPrefix(
                    "join ff02::1:ff00:1234 (PACKET_ADD_MEMBERSHIP 33:33:ff:00:12:34) on spm0 (index ") == true,
                "\(gone.map(String.init) ?? "")")
            #expect(membership.joined.isEmpty)
        }
    }
}

// MARK: - Helpers

/// The solicited-node groups of `fd77::1:0` and the `count - 1` addresses after it (all distinct below 2^24).
private func solicitedNodeGroups(_ count: Int) -> Set<IPv6Address> {
    Set((0..<count).map { IPv6Address(high: 0xFD77_0000_0000_0000, low: 0x1_0000 + UInt64($0)).solicitedNodeGroup })
}

/// The link-layer multicast addresses of the proxy's `eth0`, from `ip maddress show dev eth0`.
private func proxyLinkAddresses(_ lab: Lab) async throws -> Set<MACAddress> {
    let result = try await lab.run(.proxy, ["ip", "maddress", "show", "dev", Lab.interfaceName])
    guard result.succeeded else { throw TestFailure("ip maddress failed: \(result)") }
    var addresses = Set<MACAddress>()
    for line in result.stdout.split(separator: "\n") {
        // `\tlink  33:33:ff:00:12:34` (with ` users 2` when several hold it).
        let fields = line.split(whereSeparator: \.isWhitespace)
        guard fields.count >= 2, fields[0] == "link", let mac = MACAddress(String(fields[1])) else { continue }
        addresses.insert(mac)
    }
    return addresses
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
