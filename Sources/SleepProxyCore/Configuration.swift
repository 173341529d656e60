public import NetworkAddresses

/// The limits and policies of the core. Every value has a default that serves a home network.
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

    public init(
        maximumLease: UInt32 = 86_400, maximumRecordsPerOwner: Int = 1_000, maximumRecordsTotal: Int = 10_000,
        wakePolicy: WakePolicy = WakePolicy(), keepaliveOffload: Bool = true
    ) {
        self.maximumLease = min(max(maximumLease, 1), Self.leaseCeiling)
        self.maximumRecordsPerOwner = maximumRecordsPerOwner
        self.maximumRecordsTotal = maximumRecordsTotal
        self.wakePolicy = wakePolicy
        self.keepaliveOffload = keepaliveOffload
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
            if let mac = MACAddress(text) {
                form = .mac(mac)
            } else if let match = Self.name(text) {
                self = match
            } else {
                return nil
            }
        }

        private init(form: Form) { self.form = form }

        /// Lower case, without a trailing dot or `.local`.
        static func fold(_ name: String) -> String? {
            var text = name.lowercased()
            if text.hasSuffix(".") { text.removeLast() }
            if text.hasSuffix(".local") { text.removeLast(".local".count) }
            return text.isEmpty ? nil : text
        }

        /// Whether `owner` is the host this names.
        public func matches(_ owner: Owner) -> Bool {
            switch form {
            case .mac(let mac): return owner.key.primaryMAC == mac || owner.wakeMAC == mac
            case .name(let name): return owner.hostNames.contains { Self.fold($0) == name }
            }
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
