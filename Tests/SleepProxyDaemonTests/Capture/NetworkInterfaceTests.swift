import NetworkIO
import SleepProxyDaemon
import TestLab
import Testing

struct NetworkInterfaceTests {
    @Test func loopbackIsListedWithItsAddress() throws {
        let loopback = try NetworkInterface.named("lo")
        #expect(loopback.index > 0)
        #expect(loopback.isUp)
        #expect(loopback.ipv4Addresses.contains(NetworkInterface.Address(bytes: [127, 0, 0, 1], prefixLength: 8)))
        #expect(try NetworkInterface.all().contains { $0.name == "lo" })
    }

    @Test func missingInterfaceIsNotFound() {
        let error = #expect(throws: SystemError.self) { try NetworkInterface.named("nosuch0") }
        #expect(error?.code == .interfaceNotFound)
        #expect(error?.description.contains("'nosuch0'") == true)
    }

    @Test func addressesFormat() {
        let ipv4 = NetworkInterface.Address(bytes: [10, 77, 0, 1], prefixLength: 24)
        let ipv6 = NetworkInterface.Address(
            bytes: [0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x77, 0, 0xFF, 0xFE, 0, 0, 1],
            prefixLength: 64,
            scopeID: 2
        )
        #expect(ipv4.description == "10.77.0.1/24")
        #expect(ipv6.description == "fe80::77:ff:fe00:1/64")
        #expect(ipv6.isIPv6LinkLocal)
        #expect(!ipv4.isIPv6LinkLocal)
    }

    @Test(.requiresLab()) func labHostInterfaceHasItsMACIndexAndAddresses() async throws {
        try await Lab.withLab { lab in
            for host in lab.hosts {
                let interface = try lab.withNamespace(host.role) { try NetworkInterface.named(host.interfaceName) }
                #expect(interface.macAddress == host.mac)
                #expect(interface.macAddressString == host.macString)
                #expect(interface.isUp)
                #expect(interface.ipv4Addresses == [.init(bytes: host.ipv4Bytes, prefixLength: 24)])
                #expect(
                    Set(interface.ipv6Addresses) == [
                        .init(bytes: host.ipv6LinkLocalBytes, prefixLength: 64, scopeID: interface.index),
                        .init(bytes: host.ulaBytes, prefixLength: 64),
                    ]
                )
                let link = try await lab.run(host.role, ["ip", "-o", "link", "show", "dev", host.interfaceName])
                #expect(link.stdout.hasPrefix("\(interface.index): \(host.interfaceName)@"), "\(link)")
            }
        }
    }
}
