import Testing

@testable import SleepProxyDaemon

/// The start-up warnings about the kernel's settings: forwarding and proxy ARP/NDP always, ICMP redirects only where
/// IPv4 forwards (the kernel sends them for forwarded packets alone), so that a stock Debian install is quiet.
@Suite struct KernelSettingsTests {
    /// The values of a stock Debian 12: `send_redirects` is 1, forwarding and proxies off.
    static let debian: [String: String] = [
        "/proc/sys/net/ipv4/ip_forward": "0",
        "/proc/sys/net/ipv4/conf/eth0.20/forwarding": "0",
        "/proc/sys/net/ipv4/conf/eth0.20/proxy_arp": "0",
        "/proc/sys/net/ipv4/conf/all/send_redirects": "1",
        "/proc/sys/net/ipv4/conf/eth0.20/send_redirects": "1",
        "/proc/sys/net/ipv6/conf/eth0.20/forwarding": "0",
        "/proc/sys/net/ipv6/conf/eth0.20/proxy_ndp": "0",
    ]

    static func warnings(_ changes: [String: String]) -> [String] {
        let values = debian.merging(changes) { $1 }
        return KernelSettings.warnings(interface: "eth0.20") { values[$0] }
    }

    @Test func aStockDebianInstallIsNotWarnedAbout() {
        #expect(Self.warnings([:]).isEmpty)
    }

    @Test func redirectsAreWarnedAboutWhereIPv4Forwards() {
        let warnings = Self.warnings(["/proc/sys/net/ipv4/ip_forward": "1"])
        #expect(warnings.count == 3, "\(warnings)")
        #expect(warnings.first?.hasPrefix("net.ipv4.ip_forward is 1: ") == true)
        #expect(warnings.contains { $0.hasPrefix("net.ipv4.conf.all.send_redirects is 1 and IPv4 forwarding is on") })
        #expect(warnings.contains { $0.hasPrefix("net.ipv4.conf.eth0.20.send_redirects is 1 and IPv4 forwarding") })
        let perInterface = Self.warnings(["/proc/sys/net/ipv4/conf/eth0.20/forwarding": "1"])
        #expect(perInterface.count == 3, "\(perInterface)")
    }

    @Test(arguments: [
        ("/proc/sys/net/ipv4/conf/eth0.20/proxy_arp", "net.ipv4.conf.eth0.20.proxy_arp"),
        ("/proc/sys/net/ipv6/conf/eth0.20/forwarding", "net.ipv6.conf.eth0.20.forwarding"),
        ("/proc/sys/net/ipv6/conf/eth0.20/proxy_ndp", "net.ipv6.conf.eth0.20.proxy_ndp"),
    ])
    func eachOtherSettingIsWarnedAboutAlone(_ path: String, _ sysctl: String) {
        #expect(
            Self.warnings([path: "1"]) == [
                "\(sysctl) is 1: this host may answer or forward traffic for sleeping hosts; set \(sysctl)=0"
            ])
    }

    @Test func anUnreadableSettingIsNoWarning() {
        #expect(KernelSettings.warnings(interface: "eth0") { _ in nil }.isEmpty)
    }
}
