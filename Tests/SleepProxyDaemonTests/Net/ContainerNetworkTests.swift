import NetworkIO
import SleepProxyDaemon
import Testing

private func link(_ name: String, _ driver: String?, _ addresses: [[UInt8]], prefix: Int = 16)
    -> ContainerNetwork.Link
{
    ContainerNetwork.Link(
        name: name, driver: driver,
        ipv4Addresses: addresses.map { NetworkInterface.Address(bytes: $0, prefixLength: prefix) })
}

/// The refusal to start on a container runtime's bridge, decided from the facts of the served interfaces.
@Suite struct ContainerNetworkTests {

    @Test func theRuntimeIsKnownByTheFileItLeaves() {
        #expect(ContainerNetwork.runtime(exists: { $0 == "/run/.containerenv" }, environment: [:]) == "podman")
        #expect(ContainerNetwork.runtime(exists: { $0 == "/.dockerenv" }, environment: [:]) == "docker")
        #expect(ContainerNetwork.runtime(exists: { _ in false }, environment: ["container": "lxc"]) == "lxc")
        #expect(ContainerNetwork.runtime(exists: { _ in false }, environment: ["container": ""]) == nil)
        #expect(ContainerNetwork.runtime(exists: { _ in false }, environment: [:]) == nil)
    }

    @Test func podmansDefaultBridgeIsRefusedWithWhatToDo() throws {
        let refusal = try #require(
            ContainerNetwork.refusal(links: [link("eth0", "veth", [[10, 88, 0, 5]])], container: "podman"))
        #expect(refusal.contains("this container (podman) is on a container network, not the LAN"), "\(refusal)")
        #expect(refusal.contains("eth0 (10.88.0.5/16, in Podman's default network, 10.88.0.0/16) is a veth"))
        #expect(refusal.contains("--network host") && refusal.contains("network_mode: host"), "\(refusal)")
        #expect(refusal.contains("SLEEPPROXY_HOST_NETWORK=1"), "\(refusal)")
    }

    @Test(arguments: [
        [UInt8]([172, 17, 0, 2]), [172, 18, 0, 3], [172, 31, 255, 1], [10, 89, 0, 7],
    ])
    func dockerAndPodmanNetworksAreRefused(address: [UInt8]) {
        #expect(ContainerNetwork.refusal(links: [link("eth0", "veth", [address])], container: "docker") != nil)
    }

    /// Host networking on a LAN interface that is a veth itself (Docker in an LXC container), a macvlan on the
    /// runtime's range, an address just outside the ranges, a second interface on the LAN, no IPv4 address to
    /// judge by, and no container at all: none of these is a bridge network.
    @Test(
        arguments: [
            ([link("eth0", "veth", [[192, 168, 1, 20]], prefix: 24)], "docker"),
            ([link("eth0", "veth", [[10, 77, 0, 1]], prefix: 24)], "podman"),
            ([link("eth0", "macvlan", [[172, 17, 0, 2]])], "docker"),
            ([link("eth0", "veth", [[172, 32, 0, 2]])], "docker"),
            ([link("eth0", "veth", [[10, 90, 0, 2]])], "podman"),
            (
                [link("eth0", "veth", [[172, 17, 0, 2]]), link("eth1", "e1000e", [[192, 168, 1, 2]], prefix: 24)],
                "docker"
            ),
            ([link("eth0", "veth", [[172, 17, 0, 2], [192, 168, 1, 2]])], "docker"),
            ([link("eth0", "veth", [])], "podman"),
            ([link("eth0", nil, [[10, 88, 0, 5]])], "podman"),
        ] as [([ContainerNetwork.Link], String)])
    func theLANIsNotRefused(links: [ContainerNetwork.Link], container: String) {
        #expect(ContainerNetwork.refusal(links: links, container: container) == nil)
    }

    @Test func outsideAContainerNothingIsRefused() {
        #expect(ContainerNetwork.refusal(links: [link("eth0", "veth", [[10, 88, 0, 5]])], container: nil) == nil)
    }

    @Test func twoBridgedInterfacesAreBothNamed() throws {
        let refusal = try #require(
            ContainerNetwork.refusal(
                links: [link("eth0", "veth", [[10, 88, 0, 5]]), link("eth1", "veth", [[172, 20, 0, 5]])],
                container: "podman"))
        #expect(refusal.contains("eth0 (10.88.0.5/16") && refusal.contains("eth1 (172.20.0.5/16"), "\(refusal)")
        #expect(refusal.contains(" are veths"), "\(refusal)")
    }

    @Test func theOverrideSkipsTheCheck() throws {
        // The loopback interface is no veth, so nothing would be refused anyway; with the override nothing is
        // looked at, and an interface that does not exist passes too.
        try ContainerNetwork.check(
            interfaces: ["no-such-interface"], container: "docker", environment: ["SLEEPPROXY_HOST_NETWORK": "1"])
        try ContainerNetwork.check(interfaces: ["lo"], container: "docker", environment: [:])
        #expect(ContainerNetwork.driver(of: "no-such-interface") == nil)
    }
}
