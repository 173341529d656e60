import CPcap

/// An error from opening, configuring or using a ``PacketCapture``.
///
/// Compare ``code`` to tell failures apart; ``description`` names the interface, the operation and libpcap's own
/// message.
public struct PacketCaptureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Backing: Sendable, Hashable {
            case interfaceNotFound
            case permissionDenied
            case interfaceDown
            case openFailed
            case invalidFilter
            case filterFailed
            case injectFailed
            case shortWrite
            case statisticsFailed
            case closed
        }

        private let backing: Backing

        private init(_ backing: Backing) {
            self.backing = backing
        }

        /// No interface of that name exists in the network namespace the capture was opened in.
        public static let interfaceNotFound = Code(.interfaceNotFound)
        /// The process lacks `CAP_NET_RAW`.
        public static let permissionDenied = Code(.permissionDenied)
        /// The interface exists but is administratively down.
        public static let interfaceDown = Code(.interfaceDown)
        /// Opening or activating the handle failed for another reason.
        public static let openFailed = Code(.openFailed)
        /// The filter expression does not compile.
        public static let invalidFilter = Code(.invalidFilter)
        /// A compiled filter could not be attached.
        public static let filterFailed = Code(.filterFailed)
        /// Sending a frame failed.
        public static let injectFailed = Code(.injectFailed)
        /// The kernel took fewer bytes than the frame had.
        public static let shortWrite = Code(.shortWrite)
        /// Reading the counters failed.
        public static let statisticsFailed = Code(.statisticsFailed)
        /// The capture was already closed.
        public static let closed = Code(.closed)

        public var description: String {
            switch backing {
            case .interfaceNotFound: "interface not found"
            case .permissionDenied: "permission denied"
            case .interfaceDown: "interface down"
            case .openFailed: "open failed"
            case .invalidFilter: "invalid filter"
            case .filterFailed: "filter failed"
            case .injectFailed: "inject failed"
            case .shortWrite: "short write"
            case .statisticsFailed: "statistics failed"
            case .closed: "closed"
            }
        }
    }

    public let code: Code
    public let description: String

    private init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    /// Maps a failed `pcap_activate` (or `pcap_create`) result to an error.
    ///
    /// - Parameters:
    ///   - interface: the interface name that was opened.
    ///   - status: libpcap's return code (`PCAP_ERROR_*`).
    ///   - message: libpcap's error text (`pcap_geterr` or the error buffer), possibly empty.
    static func openFailure(interface: String, status: Int32, message: String) -> PacketCaptureError {
        let detail = message.isEmpty ? "" : ": \(message)"
        let lowered = message.lowercased()
        let isPermission =
            status == PCAP_ERROR_PERM_DENIED || status == PCAP_ERROR_PROMISC_PERM_DENIED
            || lowered.contains("operation not permitted") || lowered.contains("permission denied")
        if isPermission {
            return PacketCaptureError(
                .permissionDenied,
                "cannot capture on interface '\(interface)': permission denied; "
                    + "capture needs CAP_NET_RAW (or root)\(detail)"
            )
        }
        if status == PCAP_ERROR_NO_SUCH_DEVICE || lowered.contains("no such device") {
            return PacketCaptureError(
                .interfaceNotFound,
                "cannot capture on interface '\(interface)': no such interface in this network namespace\(detail)"
            )
        }
        if status == PCAP_ERROR_IFACE_NOT_UP {
            return PacketCaptureError(
                .interfaceDown,
                "cannot capture on interface '\(interface)': the interface is down\(detail)"
            )
        }
        return PacketCaptureError(
            .openFailed,
            "cannot capture on interface '\(interface)': \(step(status)) (libpcap status \(status))\(detail)"
        )
    }

    private static func step(_ status: Int32) -> String {
        switch status {
        case PCAP_ERROR_ACTIVATED: "handle already activated"
        case PCAP_ERROR_NOT_ACTIVATED: "handle not activated"
        case PCAP_ERROR_RFMON_NOTSUP: "monitor mode not supported"
        case PCAP_ERROR_CANTSET_TSTAMP_TYPE: "time stamp type not supported"
        case PCAP_ERROR_TSTAMP_PRECISION_NOTSUP: "time stamp precision not supported"
        default: "activation failed"
        }
    }

    static func configuration(interface: String, setting: String, status: Int32, message: String) -> PacketCaptureError
    {
        let detail = message.isEmpty ? "" : ": \(message)"
        return PacketCaptureError(
            .openFailed,
            "cannot capture on interface '\(interface)': setting \(setting) failed (libpcap status \(status))\(detail)"
        )
    }

    static func invalidFilter(interface: String, expression: String, message: String) -> PacketCaptureError {
        PacketCaptureError(
            .invalidFilter,
            "invalid capture filter '\(expression)' on interface '\(interface)': \(message)"
        )
    }

    static func filterFailed(interface: String, expression: String, message: String) -> PacketCaptureError {
        PacketCaptureError(
            .filterFailed,
            "cannot attach capture filter '\(expression)' on interface '\(interface)': \(message)"
        )
    }

    static func injectFailed(interface: String, length: Int, message: String) -> PacketCaptureError {
        PacketCaptureError(
            .injectFailed,
            "cannot inject a \(length)-byte frame on interface '\(interface)': \(message)"
        )
    }

    static func shortWrite(interface: String, length: Int, written: Int) -> PacketCaptureError {
        PacketCaptureError(
            .shortWrite,
            "short write injecting on interface '\(interface)': \(written) of \(length) bytes sent"
        )
    }

    static func statisticsFailed(interface: String, message: String) -> PacketCaptureError {
        PacketCaptureError(.statisticsFailed, "cannot read capture statistics on interface '\(interface)': \(message)")
    }

    static func closed(interface: String, operation: String) -> PacketCaptureError {
        PacketCaptureError(.closed, "cannot \(operation) on interface '\(interface)': the capture is closed")
    }
}
