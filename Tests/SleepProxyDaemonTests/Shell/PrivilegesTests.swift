import SleepProxyDaemon
import Testing

/// The capability check at start, without root: the sets are given.
@Suite struct PrivilegesTests {
    static let configuration = DaemonConfiguration(interfaces: ["eth0"], stateDirectory: "/tmp/x")

    @Test func theResponderNeedsRawAndAdminAndNothingElse() throws {
        #expect(Privileges.needed(for: Self.configuration) == [.netRaw, .netAdmin])
        var registrationsOnly = Self.configuration
        registrationsOnly.responder = false
        #expect(Privileges.needed(for: registrationsOnly).isEmpty)
        try Privileges.check(registrationsOnly, effective: 0, container: nil)
    }

    static let cases: [(UInt64, [String])] = [
        (0x3000, []),
        // Bit 12 is CAP_NET_ADMIN, bit 13 CAP_NET_RAW.
        (0x1000, ["CAP_NET_RAW"]),
        (0x2000, ["CAP_NET_ADMIN"]),
        (0, ["CAP_NET_RAW", "CAP_NET_ADMIN"]),
        (0x1FF_FFFF_FFFF, []),
    ]

    @Test(arguments: cases)
    func whatIsMissing(effective: UInt64, missing: [String]) {
        #expect(
            Privileges.missing(Privileges.needed(for: Self.configuration), effective: effective).map(\.name) == missing)
    }

    @Test func theRefusalNamesTheCapabilityWhatItIsForAndHowToGrantIt() {
        do {
            try Privileges.check(Self.configuration, effective: 0x2000, container: nil)
            Issue.record("a missing capability must be refused")
        } catch {
            #expect(error.description.hasPrefix("missing capability CAP_NET_ADMIN: CAP_NET_ADMIN (the neighbour table"))
            #expect(error.description.contains("AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN"))
        }
        #expect(throws: Never.self) { try Privileges.check(Self.configuration, effective: 0x3000, container: nil) }
    }

    /// In a container the way to grant them is the runtime's, and no-new-privileges is named: it keeps the
    /// image's file capabilities from reaching the daemon.
    @Test func inAContainerTheRefusalSaysHowTheRuntimeGrantsThem() {
        do {
            try Privileges.check(Self.configuration, effective: 0, container: "docker")
            Issue.record("missing capabilities must be refused")
        } catch {
            #expect(error.description.hasPrefix("missing capabilities CAP_NET_RAW and CAP_NET_ADMIN"))
            #expect(error.description.contains("In a container (docker)"), "\(error)")
            #expect(error.description.contains("--cap-add NET_RAW --cap-add NET_ADMIN"), "\(error)")
            #expect(error.description.contains("no-new-privileges"), "\(error)")
            #expect(!error.description.contains("AmbientCapabilities"), "\(error)")
        }
    }

    /// Raising what is permitted into force leaves the process with a set it can read back, and asks for nothing
    /// it does not hold: the effective set afterwards is the one /proc reports.
    @Test func raisingIsWhatTheKernelReportsAfterwards() throws {
        let raised = try #require(Privileges.raise([.netRaw, .netAdmin]))
        #expect(Privileges.effective() == raised)
    }

    @Test func theEffectiveSetIsReadFromProcStatus() {
        let status =
            "Name:\tsleepproxyd\nCapInh:\t0000000000000000\nCapPrm:\t0000000000003000\nCapEff:\t0000000000003000\n"
        #expect(Privileges.parseEffective(status) == 0x3000)
        #expect(Privileges.parseEffective("Name:\tx\n") == nil)
        #expect(Privileges.effective() != nil, "this process's own set is readable")
    }
}
