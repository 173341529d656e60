import CaptureStream
import Foundation
import NetworkAddresses
import NetworkIO
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `NeighbourTable` against a real kernel: entries set in the lab's proxy namespace, read back with `ip neigh`.
@Suite(.requiresLab(tools: ["python3"]))
struct NeighbourTableLabTests {
    /// A locally administered MAC nobody in the lab has.
    static let madeUpMAC = MACAddress(0x02, 0x77, 0x00, 0x00, 0x99, 0x01)
    static let otherMAC = MACAddress(0x02, 0x77, 0x00, 0x00, 0x99, 0x02)

    /// The sleeper's addresses, as the proxy would hold them.
    enum Kind: String, Sendable, CaseIterable, CustomTestStringConvertible {
        case ipv4 = "IPv4"
        case ula = "IPv6 ULA"
        case linkLocal = "IPv6 link-local"

        var testDescription: String { rawValue }

        func address(of host: LabHost) -> String {
            switch self {
            case .ipv4: host.ipv4
            case .ula: host.ula
            case .linkLocal: host.ipv6LinkLocal
            }
        }
    }

    @Test("set, replace, remove and remove again an entry for the sleeper's address", arguments: Kind.allCases)
    func setReplaceRemove(kind: Kind) async throws {
        try await Lab.withLab { lab in
            let target = kind.address(of: lab.host(.sleeper))
            let address = try ip(target)
            let table = try openTable(lab)
            defer { table.close() }

            try table.set(address, mac: Self.madeUpMAC)
            var entry = try await neighbour(lab, target)
            #expect(entry?.mac == Self.madeUpMAC.description, "\(entry?.line ?? "no entry")")
            #expect(entry?.state == "PERMANENT", "\(entry?.line ?? "no entry")")

            try table.set(address, mac: Self.otherMAC)
            entry = try await neighbour(lab, target)
            #expect(entry?.mac == Self.otherMAC.description, "\(entry?.line ?? "no entry")")
            #expect(entry?.state == "PERMANENT", "\(entry?.line ?? "no entry")")

            #expect(try table.remove(address))
            #expect(try await neighbour(lab, target) == nil)
            #expect(try table.remove(address) == false)
            #expect(try await neighbour(lab, target) == nil)
        }
    }

    /// The purpose: with the sleeper asleep (it answers no ARP or ND), traffic from the proxy's own host still
    /// leaves for the sleeper's real MAC at once.
    @Test("with an entry, the proxy's own UDP reaches the sleeping host's NIC", arguments: [Kind.ipv4, Kind.ula])
    func ownTrafficReachesTheSleeper(kind: Kind) async throws {
        try await Lab.withLab { lab in
            let sleeper = lab.host(.sleeper)
            let target = kind.address(of: sleeper)
            try lab.sleep(.sleeper)
            let table = try openTable(lab)
            defer { table.close() }
            let capture = try lab.withNamespace(.sleeper) { try CaptureStream(interface: sleeper.interfaceName) }
            defer { capture.close() }
            try capture.setFilter("udp dst port 9")

            try table.set(try ip(target), mac: mac(sleeper.mac))
            let send = try await lab.run(.proxy, ["python3", "-c", udpSendScript, target, "9", "wake"])
            #expect(send.succeeded, "\(send)")

            // Frames captured before the filter applied (the sleeper's own MLD reports) may come first: skip them.
            let frame = try await firstElement(of: capture.frames, "the proxy's datagram at the sleeper") {
                $0.bytes.contains(sequence: Array("wake".utf8))
            }
            #expect(Array(frame.bytes[0..<6]) == sleeper.mac)
            #expect(Array(frame.bytes[6..<12]) == lab.host(.proxy).mac)
            #expect(frame.bytes.contains(sequence: Array("wake".utf8)))
            #expect(try table.remove(try ip(target)))
        }
    }

