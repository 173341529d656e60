import Frames
import NetworkAddresses

/// The proxy as a Multicast Listener Discovery listener for the solicited-node groups of the IPv6 addresses it
/// holds. The shell opens the NIC's filter for each group with a link-layer membership only (so that the kernel's
/// IPv6 group list, which it searches linearly for every multicast packet, stays as short as the host's own), and
/// the kernel therefore sends no MLD for them. A switch with MLD snooping forwards a group's frames only to ports
/// that reported it: without reports, the Neighbour Solicitations for a sleeping host's address would go only to
/// the sleeping host's port, and to nobody once its own membership timed out (about 260 s). So the proxy reports
/// the groups itself, as the kernel would for a joined group:
///
/// - a change (a group joined or left) goes out at once as an MLDv2 report of state-change records
///   (CHANGE_TO_EXCLUDE {} to listen, CHANGE_TO_INCLUDE {} to stop), and once more at a random moment within the
///   Unsolicited Report Interval (1 s): Robustness Variable 2 (RFC 3810 sections 6.1 and 9.11); changes falling
///   together go in one report;
/// - a general query is answered with the current state of every group (MODE_IS_EXCLUDE {}), at a random moment
///   within its Maximum Response Delay (section 6.2), in reports of up to 72 records, and at most once a second; a
///   query for one group the proxy holds, with that group;
/// - after an MLDv1 query (RFC 2710), for the Older Version Querier Present Timeout (260 s: Robustness 2 × Query
///   Interval 125 s + Query Response Interval 10 s, section 8.2.1), reports are MLDv1: one Report per group, to
///   the group, and a Done to `ff02::2` on leaving.
///
/// Reports go from the proxy's link-local address on the link (`::` while it has none, RFC 3590), with its MAC.
/// Queries are for the proxy's own groups too; the kernel answers those, and this answers only for the groups of
/// held addresses.
struct MulticastListener: Sendable {
    struct Interface: Sendable {
        /// The groups listened to now.
        var groups: Set<IPv6Address> = []
        /// State changes still to report: whether the group is now listened to, and how many more reports.
        var changes: [IPv6Address: (listening: Bool, remaining: Int)] = [:]
        var changesDue: UnixTime?
        /// When the current state of every group is to be reported (a general query was heard).
        var generalDue: UnixTime?
        /// When the current state of every group was last reported in answer to a general query.
        var generalReportedAt: UnixTime?
        /// Groups asked about one by one, and when each is to be reported.
        var groupsDue: [IPv6Address: UnixTime] = [:]
        /// Until when an MLDv1 querier is present: reports are MLDv1 until then.
        var mldv1Until: UnixTime?

        var isIdle: Bool { groups.isEmpty && changes.isEmpty }

        var nextDue: UnixTime? {
            ([changesDue, generalDue] + groupsDue.values.map { Optional($0) }).compactMap { $0 }.min()
        }
    }

    static let robustness = 2
    static let unsolicitedReportInterval: Duration = .seconds(1)
    static let olderVersionQuerierPresent: Duration = .seconds(260)
    /// General queries are answered at most this often: with thousands of groups an answer is a hundred frames or
    /// more, and a querier asks every 125 s, so a sender asking many times a second gets no more than one a second.
    static let generalReportInterval: Duration = .seconds(1)

    private(set) var interfaces: [InterfaceName: Interface] = [:]

    var nextDue: UnixTime? { interfaces.values.compactMap(\.nextDue).min() }

    /// Starts (`listening`) or stops listening to `group`: the change is reported at `now`.
    mutating func change(_ group: IPv6Address, listening: Bool, on interface: InterfaceName, now: UnixTime) {
        // In place: a copy of the interface's state would copy its set of (thousands of) groups at every change.
        if listening {
            interfaces[interface, default: Interface()].groups.insert(group)
        } else {
            interfaces[interface, default: Interface()].groups.remove(group)
            interfaces[interface]?.groupsDue[group] = nil
        }
        interfaces[interface]?.changes[group] = (listening, Self.robustness)
        interfaces[interface]?.changesDue = now
    }

    /// A query heard on `interface`: its answer is scheduled (nothing if it asks about no group held here).
    mutating func hear(_ query: MLDQuery, on interface: InterfaceName, now: UnixTime, random: inout CoreRandom) {
        guard var state = interfaces[interface], !state.groups.isEmpty else { return }
        if query.version == .v1 { state.mldv1Until = now + Self.olderVersionQuerierPresent }
        let delay = Self.randomDelay(upTo: query.maximumResponseDelay, random: &random)
        if let group = query.group {
            guard state.groups.contains(group) else { return }
            state.groupsDue[group] = min(state.groupsDue[group] ?? now + delay, now + delay)
        } else {
            var due = now + delay
            if let last = state.generalReportedAt, due < last + Self.generalReportInterval {
                due = last + Self.generalReportInterval
            }
            state.generalDue = min(state.generalDue ?? due, due)
        }
        interfaces[interface] = state
    }

