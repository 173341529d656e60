import CNetSupport
public import NetworkAddresses
public import SleepProxyCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The mDNS socket of one interface and one family: receives what is sent to the mDNS group on that interface and
/// sends multicast and unicast mDNS from port 5353, sharing the port with an avahi-daemon on the same host.
///
/// The socket is bound to the group address, `224.0.0.251:5353` or `[ff02::fb%interface]:5353`, not to the
/// wildcard. Linux then delivers to it only datagrams sent to the group; unicast datagrams to one of the host's
/// own addresses on port 5353 keep going to a wildcard-bound avahi-daemon (a socket bound to the group never
/// matches a unicast destination, and it is not in avahi's `SO_REUSEPORT` group, which holds only sockets bound to
/// the same address). Every multicast datagram reaches both: the kernel hands a copy to each matching socket.
///
/// Sharing port 5353 with avahi-daemon: avahi 0.8 first binds `0.0.0.0:5353` / `[::]:5353` without reuse options
/// and sets `SO_REUSEADDR` and `SO_REUSEPORT` right after that bind succeeds; if it fails with `EADDRINUSE`, it
/// logs "Detected another IPv4 mDNS stack running on this host" and binds again with both options set. This socket
/// sets both before binding, so both start orders work; when avahi starts second it logs that warning once.
///
/// The socket is bound to its interface: IPv4 with `SO_BINDTOIFINDEX`, IPv6 through the scope of `ff02::fb`,
/// and `IP_MULTICAST_ALL` / `IPV6_MULTICAST_ALL` are off. Without that, a socket bound to the group would also
/// receive the group's datagrams from every other interface on which anybody on the host (avahi) joined it.
///
/// Sending: multicast leaves through the socket's interface, with TTL / hop limit 255 as RFC 6762 requires for
/// every mDNS packet (unicast too), and is looped back to local members of the group (`IP_MULTICAST_LOOP`): an
/// avahi-daemon on the same host sees our announcements, and so does this socket itself. A looped-back datagram
/// carries the interface's own source address and port 5353, exactly like one from a local avahi-daemon, so
/// recognise your own packets by content, not by source. Without a `source`, Linux picks the interface's primary
/// IPv4 address for IPv4 multicast, the link-local address for IPv6 multicast, and the route's preferred source for
/// unicast (for a ULA destination on the link, the ULA); the source port is always 5353.
///
/// The socket is created on the calling thread and belongs to that thread's network namespace for its whole life.
/// It is `Sendable`: the descriptor sits behind a lock, and no method blocks. Cancel a dispatch source on
/// ``fileDescriptor`` (and wait for its cancel handler) before ``close()``.
public final class MulticastDNSSocket: Sendable {
    /// The mDNS port.
    public static let port: UInt16 = 5353
    /// `224.0.0.251`.
    public static let ipv4Group = IPAddress(bytes: [224, 0, 0, 251])!
    /// `ff02::fb`.
    public static let ipv6Group = IPAddress(bytes: [0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFB])!

    public let family: DatagramSocket.Family
    /// The index of the interface the socket serves.
    public let interfaceIndex: UInt32
    /// The interface's name when the socket was opened (for messages).
    public let interfaceName: String

    private let state: Mutex<State>

    private struct State {
        /// -1 once closed.
        var descriptor: Int32
        var buffer: [UInt8]
    }

    /// The group and port the socket is bound to: `224.0.0.251:5353` or `[ff02::fb]:5353`.
    public var group: Endpoint {
        Endpoint(address: family == .ipv4 ? Self.ipv4Group : Self.ipv6Group, port: Self.port)
    }

