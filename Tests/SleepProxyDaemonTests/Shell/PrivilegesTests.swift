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
        try Privileges.check(registrationsOnly, effective: 0)
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
            try Privileges.check(Self.configuration, effective: 0x2000)
            Issue.record("a missing capability must be refused")
        } catch {
            #expect(error.description.hasPrefix("missing capability CAP_NET_ADMIN: CAP_NET_ADMIN (the neighbour table"))
            #expect(error.description.contains("AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN"))
        }
        #expect(throws: Never.self) { try Privileges.check(Self.configuration, effective: 0x3000) }
    }

    @Test func theEffectiveSetIsReadFromProcStatus() {
        let status =
            "Name:\tsleepproxyd\nCapInh:\t0000000000000000\nCapPrm:\t0000000000003000\nCapEff:\t0000000000003000\n"
        #expect(Privileges.parseEffective(status) == 0x3000)
        #expect(Privileges.parseEffective("Name:\tx\n") == nil)
        #expect(Privileges.effective() != nil, "this process's own set is readable")
    }
}