    /// The reports due by `now`, as frames from `source` (the proxy's MAC and link-local address per interface).
    mutating func dueReports(
        now: UnixTime, random: inout CoreRandom, sources: [InterfaceName: (MACAddress, IPv6Address)]
    ) -> [Action] {
        var actions: [Action] = []
        for interface in interfaces.keys.sorted() {
            guard var state = interfaces[interface], let due = state.nextDue, due <= now else { continue }
            guard let (mac, address) = sources[interface] else {
                interfaces[interface] = nil
                continue
            }
            let mldv1 = state.mldv1Until.map { $0 > now } ?? false
            if !mldv1 { state.mldv1Until = nil }
            var current: Set<IPv6Address> = []
            if let general = state.generalDue, general <= now {
                current = state.groups
                state.generalDue = nil
                state.generalReportedAt = now
            }
            for (group, time) in state.groupsDue where time <= now {
                current.insert(group)
                state.groupsDue[group] = nil
            }
            var changed: [(type: MLDRecordType, group: IPv6Address)] = []
            if let time = state.changesDue, time <= now {
                for group in state.changes.keys.sorted() {
                    guard let change = state.changes[group] else { continue }
                    changed.append((change.listening ? .changeToExclude : .changeToInclude, group))
                    state.changes[group] = change.remaining > 1 ? (change.listening, change.remaining - 1) : nil
                }
                state.changesDue =
                    state.changes.isEmpty
                    ? nil : now + Self.randomDelay(upTo: Self.unsolicitedReportInterval, random: &random)
            }
            // A group whose change is reported now needs no current-state record in the same report.
            let changedGroups = Set(changed.map(\.group))
            let records =
                changed + current.subtracting(changedGroups).sorted().map { (MLDRecordType.modeIsExclude, $0) }
            if mldv1 {
                for record in records {
                    let frame = EthernetFrame.mldv1Message(
                        for: record.group, done: record.type == .changeToInclude, sourceAddress: address, source: mac)
                    actions.append(.injectFrame(interface, frame.serialized()))
                }
            } else {
                var start = 0
                while start < records.count {
                    let end = min(records.count, start + EthernetFrame.mldv2RecordsPerReport)
                    let frame = EthernetFrame.mldv2Report(
                        Array(records[start..<end]), sourceAddress: address, source: mac)
                    actions.append(.injectFrame(interface, frame.serialized()))
                    start = end
                }
            }
            interfaces[interface] = state.isIdle ? nil : state
        }
        return actions
    }

    /// Every time held moves with a step of the wall clock.
    mutating func moveTimes(by step: Duration) {
        for interface in interfaces.keys {
            guard var state = interfaces[interface] else { continue }
            state.changesDue = state.changesDue.map { $0 + step }
            state.generalDue = state.generalDue.map { $0 + step }
            state.generalReportedAt = state.generalReportedAt.map { $0 + step }
            state.groupsDue = state.groupsDue.mapValues { $0 + step }
            state.mldv1Until = state.mldv1Until.map { $0 + step }
            interfaces[interface] = state
        }
    }

    /// Forgets an interface no longer served (its memberships went with the shell's).
    mutating func remove(_ interface: InterfaceName) {
        interfaces[interface] = nil
    }

    /// A delay chosen evenly from 0 to `limit`, in milliseconds.
    static func randomDelay(upTo limit: Duration, random: inout CoreRandom) -> Duration {
        let milliseconds =
            Int(limit.components.seconds) * 1000 + Int(limit.components.attoseconds / 1_000_000_000_000_000)
        guard milliseconds > 0 else { return .zero }
        return .milliseconds(Int.random(in: 0...milliseconds, using: &random))
    }
}

extension SleepProxyCore {
    /// The proxy's MAC and link-local address on `interface` for MLD reports (`::` while it has none).
    func listenerSource(on interface: InterfaceName) -> (MACAddress, IPv6Address)? {
        guard let link = links[interface] else { return nil }
        for prefix in link.prefixes {
            if case .v6(let v6) = prefix.address, v6.isLinkLocal { return (link.macAddress, v6) }
        }
        return (link.macAddress, .unspecified)
    }

    /// The MLD reports due by `now`.
    mutating func sendDueReports(now: UnixTime) -> [Action] {
        guard let due = listener.nextDue, due <= now else { return [] }
        var sources: [InterfaceName: (MACAddress, IPv6Address)] = [:]
        for interface in listener.interfaces.keys {
            sources[interface] = listenerSource(on: interface)
        }
        return listener.dueReports(now: now, random: &random, sources: sources)
    }
}
