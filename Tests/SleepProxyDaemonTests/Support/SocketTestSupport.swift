import DNSWire
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

// Helpers the socket and kernel-table lab tests share.

/// A failure in a test helper.
struct TestFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Parses `text` as an address or fails the test.
func ip(_ text: String) throws -> IPAddress {
    try #require(IPAddress(text), "not an IP address: \(text)")
}

/// A socket the tests wait on with `poll`.
protocol PollableSocket {
    func receive() throws -> ReceivedDatagram?
    var fileDescriptor: Int32 { get }
    /// What to call the socket in a timeout message.
    var testLabel: String { get }
}

extension DatagramSocket: PollableSocket {
    var testLabel: String { group.map { "\($0)" } ?? "UDP port \(localPort)" }
}

/// The next datagram on `socket`, waiting on its descriptor with `poll` for at most `timeout` (generous: only a
/// failure waits that long, and a loaded machine is slow).
func nextDatagram(from socket: some PollableSocket, within timeout: Duration = .seconds(20)) async throws
    -> ReceivedDatagram
{
    let deadline = ContinuousClock.now + timeout
    while true {
        if let datagram = try socket.receive() { return datagram }
        let remaining = deadline - ContinuousClock.now
        guard remaining > .zero else {
            throw TimeoutError("no datagram on \(socket.testLabel) within \(timeout)")
        }
        try await waitReadable(socket.fileDescriptor, timeout: remaining)
    }
}

/// Blocks a Dispatch thread (not the cooperative pool) in `poll` until `descriptor` is readable or `timeout`
/// passes.
func waitReadable(_ descriptor: Int32, timeout: Duration) async throws {
    let milliseconds = Int32(clamping: Int((timeout / .milliseconds(1)).rounded(.up)))
    let result: Int32 = await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            var ready: Int32
            repeat {
                ready = poll(&entry, 1, milliseconds)
            } while ready < 0 && errno == EINTR
            continuation.resume(returning: ready < 0 ? -errno : ready)
        }
    }
    if result < 0 {
        throw TestFailure("poll failed: \(String(cString: strerror(-result)))")
    }
}

/// Re-evaluates `condition` every 10 ms until it holds, for at most `timeout`.
func waitUntil(_ what: String, within timeout: Duration = .seconds(5), _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        guard ContinuousClock.now < deadline else {
            throw TimeoutError("timed out after \(timeout) waiting for \(what)")
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

// MARK: Capabilities

let capNetAdmin: UInt32 = 12
let capNetRaw: UInt32 = 13

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
let capabilityVersion3: UInt32 = 0x2008_0522

typealias CapabilityCall = @convention(c) (UnsafeMutableRawPointer, UnsafeMutableRawPointer) -> Int32

/// glibc exports `capget` and `capset` but declares them in no header the Glibc module has.
func capabilityFunction(_ name: String) throws -> CapabilityCall {
    guard let symbol = dlsym(nil, name) else { throw TestFailure("glibc has no \(name)") }
    return unsafeBitCast(symbol, to: CapabilityCall.self)
}

/// Header (version, pid: 0 is the calling thread) and two sets of (effective, permitted, inheritable).
func withCapabilities<Result>(_ body: (UnsafeMutableRawPointer, UnsafeMutablePointer<UInt32>) throws -> Result)
    throws -> Result
{
    var header: [UInt32] = [capabilityVersion3, 0]
    var data = [UInt32](repeating: 0, count: 6)
    return try header.withUnsafeMutableBytes { headerBytes in
        try data.withUnsafeMutableBufferPointer { words in
            let capget = try capabilityFunction("capget")
            guard capget(headerBytes.baseAddress!, UnsafeMutableRawPointer(words.baseAddress!)) == 0 else {
                throw TestFailure("capget: \(String(cString: strerror(errno)))")
            }
            return try body(headerBytes.baseAddress!, words.baseAddress!)
        }
    }
}

/// Removes `capability` from the calling thread's effective set.
func dropEffectiveCapability(_ capability: UInt32) throws {
    try withCapabilities { header, words in
        words[0] &= ~(1 << capability)
        let capset = try capabilityFunction("capset")
        guard capset(header, UnsafeMutableRawPointer(words)) == 0 else {
            throw TestFailure("capset: \(String(cString: strerror(errno)))")
        }
    }
}

/// The low 32 bits of the calling thread's effective set.
func effectiveCapabilities() throws -> UInt32 {
    try withCapabilities { _, words in words[0] }
}

/// Runs `body` on a new thread that ends afterwards, so per-thread state it changes (capabilities, network
/// namespace) dies with it.
func onFreshThread<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.start()
    }
}

extension MDNSQueryResponse {
    /// Whether this response answers the question `name`/`type`: an answer record of that name (any case) and
    /// type. A responder also sends announcements (of its reverse mappings, say) unasked: those do not count.
    func answers(_ name: DNSName, _ type: DNSType) -> Bool {
        guard let message = try? DNSMessage(decoding: bytes) else { return false }
        return message.answers.contains { $0.type == type && $0.name.caseInsensitiveEquals(name) }
    }
}
