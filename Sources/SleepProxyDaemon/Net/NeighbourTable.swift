import CNetSupport
public import NetworkAddresses
import NetworkIO
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel's neighbour table (ARP for IPv4, NDP for IPv6) of one interface, changed through rtnetlink.
///
/// A sleep proxy answers ARP and Neighbour Solicitations for a sleeping host's addresses with its own MAC, but it
/// never answers its *own* host that way: frames the proxy injects do not come back into the local stack. When the
/// proxy's own host asks for a held address, the daemon adds an entry here mapping the address to the sleeping
/// host's real MAC (Apple's "local address cache entry", PROTOCOL.md sections 3.2, 3.3 and 7), so local traffic,
/// a UDP wake copy included, goes straight to the real NIC. It removes the entry when it releases the address.
///
/// Entries are set with state `NUD_PERMANENT`, not `NUD_REACHABLE`:
/// - A `REACHABLE` entry turns `STALE` after the interface's reachable time (`base_reachable_time_ms`, randomised
///   to 15 to 45 s by default); its next use moves it to `DELAY` and then `PROBE`, and the kernel sends unicast ARP
///   requests / Neighbour Solicitations to the sleeping host, which does not answer. After `ucast_solicit` probes
///   the entry is `FAILED`, traffic stalls, and the kernel broadcasts again: the entry would not survive a sleep.
/// - The kernel never changes a `PERMANENT` entry on its own: received ARP, Neighbour Advertisements (the proxy's
///   own announcements, should they loop back) and garbage collection leave it alone. Only an administrative
///   request (this type, `ip neigh`) replaces or removes it. The price: an entry outlives a daemon that crashes
///   before removing it. It still points at the host's real MAC, which is right once the host is awake, and it
///   goes when the interface is set down or deleted (a carrier loss keeps it).
///
/// ``set(_:mac:)`` creates or replaces (`NLM_F_CREATE | NLM_F_REPLACE`), so setting again with another MAC
/// simply updates the entry. ``remove(_:)`` deletes the entry for the address whatever its state, including one
/// the kernel learnt itself; removing an address that has no entry is not an error, it returns `false`.
///
/// Every request waits for the kernel's acknowledgement (at most 5 s) and throws ``SystemError`` on a
/// refusal, with the kernel's own explanation where it sends one (extended ACK). Changing the table needs
/// `CAP_NET_ADMIN`; without it every request fails with ``SystemError/Code/permissionDenied``.
///
/// The netlink socket is created on the calling thread and belongs to that thread's network namespace for its
/// whole life; so does every entry it sets. It is `Sendable`: the socket sits behind a lock, and each request holds
/// the lock while it waits for the kernel's answer (microseconds; the kernel answers rtnetlink requests before
/// `sendmsg` returns).
public final class NeighbourTable: Sendable {
    /// The index of the interface whose table this changes.
    public let interfaceIndex: UInt32
    /// The interface's name when the table was opened (for messages).
    public let interfaceName: String

    /// How long a request waits for the kernel's answer.
    static let answerTimeoutMilliseconds: UInt32 = 5_000

    private let state: Mutex<State>

    private struct State {
        /// -1 once closed.
        var descriptor: Int32
        /// The socket's netlink port id.
        var portID: UInt32
        /// The sequence number of the last request.
        var sequence: UInt32
    }

    /// Opens the neighbour table of the interface with index `interfaceIndex` in the calling thread's network
    /// namespace.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/interfaceNotFound`` if the
    ///   namespace has no such interface, ``SystemError/Code/openFailed`` if the netlink socket cannot be
    ///   opened.
    public init(interfaceIndex: UInt32) throws {
        guard let name = NetworkInterface.name(ofIndex: interfaceIndex) else {
            throw SystemError.interfaceNotFound(index: interfaceIndex)
        }
        var portID: UInt32 = 0
        var failedStep = sp_netlink_open_step.noFailure
        let result = sp_netlink_route_open(Self.answerTimeoutMilliseconds, &portID, &failedStep)
        guard result >= 0 else {
            throw SystemError.openFailed(
                step: failedStep,
                errno: -result,
                interface: "\(name) (index \(interfaceIndex))"
            )
        }
        self.interfaceIndex = interfaceIndex
        self.interfaceName = name
        self.state = Mutex(State(descriptor: result, portID: portID, sequence: 0))
    }

