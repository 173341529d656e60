import Foundation

/// One more host on the lab's bridge `br0`, beside the proxy, the sleeper and the waker: a bystander that
/// registers, resolves and connects while others misbehave. Host number `N` gets the lab's pattern of addresses:
///
/// | MAC | IPv4 | IPv6 link-local | ULA |
/// | --- | --- | --- | --- |
/// | 02:77:00:00:00:0N | 10.77.0.N/24 | fe80::77:ff:fe00:N/64 | fd77::N/64 |
///
/// The lab deletes its namespace (and with it the veth) at teardown, and kills what still runs in it.
public struct ExtraHost: Sendable, Hashable {
    /// `client`, say; part of the namespace's name.
    public let name: String
    /// The network namespace (`ip netns` name).
    public let namespace: String
    /// The last byte of its MAC and addresses (4 to 99).
    public let number: UInt8
    /// The interface inside the host, `eth0`.
    public var interfaceName: String { Lab.interfaceName }

    /// `02:77:00:00:00:NN`.
    public var macString: String {
        let hex = String(number, radix: 16)
        return "02:77:00:00:00:" + (number < 0x10 ? "0" + hex : hex)
    }

    /// `10.77.0.N`.
    public var ipv4: String { "10.77.0.\(number)" }
    /// `fe80::77:ff:fe00:N`.
    public var ipv6LinkLocal: String { "fe80::77:ff:fe00:\(String(number, radix: 16))" }
    /// `fd77::N`.
    public var ula: String { "fd77::\(String(number, radix: 16))" }

    /// Runs `arguments` inside the host (`ip netns exec`) and waits for it, up to `timeout`, off the cooperative
    /// thread pool.
    public func run(_ arguments: [String], timeout: Duration = .seconds(20)) async throws -> CommandResult {
        guard let ip = Subprocess.which("ip") else { throw LabError(Lab.unsupportedReason ?? "`ip` not found") }
        guard !arguments.isEmpty else { throw LabError("no command given to run in \(name)") }
        let argv = [ip, "netns", "exec", namespace] + arguments
        return try await runOffCooperativePool { try Subprocess.run(argv, timeout: timeout) }
    }

    /// Runs `body` with the calling thread switched into the host's network namespace.
    public func withNamespace<Result>(_ body: () throws -> Result) throws -> Result {
        try Lab.withNamespace(named: namespace, body)
    }
}

extension Lab {
    /// Adds host `name` with number `number` (4 to 99: 1 to 3 are the lab's own) to the bridge `br0`, up and
    /// addressed like the lab's hosts: IPv4, link-local and ULA IPv6 without DAD, the multicast route and a
    /// default route through the lab's gateway address.
    public func addHost(_ name: String, number: UInt8) throws -> ExtraHost {
        guard (4...99).contains(number) else { throw LabError("host number \(number) is not between 4 and 99") }
        guard !name.isEmpty, name.count <= 8, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw LabError("host name \(name.debugDescription): use 1 to 8 ASCII letters and digits")
        }
        let host = ExtraHost(name: name, namespace: prefix + name, number: number)
        try Self.withNamespaceLock {
            try Self.ip(["netns", "add", host.namespace])
            adopt(namespace: host.namespace)
        }
        let bridge = bridgeNamespace
        let port = "p-\(name)"
        let device = host.interfaceName
        try Self.ip([
            "-n", bridge, "link", "add", port, "type", "veth", "peer", "name", device, "netns", host.namespace,
        ])
        try Self.ip(["-n", bridge, "link", "set", port, "addrgenmode", "none"])
        try Self.ip(["-n", bridge, "link", "set", port, "master", "br0", "up"])
        try Self.ip(["-n", host.namespace, "link", "set", "lo", "up"])
        try Self.ip([
            "-n", host.namespace, "link", "set", device, "address", host.macString, "addrgenmode", "none",
        ])
        try host.withNamespace {
            try Self.writeSysctl("net/ipv6/conf/\(device)/accept_ra", "0")
            try Self.writeSysctl("net/ipv6/conf/\(device)/accept_dad", "0")
        }
        try Self.ip(["-n", host.namespace, "link", "set", device, "up"])
        try wake(host)
        return host
    }

    /// Puts `host` to sleep as far as the network can tell, as `sleep(_ role:)` does a lab host: its
    /// addresses go (its kernel answers neither ARP nor ND) while its link stays up.
    public func sleep(_ host: ExtraHost) throws {
        try Self.ip(["-n", host.namespace, "address", "flush", "dev", host.interfaceName])
        try Self.ip(["-n", host.namespace, "neighbour", "flush", "dev", host.interfaceName])
    }

    /// Wakes `host`: its addresses (`nodad`, usable at once), the multicast route and the default route.
    public func wake(_ host: ExtraHost) throws {
        let device = host.interfaceName
        try Self.ip(["-n", host.namespace, "address", "replace", "\(host.ipv4)/24", "dev", device])
        for address in [host.ipv6LinkLocal, host.ula] {
            try Self.ip(["-n", host.namespace, "address", "replace", "\(address)/64", "dev", device, "nodad"])
        }
        try Self.ip(["-n", host.namespace, "route", "replace", "224.0.0.0/4", "dev", device])
        try Self.ip(["-n", host.namespace, "route", "replace", "default", "via", Self.gatewayIPv4, "dev", device])
    }
}
