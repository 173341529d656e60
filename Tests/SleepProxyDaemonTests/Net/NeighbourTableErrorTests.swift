import CNetSupport
import NetworkIO
import Testing

@testable import SleepProxyDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// Error texts for failures a lab cannot provoke on demand: a kernel that does not answer, a refusal with the
/// kernel's extended-ACK text, a failed send.
struct NeighbourTableErrorTests {
    static let operation = "set neighbour 10.77.0.2 lladdr 02:77:00:00:99:01 PERMANENT (RTM_NEWNEIGH)"

    @Test("request failures map to a code and a description naming the operation, interface and reason")
    func requestFailures() {
        let cases: [(sp_netlink_stage, Int32, String, SystemError.Code, String)] = [
            (
                .kernel, EPERM, "", .permissionDenied,
                "\(Self.operation) on eth0 (index 2): Operation not permitted; "
                    + "changing the neighbour table needs CAP_NET_ADMIN"
            ),
            (
                .kernel, EINVAL, "Invalid link address", .requestFailed,
                "\(Self.operation) on eth0 (index 2): Invalid argument (kernel: Invalid link address)"
            ),
            (
                .receive, EAGAIN, "", .requestFailed,
                "receive the answer to \(Self.operation) on eth0 (index 2): Resource temporarily unavailable; "
                    + "the kernel did not answer within 5000 ms"
            ),
            (
                .send, ENOBUFS, "", .requestFailed,
                "send \(Self.operation) on eth0 (index 2): No buffer space available"
            ),
            (
                .kernel, ENODEV, "", .interfaceNotFound,
                "\(Self.operation) on eth0 (index 2): No such device; "
                    + "the interface does not exist in this network namespace (any more)"
            ),
        ]
        for (stage, number, kernelMessage, code, description) in cases {
            let error = SystemError.requestFailed(
                operation: Self.operation,
                interface: "eth0 (index 2)",
                stage: stage,
                errno: number,
                kernelMessage: kernelMessage
            )
            #expect(error.code == code)
            #expect(error.errorNumber == number)
            #expect(error.description == description)
        }
    }

    @Test("an open failure names the netlink socket and the interface")
    func openFailure() {
        let error = SystemError.openFailed(step: .socket, errno: EMFILE, interface: "eth0 (index 2)")
        #expect(error.code == .openFailed)
        #expect(
            error.description
                == "create the NETLINK_ROUTE socket for the neighbour table of eth0 (index 2): Too many open files")
    }
}
