import CNetSupport
public import NetworkAddresses
public import SleepProxyCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A UDP socket on one interface that reports where each datagram arrived (destination address, interface) and
/// sends with a chosen source address and interface.
///
/// A sleep proxy must answer a registration from exactly the address and port the client sent it to, on the
/// interface it arrived on (PROTOCOL.md section 6 item 7). SwiftNIO's datagram channel can receive packet info
/// but cannot set the source of what it sends, hence this thin socket.
///
/// The socket is bound to the wildcard address and ``localPort`` and, with `SO_BINDTODEVICE`, to one
/// interface: datagrams arriving on other interfaces (loopback included) never reach it. It is non-blocking;
/// wait for readability on ``fileDescriptor`` (a `DispatchSourceRead`) and then call ``receive()`` until it
/// returns `nil`. IPv6 sockets are IPv6-only (`IPV6_V6ONLY`); open one socket per family.
///
/// `SO_REUSEADDR` is set, so on Linux a second socket of this kind may bind the same port on the same interface;
/// the kernel then delivers each unicast datagram to only one of them, the most recently bound.
///
/// The socket is created on the calling thread and belongs to that thread's network namespace for its whole
/// life.
///
/// It is `Sendable`: the descriptor sits behind a lock, and ``receive()``, ``send(_:to:scopeID:from:interfaceIndex:)``
/// and ``close()`` never block, so they may be called from any thread. The daemon uses each socket from one serial
/// queue. Cancel a dispatch source on ``fileDescriptor`` (and wait for its cancel handler) before ``close()``.
public final class DatagramSocket: Sendable {
    /// An address family.
    public struct Family: Sendable, Hashable, CustomStringConvertible {
        private enum Backing: Sendable, Hashable {
            case ipv4
            case ipv6
        }

        private let backing: Backing

        private init(_ backing: Backing) {
            self.backing = backing
        }

        /// IPv4 (`AF_INET`).
        public static let ipv4 = Family(.ipv4)
        /// IPv6 only (`AF_INET6` with `IPV6_V6ONLY`).
        public static let ipv6 = Family(.ipv6)

        /// `AF_INET` or `AF_INET6`.
        var addressFamily: Int32 {
            switch backing {
            case .ipv4: AF_INET
            case .ipv6: AF_INET6
            }
        }

        /// Whether `address` belongs to this family.
        func contains(_ address: IPAddress) -> Bool {
            switch (backing, address) {
            case (.ipv4, .v4), (.ipv6, .v6): true
            default: false
            }
        }

        /// `0.0.0.0:port` or `[::]:port`.
        func wildcard(port: UInt16) -> String {
            switch backing {
            case .ipv4: "0.0.0.0:\(port)"
            case .ipv6: "[::]:\(port)"
            }
        }

        public var description: String {
            switch backing {
            case .ipv4: "IPv4"
            case .ipv6: "IPv6"
            }
        }
    }

    /// The largest UDP payload; longer datagrams cannot exist, so nothing is ever truncated at this size.
    public static let maximumDatagramSize = 65_535

    public let family: Family
    /// The interface the socket is bound to.
    public let interface: String
    /// The bound port (the kernel's choice when the socket was opened with port 0).
    public let localPort: UInt16

    private let state: Mutex<State>

    private struct State {
        /// -1 once closed.
        var descriptor: Int32
        var buffer: [UInt8]
    }

    /// Opens a socket of `family` on `interface`, bound to the wildcard address and `port` (0: an ephemeral port).
    ///
    /// - Throws: ``DatagramSocketError`` with code ``DatagramSocketError/Code/interfaceNotFound`` if there is no
    ///   such interface in the calling thread's network namespace, ``DatagramSocketError/Code/addressInUse`` if
    ///   another socket holds the port without `SO_REUSEADDR`, ``DatagramSocketError/Code/permissionDenied``
    ///   if a capability is missing, ``DatagramSocketError/Code/openFailed`` otherwise.
    public init(family: Family, interface: String, port: UInt16) throws {
        var boundPort: UInt16 = 0
        var failedStep = sp_udp_open_step.noFailure
        let result = sp_udp_open(family.addressFamily, interface, port, &boundPort, &failedStep)
        guard result >= 0 else {
            throw DatagramSocketError.openFailed(
                step: failedStep,
                errno: -result,
                family: family,
                interface: interface,
                port: port
            )
        }
        self.family = family
        self.interface = interface
        self.localPort = boundPort
        self.state = Mutex(State(descriptor: result, buffer: [UInt8](repeating: 0, count: Self.maximumDatagramSize)))
    }

