import CNetSupport
public import NetworkAddresses
import NetworkIO
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The link-layer multicast addresses of the solicited-node groups (`ff02::1:ffXX:XXXX`, on Ethernet
/// `33:33:ff:XX:XX:XX`) of the addresses the proxy takes over on one interface, so that the NIC accepts Neighbour
/// Solicitations for them (PROTOCOL.md section 3.3). The frames themselves are read by the capture; these
/// memberships only open the NIC's multicast filter.
///
/// Memberships are `PACKET_ADD_MEMBERSHIP` (`PACKET_MR_MULTICAST`) on a packet socket bound to no protocol, which
/// therefore receives nothing. They program the NIC's filter exactly as an IPv6 membership would, but the IPv6
/// layer knows nothing of them: its list of joined groups is searched linearly for every IPv6 multicast packet
/// the host sends or receives and for every join, and with one group per held address that search came to be
/// most of what a registration cost the daemon with thousands of hosts held. The kernel keeps link-layer
/// addresses in a tree and charges a packet socket's memberships to no option-memory limit; only the socket's own
/// list is searched linearly at each change, so the groups are spread over ``socketCount`` sockets by their low
/// bits (with 10,000 groups, about 600 each). A Neighbour Solicitation to such a group still reaches the capture (which sees frames
/// before the IPv6 layer) and the IPv6 layer, which drops it as not for this host.
///
/// Without an IPv6 membership the kernel sends no MLD report for the group, and a switch with MLD snooping would
/// forward the solicitations only to the sleeping host's port (and, once its membership times out, to nobody).
/// The core reports the groups itself, from the proxy's link-local address, and answers MLD queries for them
/// (`MulticastListener`).
///
/// ``join(_:)`` and ``leave(_:)`` are idempotent: joining a group already joined and leaving one not joined do
/// nothing and return `false`. Several held addresses can share one solicited-node group (only the low 24 bits
/// count); the caller keeps the set of groups it needs and joins and leaves the differences. The kernel counts
/// link-layer memberships per device, so leaving never takes an address away from the host's own groups or
/// another socket. ``close()`` closes the sockets, which drops every membership.
///
/// The sockets are created by the initialiser in the calling thread's network namespace; the interface index is
/// looked up there on every change. It is `Sendable`: the sockets sit behind a lock, and no method blocks.
public final class MulticastMembership: Sendable {
    /// The index of the interface the groups are joined on.
    public let interfaceIndex: UInt32
    /// The interface's name when the membership was opened (for messages).
    public let interfaceName: String

    private let state: Mutex<State>

    /// How many packet sockets hold the memberships.
    public static let socketCount = 16

    private struct State {
        /// The packet sockets holding the memberships, a group on the one its low bits choose; empty once closed.
        var descriptors: [Int32]
        var groups: Set<IPv6Address> = []
    }

    /// Prepares to join groups on the interface with index `interfaceIndex` in the calling thread's network
    /// namespace, opening the sockets.
    ///
    /// - Throws: ``SystemError`` with code ``SystemError/Code/interfaceNotFound`` if the
    ///   namespace has no such interface (or `interfaceIndex` is 0), ``SystemError/Code/openFailed``
    ///   if a socket cannot be opened.
    public init(interfaceIndex: UInt32) throws {
        guard let name = NetworkInterface.name(ofIndex: interfaceIndex) else {
            throw SystemError.membershipInterfaceNotFound(index: interfaceIndex)
        }
        var descriptors: [Int32] = []
        for _ in 0..<Self.socketCount {
            let descriptor = sp_link_membership_socket()
            guard descriptor >= 0 else {
                for open in descriptors { _ = Glibc.close(open) }
                throw SystemError.openFailed(
                    errno: -descriptor, interface: "\(name) (index \(interfaceIndex))")
            }
            descriptors.append(descriptor)
        }
        self.interfaceIndex = interfaceIndex
        self.interfaceName = name
        self.state = Mutex(State(descriptors: descriptors))
    }

    deinit {
        close()
    }

    /// The groups currently joined through this membership.
    public var joined: Set<IPv6Address> {
        state.withLock { $0.groups }
    }

    /// Joins `group` on the interface (its link-layer address), unless it is joined already.
    ///
    /// - Returns: `true` if the group was joined now, `false` if it had been joined before.
    /// - Throws: ``SystemError`` with code ``SystemError/Code/invalidGroup`` if `group`
    ///   is not a multicast address, ``SystemError/Code/interfaceNotFound`` if the interface is gone,
    ///   ``SystemError/Code/closed`` after ``close()``, ``SystemError/Code/joinFailed`` otherwise.
    @discardableResult
    public func join(_ group: IPv6Address) throws -> Bool {
        let interface = describeInterface()
        guard group.isMulticast else {
            throw SystemError.invalidGroup(group, interface: interface)
        }
        return try change(group, join: true, interface: interface)
    }

    /// Leaves `group` on the interface, if it was joined through this membership.
    ///
    /// - Returns: `true` if the group was left now, `false` if it had not been joined.
    /// - Throws: ``SystemError`` with code ``SystemError/Code/closed`` after
    ///   ``close()``, ``SystemError/Code/leaveFailed`` if the kernel refuses (the group then stays
    ///   in ``joined``).
    @discardableResult
    public func leave(_ group: IPv6Address) throws -> Bool {
        try change(group, join: false, interface: describeInterface())
    }

    private func change(_ group: IPv6Address, join: Bool, interface: String) throws -> Bool {
        let interfaceIndex = interfaceIndex
        return try state.withLock { state throws(SystemError) -> Bool in
            guard !state.descriptors.isEmpty else {
                throw SystemError.membershipClosed(
                    operation: "\(join ? "join" : "leave") \(group)", interface: interface)
            }
            guard state.groups.contains(group) != join else { return false }
            let mac = MACAddress(ipv6Multicast: group)
            let descriptor = state.descriptors[Int(group.low % UInt64(state.descriptors.count))]
            let result = mac.array.withUnsafeBufferPointer { bytes in
                sp_link_membership_change(descriptor, join ? 1 : 0, bytes.baseAddress, interfaceIndex)
            }
            // On a drop, EADDRNOTAVAIL / ENOENT: the kernel holds no such membership; it is gone either way.
            guard result == 0 || (!join && (result == -EADDRNOTAVAIL || result == -ENOENT)) else {
                throw SystemError.changeFailed(join: join, group: group, interface: interface, errno: -result)
            }
            if join {
                state.groups.insert(group)
            } else {
                state.groups.remove(group)
            }
            return true
        }
    }

    /// Leaves every group by closing the sockets. Safe to call more than once; later joins and leaves fail with
    /// ``SystemError/Code/closed``.
    public func close() {
        state.withLock { state in
            for descriptor in state.descriptors { _ = Glibc.close(descriptor) }
            state.descriptors = []
            state.groups = []
        }
    }

    /// `eth0 (index 2)`.
    private func describeInterface() -> String {
        "\(interfaceName) (index \(interfaceIndex))"
    }
}

/// The errors of a ``MulticastMembership``: each names the operation, the group, the interface and the system's
/// reason, e.g. `join ff02::1:ff00:1234 (PACKET_ADD_MEMBERSHIP 33:33:ff:00:12:34) on eth0 (index 2): No such
/// device; the interface does not exist in this network namespace (any more)`.
extension SystemError {
    static func membershipInterfaceNotFound(index: UInt32) -> SystemError {
        let operation = "open multicast memberships on interface index \(index)"
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
        let call = SystemCallError("create a packet socket for multicast memberships on \(interface)", code: number)
        return SystemError(.openFailed, call.description, call: call)
    }

    /// Maps a failed `PACKET_ADD_MEMBERSHIP` / `PACKET_DROP_MEMBERSHIP` to an error.
    static func changeFailed(join: Bool, group: IPv6Address, interface: String, errno number: Int32)
        -> SystemError
    {
        let mac = MACAddress(ipv6Multicast: group)
        let operation =
            join
            ? "join \(group) (PACKET_ADD_MEMBERSHIP \(mac))" : "leave \(group) (PACKET_DROP_MEMBERSHIP \(mac))"
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

    static func membershipClosed(operation: String, interface: String) -> SystemError {
        SystemError(.closed, "\(operation) on \(interface): the membership is closed", call: nil)
    }
}
