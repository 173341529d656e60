public import NetworkAddresses

/// The limits and policies of the core. Every value has a default that serves a home network; the config file's
/// keys for them take these defaults (`Schema` in SleepProxyDaemon).
public struct CoreConfiguration: Hashable, Sendable {
    /// Apple's sleep proxy grants at most 24 hours (PROTOCOL.md section 2.6); so do we, and never more.
    public static let leaseCeiling: UInt32 = 86_400

    /// The longest lease granted, in seconds; requests are clamped to it. At most `leaseCeiling`.
    public var maximumLease: UInt32 {
        didSet { maximumLease = min(max(maximumLease, 1), Self.leaseCeiling) }
    }
    /// Records one owner may hold. A Mac with every sharing service on registers well under a hundred.
    public var maximumRecordsPerOwner: Int
    /// Records all owners together may hold. Apple's limit is 10,000 ("400 machines × 25 records").
    public var maximumRecordsTotal: Int
    /// Which traffic wakes which host, beyond the protocol's rules.
    public var wakePolicy: WakePolicy
    /// Keep the TCP connections of sleeping hosts alive from their keepalive records (PROTOCOL.md section 3.8).
    /// Off, those records are held like any other.
    public var keepaliveOffload: Bool
    /// The largest registration datagram accepted. Macs send at most about 1,440 bytes a datagram; 9,000 leaves
    /// room for jumbo frames.
    public var maximumRegistrationBytes: Int = 9_000
    /// Hosts one interface may hold.
    public var maximumHostsPerInterface: Int = 1_000
    /// Registration datagrams one source address may send: a sustained rate and a burst. A Mac sends a few per
    /// registration; a proxy handing its hosts over sends a few per host, hence the burst.
    public var registrationRate = Rate(perSecond: 50, burst: 500)
    /// mDNS queries one source address may have answered: a sustained rate and a burst. Real queriers ask a few
    /// a second (a browser starting up, a few dozen at once); beyond, queries from that source go unanswered.
    public var queryRate = Rate(perSecond: 500, burst: 200)
    /// What one sending MAC may have answered from all its source addresses together: four times `queryRate`,
    /// as a host asks from its IPv4, link-local, ULA and global addresses. A host inventing source addresses
    /// gets no more than this.
    public var queryRatePerMAC: Rate {
        Rate(perSecond: queryRate.perSecond * 4, burst: queryRate.burst * 4)
    }
    /// Questions of one mDNS query that are answered; the rest are ignored. Real queriers ask a handful.
    public var maximumQuestionsPerQuery: Int = 64
    /// Multicast responses waiting for their moment; query answers beyond it are dropped (announcements are not).
    public var maximumPendingResponses: Int = 4_096
    /// How a held address is claimed once its probes went unanswered.
    public var addressClaim: AddressClaim = .announce
    /// Hosts that never register, watched on the wire and held while they sleep (`Declared.swift`).
    public var declaredHosts: [DeclaredHost] = []

    public init(
        maximumLease: UInt32 = Self.leaseCeiling, maximumRecordsPerOwner: Int = 1_000,
        maximumRecordsTotal: Int = 10_000,
        wakePolicy: WakePolicy = WakePolicy(), keepaliveOffload: Bool = true
    ) {
        self.maximumLease = min(max(maximumLease, 1), Self.leaseCeiling)
        self.maximumRecordsPerOwner = maximumRecordsPerOwner
        self.maximumRecordsTotal = maximumRecordsTotal
        self.wakePolicy = wakePolicy
        self.keepaliveOffload = keepaliveOffload
    }
}

/// How the proxy claims a sleeping host's address.
public enum AddressClaim: String, Hashable, Sendable, CaseIterable {
    /// Four gratuitous ARPs or unsolicited Neighbour Advertisements, as Apple's proxy sends (PROTOCOL.md section
    /// 3.2): the link's caches point at the proxy at once.
    case announce
    /// Nothing sent: ARP requests and Neighbour Solicitations for the address are answered when they come. For
    /// networks whose monitoring flags a MAC that announces another host's address; traffic reaches the proxy
    /// only once a neighbour's cache entry for the host has gone stale and it asks again (a minute or so).
    case lazy
}