    deinit {
        close()
    }

    /// Creates or replaces the permanent entry `address` → `mac` on the interface.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/invalidAddress`` for an
    ///   unspecified, multicast or broadcast `address` or a zero or multicast `mac` (nothing is sent),
    ///   ``SystemError/Code/permissionDenied`` without `CAP_NET_ADMIN`,
    ///   ``SystemError/Code/interfaceNotFound`` if the interface is gone,
    ///   ``SystemError/Code/closed`` after ``close()``, ``SystemError/Code/requestFailed``
    ///   otherwise.
    public func set(_ address: IPAddress, mac: MACAddress) throws {
        let operation = "set neighbour \(address) lladdr \(mac) PERMANENT (RTM_NEWNEIGH)"
        if let problem = Self.problem(with: address) ?? Self.problem(with: mac) {
            throw SystemError.invalidAddress(operation: operation, interface: describeInterface(), problem)
        }
        _ = try request(operation: operation, address: address, mac: mac)
    }

    /// Removes the entry for `address` on the interface, whatever its state and whoever made it.
    ///
    /// - Returns: `true` if there was an entry, `false` if there was none (the kernel's `ENOENT`).
    /// - Throws: ``SystemError`` with code ``SystemError/Code/permissionDenied`` without
    ///   `CAP_NET_ADMIN`, ``SystemError/Code/interfaceNotFound`` if the interface is gone,
    ///   ``SystemError/Code/closed`` after ``close()``, ``SystemError/Code/requestFailed``
    ///   otherwise.
    @discardableResult
    public func remove(_ address: IPAddress) throws -> Bool {
        try request(operation: "remove neighbour \(address) (RTM_DELNEIGH)", address: address, mac: nil)
    }

    /// Closes the netlink socket. Entries stay in the kernel's table. Safe to call more than once.
    public func close() {
        state.withLock { state in
            guard state.descriptor >= 0 else { return }
            _ = Glibc.close(state.descriptor)
            state.descriptor = -1
        }
    }

    /// Sends one request; `mac` nil removes. Returns whether the entry existed (always `true` for a set).
    private func request(operation: String, address: IPAddress, mac: MACAddress?) throws -> Bool {
        let family =
            switch address {
            case .v4: AF_INET
            case .v6: AF_INET6
            }
        let interfaceIndex = interfaceIndex
        let (result, stage, kernelMessage) = try state.withLock {
            state throws(SystemError) -> (Int32, sp_netlink_stage, String) in
            guard state.descriptor >= 0 else {
                throw SystemError.closed(operation: operation, interface: describeInterface())
            }
            state.sequence &+= 1
            let descriptor = state.descriptor
            let portID = state.portID
            let sequence = state.sequence
            var stage = sp_netlink_stage.noFailure
            var message = [CChar](repeating: 0, count: 256)
            let macBytes = mac?.array ?? [UInt8](repeating: 0, count: 6)
            let result = address.bytes.withUnsafeBufferPointer { addressBytes in
                macBytes.withUnsafeBufferPointer { macPointer in
                    message.withUnsafeMutableBufferPointer { messageBuffer in
                        sp_neighbour_change(
                            descriptor,
                            portID,
                            sequence,
                            mac == nil ? 1 : 0,
                            family,
                            interfaceIndex,
                            addressBytes.baseAddress,
                            macPointer.baseAddress,
                            sp_nud_permanent,
                            &stage,
                            messageBuffer.baseAddress,
                            messageBuffer.count
                        )
                    }
                }
            }
            let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return (result, stage, text)
        }
        if result == 0 { return true }
        let number = -result
        if mac == nil && stage == .kernel && number == ENOENT { return false }
        throw SystemError.requestFailed(
            operation: operation,
            interface: describeInterface(),
            stage: stage,
            errno: number,
            kernelMessage: kernelMessage
        )
    }

