import CPcap
public import Dispatch
import NetworkIO

#if canImport(Glibc)
    import Glibc
#endif

/// A libpcap capture handle on one interface: frames come out as copies to a handler; frames go out through
/// ``inject(_:)``.
///
/// libpcap handles are not thread-safe, so the caller's serial queue owns the handle: frames go to the handler
/// given to ``startDelivering(_:)``, on that queue, as they are read (no hop between threads). A read source on the
/// handle's selectable descriptor drains it on that queue; ``setFilter(_:)``, ``inject(_:)``, ``statistics()``
/// and ``close()`` run on the same queue (synchronously from other threads, at once when called on it), so they
/// may be called from any thread or task, and from the handler itself.
///
/// The handle is created on the calling thread, so it belongs to that thread's network namespace.
///
/// Close a capture explicitly with ``close()``. An open socket keeps its network namespace (and the namespace's
/// interfaces) alive, so a capture that is never closed outlives the namespace it was opened in.
public final class PacketCapture: Sendable {
    /// The interface this capture was opened on.
    public let interfaceName: String

    private let queue: DispatchQueue
    /// Set on `queue` to this capture's owner: tells whether a call is already on the queue.
    private let queueKey: DispatchSpecificKey<ObjectIdentifier>
    private let owner: HandleOwner
    /// Left when the read source's cancel handler has run; the handle may only be closed after that.
    private let sourceCancelled: DispatchGroup

    /// Opens `interface` for capture and injection, owned by `queue`: frames go to the handler given to
    /// ``startDelivering(_:)``, called on `queue` as each frame is read.
    ///
    /// Immediate mode is always on, so frames are delivered as soon as they arrive.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/interfaceNotFound``,
    ///   ``SystemError/Code/permissionDenied`` (needs `CAP_NET_RAW`), or another open failure.
    public init(interface: String, options: Options = Options(), queue: DispatchQueue) throws {
        let handle = try Self.open(interface: interface, options: options)
        let nanosecondStamps = pcap_get_tstamp_precision(handle) == PCAP_TSTAMP_PRECISION_NANO
        let owner = HandleOwner(
            interface: interface,
            handle: handle,
            receiver: Receiver(nanosecondStamps: nanosecondStamps)
        )
        let group = DispatchGroup()
        let key = DispatchSpecificKey<ObjectIdentifier>()
        queue.setSpecific(key: key, value: ObjectIdentifier(owner))

        let source = DispatchSource.makeReadSource(fileDescriptor: pcap_get_selectable_fd(handle), queue: queue)
        source.setEventHandler { owner.drain() }
        group.enter()
        source.setCancelHandler {
            owner.sourceCancelled()
            group.leave()
        }
        owner.readSource = source

        // Immediate mode on Linux needs no poll timeout; honour one if this libpcap asks for it anyway.
        if let timeout = pcap_get_required_select_timeout(handle)?.pointee {
            let interval = max(1, timeout.tv_sec * 1_000_000 + timeout.tv_usec)
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now(), repeating: .microseconds(interval))
            timer.setEventHandler { owner.drain() }
            owner.timerSource = timer
            timer.activate()
        }

