import CNetSupport
public import NetworkIO

#if canImport(Glibc)
    import Glibc
#endif

/// Whether the daemon runs in a container, and whether that container is on the LAN (host networking, a macvlan)
/// or behind a runtime's bridge. On a bridge the daemon would see only the runtime's private network: no Mac's
/// registration reaches it, its answers and magic packets never reach the LAN, and it would serve nobody without a
/// word. So it refuses to start there, saying why and what to do.
///
/// A bridge network is recognised by what the container sees: every interface it would serve is a `veth` (the
/// runtime's end of the pair is on its bridge) whose IPv4 addresses all lie in the ranges the runtimes allocate
/// their NATed networks from. Host networking in a machine whose LAN interface is itself a `veth` (Docker in a
/// Proxmox LXC container) has a LAN address there, and passes.
public enum ContainerNetwork {
    /// An address range a container runtime gives its bridge networks, which it NATs to the host's.
    public struct RuntimeRange: Sendable, Hashable {
        public let network: [UInt8]
        public let prefixLength: Int
        public let owner: String

        public func contains(_ address: [UInt8]) -> Bool {
            guard address.count == 4 else { return false }
            for bit in 0..<prefixLength where (address[bit / 8] ^ network[bit / 8]) & (0x80 >> UInt8(bit % 8)) != 0 {
                return false
            }
            return true
        }

        public var text: String { network.map(String.init).joined(separator: ".") + "/\(prefixLength)" }
    }

    /// Podman's default network (`podman`, 10.88.0.0/16) and the networks `podman network create` makes (from
    /// 10.89.0.0/16); Docker's default bridge (172.17.0.0/16) and its default pools for other networks and
    /// Compose projects (172.17.0.0/16 to 172.31.0.0/16). Docker's pools in 192.168.0.0/16 are left out: home LANs
    /// live there.
    public static let runtimeRanges = [
        RuntimeRange(network: [10, 88, 0, 0], prefixLength: 16, owner: "Podman's default network"),
        RuntimeRange(network: [10, 89, 0, 0], prefixLength: 16, owner: "Podman's networks"),
        RuntimeRange(network: [172, 16, 0, 0], prefixLength: 12, owner: "Docker's networks"),
    ]

    /// The environment variable that skips the check, for a LAN that really is numbered like a container network.
    public static let overrideVariable = "SLEEPPROXY_HOST_NETWORK"

    /// What the check needs to know of one served interface.
    public struct Link: Sendable, Hashable {
        public var name: String
        /// The driver `ethtool -i` names ("veth", "macvlan", "e1000e"), or nil if the interface does not say.
        public var driver: String?
        public var ipv4Addresses: [NetworkInterface.Address]

        public init(name: String, driver: String?, ipv4Addresses: [NetworkInterface.Address]) {
            self.name = name
            self.driver = driver
            self.ipv4Addresses = ipv4Addresses
        }
    }

    /// The container runtime the process runs under, from the files the runtimes leave in every container
    /// (`/run/.containerenv`: Podman; `/.dockerenv`: Docker) or the `container` variable of the environment
    /// (Podman, LXC, systemd-nspawn set it); nil outside a container.
    public static func runtime(
        exists: (String) -> Bool = ContainerNetwork.fileExists,
        environment: [String: String] = ContainerNetwork.processEnvironment()
    ) -> String? {
        if exists("/run/.containerenv") { return "podman" }
        if exists("/.dockerenv") { return "docker" }
        if let named = environment["container"], !named.isEmpty { return named }
        return nil
    }

    public static func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// The variables ``runtime(exists:environment:)`` and ``check(interfaces:container:environment:)`` read.
    public static func processEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        for variable in ["container", overrideVariable] {
            if let value = getenv(variable) { environment[variable] = String(cString: value) }
        }
        return environment
    }

    /// Why a daemon serving `links` in `container` must not start, or nil: every link is a veth whose IPv4
    /// addresses (at least one) all lie in a runtime's range.
    public static func refusal(links: [Link], container: String?) -> String? {
        guard let container, !links.isEmpty else { return nil }
        var found: [String] = []
        for link in links {
            guard link.driver == "veth", !link.ipv4Addresses.isEmpty else { return nil }
            var owners: [String] = []
            for address in link.ipv4Addresses {
                guard let range = runtimeRanges.first(where: { $0.contains(address.bytes) }) else { return nil }
                owners.append("\(range.owner), \(range.text)")
            }
            let addresses = link.ipv4Addresses.map(\.description).joined(separator: ", ")
            found.append("\(link.name) (\(addresses), in \(Set(owners).sorted().joined(separator: "; ")))")
        }
        let which = found.count == 1 ? "\(found[0]) is a veth" : "\(found.joined(separator: " and ")) are veths"
        return
            "this container (\(container)) is on a container network, not the LAN: \(which) behind the runtime's bridge and NAT. A sleep proxy must send and receive the LAN's own frames (mDNS, ARP, magic packets); here no Mac would find it and it would serve nobody. Run the container with host networking: --network host (docker run, podman run) or network_mode: host (compose.yaml). If this really is the LAN, \(overrideVariable)=1 skips this check."
    }

    /// Throws the refusal for `interfaces` of this network namespace, as ``refusal(links:container:)`` decides.
    /// Outside a container, and with ``overrideVariable`` set to 1, it looks at nothing.
    public static func check(
        interfaces: [String], container: String? = ContainerNetwork.runtime(),
        environment: [String: String] = ContainerNetwork.processEnvironment()
    ) throws(DaemonError) {
        guard let container, environment[overrideVariable] != "1" else { return }
        guard let all = try? NetworkInterface.all() else { return }
        let links = interfaces.map { name in
            Link(
                name: name, driver: driver(of: name),
                ipv4Addresses: all.first { $0.name == name }?.ipv4Addresses ?? [])
        }
        if let refusal = refusal(links: links, container: container) { throw DaemonError(description: refusal) }
    }

    /// The driver behind `interface`, as `ethtool -i` names it; nil if the interface does not say.
    public static func driver(of interface: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard sp_interface_driver(interface, &buffer, buffer.count) == 0 else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