    /// `eth0 (index 2)`.
    private func describeInterface() -> String {
        "\(interfaceName) (index \(interfaceIndex))"
    }

    private static func problem(with address: IPAddress) -> String? {
        switch address {
        case .v4(let v4):
            if v4.isUnspecified { return "\(address) is the unspecified address" }
            if v4.isMulticast { return "\(address) is a multicast address" }
            if v4 == .broadcast { return "\(address) is the broadcast address" }
        case .v6(let v6):
            if v6.isUnspecified { return "\(address) is the unspecified address" }
            if v6.isMulticast { return "\(address) is a multicast address" }
        }
        return nil
    }

    private static func problem(with mac: MACAddress) -> String? {
        if mac.isZero { return "the link-layer address \(mac) is all zeros" }
        if mac.isMulticast { return "the link-layer address \(mac) is a group (multicast or broadcast) address" }
        return nil
    }
}

/// The errors of a ``NeighbourTable``: each names the operation, the address and MAC, the interface and the
/// system's reason, e.g. `set neighbour 10.77.0.2 lladdr 02:77:00:00:00:99 PERMANENT (RTM_NEWNEIGH) on eth0
/// (index 2): Operation not permitted; changing the neighbour table needs CAP_NET_ADMIN`.
extension SystemError {
    static func interfaceNotFound(index: UInt32) -> SystemError {
        let operation = "open the neighbour table of interface index \(index)"
        return SystemError(
            .interfaceNotFound,
            "\(operation): there is no interface with index \(index) in this network namespace",
            call: SystemCallError(operation, code: ENODEV)
        )
    }

    /// Maps a failed `sp_netlink_route_open` to an error.
    static func openFailed(step: sp_netlink_open_step, errno number: Int32, interface: String) -> SystemError {
        let operation =
            switch step {
            case .socket, .noFailure: "create"
            case .receiveTimeout: "set SO_RCVTIMEO on"
            case .bind: "bind"
            case .localName: "read the port id of"
            }
        let code: Code = number == EPERM || number == EACCES ? .permissionDenied : .openFailed
        let call = SystemCallError(
            "\(operation) the NETLINK_ROUTE socket for the neighbour table of \(interface)",
            code: number
        )
        return SystemError(code, call.description, call: call)
    }

    /// Maps a failed `sp_neighbour_change` to an error.
    static func requestFailed(
        operation: String,
        interface: String,
        stage: sp_netlink_stage,
        errno number: Int32,
        kernelMessage: String
    ) -> SystemError {
        let kernel = kernelMessage.isEmpty ? "" : " (kernel: \(kernelMessage))"
        let code: Code
        var hint = ""
        switch (stage, number) {
        case (.kernel, EPERM), (.kernel, EACCES), (.send, EPERM), (.send, EACCES):
            code = .permissionDenied
            hint = "; changing the neighbour table needs CAP_NET_ADMIN"
        case (.kernel, ENODEV), (.arguments, ENODEV):
            code = .interfaceNotFound
            hint = "; the interface does not exist in this network namespace (any more)"
        case (.receive, EAGAIN), (.receive, EWOULDBLOCK):
            code = .requestFailed
            hint = "; the kernel did not answer within \(NeighbourTable.answerTimeoutMilliseconds) ms"
        default:
            code = .requestFailed
        }
        let stagePrefix =
            switch stage {
            case .send: "send "
            case .receive: "receive the answer to "
            case .kernel, .arguments, .noFailure: ""
            }
        let call = SystemCallError("\(stagePrefix)\(operation) on \(interface)", code: number)
        return SystemError(code, "\(call)\(kernel)\(hint)", call: call)
    }

    static func invalidAddress(operation: String, interface: String, _ problem: String) -> SystemError {
        SystemError(.invalidAddress, "\(operation) on \(interface): \(problem)", call: nil)
    }

    static func closed(operation: String, interface: String) -> SystemError {
        SystemError(.closed, "\(operation) on \(interface): the neighbour table is closed", call: nil)
    }
}