    deinit {
        close()
    }

    /// The socket's descriptor, for a read source; -1 once closed. Do not read from or close it directly.
    public var fileDescriptor: Int32 {
        state.withLock { $0.descriptor }
    }

    /// Receives one pending datagram, or returns `nil` if none is pending.
    ///
    /// - Throws: ``DatagramSocketError`` with code ``DatagramSocketError/Code/closed`` after ``close()``,
    ///   ``DatagramSocketError/Code/receiveFailed`` if `recvmsg` fails or the kernel reported no packet info.
    public func receive() throws -> ReceivedDatagram? {
        try state.withLock { state throws(DatagramSocketError) -> ReceivedDatagram? in
            guard state.descriptor >= 0 else {
                throw DatagramSocketError.closed(operation: "receive", socket: describeLocal())
            }
            var info = sp_udp_datagram_info()
            let descriptor = state.descriptor
            let count = state.buffer.withUnsafeMutableBufferPointer { buffer in
                sp_udp_receive(descriptor, buffer.baseAddress, buffer.count, &info)
            }
            if count < 0 {
                let code = Int32(-count)
                if code == EAGAIN || code == EWOULDBLOCK { return nil }
                throw DatagramSocketError.receiveFailed(socket: describeLocal(), reason: errorText(code), errno: code)
            }
            guard let sourceAddress = Self.address(family: info.source_family, bytes: info.source_address) else {
                throw DatagramSocketError.receiveFailed(
                    socket: describeLocal(),
                    reason: "the source address has unknown family \(info.source_family)",
                    errno: nil
                )
            }
            guard let destination = Self.address(family: info.destination_family, bytes: info.destination_address)
            else {
                throw DatagramSocketError.receiveFailed(
                    socket: describeLocal(),
                    reason: "no packet info arrived with the datagram from \(sourceAddress)",
                    errno: nil
                )
            }
            return ReceivedDatagram(
                bytes: Array(state.buffer[0..<count]),
                source: Endpoint(address: sourceAddress, port: info.source_port),
                sourceScopeID: info.source_scope_id,
                destination: destination,
                destinationPort: localPort,
                interfaceIndex: info.interface_index,
                truncated: info.truncated != 0
            )
        }
    }

    /// Sends `bytes` to `destination` from `source` (an address of this host, of the socket's family) out of
    /// the interface with index `interfaceIndex`. The source port is ``localPort``.
    ///
    /// - Parameters:
    ///   - scopeID: the IPv6 scope (interface index) of a link-local `destination`, as received in
    ///     ``ReceivedDatagram/sourceScopeID``; 0 otherwise. Linux rejects (`EINVAL`) a scope that differs from a
    ///     non-zero `interfaceIndex`.
    ///   - source: the source address: it must be assigned to this host, otherwise Linux rejects it (`EINVAL`).
    ///     Never a multicast address: reply to a multicast datagram from an address of the interface.
    ///   - interfaceIndex: the outgoing interface; 0 lets the kernel choose (the socket's interface).
    /// - Throws: ``DatagramSocketError`` with code ``DatagramSocketError/Code/addressFamilyMismatch``,
    ///   ``DatagramSocketError/Code/sendFailed`` or ``DatagramSocketError/Code/closed``.
    public func send(
        _ bytes: [UInt8],
        to destination: Endpoint,
        scopeID: UInt32,
        from source: IPAddress,
        interfaceIndex: UInt32
    ) throws {
        let what = "UDP from \(Endpoint(address: source, port: localPort)) to \(destination)"
        for address in [destination.address, source] where !family.contains(address) {
            throw DatagramSocketError.addressFamilyMismatch(
                send: what,
                socket: describeLocal(),
                address: address,
                family: family
            )
        }
        try state.withLock { state throws(DatagramSocketError) in
            guard state.descriptor >= 0 else {
                throw DatagramSocketError.closed(operation: "send \(what)", socket: describeLocal())
            }
            let result = bytes.withUnsafeBufferPointer { payload in
                destination.address.bytes.withUnsafeBufferPointer { destinationBytes in
                    source.bytes.withUnsafeBufferPointer { sourceBytes in
                        sp_udp_send(
                            state.descriptor,
                            family.addressFamily,
                            payload.baseAddress,
                            payload.count,
                            destinationBytes.baseAddress,
                            destination.port,
                            scopeID,
                            sourceBytes.baseAddress,
                            interfaceIndex
                        )
                    }
                }
            }
            if result < 0 {
                let code = Int32(-result)
                throw DatagramSocketError.sendFailed(
                    send: what,
                    interface: interface,
                    interfaceIndex: interfaceIndex,
                    reason: errorText(code),
                    errno: code
                )
            }
            if result != bytes.count {
                throw DatagramSocketError.sendFailed(
                    send: what,
                    interface: interface,
                    interfaceIndex: interfaceIndex,
                    reason: "only \(result) of \(bytes.count) bytes were sent",
                    errno: nil
                )
            }
        }
    }

