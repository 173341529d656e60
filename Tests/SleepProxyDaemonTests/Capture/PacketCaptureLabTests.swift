import CaptureStream
import Dispatch
import Frames
import NetworkAddresses
import NetworkIO
import SleepProxyCore
import SleepProxyDaemon
import Synchronization
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Real libpcap on the veth interfaces of a three-host lab.
@Suite(.requiresLab(tools: ["arping", "nc"]))
struct PacketCaptureLabTests {
    @Test func captureInProxySeesARPRequestFromWaker() async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let waker = lab.host(.waker)
            let capture = try lab.withNamespace(.proxy) { try CaptureStream(interface: proxy.interfaceName) }
            defer { capture.close() }
            try capture.setFilter("arp")

            let result = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", proxy.ipv4])
            #expect(result.succeeded, "arping got no reply from the proxy: \(result)")

            let frame = try await firstElement(of: capture.frames, "an ARP request from the waker") { frame in
                arpRequest(frame.bytes).map { $0.senderProtocolAddress == address(waker.ipv4Bytes) } ?? false
            }
            let parsed = try EthernetFrame(parsing: frame.bytes)
            let arp = try #require(parsed.arp)
            #expect(parsed.header.etherType == .arp)
            #expect(arp.operation == .request)
            #expect(parsed.header.destination == .broadcast)
            #expect(parsed.header.source == mac(waker.mac))
            #expect(arp.senderHardwareAddress == mac(waker.mac))
            #expect(arp.senderProtocolAddress == address(waker.ipv4Bytes))
            #expect(arp.targetProtocolAddress == address(proxy.ipv4Bytes))
            #expect(frame.originalLength == frame.bytes.count)
        }
    }

    @Test func captureInProxySeesTCPSynFromWaker() async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let waker = lab.host(.waker)
            let capture = try lab.withNamespace(.proxy) { try CaptureStream(interface: proxy.interfaceName) }
            defer { capture.close() }
            try capture.setFilter("tcp")

            // Nothing listens on port 22 in the proxy: the kernel answers with a reset, so nc fails quickly.
            let result = try await lab.run(.waker, ["nc", "-z", "-w", "2", proxy.ipv4, "22"])
            #expect(!result.succeeded, "nothing listens on port 22, yet nc connected: \(result)")

            let frame = try await firstElement(of: capture.frames, "a TCP SYN from the waker") { frame in
                syn(frame.bytes)?.destinationPort == 22
            }
            // The IPv4 header checksum is real; TCP checksums on veth are left to offload.
            let parsed = try EthernetFrame(parsing: frame.bytes, verifying: .ipv4Header)
            let ipv4 = try #require(parsed.ipv4)
            let tcp = try #require(parsed.tcp)
            #expect(parsed.header.etherType == .ipv4)
            #expect(ipv4.header.transportProtocol == .tcp)
            #expect(tcp.flags.contains(.syn))
            #expect(!tcp.flags.contains(.ack))
            #expect(tcp.destinationPort == 22)
            #expect(tcp.sourcePort >= 1024)
            #expect(ipv4.header.source == address(waker.ipv4Bytes))
            #expect(ipv4.header.destination == address(proxy.ipv4Bytes))
            #expect(parsed.header.source == mac(waker.mac))
            #expect(parsed.header.destination == mac(proxy.mac))
        }
    }

    @Test(arguments: [false, true])
    func frameInjectedByProxyArrivesInSleeper(sleeperAsleep: Bool) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let sleeper = lab.host(.sleeper)
            if sleeperAsleep { try lab.sleep(.sleeper) }
            let injector = try lab.withNamespace(.proxy) { try CaptureStream(interface: proxy.interfaceName) }
            defer { injector.close() }
            let receiver = try lab.withNamespace(.sleeper) { try CaptureStream(interface: sleeper.interfaceName) }
            defer { receiver.close() }
            try receiver.setFilter("ether proto 0x0842")

            let magic = try magicFrame(from: proxy.mac, to: sleeper.mac)
            #expect(magic.count == 14 + 102)
            let before = wallClock()
            try injector.inject(magic)

            let frame = try await firstElement(of: receiver.frames, "the magic packet in the sleeper") { _ in true }
            let after = wallClock()
            #expect(frame.bytes == magic, "got \(frame.bytes)")
            #expect(try EthernetFrame(parsing: frame.bytes).magicPacket?.target == mac(sleeper.mac))
            #expect(frame.originalLength == magic.count)
            #expect(!frame.isTruncated)
            #expect(frame.timestamp >= before - .milliseconds(1) && frame.timestamp <= after)
        }
    }

    @Test func replacedFilterTakesEffect() async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let sleeper = lab.host(.sleeper)
            let capture = try lab.withNamespace(.proxy) { try CaptureStream(interface: proxy.interfaceName) }
            defer { capture.close() }

            // With "arp": a connection attempt, then an ARP request for the sleeper as an end marker. Frames
            // arrive in order, so a leaked TCP segment would show up before the marker.
            try capture.setFilter("arp")
            _ = try await lab.run(.waker, ["nc", "-z", "-w", "2", proxy.ipv4, "22"])
            _ = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", sleeper.ipv4])
            let arpPhase = try await elements(of: capture.frames, "the ARP marker for the sleeper") { frame in
                arpRequest(frame.bytes).map { $0.targetProtocolAddress == address(sleeper.ipv4Bytes) } ?? false
            }
            #expect(
                arpPhase.allSatisfy { (try? EthernetFrame(parsing: $0.bytes))?.arp != nil },
                "non-ARP frames under filter 'arp'")

            // With "tcp": an ARP request first, then the connection attempt. Frames stamped before the switch
            // may still be buffered; only those after it count.
            try capture.setFilter("tcp")
            let switched = wallClock()
            _ = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", sleeper.ipv4])
            _ = try await lab.run(.waker, ["nc", "-z", "-w", "2", proxy.ipv4, "22"])
            let tcpPhase = try await elements(of: capture.frames, "a TCP SYN after the switch") { frame in
                syn(frame.bytes)?.destinationPort == 22
            }
            let afterSwitch = tcpPhase.filter { $0.timestamp > switched }
            #expect(!afterSwitch.isEmpty)
            #expect(
                afterSwitch.allSatisfy { (try? EthernetFrame(parsing: $0.bytes))?.tcp != nil },
                "non-TCP frames under filter 'tcp'")

            let statistics = try capture.statistics()
            #expect(statistics.captured >= UInt64(arpPhase.count + tcpPhase.count))
            #expect(statistics.received >= 1)
            #expect(statistics.droppedByKernel == 0)
        }
    }

    /// A capture owned by the caller's queue: frames reach the handler on that queue, in order; the handler may
    /// inject, set the filter and read the statistics without deadlocking (they run at once), and may close the
    /// capture, after which nothing more is delivered and every call says it is closed.
    @Test func framesAreHandledOnTheCallersQueue() async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let sleeper = lab.host(.sleeper)
            let queue = DispatchQueue(label: "test.daemon")
            let key = DispatchSpecificKey<String>()
            queue.setSpecific(key: key, value: "the daemon's queue")
            let capture = try lab.withNamespace(.proxy) {
                try PacketCapture(interface: proxy.interfaceName, queue: queue)
            }
            defer { capture.close() }
            try capture.setFilter("ether proto 0x0842")
            let echo = try lab.withNamespace(.sleeper) { try CaptureStream(interface: sleeper.interfaceName) }
            defer { echo.close() }
            try echo.setFilter("ether proto 0x0843")

            let seen = Mutex<[UInt8]>([])
            let problems = Mutex<[String]>([])
            let closedAfter = Mutex<Bool>(false)
            queue.sync {
                capture.startDelivering { frame in
                    if DispatchQueue.getSpecific(key: key) == nil { problems.withLock { $0.append("off the queue") } }
                    let number = frame.bytes[14]
                    seen.withLock { $0.append(number) }
                    do {
                        // From inside the handler: inject an answer, set the same filter, read the counters.
                        try capture.inject(
                            sleeper.mac + proxy.mac + [0x08, 0x43] + Array(repeating: number, count: 46))
                        try capture.setFilter("ether proto 0x0842")
                        _ = try capture.statistics()
                    } catch {
                        problems.withLock { $0.append("\(error)") }
                    }
                    if number == 4 {
                        capture.close()
                        closedAfter.withLock { $0 = capture.isClosed }
                    }
                }
            }
            let sender = try lab.withNamespace(.sleeper) { try CaptureStream(interface: sleeper.interfaceName) }
            defer { sender.close() }
            for number in 0..<8 {
                try sender.inject(proxy.mac + sleeper.mac + [0x08, 0x42] + Array(repeating: UInt8(number), count: 46))
            }
            let echoed = try await elements(of: echo.frames, "the echo of frame 4") { $0.bytes[14] == 4 }
            #expect(echoed.map { $0.bytes[14] } == [0, 1, 2, 3, 4])
            // Frames 5 to 7 arrive after the close: never delivered.
            try await Task.sleep(for: .milliseconds(300))
            queue.sync {}
            #expect(seen.withLock { $0 } == [0, 1, 2, 3, 4])
            #expect(problems.withLock { $0 }.isEmpty, "\(problems.withLock { $0 })")
            #expect(closedAfter.withLock { $0 })
            let error = #expect(throws: SystemError.self) { try capture.statistics() }
            #expect(error?.code == .closed)
        }
    }

    /// A capture on the caller's queue that never started delivering closes cleanly, from the queue or not.
    @Test(arguments: [false, true])
    func aCaptureThatNeverStartedCloses(fromTheQueue: Bool) async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let queue = DispatchQueue(label: "test.daemon")
            let capture = try lab.withNamespace(.proxy) {
                try PacketCapture(interface: proxy.interfaceName, queue: queue)
            }
            if fromTheQueue {
                queue.sync { capture.close() }
                queue.sync {}
            } else {
                capture.close()
            }
            #expect(capture.isClosed)
            let error = #expect(throws: SystemError.self) { try capture.setFilter("arp") }
            #expect(error?.code == .closed)
            queue.sync { capture.startDelivering { _ in Issue.record("a closed capture delivered a frame") } }
        }
    }

    @Test func closeFinishesTheStreamAndIsIdempotent() async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let capture = try lab.withNamespace(.proxy) { try CaptureStream(interface: proxy.interfaceName) }
            let frames = capture.frames
            let consumer = Task { () -> Int in
                var count = 0
                for await _ in frames { count += 1 }
                return count
            }
            #expect(!capture.isClosed)
            capture.close()
            capture.close()
            #expect(capture.isClosed)
            _ = try await withTimeout(.seconds(5), "the frame stream to finish") { await consumer.value }

            let closedErrors: [SystemError?] = [
                #expect(throws: SystemError.self) {
                    try capture.inject(magicFrame(from: proxy.mac, to: proxy.mac))
                },
                #expect(throws: SystemError.self) { try capture.setFilter("arp") },
                #expect(throws: SystemError.self) { try capture.statistics() },
            ]
            for error in closedErrors {
                #expect(error?.code == .closed)
                #expect(error?.description.contains("closed") == true)
            }
        }
    }

    @Test func openingAMissingInterfaceFailsSpecifically() async throws {
        try await Lab.withLab { lab in
            let error = #expect(throws: SystemError.self) {
                try lab.withNamespace(.proxy) { try CaptureStream(interface: "nosuch0") }
            }
            #expect(error?.code == .interfaceNotFound)
            #expect(error?.description.contains("'nosuch0'") == true, "\(String(describing: error))")
        }
    }

    @Test func badFilterFailsSpecificallyAndCaptureKeepsWorking() async throws {
        try await Lab.withLab { lab in
            let proxy = lab.host(.proxy)
            let sleeper = lab.host(.sleeper)
            let capture = try lab.withNamespace(.proxy) { try CaptureStream(interface: proxy.interfaceName) }
            defer { capture.close() }
            try capture.setFilter("ether proto 0x0842")

            let expression = "tcp port banana"
            let error = #expect(throws: SystemError.self) { try capture.setFilter(expression) }
            #expect(error?.code == .invalidFilter)
            let description = error?.description ?? ""
            #expect(description.contains("'\(expression)'"), "\(description)")
            #expect(description.contains("banana"))
            #expect(description.count > expression.count + 40, "libpcap's reason is missing: \(description)")

            let tooShort = #expect(throws: SystemError.self) { try capture.inject([0x01, 0x02]) }
            #expect(tooShort?.code == .injectFailed)

            // The previous filter is still in effect.
            let sender = try lab.withNamespace(.sleeper) { try CaptureStream(interface: sleeper.interfaceName) }
            defer { sender.close() }
            let magic = try magicFrame(from: sleeper.mac, to: proxy.mac)
            try sender.inject(magic)
            let frame = try await firstElement(of: capture.frames, "a magic packet after the bad filter") { _ in true }
            #expect(frame.bytes == magic)
        }
    }
}

/// Polls `capture`'s counters until `condition` holds, for at most `timeout`.
func waitForStatistics(
    _ capture: PacketCapture,
    _ what: String,
    timeout: Duration = .seconds(5),
    until condition: @escaping @Sendable (PacketCapture.Statistics) -> Bool
) async throws -> PacketCapture.Statistics {
    try await withTimeout(timeout, what) {
        while true {
            let statistics = try capture.statistics()
            if condition(statistics) { return statistics }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// `CLOCK_REALTIME` as a duration since the Unix epoch, comparable with capture timestamps.
func wallClock() -> Duration {
    .nanoseconds(Daemon.now().nanoseconds)
}
