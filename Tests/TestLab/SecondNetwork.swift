import Foundation

/// A second LAN for the lab (a VLAN, say): bridge `br1`, the proxy's `eth1`, a second sleeper on it, and the
/// waker's `eth1`, so that the waker reaches both networks as a router would.
///
/// | host | interface | MAC | IPv4 | ULA |
/// | --- | --- | --- | --- | --- |
/// | proxy | eth1 | 02:78:00:00:00:01 | 10.78.0.1/24 | fd78::1/64 |
/// | second sleeper | eth0 | 02:78:00:00:00:02 | 10.78.0.2/24 | fd78::2/64 |
/// | waker | eth1 | 02:78:00:00:00:03 | 10.78.0.3/24 | fd78::3/64 |
public struct SecondNetwork: Sendable {
    /// The second sleeper's namespace (`ip netns` name); its interface is `eth0`.
    public let sleeperNamespace: String
    public static let proxyInterface = "eth1"
    public static let proxyIPv4 = "10.78.0.1"
    public static let sleeperIPv4 = "10.78.0.2"
    public static let sleeperMAC = "02:78:00:00:00:02"
    public static let wakerIPv4 = "10.78.0.3"

    /// Gives the second sleeper its addresses back (it is built awake).
    public func wake() throws {
        let namespace = sleeperNamespace
        try Lab.ip(["-n", namespace, "address", "replace", "\(Self.sleeperIPv4)/24", "dev", "eth0"])
        try Lab.ip(["-n", namespace, "address", "replace", "fd78::2/64", "dev", "eth0", "nodad"])
        try Lab.ip(["-n", namespace, "address", "replace", "fe80::78:ff:fe00:2/64", "dev", "eth0", "nodad"])
        try Lab.ip(["-n", namespace, "route", "replace", "224.0.0.0/4", "dev", "eth0"])
    }

    /// Takes its addresses away, as `Lab.sleep` does for the first sleeper.
    public func sleep() throws {
        try Lab.ip(["-n", sleeperNamespace, "address", "flush", "dev", "eth0"])
        try Lab.ip(["-n", sleeperNamespace, "neighbour", "flush", "dev", "eth0"])
    }
}

extension Lab {
    /// Builds the second network (see `SecondNetwork`).
    public func addSecondNetwork() throws -> SecondNetwork {
        let sleeper = prefix + "sleeper2"
        try Self.withNamespaceLock {
            try Self.ip(["netns", "add", sleeper])
            adopt(namespace: sleeper)
        }
        let bridge = bridgeNamespace
        try Self.ip(["-n", bridge, "link", "add", "br1", "type", "bridge", "mcast_snooping", "0"])
        try Self.ip(["-n", bridge, "link", "set", "br1", "addrgenmode", "none"])
        try Self.ip(["-n", bridge, "link", "set", "br1", "up"])
        let ends: [(port: String, namespace: String, device: String, number: Int)] = [
            ("q-proxy", host(.proxy).namespace, "eth1", 1), ("q-sleeper", sleeper, "eth0", 2),
            ("q-waker", host(.waker).namespace, "eth1", 3),
        ]
        for end in ends {
            try Self.ip([
                "-n", bridge, "link", "add", end.port, "type", "veth", "peer", "name", end.device, "netns",
                end.namespace,
            ])
            try Self.ip(["-n", bridge, "link", "set", end.port, "addrgenmode", "none"])
            try Self.ip(["-n", bridge, "link", "set", end.port, "master", "br1", "up"])
            try Self.ip([
                "-n", end.namespace, "link", "set", end.device, "address", "02:78:00:00:00:0\(end.number)",
                "addrgenmode", "none",
            ])
            try Self.withNamespace(named: end.namespace) {
                try Self.writeSysctl("net/ipv6/conf/\(end.device)/accept_ra", "0")
                try Self.writeSysctl("net/ipv6/conf/\(end.device)/accept_dad", "0")
            }
            try Self.ip(["-n", end.namespace, "link", "set", "lo", "up"])
            try Self.ip(["-n", end.namespace, "link", "set", end.device, "up"])
            if end.number != 2 {
                try Self.ip(["-n", end.namespace, "address", "replace", "10.78.0.\(end.number)/24", "dev", end.device])
                try Self.ip([
                    "-n", end.namespace, "address", "replace", "fd78::\(end.number)/64", "dev", end.device, "nodad",
                ])
                try Self.ip([
                    "-n", end.namespace, "address", "replace", "fe80::78:ff:fe00:\(end.number)/64", "dev", end.device,
                    "nodad",
                ])
            }
        }
        let network = SecondNetwork(sleeperNamespace: sleeper)
        try network.wake()
        return network
    }
}
