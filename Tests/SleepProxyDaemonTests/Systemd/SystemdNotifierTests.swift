import NetworkIO
import SleepProxyDaemon
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The sd_notify protocol against a real Unix datagram socket standing in for the service manager.
@Suite("Systemd notifier")
struct SystemdNotifierTests {
    /// One call and the datagram the manager must receive for it.
    struct Case: Sendable, CustomStringConvertible {
        let description: String
        let expected: String
        let call: @Sendable (SystemdNotifier) throws -> Bool
    }

    static let cases: [Case] = [
        Case(description: "ready with status", expected: "READY=1\nSTATUS=holding 3 hosts on eth0") {
            try $0.ready(status: "holding 3 hosts on eth0")
        },
        Case(description: "ready", expected: "READY=1") { try $0.ready() },
        Case(description: "status", expected: "STATUS=holding 1 host on eth0, eth0.20") {
            try $0.status("holding 1 host on eth0, eth0.20")
        },
        Case(description: "a line break in a status", expected: "STATUS=two lines") { try $0.status("two\nlines") },
        Case(description: "reloading", expected: "RELOADING=1\nMONOTONIC_USEC=123456789") { try $0.reloading() },
        Case(description: "ready after reload", expected: "READY=1\nSTATUS=holding 0 hosts on eth0") {
            try $0.readyAfterReload(status: "holding 0 hosts on eth0")
        },
        Case(description: "stopping", expected: "STOPPING=1") { try $0.stopping() },
        Case(description: "stopping with status", expected: "STOPPING=1\nSTATUS=waking 2 hosts") {
            try $0.stopping(status: "waking 2 hosts")
        },
        Case(description: "watchdog", expected: "WATCHDOG=1") { try $0.watchdogPing() },
        Case(description: "lifecycle: ready", expected: "READY=1\nSTATUS=holding 2 hosts on eth0") {
            try $0.notify(Daemon.LifecycleEvent.ready(status: "holding 2 hosts on eth0"))
        },
        Case(description: "lifecycle: reloaded", expected: "READY=1\nSTATUS=holding 2 hosts on eth1") {
            try $0.notify(Daemon.LifecycleEvent.reloaded(status: "holding 2 hosts on eth1"))
        },
        Case(description: "lifecycle: watchdog", expected: "WATCHDOG=1") {
            try $0.notify(Daemon.LifecycleEvent.watchdog)
        },
    ]

    @Test(arguments: cases)
    func sendsToASocketFile(_ testCase: Case) throws {
        let manager = try ManagerSocket.inTemporaryDirectory()
        let notifier = SystemdNotifier(
            environment: ["NOTIFY_SOCKET": manager.address], monotonicMicroseconds: { 123_456_789 })
        #expect(notifier.socketAddress?.description == manager.address)
        #expect(try testCase.call(notifier))
        #expect(try manager.next() == testCase.expected)
    }

    @Test(arguments: cases)
    func sendsToAnAbstractName(_ testCase: Case) throws {
        let manager = try ManagerSocket(
            abstractName: "sleepproxy-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        let notifier = SystemdNotifier(
            environment: ["NOTIFY_SOCKET": manager.address], monotonicMicroseconds: { 123_456_789 })
        #expect(try testCase.call(notifier))
        #expect(try manager.next() == testCase.expected)
    }

    @Test func aSequenceArrivesInOrder() throws {
        let manager = try ManagerSocket.inTemporaryDirectory()
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": manager.address])
        try notifier.ready(status: "holding 3 hosts on eth0")
        try notifier.watchdogPing()
        try notifier.stopping()
        #expect(try manager.next() == "READY=1\nSTATUS=holding 3 hosts on eth0")
        #expect(try manager.next() == "WATCHDOG=1")
        #expect(try manager.next() == "STOPPING=1")
    }

    @Test func reloadingCarriesTheMonotonicClock() throws {
        let manager = try ManagerSocket.inTemporaryDirectory()
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": manager.address])
        var before = timespec()
        clock_gettime(CLOCK_MONOTONIC, &before)
        try notifier.reloading()
        var after = timespec()
        clock_gettime(CLOCK_MONOTONIC, &after)
        let lines = try manager.next().split(separator: "\n")
        #expect(lines.first == "RELOADING=1")
        let stamp = try #require(lines.last.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) })
        #expect(lines.last?.hasPrefix("MONOTONIC_USEC=") == true)
        #expect(stamp >= UInt64(before.tv_sec) * 1_000_000 + UInt64(before.tv_nsec) / 1_000)
        #expect(stamp <= UInt64(after.tv_sec) * 1_000_000 + UInt64(after.tv_nsec) / 1_000)
    }

    @Test func withoutNotifySocketEveryCallDoesNothing() throws {
        for environment in [[:], ["NOTIFY_SOCKET": ""], ["WATCHDOG_USEC": "30000000"]] {
            let notifier = SystemdNotifier(environment: environment)
            #expect(!notifier.isEnabled)
            #expect(notifier.socketAddress == nil)
            #expect(try !notifier.ready(status: "holding 3 hosts on eth0"))
            #expect(try !notifier.status("x"))
            #expect(try !notifier.reloading())
            #expect(try !notifier.readyAfterReload())
            #expect(try !notifier.stopping())
            #expect(try !notifier.watchdogPing())
        }
    }

