public import NetworkAddresses

/// How loud a log line is. The shell maps it to its logger.
public struct LogLevel: Hashable, Sendable, Comparable, CustomStringConvertible {
    private let rank: Int
    private let name: String

    public static let debug = LogLevel(rank: 0, name: "debug")
    public static let info = LogLevel(rank: 1, name: "info")
    public static let notice = LogLevel(rank: 2, name: "notice")
    public static let warning = LogLevel(rank: 3, name: "warning")
    public static let error = LogLevel(rank: 4, name: "error")

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
    public var description: String { name }
}

/// A reply to a registration: sent from the address and port the request was sent to, on its interface.
public struct RegistrationReply: Hashable, Sendable {
    public var interface: InterfaceName
    public var bytes: [UInt8]
    public var destination: Endpoint
    /// The IPv6 scope of a link-local destination (the interface index), 0 otherwise.
    public var destinationScopeID: UInt32
    public var source: Endpoint

    public init(
        interface: InterfaceName, bytes: [UInt8], destination: Endpoint, destinationScopeID: UInt32, source: Endpoint
    ) {
        self.interface = interface
        self.bytes = bytes
        self.destination = destination
        self.destinationScopeID = destinationScopeID
        self.source = source
    }
}

/// What the core asks its shell to do, as a list per input. The shell (`ActionPerformer`) carries a list out in
/// three passes, and the core relies on nothing more:
///
/// 1. Every action that is neither a store change nor a reply (log lines, mDNS, frames, the capture's address
///    list, multicast groups, neighbour entries), in list order, at once: the network follows the core, which
///    has already changed, and a wake never waits for the disk. Of several address lists for one interface, only
///    the last is applied (each is complete).
/// 2. All the store changes of the list, in list order, committed in one transaction.
/// 3. Only if that commit succeeded (or there was nothing to commit): the notices of the stored events, then the
///    replies, in list order. A reply therefore never goes out for a registration the store does not hold; the
///    client retransmits.
///
/// So the position of a store change or a reply relative to the other actions does not matter; their order
/// among themselves does.
public enum Action: Hashable, Sendable {
    /// Make the lease store mirror a change.
    case store(StoreChange)
    /// Send a registration reply.
    case reply(RegistrationReply)
    /// Send an mDNS message.
    case sendMDNS(MDNSTransmission)
    /// Write a log line.
    case log(LogLevel, String)
    /// Put a frame on the wire (ARP, Neighbour Discovery, magic packets), with our MAC as its source.
    case injectFrame(InterfaceName, [UInt8])
    /// The held addresses on an interface changed so that the capture is to watch these prefixes now (each held
    /// address alone while few, folded into prefixes when many; see `WatchedPrefixes`).
    case watchDestinations(InterfaceName, [Link.Prefix])
    /// Join or leave an IPv6 multicast group (the solicited-node group of held addresses). The core counts the
    /// addresses sharing a group: a join comes with the first, a leave with the last.
    case joinMulticastGroup(InterfaceName, IPv6Address)
    case leaveMulticastGroup(InterfaceName, IPv6Address)
    /// Point our own host's neighbour entry for a held address at the sleeping host's real MAC, or drop it.
    case setNeighbour(InterfaceName, IPAddress, MACAddress)
    case removeNeighbour(InterfaceName, IPAddress)
    /// The declared hosts on an interface changed: the capture must also see every frame from these MACs (all of
    /// them now), to know when each is awake.
    case watchSources(InterfaceName, [MACAddress])
    /// A wake started: the magic packets of its first round are the actions just before this one. Nothing goes on
    /// the wire; the shell counts the wake under its trigger and measures how long after the input that caused it
    /// (the captured frame, the mDNS packet, the request) the magic packets went out.
    case wakeStarted(InterfaceName, WakeTrigger)
    /// An interface removed from the configuration has nothing left to serve (the wakes of its hosts are over):
    /// the shell closes it, after the actions before this one (the last goodbyes) went out on it.
    case stopServing(InterfaceName)
}
