import CNetSupport
import NetworkAddresses
import Testing

@testable import NetworkIO

#if canImport(Glibc)
    import Glibc
#endif

/// Error texts for failures a test cannot provoke on demand (the kernel only refuses SO_BINDTODEVICE for lack of
/// CAP_NET_RAW on re-binding since Linux 5.7; a join fails only if the interface goes at the wrong moment).
struct DatagramSocketErrorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var step: sp_udp_step
        var errno: Int32
        var socket: DatagramSocketName
        var code: SystemError.Code
        var description: String

        var testDescription: String { "\(step) \(code): \(String(cString: strerror(errno)))" }
    }

    /// A registration socket on port `port`.
    static func registration(
        _ family: DatagramSocket.Family,
        port: UInt16 = 5354,
        interface: String = "eth0",
        index: UInt32 = 2
    ) -> DatagramSocketName {
        DatagramSocketName(family: family, group: nil, port: port, interfaceName: interface, interfaceIndex: index)
    }

    /// An mDNS socket on `eth0`, index 2.
    static func multicastDNS(_ family: DatagramSocket.Family) -> DatagramSocketName {
        DatagramSocketName(
            family: family,
            group: IPAddress(family == .ipv4 ? "224.0.0.251" : "ff02::fb"),
            port: 5353,
            interfaceName: "eth0",
            interfaceIndex: 2
        )
    }

    static let cases = [
        Case(
            step: .bind,
            errno: EADDRINUSE,
            socket: registration(.ipv6),
            code: .addressInUse,
            description: "bind UDP [::]:5354 on eth0 (index 2): Address already in use "
                + "(another socket holds port 5354 without SO_REUSEADDR)"
        ),
        Case(
            step: .bindToDevice,
            errno: EPERM,
            socket: registration(.ipv4),
            code: .permissionDenied,
            description: "bind UDP 0.0.0.0:5354 to interface 'eth0' (SO_BINDTODEVICE): Operation not permitted; "
                + "binding a socket to an interface needs CAP_NET_RAW"
        ),
        Case(
            step: .bindToDevice,
            errno: ENODEV,
            socket: registration(.ipv6, index: 0),
            code: .interfaceNotFound,
            description: "bind UDP [::]:5354 to interface 'eth0' (SO_BINDTODEVICE): No such device; "
                + "there is no interface 'eth0' in this network namespace"
        ),
        Case(
            step: .bindToDevice,
            errno: EINVAL,
            socket: registration(.ipv6, interface: "", index: 0),
            code: .interfaceNotFound,
            description: "bind UDP [::]:5354 to interface '' (SO_BINDTODEVICE): invalid interface name "
                + "(0 bytes; a name has 1 to 15)"
        ),
        Case(
            step: .bind,
            errno: EACCES,
            socket: registration(.ipv4, port: 547),
            code: .permissionDenied,
            description: "bind UDP 0.0.0.0:547 on eth0 (index 2): Permission denied; "
                + "ports below 1024 need CAP_NET_BIND_SERVICE"
        ),
        Case(
            step: .bind,
            errno: EACCES,
            socket: registration(.ipv4),
            code: .permissionDenied,
            description: "bind UDP 0.0.0.0:5354 on eth0 (index 2): Permission denied"
        ),
        Case(
            step: .packetInfo,
            errno: ENOPROTOOPT,
            socket: registration(.ipv6),
            code: .openFailed,
            description: "set IPV6_RECVPKTINFO on UDP [::]:5354 on eth0 (index 2): Protocol not available"
        ),
        Case(
            step: .socket,
            errno: EMFILE,
            socket: registration(.ipv4),
            code: .openFailed,
            description: "create UDP 0.0.0.0:5354 on eth0 (index 2): Too many open files"
        ),
        Case(
            step: .bind,
            errno: EADDRINUSE,
            socket: multicastDNS(.ipv4),
            code: .addressInUse,
            description: "bind UDP 224.0.0.251:5353 on eth0 (index 2): Address already in use "
                + "(another socket holds port 5353 without SO_REUSEADDR)"
        ),
        Case(
            step: .join,
            errno: ENODEV,
            socket: multicastDNS(.ipv6),
            code: .interfaceNotFound,
            description: "join ff02::fb (IPV6_JOIN_GROUP) on UDP [ff02::fb]:5353 on eth0 (index 2): No such device; "
                + "there is no interface 'eth0' in this network namespace"
        ),
        Case(
            step: .multicastTTL,
            errno: EPERM,
            socket: multicastDNS(.ipv4),
            code: .permissionDenied,
            description: "set IP_MULTICAST_TTL on UDP 224.0.0.251:5353 on eth0 (index 2): Operation not permitted"
        ),
        Case(
            step: .reusePort,
            errno: ENOPROTOOPT,
            socket: multicastDNS(.ipv6),
            code: .openFailed,
            description: "set SO_REUSEPORT on UDP [ff02::fb]:5353 on eth0 (index 2): Protocol not available"
        ),
    ]

    @Test(
        "open failures map to a code and a description naming the operation, address, interface and reason",
        arguments: cases)
    func openFailure(_ expected: Case) {
        let error = SystemError.openFailed(step: expected.step, errno: expected.errno, socket: expected.socket)
        #expect(error.code == expected.code)
        #expect(error.errorNumber == expected.errno)
        #expect(error.systemCallError?.code == expected.errno)
        #expect(error.description == expected.description)
        #expect(error.description.hasPrefix(error.systemCallError?.operation ?? "-"))
    }

    @Test("a missing interface index is reported with ENODEV")
    func missingIndex() {
        let error = SystemError.interfaceNotFound(
            index: 9_999,
            socket: Endpoint(address: IPAddress("224.0.0.251")!, port: 5353)
        )
        #expect(error.code == .interfaceNotFound)
        #expect(error.errorNumber == ENODEV)
        #expect(
            error.description
                == "open UDP 224.0.0.251:5353 on interface index 9999: "
                + "there is no interface with index 9999 in this network namespace")
    }
}
