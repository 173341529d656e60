/// One frame as captured: a private copy of its bytes, the capture time and the length on the wire.
public struct CapturedFrame: Sendable, Hashable {
    /// The captured bytes, starting at the Ethernet header. At most the snapshot length.
    public var bytes: [UInt8]
    /// Capture time since the Unix epoch (the kernel's `CLOCK_REALTIME` stamp), nanosecond resolution.
    public var timestamp: Duration
    /// The frame's length on the wire; larger than `bytes.count` when the snapshot length cut it.
    public var originalLength: Int

    public init(bytes: [UInt8], timestamp: Duration, originalLength: Int) {
        self.bytes = bytes
        self.timestamp = timestamp
        self.originalLength = originalLength
    }

    /// Whether the snapshot length cut the frame short.
    public var isTruncated: Bool { originalLength > bytes.count }
}

extension PacketCapture {
    /// Counters of one capture handle.
    ///
    /// `received`, `droppedByKernel` and `droppedByInterface` come from `pcap_stats` (32-bit counters in
    /// libpcap that wrap); the others are counted by ``PacketCapture`` itself since it was opened.
    public struct Statistics: Sendable, Hashable {
        /// Frames that passed the filter and reached the capture buffer (`ps_recv`).
        public var received: UInt64
        /// Frames dropped because the kernel's capture buffer was full (`ps_drop`).
        public var droppedByKernel: UInt64
        /// Frames dropped by the interface or its driver (`ps_ifdrop`); libpcap reads this from sysfs, which
        /// only shows interfaces of the namespace sysfs was mounted in.
        public var droppedByInterface: UInt64
        /// Frames read from libpcap and handed to the handler.
        public var captured: UInt64

        public init(
            received: UInt64,
            droppedByKernel: UInt64,
            droppedByInterface: UInt64,
            captured: UInt64
        ) {
            self.received = received
            self.droppedByKernel = droppedByKernel
            self.droppedByInterface = droppedByInterface
            self.captured = captured
        }
    }

    /// Which frames to capture by direction relative to the interface.
    public enum Direction: Sendable, Hashable, CustomStringConvertible {
        /// Frames received and sent by the interface (the default).
        case both
        /// Only frames the interface received.
        case incoming
        /// Only frames the interface sent (by any socket other than this handle).
        case outgoing

        public var description: String {
            switch self {
            case .both: "both"
            case .incoming: "incoming"
            case .outgoing: "outgoing"
            }
        }
    }

    /// How a capture handle is opened.
    public struct Options: Sendable, Hashable {
        /// Bytes kept of each frame.
        public var snapshotLength: Int
        /// Size of the kernel's capture buffer in bytes (`pcap_set_buffer_size`).
        public var kernelBufferSize: Int
        /// Promiscuous mode; off by default because peers address the proxy's own MAC.
        public var promiscuous: Bool
        /// Which direction of traffic to capture.
        public var direction: Direction

        public init(
            snapshotLength: Int = 65_535,
            kernelBufferSize: Int = 2 * 1024 * 1024,
            promiscuous: Bool = false,
            direction: Direction = .both
        ) {
            self.snapshotLength = snapshotLength
            self.kernelBufferSize = kernelBufferSize
            self.promiscuous = promiscuous
            self.direction = direction
        }
    }
}
