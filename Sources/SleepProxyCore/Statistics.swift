/// What started a wake, in a few fixed kinds: the label of the daemon's wake counter. The wake event's detail says
/// the rest (source, port, service).
public struct WakeTrigger: Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
        case tcpSYN = "tcp-syn"
        case ssh
        case udp
        case magicPacket = "magic-packet"
        case keepaliveRST = "keepalive-rst"
        case keepaliveFIN = "keepalive-fin"
        case keepaliveData = "keepalive-data"
        case addressConflict = "address-conflict"
        case nameConflict = "name-conflict"
        case leaseEnd = "lease-end"
        case manual
        case unserved
        case shutdown
    }
    private let code: Code

    /// A TCP SYN to a port of one of the host's `_tcp` services (or a wake port the configuration gives it).
    public static let tcpSYN = WakeTrigger(code: .tcpSYN)
    /// Any segment but RST or a lone FIN to port 22 of a host offering ssh (a reconnecting client).
    public static let ssh = WakeTrigger(code: .ssh)
    /// UDP to a port of one of its `_udp` services, Apple Remote Desktop's wake, IPsec on UDP 4500.
    public static let udp = WakeTrigger(code: .udp)
    /// A Wake-on-LAN magic packet for the host sent to its held address.
    public static let magicPacket = WakeTrigger(code: .magicPacket)
    /// RST, FIN or new data from the peer of a TCP connection kept alive for the host.
    public static let keepaliveRST = WakeTrigger(code: .keepaliveRST)
    public static let keepaliveFIN = WakeTrigger(code: .keepaliveFIN)
    public static let keepaliveData = WakeTrigger(code: .keepaliveData)
    /// Another host kept using one of its addresses.
    public static let addressConflict = WakeTrigger(code: .addressConflict)
    /// Another host kept claiming one of its names.
    public static let nameConflict = WakeTrigger(code: .nameConflict)
    /// Its lease ended.
    public static let leaseEnd = WakeTrigger(code: .leaseEnd)
    /// The administrator asked (`sleepproxyctl wake`).
    public static let manual = WakeTrigger(code: .manual)
    /// Its interface is no longer served (removed from the configuration): woken to find another proxy.
    public static let unserved = WakeTrigger(code: .unserved)
    /// The proxy is stopping and wakes every held host (`wake_all_on_exit`).
    public static let shutdown = WakeTrigger(code: .shutdown)

    /// Every trigger, for documentation and for metrics that start at zero.
    public static let all: [WakeTrigger] = [
        .tcpSYN, .ssh, .udp, .magicPacket, .keepaliveRST, .keepaliveFIN, .keepaliveData, .addressConflict,
        .nameConflict, .leaseEnd, .manual, .unserved, .shutdown,
    ]

    /// A stable identifier (`tcp-syn`), the label value in metrics.
    public var identifier: String { code.rawValue }

    private init(code: Code) { self.code = code }

    public var description: String { identifier }
}

/// Why the proxy let go of a host, in a few fixed kinds: the label of the daemon's release counter.
public struct ReleaseReason: Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
        case returned
        case forgotten
        case unserved
        case unanswered
        case expired
        case undeclared
        case addressInUse = "address-in-use"
        case registered
    }
    private let code: Code

    /// The host is back: its OWNER option, a probe or an announcement of its own names, a frame from a declared
    /// host's MAC.
    public static let returned = ReleaseReason(code: .returned)
    /// The administrator asked (`sleepproxyctl forget`).
    public static let forgotten = ReleaseReason(code: .forgotten)
    /// Its interface is no longer served.
    public static let unserved = ReleaseReason(code: .unserved)
    /// A wake went unanswered: its records were dropped.
    public static let unanswered = ReleaseReason(code: .unanswered)
    /// The lease ended and the wake policy kept the host from being woken: its records were dropped.
    public static let expired = ReleaseReason(code: .expired)
    /// A declared host's declaration changed or went on reload.
    public static let undeclared = ReleaseReason(code: .undeclared)
    /// Another machine answered for a declared host's address: the declaration is stale.
    public static let addressInUse = ReleaseReason(code: .addressInUse)
    /// A declared host registered itself: its registration holds it from then on.
    public static let registered = ReleaseReason(code: .registered)

    /// Every reason, for documentation and for metrics that start at zero.
    public static let all: [ReleaseReason] = [
        .returned, .forgotten, .unserved, .unanswered, .expired, .undeclared, .addressInUse, .registered,
    ]

    /// A stable identifier (`returned`), the label value in metrics.
    public var identifier: String { code.rawValue }

    private init(code: Code) { self.code = code }

    public var description: String { identifier }
}

