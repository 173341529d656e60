import CNetSupport
import Testing

@testable import SleepProxyDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// Error texts for failures a test cannot provoke on demand (the kernel only refuses SO_BINDTODEVICE for lack of
/// CAP_NET_RAW on re-binding since Linux 5.7).
struct DatagramSocketErrorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var step: sp_udp_open_step
        var errno: Int32
        var family: DatagramSocket.Family
        var code: DatagramSocketError.Code
        var description: String

        var testDescription: String { "\(code): \(String(cString: strerror(errno)))" }
    }

    static let cases = [
        Case(
            step: .bind,
            errno: EADDRINUSE,
            family: .ipv6,
            code: .addressInUse,
            description: "bind UDP [::]:5354 on eth0: Address already in use "
                + "(another socket holds the port without SO_REUSEADDR)"
        ),
        Case(
            step: .bindToDevice,
            errno: EPERM,
            family: .ipv4,
            code: .permissionDenied,
            description: "bind UDP 0.0.0.0:5354 to interface 'eth0' (SO_BINDTODEVICE): Operation not permitted; "
                + "binding a socket to an interface needs CAP_NET_RAW"
        ),
        Case(
            step: .bindToDevice,
            errno: ENODEV,
            family: .ipv6,
            code: .interfaceNotFound,
            description: "bind UDP [::]:5354 to interface 'eth0': No such device; "
                + "there is no interface 'eth0' in this network namespace"
        ),
        Case(
            step: .bind,
            errno: EACCES,
            family: .ipv4,
            code: .permissionDenied,
            description: "bind UDP 0.0.0.0:5354 on eth0: Permission denied; ports below 1024 need CAP_NET_BIND_SERVICE"
        ),
        Case(
            step: .packetInfo,
            errno: ENOPROTOOPT,
            family: .ipv6,
            code: .openFailed,
            description: "set IPV6_RECVPKTINFO on UDP [::]:5354 on eth0: Protocol not available"
        ),
        Case(
            step: .socket,
            errno: EMFILE,
            family: .ipv4,
            code: .openFailed,
            description: "create UDP 0.0.0.0:5354 on eth0: Too many open files"
        ),
    ]

    @Test(
        "open failures map to a code and a description naming the operation, address, interface and reason",
        arguments: cases)
    func openFailure(_ expected: Case) {
        let error = DatagramSocketError.openFailed(
            step: expected.step,
            errno: expected.errno,
            family: expected.family,
            interface: "eth0",
            port: 5354
        )
        #expect(error.code == expected.code)
        #expect(error.errorNumber == expected.errno)
        #expect(error.description == expected.description)
    }
}
