import CPcap
import NetworkIO

/// The errors of a ``PacketCapture``: each names the interface, the operation and libpcap's own message.
extension SystemError {
    /// Maps a failed `pcap_activate` (or `pcap_create`) result to an error.
    ///
    /// - Parameters:
    ///   - interface: the interface name that was opened.
    ///   - status: libpcap's return code (`PCAP_ERROR_*`).
    ///   - message: libpcap's error text (`pcap_geterr` or the error buffer), possibly empty.
    static func openFailure(interface: String, status: Int32, message: String) -> SystemError {
        let detail = message.isEmpty ? "" : ": \(message)"
        let lowered = message.lowercased()
        let isPermission =
            status == PCAP_ERROR_PERM_DENIED || status == PCAP_ERROR_PROMISC_PERM_DENIED
            || lowered.contains("operation not permitted") || lowered.contains("permission denied")
        if isPermission {
            return SystemError(
                .permissionDenied,
                "cannot capture on interface '\(interface)': permission denied; "
                    + "capture needs CAP_NET_RAW (or root)\(detail)"
            )
        }
        if status == PCAP_ERROR_NO_SUCH_DEVICE || lowered.contains("no such device") {
            return SystemError(
                .interfaceNotFound,
                "cannot capture on interface '\(interface)': no such interface in this network namespace\(detail)"
            )
        }
        if status == PCAP_ERROR_IFACE_NOT_UP {
            return SystemError(
                .interfaceDown,
                "cannot capture on interface '\(interface)': the interface is down\(detail)"
            )
        }
        return SystemError(
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

    static func configuration(interface: String, setting: String, status: Int32, message: String) -> SystemError {
        let detail = message.isEmpty ? "" : ": \(message)"
        return SystemError(
            .openFailed,
            "cannot capture on interface '\(interface)': setting \(setting) failed (libpcap status \(status))\(detail)"
        )
    }

    static func invalidFilter(interface: String, expression: String, message: String) -> SystemError {
        SystemError(
            .invalidFilter,
            "invalid capture filter '\(expression)' on interface '\(interface)': \(message)"
        )
    }

    static func filterFailed(interface: String, expression: String, message: String) -> SystemError {
        SystemError(
            .filterFailed,
            "cannot attach capture filter '\(expression)' on interface '\(interface)': \(message)"
        )
    }

    static func injectFailed(interface: String, length: Int, message: String) -> SystemError {
        SystemError(
            .injectFailed,
            "cannot inject a \(length)-byte frame on interface '\(interface)': \(message)"
        )
    }

    static func shortWrite(interface: String, length: Int, written: Int) -> SystemError {
        SystemError(
            .shortWrite,
            "short write injecting on interface '\(interface)': \(written) of \(length) bytes sent"
        )
    }

    static func statisticsFailed(interface: String, message: String) -> SystemError {
        SystemError(.statisticsFailed, "cannot read capture statistics on interface '\(interface)': \(message)")
    }

    static func closed(interface: String, operation: String) -> SystemError {
        SystemError(.closed, "cannot \(operation) on interface '\(interface)': the capture is closed")
    }
}
