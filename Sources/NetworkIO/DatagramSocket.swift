import CNetSupport
public import NetworkAddresses
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A UDP socket on one interface that reports where each datagram arrived (destination address, interface) and
/// sends with a chosen source address and interface. SwiftNIO's datagram channel can receive packet info but cannot
/// set the source of what it sends, hence this thin socket. The daemon and the sleep client open three kinds, which
/// differ only in what they bind to and the options that follow from it:
///
/// - A registration socket, ``init(family:interface:port:)``: bound to the wildcard address and a port. A sleep
///   proxy must answer a registration from exactly the address and port the client sent it to, on the interface it
///   arrived on (PROTOCOL.md section 6 item 7): the daemon's socket has that port and interface, and
///   ``send(_:to:scopeID:from:interfaceIndex:)`` sends from the registration's
///   ``ReceivedDatagram/destination``. The sleep client sends its registrations from one on an ephemeral port.
/// - A one-shot querier, ``oneShotQuerier(family:interface:)``: the sleep client's, for legacy-unicast mDNS
///   queries from an ephemeral port.
/// - An mDNS socket, ``multicastDNS(family:interfaceIndex:)``: bound to the mDNS group and port 5353, sharing the
///   port with an avahi-daemon on the same host.
///
/// Every socket is bound to its interface with `SO_BINDTODEVICE`: datagrams arriving on other interfaces (loopback
/// included) never reach it. It is non-blocking; wait for readability on ``fileDescriptor`` (a `DispatchSourceRead`)
/// and then call ``receive()`` until it returns `nil`. IPv6 sockets are IPv6-only (`IPV6_V6ONLY`); open one socket
/// per family.
///
/// The socket is created on the calling thread and belongs to that thread's network namespace for its whole life.
///
/// It is `Sendable`: the descriptor sits behind a lock, and ``receive()``,
/// ``send(_:to:scopeID:from:interfaceIndex:)`` and ``close()`` never block, so they may be called from any thread.
/// The daemon uses each socket from one serial queue. Cancel a dispatch source on ``fileDescriptor`` (and wait for
/// its cancel handler) before ``close()``.
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

        /// `0.0.0.0` or `::`.
        var wildcard: IPAddress {
            switch backing {
            case .ipv4: .v4(.any)
            case .ipv6: .v6(.unspecified)
            }
        }

        /// `224.0.0.251` or `ff02::fb`.
        var multicastDNSGroup: IPAddress {
            switch backing {
            case .ipv4: MulticastDNS.ipv4Group.address
            case .ipv6: MulticastDNS.ipv6Group.address
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
    /// The name of the interface the socket is bound to, as it was when the socket was opened.
    public let interfaceName: String
    /// The index of that interface.
    public let interfaceIndex: UInt32
    /// The bound port (the kernel's choice for a one-shot querier, and for a registration socket opened with port 0).
    public let localPort: UInt16
    /// The multicast group the socket is bound to and has joined; nil for a socket on the wildcard address.
    private let groupAddress: IPAddress?

    private let state: Mutex<State>

    private struct State {
        /// -1 once closed.
        var descriptor: Int32
        var buffer: [UInt8]
    }

    /// What a socket binds to, and the options beyond those every socket has.
    private struct Setup {
        /// The multicast group to bind to and join; nil for the wildcard address.
        var group: IPAddress?
        var port: UInt16
        /// `SO_REUSEPORT` as well as `SO_REUSEADDR`.
        var sharesPort: Bool
        /// The TTL / hop limit of everything sent, unicast and multicast; 0 keeps the system's defaults.
        var hopLimit: Int32
    }

    /// The group and port the socket is bound to (`224.0.0.251:5353`, `[ff02::fb]:5353`); nil for a socket on the
    /// wildcard address.
    public var group: Endpoint? {
        groupAddress.map { Endpoint(address: $0, port: localPort) }
    }

    /// Opens a registration socket of `family` on `interface`, bound to the wildcard address and `port` (0: an
    /// ephemeral port).
    ///
    /// `SO_REUSEADDR` is set, so on Linux a second socket of this kind may bind the same port on the same interface;
    /// the kernel then delivers each unicast datagram to only one of them, the most recently bound.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/interfaceNotFound`` if there is no
    ///   such interface in the calling thread's network namespace, ``SystemError/Code/addressInUse`` if
    ///   another socket holds the port without `SO_REUSEADDR`, ``SystemError/Code/permissionDenied``
    ///   if a capability is missing, ``SystemError/Code/openFailed`` otherwise.
    public convenience init(family: Family, interface: String, port: UInt16) throws {
        // An unknown name leaves the index 0: SO_BINDTODEVICE then reports the missing interface.
        try self.init(
            family: family,
            interfaceName: interface,
            interfaceIndex: if_nametoindex(interface),
            setup: Setup(group: nil, port: port, sharesPort: false, hopLimit: 0)
        )
    }

    /// Opens a socket of `family` on `interface` for one-shot mDNS queries (RFC 6762 section 5.1): bound to the
    /// wildcard address and an ephemeral port. A query sent from it to the mDNS group is a legacy-unicast one
    /// (section 6.7): every responder answers it at once by unicast to this port, with the query's ID, whatever
    /// other responders or queriers on the link have sent (no duplicate- or known-answer suppression applies), with
    /// TTLs cut to 10 s and no cache-flush bits.
    ///
    /// Multicast leaves through `interface` (the socket is bound to it) with TTL / hop limit 255, and is looped back
    /// to this host's own responder (`IP_MULTICAST_LOOP` is on by default); that responder's answer comes back
    /// through loopback with the interface's address as its source and reaches this socket.
    ///
    /// - Throws: as ``init(family:interface:port:)``.
    public static func oneShotQuerier(family: Family, interface: String) throws -> DatagramSocket {
        try DatagramSocket(
            family: family,
            interfaceName: interface,
            interfaceIndex: if_nametoindex(interface),
            setup: Setup(group: nil, port: 0, sharesPort: false, hopLimit: 255)
        )
    }

    /// Opens the mDNS socket of `family` on the interface with index `interfaceIndex`: it receives what is sent to
    /// the mDNS group on that interface and sends multicast and unicast mDNS from port 5353.
    ///
    /// The socket is bound to the group address, `224.0.0.251:5353` or `[ff02::fb%interface]:5353`, not to the
    /// wildcard. Linux then delivers to it only datagrams sent to the group; unicast datagrams to one of the host's
    /// own addresses on port 5353 keep going to a wildcard-bound avahi-daemon (a socket bound to the group never
    /// matches a unicast destination, and it is not in avahi's `SO_REUSEPORT` group, which holds only sockets bound
    /// to the same address). Every multicast datagram reaches both: the kernel hands a copy to each matching socket.
    ///
    /// Sharing port 5353 with avahi-daemon: avahi 0.8 first binds `0.0.0.0:5353` / `[::]:5353` without reuse
    /// options and sets `SO_REUSEADDR` and `SO_REUSEPORT` right after that bind succeeds; if it fails with
    /// `EADDRINUSE`, it logs "Detected another IPv4 mDNS stack running on this host" and binds again with both
    /// options set. This socket sets both before binding, so both start orders work; when avahi starts second it
    /// logs that warning once.
    ///
    /// Besides `SO_BINDTODEVICE` (and, for IPv6, the scope of `ff02::fb`), `IP_MULTICAST_ALL` /
    /// `IPV6_MULTICAST_ALL` are off. Without that, a socket bound to the group would also receive the group's
    /// datagrams from every other interface on which anybody on the host (avahi) joined it.
    ///
    /// Sending: multicast leaves through the socket's interface, with TTL / hop limit 255 as RFC 6762 requires for
    /// every mDNS packet (unicast too), and is looped back to local members of the group (`IP_MULTICAST_LOOP`): an
    /// avahi-daemon on the same host sees our announcements, and so does this socket itself. A looped-back datagram
    /// carries the interface's own source address and port 5353, exactly like one from a local avahi-daemon, so
    /// recognise your own packets by content, not by source. Without a `source`, Linux picks the interface's primary
    /// IPv4 address for IPv4 multicast, the link-local address for IPv6 multicast, and the route's preferred source
    /// for unicast (for a ULA destination on the link, the ULA); the source port is always 5353.
    ///
    /// Closing the socket leaves the group.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/interfaceNotFound`` if the calling
    ///   thread's network namespace has no such interface, ``SystemError/Code/addressInUse`` if another
    ///   socket holds port 5353 without `SO_REUSEADDR`, ``SystemError/Code/permissionDenied`` if a
    ///   capability is missing, ``SystemError/Code/openFailed`` otherwise.
    public static func multicastDNS(family: Family, interfaceIndex: UInt32) throws -> DatagramSocket {
        let group = family.multicastDNSGroup
        guard let name = NetworkInterface.name(ofIndex: interfaceIndex) else {
            throw SystemError.interfaceNotFound(
                index: interfaceIndex,
                socket: Endpoint(address: group, port: MulticastDNS.port)
            )
        }
        return try DatagramSocket(
            family: family,
            interfaceName: name,
            interfaceIndex: interfaceIndex,
            setup: Setup(group: group, port: MulticastDNS.port, sharesPort: true, hopLimit: 255)
        )
    }

    private init(family: Family, interfaceName: String, interfaceIndex: UInt32, setup: Setup) throws {
        var boundPort: UInt16 = 0
        var failedStep = sp_udp_step.noFailure
        let groupBytes = setup.group?.bytes
        let result = interfaceName.withCString { name in
            Self.withOptionalBuffer(groupBytes) { group in
                var options = sp_udp_options(
                    family: family.addressFamily,
                    interface_name: name,
                    interface_index: interfaceIndex,
                    group: group,
                    port: setup.port,
                    share_port: setup.sharesPort ? 1 : 0,
                    hop_limit: setup.hopLimit
                )
                return sp_udp_socket(&options, &boundPort, &failedStep)
            }
        }
        guard result >= 0 else {
            throw SystemError.openFailed(
                step: failedStep,
                errno: -result,
                socket: DatagramSocketName(
                    family: family,
                    group: setup.group,
                    port: setup.port,
                    interfaceName: interfaceName,
                    interfaceIndex: interfaceIndex
                )
            )
        }
        self.family = family
        self.interfaceName = interfaceName
        self.interfaceIndex = interfaceIndex
        self.localPort = boundPort
        self.groupAddress = setup.group
        self.state = Mutex(State(descriptor: result, buffer: [UInt8](repeating: 0, count: Self.maximumDatagramSize)))
    }

    deinit {
        close()
    }

    /// The socket's descriptor, for a read source; -1 once closed. Do not read from or close it directly.
    public var fileDescriptor: Int32 {
        state.withLock { $0.descriptor }
    }

    /// Receives one pending datagram, or returns `nil` if none is pending. On an mDNS socket that is a datagram
    /// sent to the group on this interface (our own multicast included, looped back); its
    /// ``ReceivedDatagram/destination`` is the group.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/closed`` after ``close()``,
    ///   ``SystemError/Code/receiveFailed`` if `recvmsg` fails or the kernel reported no packet info.
    public func receive() throws -> ReceivedDatagram? {
        try state.withLock { state throws(SystemError) -> ReceivedDatagram? in
            guard state.descriptor >= 0 else {
                throw SystemError.closed(operation: "receive", socket: name)
            }
            var info = sp_udp_datagram_info()
            let descriptor = state.descriptor
            let count = state.buffer.withUnsafeMutableBufferPointer { buffer in
                sp_udp_receive(descriptor, buffer.baseAddress, buffer.count, &info)
            }
            if count < 0 {
                let code = Int32(-count)
                if code == EAGAIN || code == EWOULDBLOCK { return nil }
                throw SystemError.receiveFailed(socket: name, errno: code)
            }
            guard let sourceAddress = Self.address(family: info.source_family, bytes: info.source_address) else {
                throw SystemError.receiveFailed(
                    socket: name,
                    problem: "the source address has unknown family \(info.source_family)"
                )
            }
            guard let destination = Self.address(family: info.destination_family, bytes: info.destination_address)
            else {
                throw SystemError.receiveFailed(
                    socket: name,
                    problem: "no packet info arrived with the datagram from \(sourceAddress)"
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

    /// Sends `bytes` to `destination` from port ``localPort``.
    ///
    /// - Parameters:
    ///   - scopeID: the IPv6 scope (interface index) of a link-local `destination`, as received in
    ///     ``ReceivedDatagram/sourceScopeID``; 0 otherwise. Linux rejects (`EINVAL`) a scope that differs from a
    ///     non-zero outgoing interface. A datagram to the socket's ``group`` with scope 0 gets the outgoing
    ///     interface as its scope.
    ///   - source: the source address, set with packet info: it must be assigned to this host, otherwise Linux
    ///     rejects it (`EINVAL` for IPv6, `ENETUNREACH` or `EINVAL` for IPv4). Never a multicast address: reply to
    ///     a multicast datagram from an address of the interface. Reply to a unicast query from the address it was
    ///     sent to: queriers such as `dig` use a connected socket and drop replies from any other address. `nil`
    ///     lets Linux choose (see ``multicastDNS(family:interfaceIndex:)``).
    ///   - interfaceIndex: the outgoing interface; `nil` is ``interfaceIndex``, 0 lets the kernel choose (the
    ///     socket's interface).
    /// - Throws: ``SystemError`` with code ``SystemError/Code/addressFamilyMismatch``,
    ///   ``SystemError/Code/sendFailed`` or ``SystemError/Code/closed``.
    public func send(
        _ bytes: [UInt8],
        to destination: Endpoint,
        scopeID: UInt32 = 0,
        from source: IPAddress? = nil,
        interfaceIndex: UInt32? = nil
    ) throws {
        // The texts of errors are built only when one is thrown: this runs for every answer.
        func what() -> String { sendDescription(to: destination, from: source) }
        if let mismatch = familyMismatch(to: destination, from: source) { throw mismatch }
        let outgoing = interfaceIndex ?? self.interfaceIndex
        let scope = scope(for: destination, scopeID: scopeID, outgoing: outgoing)
        func via() -> String {
            switch outgoing {
            case self.interfaceIndex: ""
            case 0: " (outgoing interface left to the kernel)"
            default: " (outgoing interface index \(outgoing))"
            }
        }
        try state.withLock { state throws(SystemError) in
            guard state.descriptor >= 0 else {
                throw SystemError.closed(operation: "send \(what())", socket: name)
            }
            let descriptor = state.descriptor
            let addressFamily = family.addressFamily
            let result = bytes.withUnsafeBufferPointer { payload in
                destination.address.bytes.withUnsafeBufferPointer { destinationBytes in
                    Self.withOptionalBuffer(source?.bytes) { sourceBytes in
                        sp_udp_send(
                            descriptor,
                            addressFamily,
                            payload.baseAddress,
                            payload.count,
                            destinationBytes.baseAddress,
                            destination.port,
                            scope,
                            sourceBytes,
                            outgoing
                        )
                    }
                }
            }
            if result < 0 {
                throw SystemError.sendFailed(send: what(), socket: "\(name)\(via())", errno: Int32(-result))
            }
            if result != bytes.count {
                throw SystemError.sendFailed(
                    send: what(),
                    socket: "\(name)\(via())",
                    problem: "only \(result) of \(bytes.count) bytes were sent"
                )
            }
        }
    }

    /// Sends `datagrams` with as few system calls as the kernel allows (`sendmmsg`, up to 64 a call), each as
    /// `send(_:to:scopeID:from:interfaceIndex:)` would send it (from this socket's interface). One that cannot go
    /// out does not keep the others back: the returned list says which failed, by index, and why.
    public func send(batch datagrams: [OutgoingDatagram]) -> [(index: Int, error: SystemError)] {
        var failures: [(index: Int, error: SystemError)] = []
        func what(_ datagram: OutgoingDatagram) -> String {
            sendDescription(to: datagram.destination, from: datagram.source)
        }
        var eligible: [Int] = []
        eligible.reserveCapacity(datagrams.count)
        for (index, datagram) in datagrams.enumerated() {
            if let mismatch = familyMismatch(to: datagram.destination, from: datagram.source) {
                failures.append((index, mismatch))
            } else {
                eligible.append(index)
            }
        }
        let interfaceIndex = self.interfaceIndex
        let addressFamily = family.addressFamily
        let name = self.name
        var start = 0
        while start < eligible.count {
            let chunk = Array(eligible[start..<min(start + Self.batchLimit, eligible.count)])
            start += chunk.count
            var outgoing = [sp_udp_outgoing](repeating: sp_udp_outgoing(), count: chunk.count)
            var errors = [Int32](repeating: 0, count: chunk.count)
            for (slot, index) in chunk.enumerated() {
                let datagram = datagrams[index]
                outgoing[slot].length = datagram.bytes.count
                withUnsafeMutableBytes(of: &outgoing[slot].destination_address) { target in
                    datagram.destination.address.bytes.withUnsafeBytes { target.copyMemory(from: $0) }
                }
                outgoing[slot].destination_port = datagram.destination.port
                outgoing[slot].destination_scope_id = scope(
                    for: datagram.destination, scopeID: datagram.scopeID, outgoing: interfaceIndex)
                if let source = datagram.source {
                    outgoing[slot].has_source = 1
                    withUnsafeMutableBytes(of: &outgoing[slot].source_address) { target in
                        source.bytes.withUnsafeBytes { target.copyMemory(from: $0) }
                    }
                }
                outgoing[slot].interface_index = interfaceIndex
            }
            // The payloads stay where they are: each is pinned while the call runs.
            func pinned(_ slot: Int, _ body: () -> Void) {
                guard slot < chunk.count else { return body() }
                datagrams[chunk[slot]].bytes.withUnsafeBufferPointer { payload in
                    outgoing[slot].bytes = payload.baseAddress
                    pinned(slot + 1, body)
                }
            }
            let closed: Bool = state.withLock { state in
                guard state.descriptor >= 0 else { return true }
                let descriptor = state.descriptor
                pinned(0) {
                    _ = sp_udp_send_batch(descriptor, addressFamily, outgoing, outgoing.count, &errors)
                }
                return false
            }
            for (slot, index) in chunk.enumerated() {
                if closed {
                    failures.append(
                        (index, SystemError.closed(operation: "send \(what(datagrams[index]))", socket: name)))
                } else if errors[slot] < 0 {
                    failures.append(
                        (
                            index,
                            SystemError.sendFailed(
                                send: what(datagrams[index]), socket: "\(name)", errno: -errors[slot])
                        ))
                }
            }
        }
        return failures.sorted { $0.index < $1.index }
    }

    /// The most datagrams one `sendmmsg` of `send(batch:)` carries.
    public static let batchLimit = Int(SP_UDP_BATCH)

    /// `UDP from ADDRESS:PORT to ADDRESS:PORT`, for the errors of a send.
    private func sendDescription(to destination: Endpoint, from source: IPAddress?) -> String {
        let from = source.map { " from \(Endpoint(address: $0, port: localPort))" } ?? ""
        return "UDP\(from) to \(destination)"
    }

    /// Why a datagram to `destination` from `source` cannot go out on this socket's family, if it cannot.
    private func familyMismatch(to destination: Endpoint, from source: IPAddress?) -> SystemError? {
        if !family.contains(destination.address) {
            return SystemError.addressFamilyMismatch(
                send: sendDescription(to: destination, from: source), socket: name, address: destination.address,
                family: family)
        }
        if let source, !family.contains(source) {
            return SystemError.addressFamilyMismatch(
                send: sendDescription(to: destination, from: source), socket: name, address: source, family: family)
        }
        return nil
    }

    /// The scope of a destination: a datagram to the socket's group with no scope given goes out on `outgoing`.
    private func scope(for destination: Endpoint, scopeID: UInt32, outgoing: UInt32) -> UInt32 {
        scopeID == 0 && destination.address == groupAddress ? outgoing : scopeID
    }

    /// Makes the kernel drop everything that arrives at this socket before it is queued (a socket filter that
    /// accepts nothing), for a socket that only sends: nothing need read it, and a flood of multicast costs it no
    /// buffer and no wake-up. The kernel counts such datagrams as the socket's drops. Sending is unaffected.
    public func discardInput() throws {
        try state.withLock { state in
            guard state.descriptor >= 0 else {
                throw SystemError.closed(operation: "discard input", socket: name)
            }
            let result = sp_discard_input(state.descriptor)
            if result < 0 {
                throw SystemError.openFailed(
                    call: SystemCallError("attach a socket filter to \(name)", code: -result))
            }
        }
    }

    /// Closes the socket (which leaves its group, if it joined one). Safe to call more than once.
    public func close() {
        state.withLock { state in
            guard state.descriptor >= 0 else { return }
            _ = Glibc.close(state.descriptor)
            state.descriptor = -1
        }
    }

    /// `UDP [::]:5354 on eth0 (index 2)`, `UDP 224.0.0.251:5353 on eth0 (index 2)`.
    private var name: DatagramSocketName {
        DatagramSocketName(
            family: family,
            group: groupAddress,
            port: localPort,
            interfaceName: interfaceName,
            interfaceIndex: interfaceIndex
        )
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

    /// Calls `body` with a pointer to `bytes`, or with `nil`.
    private static func withOptionalBuffer<Result>(
        _ bytes: [UInt8]?,
        _ body: (UnsafePointer<UInt8>?) -> Result
    ) -> Result {
        guard let bytes else { return body(nil) }
        return bytes.withUnsafeBufferPointer { body($0.baseAddress) }
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

/// How messages name a socket: `UDP [::]:5354 on eth0 (index 2)`.
struct DatagramSocketName: Sendable, CustomStringConvertible {
    var family: DatagramSocket.Family
    /// The group the socket is bound to; nil for the wildcard address.
    var group: IPAddress?
    var port: UInt16
    var interfaceName: String
    /// 0 if unknown.
    var interfaceIndex: UInt32

    /// `[::]:5354`, `224.0.0.251:5353`.
    var local: Endpoint {
        Endpoint(address: group ?? family.wildcard, port: port)
    }

    /// `eth0 (index 2)`, or `eth0` if the index is unknown.
    var interface: String {
        interfaceIndex == 0 ? interfaceName : "\(interfaceName) (index \(interfaceIndex))"
    }

    var description: String {
        "UDP \(local) on \(interface)"
    }
}

/// The errors of a ``DatagramSocket``: each names the operation, the address and port, the interface and the
/// system's reason.
extension SystemError {
    /// A failure that `problem` explains better than the system's reason for `call`, if there was a call.
    private init(_ code: Code, operation: String, problem: String, call: SystemCallError? = nil) {
        self.init(code, "\(operation): \(problem)", call: call)
    }

    static func interfaceNotFound(index: UInt32, socket: Endpoint) -> SystemError {
        let operation = "open UDP \(socket) on interface index \(index)"
        return SystemError(
            .interfaceNotFound,
            operation: operation,
            problem: "there is no interface with index \(index) in this network namespace",
            call: SystemCallError(operation, code: ENODEV)
        )
    }

    /// Maps a failed `sp_udp_socket` to an error.
    static func openFailed(step: sp_udp_step, errno number: Int32, socket: DatagramSocketName) -> SystemError {
        let v4 = socket.family == .ipv4
        let name = socket.interfaceName
        let operation =
            switch step {
            case .arguments, .socket, .noFailure: "create \(socket)"
            case .reuseAddress: "set SO_REUSEADDR on \(socket)"
            case .reusePort: "set SO_REUSEPORT on \(socket)"
            case .v6Only: "set IPV6_V6ONLY on \(socket)"
            case .bindToDevice: "bind UDP \(socket.local) to interface '\(name)' (SO_BINDTODEVICE)"
            case .packetInfo: "set \(v4 ? "IP_PKTINFO" : "IPV6_RECVPKTINFO") on \(socket)"
            case .multicastAll: "clear \(v4 ? "IP_MULTICAST_ALL" : "IPV6_MULTICAST_ALL") on \(socket)"
            case .multicastInterface: "set \(v4 ? "IP_MULTICAST_IF" : "IPV6_MULTICAST_IF") on \(socket)"
            case .multicastLoop: "set \(v4 ? "IP_MULTICAST_LOOP" : "IPV6_MULTICAST_LOOP") on \(socket)"
            case .multicastTTL: "set \(v4 ? "IP_MULTICAST_TTL" : "IPV6_MULTICAST_HOPS") on \(socket)"
            case .unicastTTL: "set \(v4 ? "IP_TTL" : "IPV6_UNICAST_HOPS") on \(socket)"
            case .bind: "bind \(socket)"
            case .join:
                "join \(socket.local.address) (\(v4 ? "IP_ADD_MEMBERSHIP" : "IPV6_JOIN_GROUP")) on \(socket)"
            case .localName: "read the bound port of \(socket)"
            }
        let call = SystemCallError(operation, code: number)
        let nameLength = name.utf8.count
        switch number {
        case EINVAL where step == .bindToDevice && !(1..<Int(IFNAMSIZ)).contains(nameLength):
            return SystemError(
                .interfaceNotFound,
                operation: operation,
                problem: "invalid interface name (\(nameLength) bytes; a name has 1 to \(IFNAMSIZ - 1))",
                call: call
            )
        case ENODEV, ENXIO:
            return SystemError(
                .interfaceNotFound,
                call,
                hint: "; there is no interface '\(name)' in this network namespace"
            )
        case EPERM where step == .bindToDevice, EACCES where step == .bindToDevice:
            return SystemError(
                .permissionDenied,
                call,
                hint: "; binding a socket to an interface needs CAP_NET_RAW"
            )
        case EPERM where step == .bind && (1..<1024).contains(socket.port),
            EACCES where step == .bind && (1..<1024).contains(socket.port):
            return SystemError(
                .permissionDenied,
                call,
                hint: "; ports below 1024 need CAP_NET_BIND_SERVICE"
            )
        case EPERM, EACCES:
            return SystemError(.permissionDenied, call)
        case EADDRINUSE where step == .bind:
            return SystemError(
                .addressInUse,
                call,
                hint: " (another socket holds port \(socket.port) without SO_REUSEADDR)"
            )
        default:
            return SystemError(.openFailed, call)
        }
    }

    static func openFailed(call: SystemCallError) -> SystemError {
        SystemError(.openFailed, call)
    }

    static func receiveFailed(socket: DatagramSocketName, errno code: Int32) -> SystemError {
        SystemError(.receiveFailed, SystemCallError("receive on \(socket)", code: code))
    }

    static func receiveFailed(socket: DatagramSocketName, problem: String) -> SystemError {
        SystemError(.receiveFailed, operation: "receive on \(socket)", problem: problem)
    }

    static func sendFailed(send what: String, socket: String, errno code: Int32) -> SystemError {
        SystemError(.sendFailed, SystemCallError("send \(what) on \(socket)", code: code))
    }

    static func sendFailed(send what: String, socket: String, problem: String) -> SystemError {
        SystemError(.sendFailed, operation: "send \(what) on \(socket)", problem: problem)
    }

    static func addressFamilyMismatch(
        send what: String,
        socket: DatagramSocketName,
        address: IPAddress,
        family: DatagramSocket.Family
    ) -> SystemError {
        SystemError(
            .addressFamilyMismatch,
            operation: "send \(what) on \(socket)",
            problem: "\(address) is not an \(family) address"
        )
    }

    static func closed(operation: String, socket: DatagramSocketName) -> SystemError {
        SystemError(.closed, operation: "\(operation) on \(socket)", problem: "the socket is closed")
    }
}

/// One datagram for `DatagramSocket.send(batch:)`.
public struct OutgoingDatagram: Sendable {
    public var bytes: [UInt8]
    public var destination: Endpoint
    /// sin6_scope_id for a link-local IPv6 destination (0: the socket's interface for its group).
    public var scopeID: UInt32
    /// The source address to use; nil lets the kernel choose.
    public var source: IPAddress?

    public init(bytes: [UInt8], destination: Endpoint, scopeID: UInt32 = 0, source: IPAddress? = nil) {
        self.bytes = bytes
        self.destination = destination
        self.scopeID = scopeID
        self.source = source
    }
}