/// What the core has done since it was made, counted as it happens: the daemon's metrics read it. Counters only
/// grow; a reload keeps them (the core is the same), a restart starts them at zero.
public struct CoreStatistics: Hashable, Sendable {
    /// Registration datagrams accepted (a first registration, a renewal, a replacement, a retransmission).
    public internal(set) var registrationsAccepted = 0
    /// Registration datagrams refused, by reason: each one, also those the event history leaves out.
    public internal(set) var registrationsRefused: [RefusalReason: Int] = [:]
    /// Hosts let go, by reason.
    public internal(set) var releases: [ReleaseReason: Int] = [:]
    /// Leases that ran out (the host is then woken, or dropped if the wake policy keeps it asleep).
    public internal(set) var leaseExpiries = 0
    /// Wakes started, by trigger: one per wake, however many rounds of magic packets it takes.
    public internal(set) var wakes: [WakeTrigger: Int] = [:]
    /// Magic-packet frames sent (the 0x0842 frame and the UDP copy, unicast and broadcast, count one each).
    public internal(set) var magicPackets = 0
    /// mDNS queries received with at least one question.
    public internal(set) var queriesReceived = 0
    /// Queries left unanswered because their source (or its MAC) was over `CoreConfiguration.queryRate`.
    public internal(set) var queriesRateLimited = 0
    /// Messages answering queries, sent to an mDNS group.
    public internal(set) var answersMulticast = 0
    /// Messages answering queries, sent to the querier (QU questions, direct and legacy queries).
    public internal(set) var answersUnicast = 0
    /// Questions answered from the answer cache, and those whose answer was worked out from the held records.
    public internal(set) var answerCacheHits = 0
    public internal(set) var answerCacheMisses = 0

    public init() {}
}

/// What one interface holds now: the daemon's gauges.
public struct HeldCounts: Hashable, Sendable {
    /// Hosts held (registered or declared), being woken included.
    public var hosts = 0
    /// Their records.
    public var records = 0
    /// Addresses the proxy answers ARP or Neighbour Discovery for (claimed, not still probing).
    public var addresses = 0
    /// TCP connections kept alive for them.
    public var keepalives = 0

    public init(hosts: Int = 0, records: Int = 0, addresses: Int = 0, keepalives: Int = 0) {
        self.hosts = hosts
        self.records = records
        self.addresses = addresses
        self.keepalives = keepalives
    }
}

extension SleepProxyCore {
    /// What each served interface holds now (zeros for one that holds nothing). One pass over the held hosts.
    public var heldCounts: [InterfaceName: HeldCounts] {
        var counts: [InterfaceName: HeldCounts] = [:]
        for name in links.keys { counts[name] = HeldCounts() }
        for host in hosts.values {
            var count = counts[host.key.interface] ?? HeldCounts()
            count.hosts += 1
            count.records += host.owner.records.count
            if !host.isWakingWhole {
                count.addresses += host.takeovers.reduce(0) { $0 + ($1.takeover.isClaimed ? 1 : 0) }
            }
            count.keepalives += host.keepalives.count
            counts[host.key.interface] = count
        }
        return counts
    }
}