    /// Opens the mDNS socket of `family` on the interface with index `interfaceIndex`.
    ///
    /// - Throws: ``MulticastDNSSocketError`` with code ``MulticastDNSSocketError/Code/interfaceNotFound`` if the
    ///   calling thread's network namespace has no such interface,
    ///   ``MulticastDNSSocketError/Code/addressInUse`` if another socket holds port 5353 without `SO_REUSEADDR`,
    ///   ``MulticastDNSSocketError/Code/permissionDenied`` if a capability is missing,
    ///   ``MulticastDNSSocketError/Code/openFailed`` otherwise.
    public init(family: DatagramSocket.Family, interfaceIndex: UInt32) throws {
        var nameBuffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        let name: String? =
            if_indextoname(interfaceIndex, &nameBuffer) == nil
            ? nil : String(decoding: nameBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let group = Endpoint(address: family == .ipv4 ? Self.ipv4Group : Self.ipv6Group, port: Self.port)
        guard let name else {
            throw MulticastDNSSocketError.interfaceNotFound(index: interfaceIndex, group: group)
        }
        var failedStep = sp_mdns_open_step.noFailure
        let result = sp_mdns_open(family.addressFamily, interfaceIndex, &failedStep)
        guard result >= 0 else {
            throw MulticastDNSSocketError.openFailed(
                step: failedStep,
                errno: -result,
                family: family,
                interface: "\(name) (index \(interfaceIndex))",
                group: group
            )
        }
        self.family = family
        self.interfaceIndex = interfaceIndex
        self.interfaceName = name
        self.state = Mutex(
            State(descriptor: result, buffer: [UInt8](repeating: 0, count: DatagramSocket.maximumDatagramSize))
        )
    }

    deinit {
        close()
    }

    /// The socket's descriptor, for a read source; -1 once closed. Do not read from or close it directly.
    public var fileDescriptor: Int32 {
        state.withLock { $0.descriptor }
    }

    /// Receives one pending datagram sent to the group on this interface (our own multicast included, looped
    /// back), or returns `nil` if none is pending. Its ``ReceivedDatagram/destination`` is the group, its
    /// ``ReceivedDatagram/destinationPort`` 5353.
    ///
    /// - Throws: ``MulticastDNSSocketError`` with code ``MulticastDNSSocketError/Code/closed`` after
    ///   ``close()``, ``MulticastDNSSocketError/Code/receiveFailed`` if `recvmsg` fails or the kernel reported no
    ///   packet info.
    public func receive() throws -> ReceivedDatagram? {
        try state.withLock { state throws(MulticastDNSSocketError) -> ReceivedDatagram? in
            guard state.descriptor >= 0 else {
                throw MulticastDNSSocketError.closed(operation: "receive", socket: describeLocal())
            }
            var info = sp_udp_datagram_info()
            let descriptor = state.descriptor
            let count = state.buffer.withUnsafeMutableBufferPointer { buffer in
                sp_udp_receive(descriptor, buffer.baseAddress, buffer.count, &info)
            }
            if count < 0 {
                let code = Int32(-count)
                if code == EAGAIN || code == EWOULDBLOCK { return nil }
                throw MulticastDNSSocketError.receiveFailed(
                    socket: describeLocal(),
                    reason: errorText(code),
                    errno: code
                )
            }
            guard let sourceAddress = Self.address(family: info.source_family, bytes: info.source_address) else {
                throw MulticastDNSSocketError.receiveFailed(
                    socket: describeLocal(),
                    reason: "the source address has unknown family \(info.source_family)",
                    errno: nil
                )
            }
            guard let destination = Self.address(family: info.destination_family, bytes: info.destination_address)
            else {
                throw MulticastDNSSocketError.receiveFailed(
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
                destinationPort: Self.port,
                interfaceIndex: info.interface_index,
                truncated: info.truncated != 0
            )
        }
    }

    /// Sends `bytes` from port 5353 out of the socket's interface: to the group (``group``) for multicast
    /// announcements and responses, or to a unicast endpoint for QU and legacy-unicast replies.
    ///
    /// - Parameters:
    ///   - destination: the group and port 5353, or a querier's address and port.
    ///   - scopeID: the IPv6 scope of a link-local destination (``ReceivedDatagram/sourceScopeID``); 0 otherwise,
    ///     or ``interfaceIndex``. The group is always sent on ``interfaceIndex``. Linux rejects (`EINVAL`) another
    ///     interface's scope.
    ///   - source: the source address, set with packet info; it must be assigned to this host (Linux rejects
    ///     others with `EINVAL` for IPv6 and `ENETUNREACH` or `EINVAL` for IPv4). Reply to a legacy-unicast query
    ///     from the address it was sent to: queriers such as `dig` use a connected socket and drop replies from
    ///     any other address. `nil` lets Linux choose (see the type's documentation).
    /// - Throws: ``MulticastDNSSocketError`` with code ``MulticastDNSSocketError/Code/addressFamilyMismatch``,
    ///   ``MulticastDNSSocketError/Code/sendFailed`` or ``MulticastDNSSocketError/Code/closed``.
    public func send(_ bytes: [UInt8], to destination: Endpoint, scopeID: UInt32, from source: IPAddress?) throws {
        let from = source.map { " from \(Endpoint(address: $0, port: Self.port))" } ?? ""
        let what = "mDNS\(from) to \(destination)"
        for address in [destination.address] + (source.map { [$0] } ?? []) where !family.contains(address) {
            throw MulticastDNSSocketError.addressFamilyMismatch(
                send: what,
                socket: describeLocal(),
                address: address,
                family: family
            )
        }
        let scope = scopeID == 0 && family == .ipv6 && destination.address == Self.ipv6Group ? interfaceIndex : scopeID
        try state.withLock { state throws(MulticastDNSSocketError) in
            guard state.descriptor >= 0 else {
                throw MulticastDNSSocketError.closed(operation: "send \(what)", socket: describeLocal())
            }
            let descriptor = state.descriptor
            let addressFamily = family.addressFamily
            let interfaceIndex = interfaceIndex
            let result = bytes.withUnsafeBufferPointer { payload in
                destination.address.bytes.withUnsafeBufferPointer { destinationBytes in
                    let send = { (sourceBytes: UnsafePointer<UInt8>?) in
                        sp_udp_send(
                            descriptor,
                            addressFamily,
                            payload.baseAddress,
                            payload.count,
                            destinationBytes.baseAddress,
                            destination.port,
                            scope,
                            sourceBytes,
                            interfaceIndex
                        )
                    }
                    guard let source else { return send(nil) }
                    return source.bytes.withUnsafeBufferPointer { send($0.baseAddress) }
                }
            }
            if result < 0 {
                let code = Int32(-result)
                throw MulticastDNSSocketError.sendFailed(
                    send: what,
                    socket: describeLocal(),
                    reason: errorText(code),
                    errno: code
                )
            }
            if result != bytes.count {
                throw MulticastDNSSocketError.sendFailed(
                    send: what,
                    socket: describeLocal(),
                    reason: "only \(result) of \(bytes.count) bytes were sent",
                    errno: nil
                )
            }
        }
    }

    /// Closes the socket, which also leaves the group. Safe to call more than once.
    public func close() {
        state.withLock { state in
            guard state.descriptor >= 0 else { return }
            _ = Glibc.close(state.descriptor)
            state.descriptor = -1
        }
    }

    /// `UDP 224.0.0.251:5353 on eth0 (index 2)`.
    private func describeLocal() -> String {
        "UDP \(group) on \(interfaceName) (index \(interfaceIndex))"
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

/// `strerror` text for `code`.
private func errorText(_ code: Int32) -> String {
    String(cString: strerror(code))
}

/// An error from opening or using a ``MulticastDNSSocket``.
///
/// Compare ``code`` to tell failures apart; ``description`` names the operation, the group, the interface and the
/// system's reason, e.g. `join 224.0.0.251 on UDP 224.0.0.251:5353 on eth0 (index 2): No such device`.
public struct MulticastDNSSocketError: Error, Sendable, Hashable, CustomStringConvertible {
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

        /// No interface with that index exists in the calling thread's network namespace.
        public static let interfaceNotFound = Code(.interfaceNotFound)
        /// A capability is missing.
        public static let permissionDenied = Code(.permissionDenied)
        /// Another socket holds port 5353 for the group (or the wildcard address) without `SO_REUSEADDR`.
        public static let addressInUse = Code(.addressInUse)
        /// Opening failed for another reason.
        public static let openFailed = Code(.openFailed)
        /// `recvmsg` failed, or the datagram came without packet info.
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

    static func interfaceNotFound(index: UInt32, group: Endpoint) -> MulticastDNSSocketError {
        MulticastDNSSocketError(
            .interfaceNotFound,
            "open UDP \(group) on interface index \(index): there is no interface with index \(index) "
                + "in this network namespace",
            errno: ENODEV
        )
    }

    /// Maps a failed `sp_mdns_open` to an error.
    static func openFailed(
        step: sp_mdns_open_step,
        errno number: Int32,
        family: DatagramSocket.Family,
        interface: String,
        group: Endpoint
    ) -> MulticastDNSSocketError {
        let socket = "UDP \(group) on \(interface)"
        let reason = errorText(number)
        let v4 = family == .ipv4
        let operation =
            switch step {
            case .arguments, .socket: "create"
            case .reuseAddress: "set SO_REUSEADDR on"
            case .reusePort: "set SO_REUSEPORT on"
            case .v6Only: "set IPV6_V6ONLY on"
            case .bindToDevice: "bind to the interface (SO_BINDTOIFINDEX)"
            case .bind, .noFailure: "bind"
            case .join: "join \(group.address) (\(v4 ? "IP_ADD_MEMBERSHIP" : "IPV6_JOIN_GROUP")) on"
            case .multicastInterface: "set \(v4 ? "IP_MULTICAST_IF" : "IPV6_MULTICAST_IF") on"
            case .multicastTTL: "set \(v4 ? "IP_MULTICAST_TTL" : "IPV6_MULTICAST_HOPS") 255 on"
            case .unicastTTL: "set \(v4 ? "IP_TTL" : "IPV6_UNICAST_HOPS") 255 on"
            case .multicastLoop: "set \(v4 ? "IP_MULTICAST_LOOP" : "IPV6_MULTICAST_LOOP") on"
            case .multicastAll: "clear \(v4 ? "IP_MULTICAST_ALL" : "IPV6_MULTICAST_ALL") on"
            case .packetInfo: "set \(v4 ? "IP_PKTINFO" : "IPV6_RECVPKTINFO") on"
            }
        let code: Code
        var hint = ""
        switch number {
        case ENODEV, ENXIO:
            code = .interfaceNotFound
            hint = "; the interface does not exist in this network namespace"
        case EPERM, EACCES:
            code = .permissionDenied
        case EADDRINUSE where step == .bind:
            code = .addressInUse
            hint = " (another socket holds port \(group.port) without SO_REUSEADDR)"
        default:
            code = .openFailed
        }
        return MulticastDNSSocketError(code, "\(operation) \(socket): \(reason)\(hint)", errno: number)
    }

    static func receiveFailed(socket: String, reason: String, errno code: Int32?) -> MulticastDNSSocketError {
        MulticastDNSSocketError(.receiveFailed, "receive on \(socket): \(reason)", errno: code)
    }

    static func sendFailed(send what: String, socket: String, reason: String, errno code: Int32?)
        -> MulticastDNSSocketError
    {
        MulticastDNSSocketError(.sendFailed, "send \(what) on \(socket): \(reason)", errno: code)
    }

    static func addressFamilyMismatch(
        send what: String,
        socket: String,
        address: IPAddress,
        family: DatagramSocket.Family
    ) -> MulticastDNSSocketError {
        MulticastDNSSocketError(
            .addressFamilyMismatch,
            "send \(what) on \(socket): \(address) is not an \(family) address",
            errno: nil
        )
    }

    static func closed(operation: String, socket: String) -> MulticastDNSSocketError {
        MulticastDNSSocketError(.closed, "\(operation) on \(socket): the socket is closed", errno: nil)
    }
}
