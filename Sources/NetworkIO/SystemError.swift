/// A failure of one of the system facilities the daemon and the client use: a UDP socket, an interface lookup, a
/// packet capture, the neighbour table, IPv6 multicast memberships, the service manager's notification socket.
///
/// Compare ``code`` to tell failures apart; ``description`` is the whole sentence for a log or a terminal: the
/// operation, its object (address, port, interface), the system's reason and, where one helps, what to do, e.g.
/// `bind UDP [::]:5354 on eth0 (index 2): Address already in use (another socket holds port 5354 without
/// SO_REUSEADDR)`. Each facility makes its errors in its own file.
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public let description: String

        private init(_ description: String) { self.description = description }

        /// No such interface exists in the network namespace (any more), or the name cannot be one.
        public static let interfaceNotFound = Code("interface not found")
        /// A capability is missing: `CAP_NET_RAW` (capture, binding to an interface before Linux 5.7),
        /// `CAP_NET_BIND_SERVICE` (a port below 1024), `CAP_NET_ADMIN` (the neighbour table).
        public static let permissionDenied = Code("permission denied")
        /// Another socket holds the port (for the address, or for the wildcard) without `SO_REUSEADDR`.
        public static let addressInUse = Code("address in use")
        /// Opening a socket or a handle failed for another reason.
        public static let openFailed = Code("open failed")
        /// Receiving failed, or a datagram came without what the socket needs to know.
        public static let receiveFailed = Code("receive failed")
        /// Sending failed.
        public static let sendFailed = Code("send failed")
        /// A destination or source address is not of the socket's family.
        public static let addressFamilyMismatch = Code("address family mismatch")
        /// The socket, handle or table was already closed.
        public static let closed = Code("closed")
        /// A system call failed where nothing more specific applies (listing the interfaces).
        public static let systemCallFailed = Code("system call failed")
        /// The interface exists but is administratively down.
        public static let interfaceDown = Code("interface down")
        /// A capture filter expression does not compile.
        public static let invalidFilter = Code("invalid filter")
        /// A compiled capture filter could not be attached.
        public static let filterFailed = Code("filter failed")
        /// Sending a frame through the capture failed.
        public static let injectFailed = Code("inject failed")
        /// The kernel took fewer bytes than the frame had.
        public static let shortWrite = Code("short write")
        /// Reading the capture's counters failed.
        public static let statisticsFailed = Code("statistics failed")
        /// The IP address or the MAC cannot be a neighbour entry; nothing was sent.
        public static let invalidAddress = Code("invalid address")
        /// The kernel refused a netlink request, or it could not be sent or answered.
        public static let requestFailed = Code("request failed")
        /// The address is not a multicast group; nothing was asked of the kernel.
        public static let invalidGroup = Code("invalid group")
        /// The kernel refused to join a multicast group.
        public static let joinFailed = Code("join failed")
        /// The kernel refused to leave a multicast group.
        public static let leaveFailed = Code("leave failed")
        /// `NOTIFY_SOCKET` is neither an absolute path nor `@name`, or too long.
        public static let invalidSocket = Code("invalid NOTIFY_SOCKET")
    }

    public let code: Code
    /// The system call that failed, with its `errno` (or the kernel's error code), if one failed.
    public let systemCallError: SystemCallError?
    public let description: String

    /// The `errno` of the failed system call (or the kernel's error code), if one failed.
    public var errorNumber: Int32? { systemCallError?.code }

    /// An error that `description` states in full.
    public init(_ code: Code, _ description: String, call: SystemCallError? = nil) {
        self.code = code
        self.description = description
        self.systemCallError = call
    }

    /// A failed system call, described as the call and the system's reason, then `hint`.
    public init(_ code: Code, _ call: SystemCallError, hint: String = "") {
        self.init(code, "\(call)\(hint)", call: call)
    }
}
