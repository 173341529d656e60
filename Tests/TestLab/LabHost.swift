extension Lab {
    /// The three hosts of a lab.
    public enum Role: String, Sendable, Hashable, CaseIterable {
        /// Runs the sleep proxy.
        case proxy
        /// Goes to sleep and is woken.
        case sleeper
        /// Wants to reach the sleeper.
        case waker

        /// 1, 2 and 3: the last byte of the host's MAC and addresses.
        public var number: UInt8 {
            switch self {
            case .proxy: 1
            case .sleeper: 2
            case .waker: 3
            }
        }
    }
}

/// One host of a ``Lab``: a network namespace with one interface, `eth0`, on the lab's bridge.
///
/// Every lab uses the same fixed addresses, so tests can assert on them:
///
/// | host | MAC | IPv4 | IPv6 link-local | ULA |
/// | --- | --- | --- | --- | --- |
/// | proxy | 02:77:00:00:00:01 | 10.77.0.1/24 | fe80::77:ff:fe00:1/64 | fd77::1/64 |
/// | sleeper | 02:77:00:00:00:02 | 10.77.0.2/24 | fe80::77:ff:fe00:2/64 | fd77::2/64 |
/// | waker | 02:77:00:00:00:03 | 10.77.0.3/24 | fe80::77:ff:fe00:3/64 | fd77::3/64 |
///
/// The link-local address is the EUI-64 one the kernel would derive from the MAC; the lab adds it explicitly
/// (with `addrgenmode none` on the link) so that sleep and wake control it.
public struct LabHost: Sendable, Hashable {
    public let role: Lab.Role
    /// `proxy`, `sleeper` or `waker`.
    public var name: String { role.rawValue }
    /// The network namespace (`ip netns` name).
    public let namespace: String
    /// The host's interface name, `eth0`.
    public let interfaceName: String
    /// 6 bytes, `02:77:00:00:00:0N`.
    public let mac: [UInt8]
    /// `10.77.0.N` as 4 bytes.
    public let ipv4Bytes: [UInt8]
    public let ipv4PrefixLength: Int
    /// `fe80::77:ff:fe00:N` as 16 bytes.
    public let ipv6LinkLocalBytes: [UInt8]
    /// `fd77::N` as 16 bytes.
    public let ulaBytes: [UInt8]
    public let ipv6PrefixLength: Int

    init(role: Lab.Role, namespace: String) {
        let number = role.number
        self.role = role
        self.namespace = namespace
        self.interfaceName = Lab.interfaceName
        self.mac = [0x02, 0x77, 0x00, 0x00, 0x00, number]
        self.ipv4Bytes = [10, 77, 0, number]
        self.ipv4PrefixLength = 24
        self.ipv6LinkLocalBytes = [0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x77, 0x00, 0xFF, 0xFE, 0x00, 0x00, number]
        self.ulaBytes = [0xFD, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, number]
        self.ipv6PrefixLength = 64
    }

    /// `02:77:00:00:00:0N`.
    public var macString: String {
        mac.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 0x10 ? "0" + hex : hex
        }.joined(separator: ":")
    }

    /// `10.77.0.N`.
    public var ipv4: String { ipv4Bytes.map(String.init).joined(separator: ".") }
    /// `fe80::77:ff:fe00:N`.
    public var ipv6LinkLocal: String { "fe80::77:ff:fe00:\(String(role.number, radix: 16))" }
    /// `fd77::N`.
    public var ula: String { "fd77::\(String(role.number, radix: 16))" }
}
