import CNetSupport
import NetworkIO

#if canImport(Glibc)
    import Glibc
#endif

/// The Linux capabilities the daemon needs, and nothing else: it never needs to be root. The systemd unit grants
/// exactly these (`AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN`).
public struct Capability: Hashable, Sendable, CustomStringConvertible {
    /// The bit in the capability sets (`linux/capability.h`).
    public let number: Int
    public let name: String
    /// What the daemon does with it.
    public let use: String

    /// Packet capture and injection (libpcap on `AF_PACKET`): ARP and Neighbour Discovery for held addresses,
    /// mDNS seen as it is on the wire, connections watched, magic packets and keepalives sent.
    public static let netRaw = Capability(
        number: 13, name: "CAP_NET_RAW",
        use: "packet capture and injection: taking over addresses, watching for connections, sending magic packets")
    /// The neighbour table (netlink `RTM_NEWNEIGH`/`RTM_DELNEIGH`): this host's own traffic to a held address
    /// goes to the sleeping host's real MAC.
    public static let netAdmin = Capability(
        number: 12, name: "CAP_NET_ADMIN",
        use: "the neighbour table: pointing this host's own traffic for a sleeping host at its network card")

    public var description: String { name }
}

/// Which of the needed capabilities the process lacks, checked once at start so that the daemon refuses with the
/// names rather than failing later on the first socket it cannot open.
public enum Privileges {
    /// The capabilities a daemon with `configuration` needs: none without the responder (registrations only use
    /// UDP sockets on ports above 1023), otherwise `CAP_NET_RAW` and `CAP_NET_ADMIN`.
    public static func needed(for configuration: DaemonConfiguration) -> [Capability] {
        configuration.responder ? [.netRaw, .netAdmin] : []
    }

    /// The process's effective capability set, from `/proc/self/status` (`CapEff`); nil if it cannot be read.
    public static func effective() -> UInt64? {
        guard case .success(let text) = readTextFile("/proc/self/status") else { return nil }
        return parseEffective(text)
    }

    /// `CapEff:` of a `/proc/PID/status` text.
    public static func parseEffective(_ status: String) -> UInt64? {
        for line in status.split(separator: "\n") where line.hasPrefix("CapEff:") {
            return UInt64(line.dropFirst("CapEff:".count).trimmingPrefix { $0 == " " || $0 == "\t" }, radix: 16)
        }
        return nil
    }

    /// The needed capabilities missing from `effective`.
    public static func missing(_ needed: [Capability], effective: UInt64) -> [Capability] {
        needed.filter { effective & (1 << UInt64($0.number)) == 0 }
    }

    /// Puts the capabilities of `capabilities` that the process holds as permitted, but not in force, into force:
    /// the container image's `sleepproxyd` carries them as file capabilities without the effective bit
    /// (`setcap cap_net_raw,cap_net_admin=p`), so that a container started without them still runs it, and is
    /// told what it lacks. Returns the effective set afterwards, or nil if the sets cannot be read.
    public static func raise(_ capabilities: [Capability]) -> UInt64? {
        let wanted = capabilities.reduce(UInt64(0)) { $0 | 1 << UInt64($1.number) }
        let result = sp_raise_effective_capabilities(wanted)
        return result >= 0 ? UInt64(result) : nil
    }

    /// Throws a `DaemonError` naming each missing capability, what it is for, and how to grant it: under systemd
    /// or by hand, or, in `container` (a runtime's name), with the runtime's options. `effective` nil: the
    /// process's own set, after ``raise(_:)``.
    public static func check(
        _ configuration: DaemonConfiguration, effective: UInt64? = nil,
        container: String? = ContainerNetwork.runtime()
    ) throws(DaemonError) {
        let needed = needed(for: configuration)
        guard let effective = effective ?? raise(needed) ?? Privileges.effective() else { return }
        let lacking = missing(needed, effective: effective)
        guard !lacking.isEmpty else { return }
        let names = lacking.map(\.name)
        let reasons = lacking.map { "\($0.name) (\($0.use))" }.joined(separator: "; ")
        let grant =
            container.map {
                "In a container (\($0)), grant them with --cap-add NET_RAW --cap-add NET_ADMIN (cap_add: [NET_RAW, NET_ADMIN] in compose.yaml), and without no-new-privileges, which keeps the image's sleepproxyd from receiving them"
            }
            ?? "Run sleepproxyd as root, under its systemd unit (AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN), or with exactly these: setpriv --inh-caps=+net_raw,+net_admin --ambient-caps=+net_raw,+net_admin ... sleepproxyd"
        throw DaemonError(
            description:
                "missing capabilit\(lacking.count == 1 ? "y" : "ies") \(names.joined(separator: " and ")): \(reasons). \(grant)"
        )
    }
}
