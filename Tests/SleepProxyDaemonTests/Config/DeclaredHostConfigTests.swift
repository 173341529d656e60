import NetworkAddresses
import SleepProxyCore
import SleepProxyDaemon
import Testing

/// `[hosts.NAME]`: hosts that never register, declared in the config file.
@Suite struct DeclaredHostConfigTests {
    static let full = """
        interfaces = ["eth0"]

        [hosts.imac]
        mac = "3C:22:FB:10:20:30"
        addresses = ["192.168.1.20", "fd00::20", "learn"]
        wake_ports = ["tcp/22", 445, "udp/3283"]
        host_name = "iMac"
        services = [
          { name = "iMac", type = "_smb._tcp", port = 445, txt = ["model=iMac20,1"] },
          { name = "iMac", type = "_ssh._tcp", port = 22 },
        ]

        [hosts.nas]
        mac = "00:11:32:aa:bb:cc"
        interface = "eth0"
        records = "declared"
        """

    /// A wake policy entry that is a name and names no declared host (by table name or host name) is allowed, for a
    /// host that may register under it later, but warned about; a MAC never is.
    @Test func aPolicyNameThatNamesNoDeclaredHostIsWarnedAbout() throws {
        let settings = try ConfigFileTests.parse(
            Self.full + """

                [wake]
                never_wake = ["nas", "imac.local", "mini", "aa:bb:cc:dd:ee:ff"]

                [wake.extra_ports]
                IMAC = ["tcp/32400"]
                studio = ["tcp/8080"]
                """)
        #expect(
            settings.warnings == [
                "wake.never_wake: \"mini\" names no declared host (declared: imac, nas); it applies only to a host that registers under the host name mini.local",
                "wake.extra_ports: \"studio\" names no declared host (declared: imac, nas); it applies only to a host that registers under the host name studio.local",
            ])
        #expect(try ConfigFileTests.parse(Self.full).warnings.isEmpty)
    }

    @Test func aDeclarationReadsWithEveryKey() throws {
        let settings = try ConfigFileTests.parse(Self.full)
        let mac = try #require(MACAddress("3c:22:fb:10:20:30"))
        #expect(
            settings.declaredHosts.first
                == DeclaredHost(
                    name: "imac", interface: "", mac: mac,
                    addresses: [IPAddress("192.168.1.20")!, IPAddress("fd00::20")!], learnsAddresses: true,
                    wakePorts: [.init(.tcp, 22), .init(.tcp, 445), .init(.udp, 3283)], hostName: "iMac",
                    services: [
                        .init(name: "iMac", type: "_smb._tcp", port: 445, txt: ["model=iMac20,1"]),
                        .init(name: "iMac", type: "_ssh._tcp", port: 22),
                    ]))
        // Addresses left out are learned, and records unless it says otherwise; the interface, when one is served,
        // is that one.
        #expect(settings.declaredHosts.first?.recordSource == .learn)
        let nas = try #require(settings.declaredHosts.last)
        #expect(nas.name == "nas" && nas.addresses.isEmpty && nas.learnsAddresses && nas.wakePorts.isEmpty)
        #expect(nas.recordSource == .declared && !nas.learnsRecords)
        let configuration = try settings.daemonConfiguration(context: ConfigFileTests.context)
        #expect(configuration.core.declaredHosts.map(\.interface) == ["eth0", "eth0"])
    }

    @Test func theEffectiveConfigurationReadsBack() throws {
        let settings = try ConfigFileTests.parse(Self.full)
        let printed = settings.toml(context: ConfigFileTests.context)
        #expect(printed.contains("[hosts.imac]\nmac = \"3c:22:fb:10:20:30\""), "\(printed)")
        #expect(try ConfigFileTests.parse(printed) == settings, "\(printed)")
    }

    @Test(arguments: [
        ("[hosts.pc]\naddresses = \"learn\"", 1, "hosts.pc", "the host's MAC is required"),
        ("[hosts.pc]\nmac = \"3c:22:fb:10:20\"", 2, "hosts.pc.mac", "is not a MAC"),
        ("[hosts.pc]\nmac = \"01:00:5e:00:00:fb\"", 2, "hosts.pc.mac", "not a host's MAC"),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\naddresses = [\"192.168.1.300\"]", 3, "hosts.pc.addresses",
            "\"192.168.1.300\" is not an address"
        ),
        ("[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\naddresses = []", 3, "hosts.pc.addresses", "an empty array"),
        ("[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\naddresses = \"all\"", 3, "hosts.pc.addresses", "found \"all\""),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\naddresses = [\"224.0.0.251\"]", 3, "hosts.pc.addresses",
            "not a host's address"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nwake_ports = [\"tcp/0\"]", 3, "hosts.pc.wake_ports",
            "[\"tcp/32400\", \"udp/9\"]"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nmacaddress = \"x\"", 3, "hosts.pc.macaddress",
            "unknown key in [hosts.pc]"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nhostname = \"pc\"", 3, "hosts.pc.hostname",
            "did you mean host_name?"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nhost_name = \"pc.local\"", 3, "hosts.pc.host_name",
            "not one DNS label"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nservices = [{ name = \"PC\", type = \"_smb._tcp\", port = 445 }]",
            1, "hosts.pc", "services need host_name"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nhost_name = \"pc\"\nservices = [{ name = \"PC\", type = \"smb\", port = 445 }]",
            4, "hosts.pc.services", "service 1: service type \"smb\" is not _name._tcp"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nhost_name = \"pc\"\nservices = [{ name = \"PC\", type = \"_smb._tcp\" }]",
            4, "hosts.pc.services", "name, type and port are required"
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nhost_name = \"pc\"\nservices = [\"smb\"]", 4, "hosts.pc.services",
            "item 1 is the string \"smb\""
        ),
        (
            "[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\nrecords = \"all\"", 3, "hosts.pc.records",
            "expected \"learn\" or \"declared\", found \"all\""
        ),
        ("[hosts.\"p c\"]\nmac = \"3c:22:fb:10:20:30\"", 1, "hosts.p c", "not a host's table name"),
        ("[hosts]\npc = \"3c:22:fb:10:20:30\"", 2, "hosts.pc", "expected a table ([hosts.pc])"),
        ("hosts = 1", 1, "hosts", "expected tables such as [hosts.imac]"),
    ])
    func badDeclarations(text: String, line: Int, key: String, allowed: String) throws {
        let error = try #require(ConfigFileTests.failure(text), "\(text) should be refused")
        #expect(error.key == key, "\(error)")
        #expect(error.line == line, "\(error)")
        #expect(error.message.contains(allowed), "\(error)")
    }

    @Test func theInterfaceMustBeServedAndNamedWhenSeveralAre() throws {
        let unserved = try ConfigFileTests.parse(
            "interfaces = [\"eth0\"]\n[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\ninterface = \"eth1\"\n")
        #expect(
            throws: ConfigError(
                key: "hosts.pc.interface",
                "eth1 is not served (interfaces: eth0); the proxy takes over addresses only where the host is on-link")
        ) {
            try unserved.daemonConfiguration(context: ConfigFileTests.context)
        }
        let ambiguous = try ConfigFileTests.parse(
            "interfaces = [\"eth0\", \"eth1\"]\n[hosts.pc]\nmac = \"3c:22:fb:10:20:30\"\n")
        #expect(
            throws: ConfigError(
                key: "hosts.pc.interface", "the proxy serves eth0, eth1: name the interface the host is on")
        ) {
            try ambiguous.daemonConfiguration(context: ConfigFileTests.context)
        }
        let twice = try ConfigFileTests.parse(
            "[hosts.a]\nmac = \"3c:22:fb:10:20:30\"\n[hosts.b]\nmac = \"3C-22-FB-10-20-30\"\n")
        #expect(throws: ConfigError(key: "hosts.b.mac", "3c:22:fb:10:20:30 on enp1s0 is declared already, as a")) {
            try twice.daemonConfiguration(context: ConfigFileTests.context)
        }
    }
}
