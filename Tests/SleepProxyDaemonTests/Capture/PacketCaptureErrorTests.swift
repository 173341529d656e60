import CPcap
import Foundation
import NetworkIO
import Testing

@testable import SleepProxyDaemon

/// The mapping from libpcap's open failures to errors, checked without needing an unprivileged process.
struct PacketCaptureErrorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var status: Int32
        var message: String
        var code: SystemError.Code
        var mentions: [String]

        var testDescription: String { "status \(status), \"\(message)\" -> \(code)" }
    }

    @Test(arguments: [
        Case(
            status: PCAP_ERROR_PERM_DENIED,
            message: "eth0: You don't have permission to perform this capture on that device (socket: "
                + "Operation not permitted)",
            code: .permissionDenied,
            mentions: ["CAP_NET_RAW", "root", "'eth0'", "socket: Operation not permitted"]
        ),
        Case(
            status: PCAP_ERROR,
            message: "socket: Operation not permitted",
            code: .permissionDenied,
            mentions: ["CAP_NET_RAW", "'eth0'"]
        ),
        Case(status: PCAP_ERROR_PROMISC_PERM_DENIED, message: "", code: .permissionDenied, mentions: ["CAP_NET_RAW"]),
        Case(
            status: PCAP_ERROR_NO_SUCH_DEVICE,
            message: "eth0: No such device exists (SIOCGIFINDEX: No such device)",
            code: .interfaceNotFound,
            mentions: ["'eth0'", "no such interface"]
        ),
        Case(status: PCAP_ERROR_IFACE_NOT_UP, message: "", code: .interfaceDown, mentions: ["'eth0'", "down"]),
        Case(
            status: PCAP_ERROR,
            message: "can't mmap rx ring: Cannot allocate memory",
            code: .openFailed,
            mentions: ["'eth0'", "can't mmap rx ring", "status -1"]
        ),
    ])
    func openFailureMapsToSpecificError(_ example: Case) {
        let error = SystemError.openFailure(interface: "eth0", status: example.status, message: example.message)
        #expect(error.code == example.code)
        for text in example.mentions {
            #expect(error.description.contains(text), "\"\(error.description)\" lacks \"\(text)\"")
        }
        #expect(!error.description.contains("CAP_NET_RAW") || example.code == .permissionDenied)
    }

    /// A real open without `CAP_NET_RAW`: on a thread of its own that drops the capability (capabilities are
    /// per thread on Linux, and the thread ends afterwards), so it also runs as root.
    @Test func openingWithoutCapNetRawNamesTheCapability() async throws {
        let outcome = try await onThreadWithoutCapNetRaw { () -> Result<Void, SystemError> in
            do {
                let capture = try PacketCapture(interface: "lo", queue: DispatchQueue(label: "test.capture"))
                capture.close()
                return .success(())
            } catch let error as SystemError {
                return .failure(error)
            } catch {
                return .failure(.openFailure(interface: "lo", status: 0, message: "unexpected \(error)"))
            }
        }
        guard case .failure(let error) = outcome else {
            Issue.record("opening a capture without CAP_NET_RAW succeeded")
            return
        }
        #expect(error.code == .permissionDenied)
        #expect(error.description.contains("CAP_NET_RAW"), "\(error)")
        #expect(error.description.contains("'lo'"), "\(error)")
    }

    @Test func codesAreDistinct() {
        let codes: [SystemError.Code] = [
            .interfaceNotFound, .permissionDenied, .interfaceDown, .openFailed, .invalidFilter, .filterFailed,
            .injectFailed, .shortWrite, .statisticsFailed, .closed,
        ]
        #expect(Set(codes).count == codes.count)
        #expect(Set(codes.map(\.description)).count == codes.count)
    }
}

/// Runs `body` on a new thread without `CAP_NET_RAW` in its effective, permitted and inheritable sets.
private func onThreadWithoutCapNetRaw<Value: Sendable>(
    _ body: @escaping @Sendable () -> Value
) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            // struct __user_cap_header_struct { u32 version; int pid; }, version 3 with two data words.
            var header: [UInt32] = [0x2008_0522, 0]
            // Two struct __user_cap_data_struct { u32 effective, permitted, inheritable; }.
            var data = [UInt32](repeating: 0, count: 6)
            guard capabilityCall("capget", &header, &data) == 0 else {
                continuation.resume(throwing: CapabilityError(description: "capget failed: errno \(errno)"))
                return
            }
            let capNetRaw: UInt32 = 1 << 13
            for index in 0..<3 { data[index] &= ~capNetRaw }
            guard capabilityCall("capset", &header, &data) == 0 else {
                continuation.resume(throwing: CapabilityError(description: "capset failed: errno \(errno)"))
                return
            }
            continuation.resume(returning: body())
        }
        thread.start()
    }
}

private struct CapabilityError: Error, CustomStringConvertible {
    var description: String
}

/// glibc exports `capget` and `capset` without declaring them in its own headers.
private func capabilityCall(
    _ name: String,
    _ header: UnsafeMutablePointer<UInt32>,
    _ data: UnsafeMutablePointer<UInt32>
) -> Int32 {
    typealias Function = @convention(c) (UnsafeMutableRawPointer, UnsafeMutableRawPointer) -> Int32
    guard let symbol = dlsym(nil, name) else { return -1 }
    return unsafeBitCast(symbol, to: Function.self)(header, data)
}
