import NetworkAddresses
import SleepProxyCore
import Testing

@testable import SleepProxyDaemon

/// What a reload (SIGHUP) changes, decided without opening anything: each row is a running configuration, the one
/// read again, the interfaces open and those being retired, and what the plan must say.
@Suite struct ReloadPlanTests {
    static let lab = AdvertisementConfiguration(name: "Lab Proxy", hostName: "lab-proxy")
    static let metricsHere = MetricsAddress(address: .v4(IPv4Address(127, 0, 0, 1)), port: 9187)
    static let metricsThere = MetricsAddress(address: .v4(IPv4Address(0, 0, 0, 0)), port: 9187)

    /// A configuration serving `interfaces`, with the advertisement and metrics address given.
    static func configuration(
        _ interfaces: [String], advertisement: AdvertisementConfiguration? = lab, keepaliveOffload: Bool = true,
        metrics: MetricsAddress? = nil, page: MetricsAddress? = nil, token: String? = nil
    ) -> DaemonConfiguration {
        var configuration = DaemonConfiguration(
            interfaces: interfaces, stateDirectory: "/var/lib/sleepproxy",
            core: CoreConfiguration(keepaliveOffload: keepaliveOffload), advertisement: advertisement,
            controlSocket: "/run/sleepproxy/control.sock")
        configuration.metricsListen = metrics
        configuration.webListen = page
        configuration.webToken = token.map { WebToken($0) }
        return configuration
    }

    /// What one row expects of the plan.
    struct Expected: Equatable {
        var open: [InterfaceName] = []
        var retire: [InterfaceName] = []
        var serveAgain: [InterfaceName] = []
        var readvertise: [InterfaceName] = []
        var advertisementChanged = false
        var endpoints = ReloadPlan.EndpointsChange.keep
        var startOnlyChanges: [String] = []
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var running: DaemonConfiguration
        var next: DaemonConfiguration
        var open: Set<InterfaceName>
        var retiring: Set<InterfaceName> = []
        var expected: Expected

        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(
            name: "nothing changed", running: configuration(["eth0"]), next: configuration(["eth0"]),
            open: ["eth0"], expected: Expected()),
        Row(
            name: "an interface added", running: configuration(["eth0"]), next: configuration(["eth0", "eth1"]),
            open: ["eth0"], expected: Expected(open: ["eth1"])),
        Row(
            name: "interfaces added are opened in order", running: configuration(["eth0"]),
            next: configuration(["vlan20", "eth0", "eth1"]), open: ["eth0"],
            expected: Expected(open: ["eth1", "vlan20"])),
        Row(
            name: "an interface removed", running: configuration(["eth0", "eth1"]), next: configuration(["eth1"]),
            open: ["eth0", "eth1"], expected: Expected(retire: ["eth0"])),
        Row(
            name: "one interface swapped for another", running: configuration(["eth0"]),
            next: configuration(["eth1"]), open: ["eth0"], expected: Expected(open: ["eth1"], retire: ["eth0"])),
        Row(
            name: "an interface being retired is not retired twice", running: configuration(["eth1"]),
            next: configuration(["eth1"]), open: ["eth0", "eth1"], retiring: ["eth0"], expected: Expected()),
        Row(
            name: "an interface removed then named again is served again, not opened",
            running: configuration(["eth1"]), next: configuration(["eth0", "eth1"]), open: ["eth0", "eth1"],
            retiring: ["eth0"], expected: Expected(serveAgain: ["eth0"])),
        Row(
            name: "the advertisement renamed is announced again where it was",
            running: configuration(["eth0", "eth1"]),
            next: configuration(
                ["eth0", "eth1"], advertisement: AdvertisementConfiguration(name: "Den", hostName: "den")),
            open: ["eth0", "eth1"],
            expected: Expected(readvertise: ["eth0", "eth1"], advertisementChanged: true)),
        Row(
            name: "the advertisement turned off", running: configuration(["eth0"]),
            next: configuration(["eth0"], advertisement: nil), open: ["eth0"],
            expected: Expected(readvertise: ["eth0"], advertisementChanged: true)),
        Row(
            name: "keepalive offload toggled changes the feature digit", running: configuration(["eth0"]),
            next: configuration(["eth0"], keepaliveOffload: false), open: ["eth0"],
            expected: Expected(readvertise: ["eth0"], advertisementChanged: true)),
        Row(
            name: "a changed advertisement is not announced again on interfaces added, served again or retired",
            running: configuration(["eth1", "eth2"]),
            next: configuration(["eth0", "eth1", "eth3"], advertisement: nil),
            open: ["eth0", "eth1", "eth2"], retiring: ["eth0"],
            expected: Expected(
                open: ["eth3"], retire: ["eth2"], serveAgain: ["eth0"], readvertise: ["eth1"],
                advertisementChanged: true)),
        Row(
            name: "a metrics endpoint opened", running: configuration(["eth0"]),
            next: configuration(["eth0"], metrics: metricsHere), open: ["eth0"],
            expected: Expected(endpoints: .reopen(HTTPEndpoints(configuration(["eth0"], metrics: metricsHere))))),
        Row(
            name: "the metrics address changed", running: configuration(["eth0"], metrics: metricsHere),
            next: configuration(["eth0"], metrics: metricsThere), open: ["eth0"],
            expected: Expected(endpoints: .reopen(HTTPEndpoints(configuration(["eth0"], metrics: metricsThere))))),
        Row(
            name: "the metrics address unchanged", running: configuration(["eth0"], metrics: metricsHere),
            next: configuration(["eth0"], metrics: metricsHere), open: ["eth0"], expected: Expected()),
        Row(
            name: "the metrics endpoint closed", running: configuration(["eth0"], metrics: metricsHere),
            next: configuration(["eth0"]), open: ["eth0"],
            expected: Expected(endpoints: .reopen(HTTPEndpoints(configuration(["eth0"]))))),
        Row(
            name: "the page opened on the metrics address", running: configuration(["eth0"], metrics: metricsHere),
            next: configuration(["eth0"], metrics: metricsHere, page: metricsHere), open: ["eth0"],
            expected: Expected(
                endpoints: .reopen(HTTPEndpoints(configuration(["eth0"], metrics: metricsHere, page: metricsHere))))),
        Row(
            name: "the page's token changed",
            running: configuration(["eth0"], page: metricsThere, token: "0123456789abcdef"),
            next: configuration(["eth0"], page: metricsThere, token: "fedcba9876543210"), open: ["eth0"],
            expected: Expected(
                endpoints: .reopen(
                    HTTPEndpoints(configuration(["eth0"], page: metricsThere, token: "fedcba9876543210"))))
        ),
        Row(
            name: "the page unchanged", running: configuration(["eth0"], page: metricsThere, token: "0123456789abcdef"),
            next: configuration(["eth0"], page: metricsThere, token: "0123456789abcdef"), open: ["eth0"],
            expected: Expected()),
        Row(
            name: "keys read only at start are named", running: configuration(["eth0"]),
            next: {
                var next = configuration(["eth0"])
                next.registrationPort = 5355
                next.stateDirectory = "/tmp/elsewhere"
                next.controlSocket = nil
                next.controlGroup = 100
                return next
            }(), open: ["eth0"],
            expected: Expected(
                startOnlyChanges: ["registration_port", "state_directory", "control.socket", "control.group"])),
    ]