    @Test("a missing interface fails specifically, when opening and when the interface goes away later")
    func missingInterface() async throws {
        try await Lab.withLab { lab in
            for index: UInt32 in [0, 9_999] {
                let error = try lab.withNamespace(.proxy) {
                    #expect(throws: SystemError.self) { try NeighbourTable(interfaceIndex: index) }
                }
                #expect(error?.code == .interfaceNotFound)
                #expect(error?.errorNumber == ENODEV)
                #expect(
                    error?.description == "open the neighbour table of interface index \(index): there is no "
                        + "interface with index \(index) in this network namespace")
            }

            let add = try await lab.run(.proxy, ["ip", "link", "add", "spn0", "type", "veth", "peer", "name", "spn1"])
            #expect(add.succeeded, "\(add)")
            let table = try lab.withNamespace(.proxy) {
                try NeighbourTable(interfaceIndex: try NetworkInterface.named("spn0").index)
            }
            defer { table.close() }
            #expect(table.interfaceName == "spn0")
            let delete = try await lab.run(.proxy, ["ip", "link", "delete", "spn0"])
            #expect(delete.succeeded, "\(delete)")

            let address = try ip("10.77.0.2")
            let error = #expect(throws: SystemError.self) { try table.set(address, mac: Self.madeUpMAC) }
            #expect(error?.code == .interfaceNotFound)
            #expect(error?.errorNumber == ENODEV)
            #expect(
                error?.description.hasPrefix(
                    "set neighbour 10.77.0.2 lladdr 02:77:00:00:99:01 PERMANENT (RTM_NEWNEIGH) on spn0 (index "
                ) == true, "\(error.map(String.init) ?? "")")
            let removeError = #expect(throws: SystemError.self) { try table.remove(address) }
            #expect(removeError?.code == .interfaceNotFound)
        }
    }

    @Test("without CAP_NET_ADMIN a request fails with permissionDenied and says what is missing")
    func withoutNetAdmin() async throws {
        try await Lab.withLab { lab in
            let namespace = lab.host(.proxy).namespace
            let sleeper = lab.host(.sleeper)
            let index = try lab.withNamespace(.proxy) { try NetworkInterface.named(Lab.interfaceName).index }
            let outcome = try await onFreshThread {
                try Lab.withNamespace(named: namespace) { () throws -> SystemError? in
                    // Capabilities are per thread; this thread ends right after.
                    try dropEffectiveCapability(capNetAdmin)
                    guard try effectiveCapabilities() & (1 << capNetAdmin) == 0 else {
                        throw TestFailure("CAP_NET_ADMIN is still effective")
                    }
                    let table = try NeighbourTable(interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
                    defer { table.close() }
                    do {
                        try table.set(try ip(sleeper.ipv4), mac: Self.madeUpMAC)
                        return nil
                    } catch let error as SystemError {
                        return error
                    }
                }
            }
            let error = try #require(outcome, "the entry was set without CAP_NET_ADMIN")
            #expect(error.code == .permissionDenied)
            #expect(error.errorNumber == EPERM)
            #expect(
                error.description
                    == "set neighbour \(sleeper.ipv4) lladdr 02:77:00:00:99:01 PERMANENT (RTM_NEWNEIGH) on eth0 "
                    + "(index \(index)): "
                    + "Operation not permitted; changing the neighbour table needs CAP_NET_ADMIN")
            #expect(try await neighbour(lab, sleeper.ipv4)?.mac != Self.madeUpMAC.description)
        }
    }

    @Test("addresses that cannot be neighbours are refused before asking the kernel; close() is final")
    func invalidAddressesAndClosing() async throws {
        try await Lab.withLab { lab in
            let table = try openTable(lab)
            let cases: [(IPAddress, MACAddress, String)] = [
                (try ip("224.0.0.251"), Self.madeUpMAC, "224.0.0.251 is a multicast address"),
                (try ip("0.0.0.0"), Self.madeUpMAC, "0.0.0.0 is the unspecified address"),
                (try ip("255.255.255.255"), Self.madeUpMAC, "255.255.255.255 is the broadcast address"),
                (try ip("ff02::1:ff00:2"), Self.madeUpMAC, "ff02::1:ff00:2 is a multicast address"),
                (try ip("::"), Self.madeUpMAC, ":: is the unspecified address"),
                (try ip("10.77.0.2"), .zero, "the link-layer address 00:00:00:00:00:00 is all zeros"),
                (
                    try ip("fd77::2"), .broadcast,
                    "the link-layer address ff:ff:ff:ff:ff:ff is a group (multicast or broadcast) address"
                ),
            ]
            for (address, mac, problem) in cases {
                let error = #expect(throws: SystemError.self) { try table.set(address, mac: mac) }
                #expect(error?.code == .invalidAddress)
                #expect(error?.errorNumber == nil)
                #expect(error?.description.hasSuffix(": \(problem)") == true, "\(error.map(String.init) ?? "")")
            }

            table.close()
            table.close()
            let setError = #expect(throws: SystemError.self) {
                try table.set(try ip("10.77.0.2"), mac: Self.madeUpMAC)
            }
            #expect(setError?.code == .closed)
            let removeError = #expect(throws: SystemError.self) { try table.remove(try ip("fd77::2")) }
            #expect(removeError?.code == .closed)
            #expect(
                removeError?.description
                    == "remove neighbour fd77::2 (RTM_DELNEIGH) on eth0 (index \(table.interfaceIndex)): "
                    + "the neighbour table is closed")
        }
    }
}

// MARK: - Helpers

/// The neighbour table of the proxy's `eth0`.
private func openTable(_ lab: Lab) throws -> NeighbourTable {
    try lab.withNamespace(.proxy) {
        try NeighbourTable(interfaceIndex: try NetworkInterface.named(Lab.interfaceName).index)
    }
}

/// One line of `ip neigh show to ADDRESS dev eth0`: `10.77.0.2 lladdr 02:77:00:00:99:01 PERMANENT`.
private struct NeighbourLine: Sendable, Equatable {
    var line: String
    var mac: String?
    var state: String?
}

/// The proxy's entry for `address` on `eth0`, or `nil` if it has none.
private func neighbour(_ lab: Lab, _ address: String) async throws -> NeighbourLine? {
    let family = address.contains(":") ? "-6" : "-4"
    let result = try await lab.run(.proxy, ["ip", family, "neigh", "show", "to", address, "dev", Lab.interfaceName])
    guard result.succeeded else { throw TestFailure("ip neigh failed: \(result)") }
    let lines = result.stdout.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    guard let line = lines.first else { return nil }
    let fields = line.split(separator: " ").map(String.init)
    let mac = fields.firstIndex(of: "lladdr").flatMap { $0 + 1 < fields.count ? fields[$0 + 1] : nil }
    return NeighbourLine(line: line, mac: mac, state: fields.last)
}

extension [UInt8] {
    /// Whether `needle` occurs in these bytes.
    fileprivate func contains(sequence needle: [UInt8]) -> Bool {
        guard needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { Array(self[$0..<($0 + needle.count)]) == needle }
    }
}

/// Sends one UDP datagram: `python3 -c script HOST PORT PAYLOAD`.
private let udpSendScript = """
    import socket, sys
    host, port, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    family, _, _, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)[0]
    socket.socket(family, socket.SOCK_DGRAM).sendto(payload.encode(), address)
    """
