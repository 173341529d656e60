import CNetSupport
public import NetworkAddresses
import NetworkIO
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// IPv6 multicast groups this host has joined on one interface for the sleep proxy: the solicited-node groups
/// (`ff02::1:ffXX:XXXX`) of the addresses it takes over, so that the NIC accepts Neighbour Solicitations for them
/// (PROTOCOL.md section 3.3). The frames themselves are read by the capture; these memberships only open the door.
///
/// Memberships are `IPV6_JOIN_GROUP` on UDP sockets that are never bound and so never receive anything, rather
/// than `PACKET_ADD_MEMBERSHIP` (`PACKET_MR_MULTICAST`, `33:33:ff:XX:XX:XX`) on a packet socket. Both program the
/// NIC's multicast filter, but only an IPv6 membership makes the kernel send MLD reports for the group and answer
/// MLD queries: a switch with MLD snooping then forwards the solicitations to the proxy's port. With a link-layer
/// membership alone such a switch keeps sending them to the sleeping host's port only, and after the host's own
/// membership times out (about 260 s) to nobody. The kernel counts memberships per interface, so leaving never
/// takes a group away from the host's own addresses, other sockets or another ``MulticastMembership``.
///
/// Scaling to thousands of groups: IPv6 has no per-socket limit on the number of groups (unlike IPv4's
/// `net.ipv4.igmp_max_memberships`, 20 by default), and `net.ipv6.mld_max_msf` limits only the source filters of
/// one group (64), which any-source joins do not use. What does limit a socket is its option memory: each
/// membership is charged to the socket (56 bytes on x86-64 Linux 6.18) up to `net.core.optmem_max`, and the next
/// join fails with `ENOMEM`. With the old default of 20480 bytes that is 364 groups per socket; with 131072 (the
/// default on recent kernels, where the setting is per network namespace) 2340. So a join that fails with
/// `ENOMEM` (or `ENOBUFS`) moves on to another socket, opening one when all are full; a socket whose last group
/// is left is closed (the first one stays). Only if a fresh socket cannot take even one group does ``join(_:)``
/// fail, with ``SystemError/Code/limitReached``. Joining and leaving cost time linear in the
/// socket's and the interface's number of groups (the kernel walks both lists); 1,000 groups take milliseconds.
///
/// ``join(_:)`` and ``leave(_:)`` are idempotent: joining a group already joined and leaving one not joined do
/// nothing and return `false`. Several held addresses can share one solicited-node group (only the low 24 bits
/// count); the caller keeps the set of groups it needs and joins and leaves the differences. ``close()`` closes
/// every socket, which leaves every group.
///
/// The sockets are created on the calling thread (the first by the initialiser, the others by ``join(_:)``) and
/// belong to that thread's network namespace: join from the namespace the membership was opened in. A join that
/// needs a new socket on a thread in another namespace fails with ``SystemError/Code/wrongNamespace``
/// rather than join the group on some other namespace's interface. It is `Sendable`: the sockets sit behind a
/// lock, and no method blocks.
public final class MulticastMembership: Sendable {
    /// The index of the interface the groups are joined on.
    public let interfaceIndex: UInt32
    /// The interface's name when the membership was opened (for messages).
    public let interfaceName: String
    /// The device and inode of the network namespace the membership was opened in; nil if unknown.
    private let namespace: NamespaceIdentity?

    private let state: Mutex<State>

    private struct State {
        /// The holder sockets, the first one never closed before ``close()``; empty once closed.
        var holders: [Holder]
        /// Each joined group and the descriptor of the socket that holds it.
        var groups: [IPv6Address: Int32]
        var isClosed = false
    }

    private struct Holder {
        var descriptor: Int32
        /// How many groups this socket holds.
        var count: Int
        /// Whether the kernel refused this socket another group for lack of option memory.
        var isFull: Bool
    }

    /// Prepares to join groups on the interface with index `interfaceIndex` in the calling thread's network
    /// namespace, opening the first socket.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/interfaceNotFound`` if the
    ///   namespace has no such interface (or `interfaceIndex` is 0), ``SystemError/Code/openFailed``
    ///   if the socket cannot be opened.
    public init(interfaceIndex: UInt32) throws {
        guard let name = NetworkInterface.name(ofIndex: interfaceIndex) else {
            throw SystemError.membershipInterfaceNotFound(index: interfaceIndex)
        }
        let descriptor = sp_ipv6_membership_socket()
        guard descriptor >= 0 else {
            throw SystemError.openFailed(
                errno: -descriptor, interface: "\(name) (index \(interfaceIndex))")
        }
        self.interfaceIndex = interfaceIndex
        self.interfaceName = name
        self.namespace = NamespaceIdentity.current()
        self.state = Mutex(State(holders: [Holder(descriptor: descriptor, count: 0, isFull: false)], groups: [:]))
    }

