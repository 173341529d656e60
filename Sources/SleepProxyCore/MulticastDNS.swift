import DNSWire
public import NetworkAddresses

/// An mDNS packet seen on an interface: from the multicast socket or the capture (which also knows the sender's
/// MAC, and sees unicast to our own address on port 5353 that an avahi-daemon on the same host would take).
public struct MDNSPacket: Hashable, Sendable {
    public var interface: InterfaceName
    public var source: Endpoint
    /// The IPv6 scope (interface index) of a link-local source, 0 otherwise.
    public var sourceScopeID: UInt32
    /// The group (224.0.0.251, ff02::fb) or our own unicast address.
    public var destination: IPAddress
    /// The Ethernet source, when the packet came through the capture.
    public var sourceMAC: MACAddress?
    public var bytes: [UInt8]

    public init(
        interface: InterfaceName, source: Endpoint, sourceScopeID: UInt32 = 0, destination: IPAddress,
        sourceMAC: MACAddress? = nil, bytes: [UInt8]
    ) {
        self.interface = interface
        self.source = source
        self.sourceScopeID = sourceScopeID
        self.destination = destination
        self.sourceMAC = sourceMAC
        self.bytes = bytes
    }

    /// RFC 6762 section 6.7: a query from a port other than 5353 comes from a simple resolver that expects a
    /// conventional unicast DNS reply.
    public var isLegacyUnicast: Bool { source.port != MulticastDNS.port }
}

/// An mDNS packet to send.
public struct MDNSTransmission: Hashable, Sendable {
    public var interface: InterfaceName
    public var bytes: [UInt8]
    /// A group (224.0.0.251:5353, [ff02::fb]:5353) or a unicast querier.
    public var destination: Endpoint
    public var destinationScopeID: UInt32
    /// The source address to send from, for unicast replies to a querier that checks it (the address it asked);
    /// nil lets the kernel choose the interface's address.
    public var source: IPAddress?

    public init(
        interface: InterfaceName, bytes: [UInt8], destination: Endpoint, destinationScopeID: UInt32 = 0,
        source: IPAddress? = nil
    ) {
        self.interface = interface
        self.bytes = bytes
        self.destination = destination
        self.destinationScopeID = destinationScopeID
        self.source = source
    }
}

/// The responder's rules, from RFC 6762 and mDNSResponder. The port and the groups are declared with the type, in
/// `NetworkAddresses`.
extension MulticastDNS {
    /// TTLs in legacy unicast replies are capped (RFC 6762 section 6.7).
    public static let legacyUnicastTTL: UInt32 = 10
    /// A record is multicast at most once a second on an interface (RFC 6762 section 6).
    public static let multicastInterval: Duration = .seconds(1)
    /// An OWNER option on a packet of a held host releases it when the sequence differs or its records are older
    /// than this (mDNS.c `ClearProxyRecords`).
    public static let ownerReleaseAge: Duration = .seconds(60)
}

/// A small deterministic random generator (SplitMix64): the core takes its seed from the shell, so that tests
/// replay the same delays.
public struct CoreRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