/// A token bucket's parameters: `perSecond` sustained, up to `burst` at once.
public struct Rate: Hashable, Sendable {
    public var perSecond: Double
    public var burst: Double

    public init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond
        self.burst = burst
    }
}

/// A token bucket: one token per event, refilled at the rate's pace up to its burst.
struct TokenBucket: Hashable, Sendable {
    var tokens: Double
    var updated: UnixTime

    init(rate: Rate, now: UnixTime) {
        tokens = rate.burst
        updated = now
    }

    /// Takes a token if there is one.
    mutating func take(_ rate: Rate, now: UnixTime) -> Bool {
        refill(rate, now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    mutating func refill(_ rate: Rate, now: UnixTime) {
        let elapsed = Double((now - updated).components.seconds) + Double((now - updated).components.attoseconds) / 1e18
        if elapsed > 0 { tokens = min(rate.burst, tokens + elapsed * rate.perSecond) }
        updated = max(updated, now)
    }

    /// Full again: nothing to remember about the source.
    func isFull(_ rate: Rate, now: UnixTime) -> Bool {
        var copy = self
        copy.refill(rate, now: now)
        return copy.tokens >= rate.burst
    }
}

/// What the core knows of an interface it serves: its addresses and their prefixes, to decide what is on-link.
public struct Link: Hashable, Sendable {
    public struct Prefix: Hashable, Sendable, CustomStringConvertible {
        public var address: IPAddress
        public var length: Int

        public init(address: IPAddress, length: Int) {
            self.address = address
            self.length = length
        }

        public var description: String { "\(address)/\(length)" }
    }

    public var name: InterfaceName
    public var macAddress: MACAddress
    public var prefixes: [Prefix]

    public init(name: InterfaceName, macAddress: MACAddress, prefixes: [Prefix]) {
        self.name = name
        self.macAddress = macAddress
        self.prefixes = prefixes
    }

    /// Whether `address` is a neighbour on this link: inside one of its prefixes, or link-local (IPv6 `fe80::/10`,
    /// which arrives scoped to this interface, and IPv4 `169.254/16`).
    public func isOnLink(_ address: IPAddress) -> Bool {
        switch address {
        case .v6(let v6) where v6.isLinkLocal: return true
        case .v4(let v4) where v4.isLinkLocal: return true
        default: return prefixes.contains { address.sharesPrefix(with: $0.address, length: $0.length) }
        }
    }
}

/// What the administrator decides about wakes, beyond the protocol's own rules (PROTOCOL.md section 3.5).
/// Every decision the policy makes is recorded in the event history.
public struct WakePolicy: Hashable, Sendable {
    /// A held host as the configuration names it: by MAC (its OWNER primary or wake MAC) or by host name (`imac`
    /// or `imac.local`, compared ignoring case).
    public struct HostMatch: Hashable, Sendable, CustomStringConvertible {
        private enum Form: Hashable, Sendable {
            case mac(MACAddress)
            /// One label or more, lower case, without a trailing `.local`.
            case name(String)
        }
        private let form: Form

        public static func mac(_ mac: MACAddress) -> HostMatch { HostMatch(form: .mac(mac)) }

        /// A host name; `.local` and a trailing dot are optional. Nil for an empty name.
        public static func name(_ name: String) -> HostMatch? {
            guard let folded = Self.fold(name) else { return nil }
            return HostMatch(form: .name(folded))
        }

        /// `aa:bb:cc:dd:ee:ff` (or with dashes) as a MAC, anything else as a host name.
        public init?(parsing text: String) {
            // The MAC is looked for in the folded text too, so that `description` (which is folded) reads back as
            // the same match: `aa:bb:cc:dd:ee:ff.local` is that MAC, not a host name.
            if let mac = MACAddress(text) ?? Self.fold(text).flatMap({ MACAddress($0) }) {
                form = .mac(mac)
            } else if let match = Self.name(text) {
                self = match
            } else {
                return nil
            }
        }

        private init(form: Form) { self.form = form }

        /// Lower case, without trailing dots or `.local`. Folding twice changes nothing (`x.local.local` and
        /// `x..` are `x`), so that `description` reads back as the same match.
        static func fold(_ name: String) -> String? {
            var text = name.lowercased()
            while text.hasSuffix(".") || text.hasSuffix(".local") {
                text.removeLast(text.hasSuffix(".") ? 1 : ".local".count)
            }
            return text.isEmpty ? nil : text
        }

        /// Whether `owner` is the host this names: by MAC, by one of its host names, or, for a declared host, by
        /// the name of its table (`nas` for `[hosts.nas]`, `declaredName`), which logs and events use.
        public func matches(_ owner: Owner, declaredName: String? = nil) -> Bool {
            switch form {
            case .mac(let mac): return owner.key.primaryMAC == mac || owner.wakeMAC == mac
            case .name(let name):
                return owner.hostNames.contains { Self.fold($0) == name }
                    || declaredName.flatMap(Self.fold) == name
            }
        }

        /// Whether this names the declared host `host` (by MAC, table name or host name): a policy entry that
        /// names none of them is worth a warning, though a host may still register under that name later.
        public func names(_ host: DeclaredHost) -> Bool {
            switch form {
            case .mac(let mac): return host.mac == mac
            case .name(let name):
                return Self.fold(host.name) == name || host.hostName.flatMap(Self.fold) == name
            }
        }

        /// Whether this is a MAC (which may name a host that registers), not a name.
        public var isMAC: Bool {
            if case .mac = form { true } else { false }
        }

        public var description: String {
            switch form {
            case .mac(let mac): mac.description
            case .name(let name): name
            }
        }
    }

    /// A port that wakes a host although it registered no service there.
    public struct Port: Hashable, Sendable, CustomStringConvertible {
        public enum Transport: String, Hashable, Sendable {
            case tcp, udp
        }
        public var transport: Transport
        public var number: UInt16

        public init(_ transport: Transport, _ number: UInt16) {
            self.transport = transport
            self.number = number
        }

        public var description: String { "\(transport.rawValue)/\(number)" }
    }

    /// More wake ports for the hosts `host` names.
    public struct ExtraPorts: Hashable, Sendable {
        public var host: HostMatch
        public var ports: [Port]

        public init(host: HostMatch, ports: [Port]) {
            self.host = host
            self.ports = ports
        }
    }

    /// Log and record what would have woken whom, but send no magic packet.
    public var dryRun: Bool
    /// Traffic from these addresses or networks never wakes anyone (a monitoring box polling every host).
    public var ignoredSources: [Link.Prefix]
    /// Hosts that are answered for but never woken by traffic.
    public var neverWake: [HostMatch]
    public var extraPorts: [ExtraPorts]

    public init(
        dryRun: Bool = false, ignoredSources: [Link.Prefix] = [], neverWake: [HostMatch] = [],
        extraPorts: [ExtraPorts] = []
    ) {
        self.dryRun = dryRun
        self.ignoredSources = ignoredSources
        self.neverWake = neverWake
        self.extraPorts = extraPorts
    }
}

extension Link.Prefix {
    /// `192.168.1.0/24`, `fd00::/64`, or a bare address (a /32 or /128).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = IPAddress(parts[0]) else { return nil }
        let full: Int
        switch address {
        case .v4: full = 32
        case .v6: full = 128
        }
        var length = full
        if parts.count == 2 {
            guard let number = Int(parts[1]), (0...full).contains(number), parts[1].allSatisfy(\.isASCII) else {
                return nil
            }
            length = number
        }
        self.init(address: address, length: length)
    }
}

extension WakePolicy.Port {
    /// `tcp/32400` or `udp/9`.
    public init?(_ text: String) {
        let parts = text.lowercased().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let transport = Transport(rawValue: String(parts[0])),
            let number = UInt16(parts[1]), number > 0
        else { return nil }
        self.init(transport, number)
    }
}
