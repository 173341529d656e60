import Dispatch
public import SleepProxyDaemon

/// A ``PacketCapture`` whose frames a test or a benchmark reads as an `AsyncStream`, as a tcpdump beside the lab
/// would show them: the capture runs on a queue of its own and its handler feeds ``frames``.
///
/// The daemon takes frames on its own queue; only tests wait for them in a task, so the stream lives here.
public final class CaptureStream: Sendable {
    private let capture: PacketCapture
    /// Captured frames in capture order, the newest 4,096 kept while nobody reads. Finishes when ``close()`` is
    /// called; if reading fails (the interface is deleted) frames stop but it does not finish, so every wait on it
    /// has a deadline (`firstElement(of:within:)`). Iterate it from one task at a time; cancelling a task that
    /// waits on it ends it for good.
    public let frames: AsyncStream<CapturedFrame>
    private let continuation: AsyncStream<CapturedFrame>.Continuation

    /// Opens `interface` in the calling thread's network namespace and starts delivering at once.
    public init(interface: String, options: PacketCapture.Options = PacketCapture.Options()) throws {
        let queue = DispatchQueue(label: "capture-stream.\(interface)")
        let (frames, continuation) = AsyncStream.makeStream(
            of: CapturedFrame.self, bufferingPolicy: .bufferingNewest(4_096))
        capture = try PacketCapture(interface: interface, options: options, queue: queue)
        self.frames = frames
        self.continuation = continuation
        let capture = capture
        queue.sync { capture.startDelivering { frame in continuation.yield(frame) } }
    }

    deinit {
        close()
    }

    public var interfaceName: String { capture.interfaceName }

    public var isClosed: Bool { capture.isClosed }

    public func setFilter(_ expression: String) throws { try capture.setFilter(expression) }

    public func inject(_ frame: [UInt8]) throws { try capture.inject(frame) }

    public func statistics() throws -> PacketCapture.Statistics { try capture.statistics() }

    /// Closes the capture and finishes ``frames``.
    public func close() {
        capture.close()
        continuation.finish()
    }
}
