import CaptureStream
import Foundation
import Frames
import NetworkAddresses
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon as an unprivileged user with exactly CAP_NET_RAW and CAP_NET_ADMIN, the set its systemd unit
/// grants: the whole story works, and without one of them it refuses to start, naming it.
@Suite(.requiresLab(tools: ["setpriv", "nc"]))
struct LeastPrivilegeLabTests {
    /// `nobody`: no home, no groups, owns nothing on the machine.
    static let user: uid_t = 65_534

    /// A directory `nobody` owns, under a world-traversable one; removed by the caller.
    static func stateDirectory() throws -> (root: String, state: String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sleepproxy-nobody-\(UUID())").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
        chmod(root, 0o755)
        let state = root + "/state"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        chown(state, user, user)
        chmod(state, 0o700)
        return (root, state)
    }

    /// `setpriv` as `nobody` with these capabilities (and no others, in any set), then the daemon.
    static func unprivileged(capabilities: [String], state: String) throws -> [String] {
        let list = capabilities.map { "+\($0)" }.joined(separator: ",")
        return [
            "setpriv", "--reuid=\(user)", "--regid=\(user)", "--clear-groups",
            "--inh-caps=\(list.isEmpty ? "-all" : "-all,\(list)")",
            "--ambient-caps=\(list.isEmpty ? "-all" : "-all,\(list)")",
            "--bounding-set=\(list.isEmpty ? "-all" : "-all,\(list)")", "--no-new-privs",
            try RegistrationDaemonLabTests.daemonPath(), "--interface", "eth0", "--state-dir", state,
            "--control-socket", state + "/control.sock", "--log-level", "debug", "--advertise-name", "Lab Proxy",
            "--config", "/nonexistent/sleepproxy.toml",
        ]
    }

    /// Effective and bounding capabilities and the user of a running process, from /proc.
    static func identity(of pid: Int32) throws -> (uid: String, effective: String, bounding: String) {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func field(_ name: String) -> String {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }.map {
                String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
            } ?? ""
        }
        return (field("Uid"), field("CapEff"), field("CapBnd"))
    }

    @Test func theWholeStoryRunsWithExactlyTwoCapabilities() async throws {
        let (root, state) = try Self.stateDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try await Lab.withLab { lab in
            let daemon = try lab.spawn(
                .proxy, try Self.unprivileged(capabilities: ["net_raw", "net_admin"], state: state))
            defer { daemon.signal(SIGTERM) }
            _ = try await eventually("the daemon's start", within: .seconds(10)) { () -> Bool? in
                if daemon.hasExited { throw TimeoutError("sleepproxyd exited: \(daemon.stderr)") }
                return daemon.stderr.contains("registrations on UDP port") ? true : nil
            }
            let identity = try Self.identity(of: daemon.pid)
            #expect(identity.uid.hasPrefix("65534\t65534"), "\(identity)")
            // CAP_NET_ADMIN (12) and CAP_NET_RAW (13): 0x3000, nothing else, not even in the bounding set.
            #expect(identity.effective == "0000000000003000" && identity.bounding == "0000000000003000", "\(identity)")

            let nic = try magicPackets(lab)
            defer { nic.close() }
            try await MacSleeper.registerSleepAndWaitForTakeOver(lab, by: daemon)
            _ = try lab.spawn(.waker, ["nc", "-z", "-w", "10", lab.host(.sleeper).ipv4, "22"])
            try await expectMagicPacketForSleeper(lab, at: nic)
            #expect(!daemon.stderr.contains("Operation not permitted"), "\(daemon.stderr)")
            #expect(!daemon.hasExited)
        }
    }

    @Test(arguments: [
        (["net_raw"], "CAP_NET_ADMIN"),
        (["net_admin"], "CAP_NET_RAW"),
        ([String](), "CAP_NET_RAW and CAP_NET_ADMIN"),
    ])
    func aMissingCapabilityIsNamed(capabilities: [String], missing: String) async throws {
        let (root, state) = try Self.stateDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try await Lab.withLab { lab in
            let result = try await lab.run(.proxy, try Self.unprivileged(capabilities: capabilities, state: state))
            #expect(result.status != 0, "\(result)")
            #expect(result.stderr.contains("missing capabilit") && result.stderr.contains(missing), "\(result.stderr)")
        }
    }
}