    @Test(arguments: ["run/notify", "vsock:2:1234", "@", "/" + String(repeating: "x", count: 108)])
    func anUnusableNotifySocketIsReportedOnEveryCall(_ value: String) {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": value])
        #expect(notifier.isEnabled)
        #expect(notifier.socketAddress == nil)
        let error = #expect(throws: SystemError.self) { try notifier.ready() }
        #expect(error?.code == .invalidSocket)
        #expect(error?.description.hasPrefix("NOTIFY_SOCKET=\(value): ") == true)
        #expect(throws: SystemError.self) { try notifier.watchdogPing() }
    }

    @Test func aSocketNobodyListensOnIsAnError() throws {
        let missing = "/tmp/sleepproxy-notify-missing-\(getpid())-\(UInt32.random(in: 0...UInt32.max))/notify"
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": missing])
        let error = #expect(throws: SystemError.self) { try notifier.ready() }
        #expect(error?.code == .sendFailed)
        #expect(error?.errorNumber == ENOENT)
        #expect(error?.description.contains(missing) == true)

        let abstract = SystemdNotifier(environment: ["NOTIFY_SOCKET": "@sleepproxy-test-nobody-\(getpid())"])
        let refused = #expect(throws: SystemError.self) { try abstract.status("x") }
        #expect(refused?.errorNumber == ECONNREFUSED)
    }

    /// WATCHDOG_USEC, WATCHDOG_PID (the test process is 4242) and the expected ping interval.
    @Test(
        arguments: [
            ("30000000", nil, .seconds(15)),
            ("30000000", "4242", .seconds(15)),
            ("30000000", "4243", nil),
            ("30000000", "", nil),
            ("30000000", "not a pid", nil),
            ("1", nil, .nanoseconds(500)),
            ("86400000000", nil, .seconds(43_200)),
            // USEC_INFINITY.
            ("18446744073709551615", nil, nil),
            ("0", nil, nil),
            ("-5", nil, nil),
            ("thirty", nil, nil),
            ("", nil, nil),
            (nil, "4242", nil),
            (nil, nil, nil),
        ] as [(String?, String?, Duration?)])
    func watchdogInterval(microseconds: String?, processID: String?, expected: Duration?) {
        var environment: [String: String] = ["NOTIFY_SOCKET": "/run/systemd/notify"]
        environment["WATCHDOG_USEC"] = microseconds
        environment["WATCHDOG_PID"] = processID
        let notifier = SystemdNotifier(environment: environment, processID: 4242)
        #expect(notifier.watchdogInterval == expected)
        #expect(notifier.watchdogTimeout == expected.map { $0 * 2 })
    }

    @Test func theWatchdogOfThisProcess() {
        let ours = SystemdNotifier(environment: ["WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "\(getpid())"])
        #expect(ours.watchdogInterval == .seconds(5))
        let theirs = SystemdNotifier(environment: ["WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "\(getpid() + 1)"])
        #expect(theirs.watchdogInterval == nil)
    }
}

/// A Unix datagram socket playing the service manager: bound to a file in a directory of its own or to an
/// abstract name, receiving with a timeout so that a missing notification fails the test instead of hanging it.
/// The file and its directory go with the value.
private final class ManagerSocket {
    let descriptor: Int32
    /// As NOTIFY_SOCKET spells it.
    let address: String
    private let directory: String?

    /// A socket file `notify` in a new directory under /tmp.
    static func inTemporaryDirectory() throws -> ManagerSocket {
        var template = Array("/tmp/sleepproxy-notify-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else {
            throw ManagerSocketError("mkdtemp: \(String(cString: strerror(errno)))")
        }
        let directory = String(cString: created)
        let path = directory + "/notify"
        do {
            return try ManagerSocket(sunPath: Array(path.utf8), address: path, directory: directory)
        } catch {
            rmdir(directory)
            throw error
        }
    }

    convenience init(abstractName: String) throws {
        try self.init(sunPath: [0] + Array(abstractName.utf8), address: "@\(abstractName)", directory: nil)
    }

    private init(sunPath: [UInt8], address: String, directory: String?) throws {
        descriptor = try Self.bound(to: sunPath, address: address)
        self.address = address
        self.directory = directory
    }

    /// A datagram socket bound to `sunPath`, with a receive timeout.
    private static func bound(to sunPath: [UInt8], address: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw ManagerSocketError("socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var storage = sockaddr_un()
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { $0.copyBytes(from: sunPath) }
        // An abstract name is exactly as long as its bytes; a path may leave its NUL out.
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + sunPath.count)
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw ManagerSocketError("bind \(address): \(reason)")
        }
        return descriptor
    }

    deinit {
        close(descriptor)
        if let directory {
            unlink(address)
            rmdir(directory)
        }
    }

    /// The next datagram, as text.
    func next() throws -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count >= 0 else {
            throw ManagerSocketError("nothing arrived at \(address): \(String(cString: strerror(errno)))")
        }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}

private struct ManagerSocketError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