        self.interfaceName = interface
        self.queue = queue
        self.queueKey = key
        self.owner = owner
        self.sourceCancelled = group
    }

    /// Starts handing frames to `handler`, on the capture's queue. Call it once, on that queue. The frame's bytes are a copy the handler
    /// may keep. `batchEnded`, if given, runs after each batch of frames read together (one `pcap_dispatch`), so
    /// that what the handler made of them can go out together.
    public func startDelivering(
        _ handler: @escaping (CapturedFrame) -> Void, batchEnded: (() -> Void)? = nil
    ) {
        onQueue {
            guard owner.receiver.handler == nil, !owner.closing, !owner.activated else { return }
            owner.receiver.handler = handler
            owner.receiver.batchEnded = batchEnded
            owner.activate()
        }
    }

    /// Runs `body` on the capture's queue: at once when already on it, synchronously otherwise.
    private func onQueue<Result>(_ body: () throws -> Result) rethrows -> Result {
        if DispatchQueue.getSpecific(key: queueKey) == ObjectIdentifier(owner) {
            return try body()
        }
        return try queue.sync(execute: body)
    }

    deinit {
        close()
    }

    /// Replaces the capture filter with `expression` (tcpdump syntax; empty captures everything).
    ///
    /// On failure the previous filter stays in effect.
    public func setFilter(_ expression: String) throws {
        try onQueue {
            guard let handle = owner.handle, !owner.closing else {
                throw SystemError.closed(interface: interfaceName, operation: "set filter '\(expression)'")
            }
            var program = bpf_program()
            guard pcap_compile(handle, &program, expression, 1, bpf_u_int32(PCAP_NETMASK_UNKNOWN)) == 0 else {
                throw SystemError.invalidFilter(
                    interface: interfaceName,
                    expression: expression,
                    message: String(cString: pcap_geterr(handle))
                )
            }
            defer { pcap_freecode(&program) }
            guard pcap_setfilter(handle, &program) == 0 else {
                throw SystemError.filterFailed(
                    interface: interfaceName,
                    expression: expression,
                    message: String(cString: pcap_geterr(handle))
                )
            }
        }
    }

    /// Sends one raw Ethernet frame (header included, no frame check sequence) out of the interface.
    ///
    /// The frame's source MAC must be the sender's real MAC: Linux bridges drop frames from `00:00:00:00:00:00`.
    public func inject(_ frame: [UInt8]) throws {
        try onQueue {
            guard let handle = owner.handle, !owner.closing else {
                throw SystemError.closed(interface: interfaceName, operation: "inject a frame")
            }
            guard frame.count >= 14 else {
                throw SystemError.injectFailed(
                    interface: interfaceName,
                    length: frame.count,
                    message: "a frame needs at least the 14-byte Ethernet header"
                )
            }
            let written = frame.withUnsafeBytes { pcap_inject(handle, $0.baseAddress, $0.count) }
            guard written >= 0 else {
                throw SystemError.injectFailed(
                    interface: interfaceName,
                    length: frame.count,
                    message: String(cString: pcap_geterr(handle))
                )
            }
            guard written == frame.count else {
                throw SystemError.shortWrite(
                    interface: interfaceName,
                    length: frame.count,
                    written: Int(written)
                )
            }
        }
    }

    /// The kernel's counters for this handle plus this capture's own.
    public func statistics() throws -> Statistics {
        try onQueue {
            guard let handle = owner.handle, !owner.closing else {
                throw SystemError.closed(interface: interfaceName, operation: "read statistics")
            }
            var stat = pcap_stat()
            guard pcap_stats(handle, &stat) == 0 else {
                throw SystemError.statisticsFailed(
                    interface: interfaceName,
                    message: String(cString: pcap_geterr(handle))
                )
            }
            return Statistics(
                received: UInt64(stat.ps_recv),
                droppedByKernel: UInt64(stat.ps_drop),
                droppedByInterface: UInt64(stat.ps_ifdrop),
                captured: owner.receiver.captured
            )
        }
    }

    /// Whether ``close()`` has been called.
    public var isClosed: Bool {
        onQueue { owner.closing }
    }

    /// Stops reading and closes the handle. Safe to call more than once and from any thread.
    /// From another thread it returns once the handle is closed; on the capture's queue (in the handler, say) the
    /// handle closes as soon as the read source has stopped, a moment later on the same queue.
    public func close() {
        let onTheQueue = DispatchQueue.getSpecific(key: queueKey) == ObjectIdentifier(owner)
        onQueue { owner.beginClose() }
        guard !onTheQueue else { return }
        sourceCancelled.wait()
        queue.sync { owner.finishClose() }
    }

    private static func open(interface: String, options: Options) throws -> OpaquePointer {
        var errorBuffer = [CChar](repeating: 0, count: Int(PCAP_ERRBUF_SIZE))
        guard let handle = pcap_create(interface, &errorBuffer) else {
            throw SystemError.openFailure(
                interface: interface,
                status: PCAP_ERROR,
                message: cString(errorBuffer)
            )
        }
        func check(_ setting: String, _ status: Int32) throws {
            guard status == 0 else {
                let message = String(cString: pcap_geterr(handle))
                pcap_close(handle)
                throw SystemError.configuration(
                    interface: interface,
                    setting: setting,
                    status: status,
                    message: message
                )
            }
        }
        try check("immediate mode", pcap_set_immediate_mode(handle, 1))
        try check("snapshot length \(options.snapshotLength)", pcap_set_snaplen(handle, Int32(options.snapshotLength)))
        try check(
            "buffer size \(options.kernelBufferSize)",
            pcap_set_buffer_size(handle, Int32(options.kernelBufferSize))
        )
        try check("promiscuous mode", pcap_set_promisc(handle, options.promiscuous ? 1 : 0))
        // Nanosecond stamps where supported; libpcap falls back to microseconds otherwise.
        _ = pcap_set_tstamp_precision(handle, Int32(PCAP_TSTAMP_PRECISION_NANO))

        let status = pcap_activate(handle)
        if status < 0 {
            let message = String(cString: pcap_geterr(handle))
            pcap_close(handle)
            throw SystemError.openFailure(interface: interface, status: status, message: message)
        }
        // A positive status is a warning (e.g. promiscuous mode unsupported): the handle works.

        guard pcap_setnonblock(handle, 1, &errorBuffer) == 0 else {
            pcap_close(handle)
            throw SystemError.configuration(
                interface: interface,
                setting: "non-blocking mode",
                status: PCAP_ERROR,
                message: cString(errorBuffer)
            )
        }
        switch options.direction {
        case .both:
            break
        case .incoming:
            try check("direction incoming", pcap_setdirection(handle, PCAP_D_IN))
        case .outgoing:
            try check("direction outgoing", pcap_setdirection(handle, PCAP_D_OUT))
        }
        guard pcap_get_selectable_fd(handle) >= 0 else {
            pcap_close(handle)
            throw SystemError.configuration(
                interface: interface,
                setting: "selectable descriptor",
                status: PCAP_ERROR,
                message: "libpcap has no pollable descriptor for this interface"
            )
        }
        return handle
    }

    private static func cString(_ buffer: [CChar]) -> String {
        buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// Receives frames from `pcap_dispatch` and hands them to the handler (nil until delivery starts, and again once
/// the capture closes); touched only on the capture's queue.
private final class Receiver {
    var handler: ((CapturedFrame) -> Void)?
    var batchEnded: (() -> Void)?
    /// Whether a frame went to the handler since `batchEnded` last ran.
    var deliveredSinceBatchEnd = false
    let nanosecondStamps: Bool
    var captured: UInt64 = 0

    init(nanosecondStamps: Bool) {
        self.nanosecondStamps = nanosecondStamps
    }

    func deliver(header: pcap_pkthdr, bytes: UnsafePointer<UInt8>) {
        let fraction = Int64(header.ts.tv_usec)
        let timestamp =
            Duration.seconds(Int64(header.ts.tv_sec))
            + (nanosecondStamps ? .nanoseconds(fraction) : .microseconds(fraction))
        let frame = CapturedFrame(
            bytes: Array(UnsafeBufferPointer(start: bytes, count: Int(header.caplen))),
            timestamp: timestamp,
            originalLength: Int(header.len)
        )
        captured += 1
        deliveredSinceBatchEnd = true
        handler?(frame)
    }
}

/// Owns the pcap handle. Every member is used only on the capture's serial queue, which is what makes the
/// unchecked `Sendable` conformance sound.
private final class HandleOwner: @unchecked Sendable {
    /// Upper bound of `pcap_dispatch` calls per read event, so a flood cannot starve the other operations.
    private static let dispatchBatches = 64
    /// Upper bound of frames per `pcap_dispatch` call: with a handler on a shared queue, other work on it (a
    /// registration, a timer) waits at most this many frames; the read source fires again for the rest.
    private static let framesPerDispatch: Int32 = 256

    let interface: String
    private(set) var handle: OpaquePointer?
    let receiver: Receiver
    var readSource: (any DispatchSourceRead)?
    var timerSource: (any DispatchSourceTimer)?
    private(set) var closing = false
    /// Whether the read source's cancel handler has run: the handle is no longer read.
    private var readingStopped = false
    /// Whether the read source was activated: only then does its cancel handler run.
    private(set) var activated = false

    init(interface: String, handle: OpaquePointer, receiver: Receiver) {
        self.interface = interface
        self.handle = handle
        self.receiver = receiver
    }

    /// Reads everything the handle has buffered.
    func drain() {
        guard let handle, !closing else { return }
        let context = UnsafeMutableRawPointer(Unmanaged.passUnretained(receiver).toOpaque())
            .assumingMemoryBound(to: UInt8.self)
        for _ in 0..<Self.dispatchBatches {
            let count = pcap_dispatch(handle, Self.framesPerDispatch, handleFrame, context)
            // Whatever ended the call (frames then an error, the handler closing the capture), the batch that was
            // delivered ends here.
            if receiver.deliveredSinceBatchEnd {
                receiver.deliveredSinceBatchEnd = false
                receiver.batchEnded?()
            }
            // The handler may have closed the capture.
            if closing { return }
            if count > 0 { continue }
            if count < 0 && count != PCAP_ERROR_BREAK {
                // The interface is gone or the socket failed; nothing more will come.
                stopReading()
                receiver.handler = nil
            }
            return
        }
    }

    /// Activates the read source (once).
    func activate() {
        guard !activated, !closing else { return }
        activated = true
        readSource?.activate()
    }

    func beginClose() {
        guard !closing else { return }
        closing = true
        // Closed from the handler: the frames left in this `pcap_dispatch` round are not delivered.
        receiver.handler = nil
        receiver.batchEnded = nil
        if let handle { pcap_breakloop(handle) }
        stopReading()
        if !activated {
            // A source must be activated before it goes (libdispatch), and only then runs its cancel handler.
            activated = true
            readSource?.activate()
        }
        if readingStopped { finishClose() }
    }

    /// The read source's cancel handler: after it, nothing reads the handle.
    func sourceCancelled() {
        readingStopped = true
        if closing { finishClose() }
    }

    func finishClose() {
        if let handle {
            pcap_close(handle)
            self.handle = nil
        }
        receiver.handler = nil
        receiver.batchEnded = nil
    }

    private func stopReading() {
        timerSource?.cancel()
        timerSource = nil
        readSource?.cancel()
    }
}

private func handleFrame(
    _ context: UnsafeMutablePointer<UInt8>?,
    _ header: UnsafePointer<pcap_pkthdr>?,
    _ bytes: UnsafePointer<UInt8>?
) {
    guard let context, let header, let bytes else { return }
    Unmanaged<Receiver>.fromOpaque(UnsafeRawPointer(context)).takeUnretainedValue()
        .deliver(header: header.pointee, bytes: bytes)
}
