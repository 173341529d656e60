import CNetSupport
import DNSWire
public import NetworkAddresses
import NetworkIO
import SleepProxyClientCore

#if canImport(Glibc)
    import Glibc
#endif

/// A failure of the client, with the exit status it leads to.
public struct ClientError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Kind: Hashable, Sendable {
        /// The exit status.
        public let status: Int32

        /// The config file or the command line.
        public static let usage = Kind(status: 64)
        /// No usable interface, or one that is missing.
        public static let interface = Kind(status: 69)
        /// Sockets, state files.
        public static let network = Kind(status: 71)
        public static let state = Kind(status: 73)
    }

    public let kind: Kind
    public let description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// One interface the client works on: its name, index, MAC and addresses.
public struct ClientInterface: Sendable, Hashable {
    public var name: String
    public var index: UInt32
    public var mac: MACAddress
    public var addresses: [IPAddress]

    init?(_ interface: NetworkInterface) {
        guard let bytes = interface.macAddress, let mac = MACAddress(bytes: bytes), !mac.isZero else { return nil }
        name = interface.name
        index = interface.index
        self.mac = mac
        addresses = (interface.ipv4Addresses + interface.ipv6Addresses).compactMap { IPAddress(bytes: $0.bytes) }
    }

    /// The interfaces to work on: those named, or else every wired Ethernet interface that is up with an
    /// address. Wired: an Ethernet device (ARPHRD_ETHER) with a device behind it that is not a wireless one, as
    /// `/sys/class/net` shows them; bridges, veths, tunnels and Wi-Fi are left out.
    static func select(_ names: [String]) throws(ClientError) -> [ClientInterface] {
        let all: [NetworkInterface]
        do {
            all = try NetworkInterface.all()
        } catch {
            throw ClientError(.network, "cannot list the interfaces: \(error)")
        }
        if !names.isEmpty {
            return try names.map { name throws(ClientError) in
                guard let found = all.first(where: { $0.name == name }) else {
                    throw ClientError(.interface, "there is no interface \(name)")
                }
                guard let interface = ClientInterface(found) else {
                    throw ClientError(.interface, "\(name) has no Ethernet address: it cannot be woken by one")
                }
                return interface
            }
        }
        let wired = all.filter { interface in
            let base = "/sys/class/net/\(interface.name)"
            return interface.isUp && readTextFile(base + "/type").map { $0.hasPrefix("1\n") } == .success(true)
                && access(base + "/device", F_OK) == 0 && access(base + "/wireless", F_OK) != 0
                && access(base + "/phy80211", F_OK) != 0
        }
        let usable = wired.compactMap(ClientInterface.init).filter { !$0.addresses.isEmpty }
        guard !usable.isEmpty else {
            throw ClientError(
                .interface,
                "no wired Ethernet interface is up with an address; name one with interfaces = [...] in the config file or --interface"
            )
        }
        return usable
    }

    /// This host's name as the system knows it, as an mDNS name: the first label and `.local`.
    static var systemHostName: DNSName? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        guard let label = name.split(separator: ".").first, !label.isEmpty else { return nil }
        return try? DNSName(labels: [String(label), "local"])
    }
}

/// Wake-on-LAN of an interface, through the ethtool ioctl.
extension WakeOnLANState {
    /// The state of `interface`, or why it cannot be read.
    static func read(_ interface: String) -> Result<WakeOnLANState, ClientError> {
        var supported: UInt32 = 0
        var enabled: UInt32 = 0
        let result = sp_wake_on_lan_get(interface, &supported, &enabled)
        if result == -EOPNOTSUPP {
            return .failure(
                ClientError(
                    .interface,
                    "\(interface) has no Wake-on-LAN (its driver does not offer it, as with most virtual interfaces); on a virtual machine whose host wakes it, set wake_on_lan = \"skip\""
                ))
        }
        guard result == 0 else {
            return .failure(
                ClientError(
                    .interface,
                    "cannot read the Wake-on-LAN state of \(interface): \(String(cString: strerror(-result)))"))
        }
        return .success(WakeOnLANState(supported: supported, enabled: enabled))
    }

    /// Sets `interface`'s Wake-on-LAN modes to `modes`, as `ethtool -s IF wol MODES` does.
    static func set(_ interface: String, modes: UInt32) -> ClientError? {
        let result = sp_wake_on_lan_set(interface, modes)
        guard result == 0 else {
            return ClientError(
                .interface,
                "cannot turn Wake-on-LAN on for \(interface) (as ethtool -s \(interface) wol \(text(modes))): \(String(cString: strerror(-result)))"
            )
        }
        return nil
    }
}

/// One line per event on standard error, with the journal's priority prefix when systemd reads it.
public enum ClientLog {
    /// Whether debug lines are written; set once, before any command runs.
    nonisolated(unsafe) public static var verbose = false
    static let underJournal = getenv("JOURNAL_STREAM") != nil

    public static func notice(_ text: String) { write(5, text) }
    public static func warning(_ text: String) { write(4, text) }
    public static func error(_ text: String) { write(3, text) }
    public static func debug(_ text: String) { if verbose { write(7, text) } }

    private static func write(_ priority: Int, _ text: String) {
        let line = (underJournal ? "<\(priority)>" : "sleepproxy-client: ") + text + "\n"
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