    /// Replies to `datagram` with `bytes`: from the address and port it was sent to, to its source, on the
    /// interface it arrived on. Only for datagrams sent to a unicast address.
    public func reply(_ bytes: [UInt8], to datagram: ReceivedDatagram) throws {
        try send(
            bytes,
            to: datagram.source,
            scopeID: datagram.sourceScopeID,
            from: datagram.destination,
            interfaceIndex: datagram.interfaceIndex
        )
    }

    /// Closes the socket. Safe to call more than once.
    public func close() {
        state.withLock { state in
            guard state.descriptor >= 0 else { return }
            _ = Glibc.close(state.descriptor)
            state.descriptor = -1
        }
    }

    /// `UDP [::]:5354 on eth0`.
    private func describeLocal() -> String {
        "UDP \(family.wildcard(port: localPort)) on \(interface)"
    }

    private static func address<Bytes>(family: Int32, bytes: Bytes) -> IPAddress? {
        withUnsafeBytes(of: bytes) { raw in
            switch family {
            case AF_INET: IPAddress(bytes: Array(raw.prefix(4)))
            case AF_INET6: IPAddress(bytes: Array(raw.prefix(16)))
            default: nil
            }
        }
    }
}

/// One datagram as ``DatagramSocket/receive()`` got it.
public struct ReceivedDatagram: Sendable, Hashable {
    /// The payload, at most ``DatagramSocket/maximumDatagramSize`` bytes.
    public var bytes: [UInt8]
    /// The sender's address and port.
    public var source: Endpoint
    /// The IPv6 scope (interface index) of a link-local source; 0 otherwise. Pass it back when replying.
    public var sourceScopeID: UInt32
    /// The destination address of the datagram's IP header: the address the sender targeted (a multicast group
    /// for multicast).
    public var destination: IPAddress
    /// The port the datagram was sent to: the socket's ``DatagramSocket/localPort``.
    public var destinationPort: UInt16
    /// The index of the interface the datagram arrived on.
    public var interfaceIndex: UInt32
    /// Whether the payload was cut to fit the receive buffer.
    public var truncated: Bool

    public init(
        bytes: [UInt8],
        source: Endpoint,
        sourceScopeID: UInt32,
        destination: IPAddress,
        destinationPort: UInt16,
        interfaceIndex: UInt32,
        truncated: Bool
    ) {
        self.bytes = bytes
        self.source = source
        self.sourceScopeID = sourceScopeID
        self.destination = destination
        self.destinationPort = destinationPort
        self.interfaceIndex = interfaceIndex
        self.truncated = truncated
    }

    /// ``destination`` and ``destinationPort``: where a reply must come from.
    public var destinationEndpoint: Endpoint {
        Endpoint(address: destination, port: destinationPort)
    }
}

/// `strerror` text for `code`.
private func errorText(_ code: Int32) -> String {
    String(cString: strerror(code))
}