    deinit {
        close()
    }

    /// The groups currently joined through this membership.
    public var joined: Set<IPv6Address> {
        state.withLock { Set($0.groups.keys) }
    }

    /// How many sockets hold the memberships: 1, more once a socket's option memory is full; 0 once closed.
    public var socketCount: Int {
        state.withLock { $0.holders.count }
    }

    /// Joins `group` on the interface, unless it is joined already.
    ///
    /// - Returns: `true` if the group was joined now, `false` if it had been joined before.
    /// - Throws: ``SystemError`` with code ``SystemError/Code/invalidGroup`` if `group`
    ///   is not a multicast address, ``SystemError/Code/interfaceNotFound`` if the interface is gone,
    ///   ``SystemError/Code/limitReached`` if even a fresh socket cannot take the group,
    ///   ``SystemError/Code/wrongNamespace`` if a new socket is needed and the calling thread is in
    ///   another network namespace,
    ///   ``SystemError/Code/closed`` after ``close()``, ``SystemError/Code/joinFailed``
    ///   otherwise.
    @discardableResult
    public func join(_ group: IPv6Address) throws -> Bool {
        let interface = describeInterface()
        let interfaceIndex = interfaceIndex
        guard group.isMulticast else {
            throw SystemError.invalidGroup(group, interface: interface)
        }
        return try state.withLock { state throws(SystemError) -> Bool in
            guard !state.isClosed else {
                throw SystemError.membershipClosed(operation: "join \(group)", interface: interface)
            }
            guard state.groups[group] == nil else { return false }
            for index in state.holders.indices where !state.holders[index].isFull {
                let descriptor = state.holders[index].descriptor
                let result = Self.change(descriptor, join: true, group: group, interfaceIndex: interfaceIndex)
                if result == 0 || result == -EADDRINUSE {
                    state.holders[index].count += 1
                    state.groups[group] = descriptor
                    return true
                }
                guard Self.isOutOfOptionMemory(-result) else {
                    throw SystemError.changeFailed(
                        join: true, group: group, interface: interface, errno: -result)
                }
                state.holders[index].isFull = true
            }
            if let namespace, NamespaceIdentity.current() != namespace {
                throw SystemError.wrongNamespace(group: group, interface: interface)
            }
            let descriptor = sp_ipv6_membership_socket()
            guard descriptor >= 0 else {
                throw SystemError.openFailed(errno: -descriptor, interface: interface)
            }
            let result = Self.change(descriptor, join: true, group: group, interfaceIndex: interfaceIndex)
            guard result == 0 else {
                _ = Glibc.close(descriptor)
                if Self.isOutOfOptionMemory(-result) {
                    throw SystemError.limitReached(
                        group: group,
                        interface: interface,
                        errno: -result,
                        joined: state.groups.count,
                        sockets: state.holders.count
                    )
                }
                throw SystemError.changeFailed(
                    join: true, group: group, interface: interface, errno: -result)
            }
            state.holders.append(Holder(descriptor: descriptor, count: 1, isFull: false))
            state.groups[group] = descriptor
            return true
        }
    }

    /// Leaves `group` on the interface, if it was joined through this membership.
    ///
    /// - Returns: `true` if the group was left now, `false` if it had not been joined.
    /// - Throws: ``SystemError`` with code ``SystemError/Code/closed`` after
    ///   ``close()``, ``SystemError/Code/leaveFailed`` if the kernel refuses (the group then stays
    ///   in ``joined``).
    @discardableResult
    public func leave(_ group: IPv6Address) throws -> Bool {
        let interface = describeInterface()
        let interfaceIndex = interfaceIndex
        return try state.withLock { state throws(SystemError) -> Bool in
            guard !state.isClosed else {
                throw SystemError.membershipClosed(operation: "leave \(group)", interface: interface)
            }
            guard let descriptor = state.groups[group] else { return false }
            let result = Self.change(descriptor, join: false, group: group, interfaceIndex: interfaceIndex)
            // EADDRNOTAVAIL: the kernel holds no such membership on the socket; it is gone either way.
            guard result == 0 || result == -EADDRNOTAVAIL else {
                throw SystemError.changeFailed(
                    join: false, group: group, interface: interface, errno: -result)
            }
            state.groups[group] = nil
            if let index = state.holders.firstIndex(where: { $0.descriptor == descriptor }) {
                state.holders[index].count -= 1
                state.holders[index].isFull = false
                if state.holders[index].count == 0 && index > 0 {
                    _ = Glibc.close(descriptor)
                    state.holders.remove(at: index)
                }
            }
            return true
        }
    }