    @Test(arguments: rows)
    func thePlanSaysWhatChanges(_ row: Row) throws {
        let plan = try ReloadPlan(running: row.running, next: row.next, open: row.open, retiring: row.retiring)
        let found = Expected(
            open: plan.open, retire: plan.retire, serveAgain: plan.serveAgain, readvertise: plan.readvertise,
            advertisementChanged: plan.advertisementChanged, endpoints: plan.endpoints,
            startOnlyChanges: plan.startOnlyChanges)
        #expect(found == row.expected)
        // Whatever else changes, the configuration applied is the new one.
        #expect(plan.configuration.interfaces == row.next.interfaces)
        #expect(plan.configuration.advertisement == row.next.advertisement)
        #expect(plan.configuration.metricsListen == row.next.metricsListen)
    }

    /// The keys read only at start keep their running values; everything else is the new configuration's.
    @Test func keysReadOnlyAtStartKeepTheirRunningValues() throws {
        let running = Self.configuration(["eth0"])
        var next = Self.configuration(["eth0"])
        next.registrationPort = 5355
        next.stateDirectory = "/tmp/elsewhere"
        next.controlSocket = "/tmp/control.sock"
        next.controlGroup = 100
        next.responder = false
        next.eventHistoryLimit = 5
        next.wakeAllOnExit = true
        next.core.wakePolicy.dryRun = true
        let applied = try ReloadPlan(running: running, next: next, open: ["eth0"], retiring: []).configuration
        #expect(applied.registrationPort == running.registrationPort)
        #expect(applied.stateDirectory == running.stateDirectory)
        #expect(applied.controlSocket == running.controlSocket)
        #expect(applied.controlGroup == running.controlGroup)
        #expect(applied.responder == running.responder)
        #expect(applied.eventHistoryLimit == 5)
        #expect(applied.wakeAllOnExit)
        #expect(applied.core.wakePolicy.dryRun)
    }

    /// A configuration that names no interface is refused whole, with the reason the log gives.
    @Test func aConfigurationWithoutInterfacesIsRefused() {
        #expect {
            try ReloadPlan(
                running: Self.configuration(["eth0"]), next: Self.configuration([]), open: ["eth0"], retiring: [])
        } throws: { error in
            "\(error)" == "no interface to serve"
        }
    }
}