/// An error from opening or using a ``DatagramSocket``.
///
/// Compare ``code`` to tell failures apart; ``description`` names the operation, the address and port, the
/// interface and the system's reason, e.g. `bind UDP [::]:5354 on eth0: Address already in use`.
public struct DatagramSocketError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Backing: Sendable, Hashable {
            case interfaceNotFound
            case permissionDenied
            case addressInUse
            case openFailed
            case receiveFailed
            case sendFailed
            case addressFamilyMismatch
            case closed
        }

        private let backing: Backing

        private init(_ backing: Backing) {
            self.backing = backing
        }

        /// No interface of that name exists in the calling thread's network namespace (or the name is empty or
        /// longer than 15 bytes).
        public static let interfaceNotFound = Code(.interfaceNotFound)
        /// A capability is missing (`CAP_NET_RAW` to bind to an interface, `CAP_NET_BIND_SERVICE` for a port
        /// below 1024).
        public static let permissionDenied = Code(.permissionDenied)
        /// Another socket holds the port on this interface (or on all interfaces) without `SO_REUSEADDR`.
        public static let addressInUse = Code(.addressInUse)
        /// Opening failed for another reason.
        public static let openFailed = Code(.openFailed)
        /// `recvmsg` failed, or the datagram came without what the socket needs to know.
        public static let receiveFailed = Code(.receiveFailed)
        /// `sendmsg` failed.
        public static let sendFailed = Code(.sendFailed)
        /// A destination or source address is not of the socket's family.
        public static let addressFamilyMismatch = Code(.addressFamilyMismatch)
        /// The socket was already closed.
        public static let closed = Code(.closed)

        public var description: String {
            switch backing {
            case .interfaceNotFound: "interface not found"
            case .permissionDenied: "permission denied"
            case .addressInUse: "address in use"
            case .openFailed: "open failed"
            case .receiveFailed: "receive failed"
            case .sendFailed: "send failed"
            case .addressFamilyMismatch: "address family mismatch"
            case .closed: "closed"
            }
        }
    }

    public let code: Code
    /// The `errno` of the failed system call, if one failed.
    public let errorNumber: Int32?
    public let description: String

    private init(_ code: Code, _ description: String, errno errorNumber: Int32?) {
        self.code = code
        self.description = description
        self.errorNumber = errorNumber
    }

    /// Maps a failed `sp_udp_open` to an error.
    static func openFailed(
        step: sp_udp_open_step,
        errno number: Int32,
        family: DatagramSocket.Family,
        interface: String,
        port: UInt16
    ) -> DatagramSocketError {
        let socket = "UDP \(family.wildcard(port: port))"
        let reason = errorText(number)
        switch step {
        case .bindToDevice where number == EINVAL:
            let length = interface.utf8.count
            return DatagramSocketError(
                .interfaceNotFound,
                "bind \(socket) to interface '\(interface)': invalid interface name "
                    + "(\(length) bytes; a name has 1 to \(IFNAMSIZ - 1))",
                errno: number
            )
        case .bindToDevice where number == ENODEV:
            return DatagramSocketError(
                .interfaceNotFound,
                "bind \(socket) to interface '\(interface)': \(reason); "
                    + "there is no interface '\(interface)' in this network namespace",
                errno: number
            )
        case .bindToDevice where number == EPERM || number == EACCES:
            return DatagramSocketError(
                .permissionDenied,
                "bind \(socket) to interface '\(interface)' (SO_BINDTODEVICE): \(reason); "
                    + "binding a socket to an interface needs CAP_NET_RAW",
                errno: number
            )
        case .bind where number == EADDRINUSE:
            return DatagramSocketError(
                .addressInUse,
                "bind \(socket) on \(interface): \(reason) "
                    + "(another socket holds the port without SO_REUSEADDR)",
                errno: number
            )
        case .bind where number == EACCES || number == EPERM:
            return DatagramSocketError(
                .permissionDenied,
                "bind \(socket) on \(interface): \(reason); ports below 1024 need CAP_NET_BIND_SERVICE",
                errno: number
            )
        default:
            let operation =
                switch step {
                case .socket, .family: "create"
                case .reuseAddress: "set SO_REUSEADDR on"
                case .v6Only: "set IPV6_V6ONLY on"
                case .bindToDevice: "set SO_BINDTODEVICE on"
                case .packetInfo:
                    family == .ipv4 ? "set IP_PKTINFO on" : "set IPV6_RECVPKTINFO on"
                case .localName: "read the bound port of"
                case .bind, .noFailure: "bind"
                }
            let code = number == EPERM || number == EACCES ? Code.permissionDenied : Code.openFailed
            return DatagramSocketError(code, "\(operation) \(socket) on \(interface): \(reason)", errno: number)
        }
    }

    static func receiveFailed(socket: String, reason: String, errno code: Int32?) -> DatagramSocketError {
        DatagramSocketError(.receiveFailed, "receive on \(socket): \(reason)", errno: code)
    }

    static func sendFailed(
        send what: String,
        interface: String,
        interfaceIndex: UInt32,
        reason: String,
        errno code: Int32?
    ) -> DatagramSocketError {
        DatagramSocketError(
            .sendFailed,
            "send \(what) on \(interface) (interface index \(interfaceIndex)): \(reason)",
            errno: code
        )
    }

    static func addressFamilyMismatch(
        send what: String,
        socket: String,
        address: IPAddress,
        family: DatagramSocket.Family
    ) -> DatagramSocketError {
        DatagramSocketError(
            .addressFamilyMismatch,
            "send \(what) on \(socket): \(address) is not an \(family) address",
            errno: nil
        )
    }

    static func closed(operation: String, socket: String) -> DatagramSocketError {
        DatagramSocketError(.closed, "\(operation) on \(socket): the socket is closed", errno: nil)
    }
}