    /// Leaves every group by closing every socket. Safe to call more than once; later joins and leaves fail with
    /// ``SystemError/Code/closed``.
    public func close() {
        state.withLock { state in
            guard !state.isClosed else { return }
            for holder in state.holders {
                _ = Glibc.close(holder.descriptor)
            }
            state.holders = []
            state.groups = [:]
            state.isClosed = true
        }
    }

    /// `eth0 (index 2)`.
    private func describeInterface() -> String {
        "\(interfaceName) (index \(interfaceIndex))"
    }

    private static func change(_ descriptor: Int32, join: Bool, group: IPv6Address, interfaceIndex: UInt32) -> Int32 {
        group.bytes.withUnsafeBufferPointer { bytes in
            sp_ipv6_membership_change(descriptor, join ? 1 : 0, bytes.baseAddress, interfaceIndex)
        }
    }

    /// `sock_kmalloc` of the membership failed: the socket's option memory (`net.core.optmem_max`) is used up.
    private static func isOutOfOptionMemory(_ number: Int32) -> Bool {
        number == ENOMEM || number == ENOBUFS
    }
}

/// Identifies a network namespace: the device and inode of `/proc/thread-self/ns/net`.
private struct NamespaceIdentity: Sendable, Hashable {
    var device: UInt64
    var inode: UInt64

    /// The calling thread's network namespace; nil if `/proc` cannot tell.
    static func current() -> NamespaceIdentity? {
        var status = stat()
        guard stat("/proc/thread-self/ns/net", &status) == 0 else { return nil }
        return NamespaceIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }
}

/// The errors of a ``MulticastMembership``: each names the operation, the group, the interface and the system's
/// reason, e.g. `join ff02::1:ff00:1234 (IPV6_JOIN_GROUP) on eth0 (index 2): No such device; the interface does
/// not exist in this network namespace (any more)`.
extension SystemError {
    static func membershipInterfaceNotFound(index: UInt32) -> SystemError {
        let operation = "open IPv6 multicast memberships on interface index \(index)"
        return SystemError(
            .interfaceNotFound,
            "\(operation): there is no interface with index \(index) in this network namespace",
            call: SystemCallError(operation, code: ENODEV)
        )
    }

    static func invalidGroup(_ group: IPv6Address, interface: String) -> SystemError {
        SystemError(
            .invalidGroup,
            "join \(group) on \(interface): \(group) is not a multicast address",
            call: nil
        )
    }

    static func openFailed(errno number: Int32, interface: String) -> SystemError {
        let call = SystemCallError("create a UDP socket for IPv6 multicast memberships on \(interface)", code: number)
        return SystemError(.openFailed, call.description, call: call)
    }

    /// Maps a failed `IPV6_JOIN_GROUP` / `IPV6_LEAVE_GROUP` to an error.
    static func changeFailed(join: Bool, group: IPv6Address, interface: String, errno number: Int32)
        -> SystemError
    {
        let operation = join ? "join \(group) (IPV6_JOIN_GROUP)" : "leave \(group) (IPV6_LEAVE_GROUP)"
        let code: Code
        var hint = ""
        switch number {
        case ENODEV, ENXIO:
            code = .interfaceNotFound
            hint = "; the interface does not exist in this network namespace (any more)"
        default:
            code = join ? .joinFailed : .leaveFailed
        }
        let call = SystemCallError("\(operation) on \(interface)", code: number)
        return SystemError(code, "\(call)\(hint)", call: call)
    }

    static func limitReached(group: IPv6Address, interface: String, errno number: Int32, joined: Int, sockets: Int)
        -> SystemError
    {
        let call = SystemCallError("join \(group) (IPV6_JOIN_GROUP) on \(interface)", code: number)
        return SystemError(
            .limitReached,
            "\(call) even on a fresh socket, with \(joined) groups joined on \(sockets) sockets; the kernel is out "
                + "of memory, or net.core.optmem_max is too small for one membership",
            call: call
        )
    }

    static func wrongNamespace(group: IPv6Address, interface: String) -> SystemError {
        SystemError(
            .wrongNamespace,
            "join \(group) (IPV6_JOIN_GROUP) on \(interface): the sockets in use are full and a new one would be "
                + "opened in the calling thread's network namespace, which is not the one the membership was "
                + "opened in",
            call: nil
        )
    }

    static func membershipClosed(operation: String, interface: String) -> SystemError {
        SystemError(.closed, "\(operation) on \(interface): the membership is closed", call: nil)
    }
}
