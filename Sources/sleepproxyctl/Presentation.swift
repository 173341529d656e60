import SleepProxyControl

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How `sleepproxyctl` shows the daemon's answers to people: aligned tables, times relative to `now`, and colour
/// only when asked for.
///
/// Everything that depends on the moment or the place is a property (`now`, `clockZone`), so the same report
/// always comes out the same.
struct Presentation: Sendable {
    /// The moment relative times count from.
    var now: Date
    /// Whether to draw with ANSI colours and bold headers.
    var colour: Bool
    /// The zone clock times are shown in.
    var clockZone: ClockZone
    /// How many services the `hosts` table names before it says how many more there are.
    var maximumServicesShown = 3

    init(now: Date = Date(), colour: Bool = false, clockZone: ClockZone = .local) {
        self.now = now
        self.colour = colour
        self.clockZone = clockZone
    }

    // MARK: Times

    /// `date` relative to `now`: `in 1 h 12 min`, `45 s ago`, `now` (within half a second). Two units at most.
    static func relative(_ date: Date, to now: Date) -> String {
        let seconds = date.timeIntervalSince(now).rounded()
        guard seconds.isFinite else { return "-" }
        if seconds == 0 { return "now" }
        let text = duration(abs(seconds))
        return seconds > 0 ? "in \(text)" : "\(text) ago"
    }

    /// A length of time in its two largest units, the smaller one left out when it is zero: `45 s`, `1 min 30 s`,
    /// `1 h 12 min`, `2 d 4 h`, `3 d`. Rounds to whole seconds; less than half a second is `0 s`.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "-" }
        let total = Int64(min(max(0, seconds.rounded()), 1e15))
        let units: [(name: String, seconds: Int64)] = [("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)]
        for (index, unit) in units.enumerated() where total >= unit.seconds {
            var text = "\(total / unit.seconds) \(unit.name)"
            if index + 1 < units.count {
                let next = units[index + 1]
                let minor = total % unit.seconds / next.seconds
                if minor > 0 { text += " \(minor) \(next.name)" }
            }
            return text
        }
        return "0 s"
    }

    /// `date` relative to this presentation's `now`.
    func relative(_ date: Date) -> String {
        Self.relative(date, to: now)
    }

    /// A clock time in `clockZone`: `HH:mm:ss` when `date` falls on the same day as `now`, else
    /// `yyyy-MM-dd HH:mm:ss`.
    func clockTime(_ date: Date) -> String {
        let parts = clockZone.fields(of: date)
        let time = "\(Self.pad(parts.hour, 2)):\(Self.pad(parts.minute, 2)):\(Self.pad(parts.second, 2))"
        let today = clockZone.fields(of: now)
        if (parts.year, parts.month, parts.day) == (today.year, today.month, today.day) { return time }
        return "\(Self.pad(parts.year, 4))-\(Self.pad(parts.month, 2))-\(Self.pad(parts.day, 2)) \(time)"
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    // MARK: Status

    /// `status`: the daemon, then a table of its interfaces.
    func status(_ report: StatusReport) -> String {
        var text = TextTable.Style.bold.apply("sleepproxyd \(report.daemonVersion)", colour: colour) + "\n"
        text += fields([
            ("up", TextTable.Cell("\(Self.duration(report.uptimeSeconds)) (since \(clockTime(report.startedAt)))")),
            ("hosts", TextTable.Cell("\(report.hostCount) holding \(Self.count(report.recordCount, "record"))")),
            ("store", TextTable.Cell(report.storePath)),
            ("control socket", TextTable.Cell(report.controlSocket)),
            (
                "dry run",
                report.dryRun
                    ? TextTable.Cell("yes: wakes are logged and recorded, never sent", .yellow) : "no"
            ),
        ])
        text += "\n"
        guard !report.interfaces.isEmpty else { return text + "no interfaces served\n" }
        var table = TextTable(headers: [
            "INTERFACE", "MAC", "ADDRESSES", "ADVERTISED AS", "PORT", "HOSTS", "RECORDS", "RECEIVED", "DROPPED",
        ])
        for interface in report.interfaces {
            let dropped = interface.captureDropped.map { TextTable.Cell(String($0), $0 > 0 ? .red : .plain) }
            table.append([
                TextTable.Cell(interface.name),
                TextTable.Cell(interface.mac),
                TextTable.Cell(Self.list(interface.addresses)),
                TextTable.Cell(interface.advertisedName ?? "-"),
                TextTable.Cell(String(interface.registrationPort)),
                TextTable.Cell(String(interface.hostCount)),
                TextTable.Cell(String(interface.recordCount)),
                TextTable.Cell(interface.captureReceived.map { String($0) } ?? "-"),
                dropped ?? "-",
            ])
        }
        return text + table.render(colour: colour)
    }

    // MARK: Hosts

    /// `hosts`: one line per held or declared host, or `no hosts held`.
    func hosts(_ hosts: [HostSummary]) -> String {
        guard !hosts.isEmpty else { return "no hosts held\n" }
        var table = TextTable(headers: [
            "NAME", "MAC", "INTERFACE", "ADDRESSES", "SERVICES", "STATE", "LEASE", "LAST WAKE",
        ])
        for host in hosts {
            table.append([
                TextTable.Cell(host.name ?? "-"),
                TextTable.Cell(host.ownerMAC),
                TextTable.Cell(host.interface),
                TextTable.Cell(Self.list(host.addresses)),
                TextTable.Cell(services(host.services)),
                // The reason once: in LAST WAKE when that is the wake under way.
                state(host, withReason: host.lastWake?.reason != host.wakeReason),
                host.declared != nil ? "declared" : lease(host.leaseExpiresAt),
                TextTable.Cell(host.lastWake.map { "\(relative($0.time)): \($0.reason)" } ?? "-"),
            ])
        }
        return table.render(colour: colour)
    }

    /// The first few services, then how many more.
    func services(_ services: [String]) -> String {
        guard services.count > maximumServicesShown else { return Self.list(services) }
        let shown = services.prefix(maximumServicesShown).joined(separator: ", ")
        return "\(shown) +\(services.count - maximumServicesShown) more"
    }

    /// `held`, `taking-over`, or `waking: <reason>` (`waking` alone without `withReason`), coloured by state.
    func state(_ host: HostSummary, withReason: Bool = true) -> TextTable.Cell {
        var text = host.state
        if withReason, host.state == "waking", let reason = host.wakeReason { text += ": \(reason)" }
        switch host.state {
        case "held", "asleep: held": return TextTable.Cell(text, .green)
        case "taking-over", "waking", "probing", "asleep: taking-over": return TextTable.Cell(text, .yellow)
        default: return TextTable.Cell(text)
        }
    }

    /// When a lease ends: `in 1 h 12 min`, `expired`, or `-` for none.
    func lease(_ expiry: Date?) -> TextTable.Cell {
        guard let expiry else { return "-" }
        return expiry > now ? TextTable.Cell(relative(expiry)) : TextTable.Cell("expired", .red)
    }

    // MARK: One host

    /// `show`: the host's facts, then its addresses and its records.
    func host(_ detail: HostDetail) -> String {
        let summary = detail.summary
        let leaseText: TextTable.Cell
        if let expiry = summary.leaseExpiresAt {
            leaseText =
                expiry > now
                ? TextTable.Cell("until \(clockTime(expiry)) (\(relative(expiry)))")
                : TextTable.Cell("expired at \(clockTime(expiry)) (\(relative(expiry)))", .red)
        } else {
            leaseText = "none"
        }
        var text = fields([
            ("name", TextTable.Cell(summary.name ?? "-", .bold)),
            ("owner MAC", TextTable.Cell(summary.ownerMAC)),
            ("wake MAC", TextTable.Cell(summary.wakeMAC)),
            ("interface", TextTable.Cell(summary.interface)),
            ("state", state(summary)),
            ("registered", TextTable.Cell("\(clockTime(summary.registeredAt)) (\(relative(summary.registeredAt)))")),
            ("lease", leaseText),
            ("sequence", TextTable.Cell(String(detail.sequence))),
            ("last source", TextTable.Cell(detail.lastSource ?? "-")),
            ("last wake", TextTable.Cell(summary.lastWake.map(wake) ?? "never")),
            ("services", TextTable.Cell(Self.list(summary.services))),
        ])

        text += "\n" + section("ADDRESSES", detail.addresses.count)
        if detail.addresses.isEmpty {
            text += "  none\n"
        } else {
            var addresses = TextTable(headers: ["ADDRESS", "STATE"], indent: "  ")
            for address in detail.addresses {
                let style: TextTable.Style =
                    switch address.state {
                    case "claimed": .green
                    case "probing", "backing-off": .yellow
                    default: .plain
                    }
                addresses.append([TextTable.Cell(address.address), TextTable.Cell(address.state, style)])
            }
            text += addresses.render(colour: colour)
        }

        text += "\n" + section("RECORDS", detail.records.count)
        if detail.records.isEmpty {
            text += "  none\n"
        } else {
            var records = TextTable(headers: ["NAME", "TYPE", "TTL", "UNIQUE", "EXPIRES", "DATA"], indent: "  ")
            for record in detail.records {
                records.append([
                    TextTable.Cell(record.name),
                    TextTable.Cell(record.type),
                    TextTable.Cell(String(record.ttl)),
                    record.unique ? "yes" : "no",
                    lease(record.expiresAt),
                    TextTable.Cell(record.data),
                ])
            }
            text += records.render(colour: colour)
        }

        if let connections = detail.connections, !connections.isEmpty {
            text += "\n" + section("KEPT ALIVE", connections.count)
            var table = TextTable(
                headers: ["LOCAL", "PEER", "EVERY", "KEEPALIVES SENT", "PROBES ANSWERED", "PEER LAST HEARD"],
                indent: "  ")
            for connection in connections {
                table.append([
                    TextTable.Cell(connection.local),
                    TextTable.Cell(connection.remote),
                    TextTable.Cell("\(connection.intervalSeconds) s"),
                    TextTable.Cell(counted(connection.keepalivesSent, connection.lastKeepaliveSent)),
                    TextTable.Cell(counted(connection.probesAnswered, connection.lastProbeAnswered)),
                    connection.silent
                        ? TextTable.Cell("silent (\(connection.lastHeard.map(relative) ?? "never"))", .red)
                        : TextTable.Cell(connection.lastHeard.map(relative) ?? "-"),
                ])
            }
            text += table.render(colour: colour)
        }
        return text
    }

    /// `3, last 12 s ago`, or `0`.
    private func counted(_ count: Int, _ last: Date?) -> String {
        guard count > 0, let last else { return String(count) }
        return "\(count), last \(relative(last))"
    }

    /// A recorded wake: when, why and who set it off.
    func wake(_ wake: WakeReport) -> String {
        var text = "\(clockTime(wake.time)) (\(relative(wake.time))): \(wake.reason)"
        if let source = Self.source(address: wake.sourceAddress, port: wake.sourcePort) { text += ", from \(source)" }
        return text
    }

    private func section(_ title: String, _ count: Int) -> String {
        TextTable.Style.bold.apply(title, colour: colour) + " (\(count))\n"
    }

    // MARK: Events

    /// `events`: the history as a table, oldest first, or `no events recorded`.
    func events(_ events: [EventReport]) -> String {
        guard !events.isEmpty else { return "no events recorded\n" }
        return eventTable(events).render(colour: colour)
    }

    /// The events table, for printing whole or, with `streaming`, as the start of a `follow` stream. A streaming
    /// table starts its columns wide enough for typical events, so that later lines mostly stay aligned.
    func eventTable(_ events: [EventReport], streaming: Bool = false) -> TextTable {
        var table = TextTable(
            headers: ["TIME", "KIND", "INTERFACE", "HOST", "SOURCE", "DETAIL"],
            minimumWidths: streaming ? [8, 14, 9, 17, 20] : [])
        for event in events {
            table.append(eventRow(event))
        }
        return table
    }

    /// One event as a row of the events table.
    func eventRow(_ event: EventReport) -> [TextTable.Cell] {
        let style: TextTable.Style =
            switch event.kind {
            case "registered", "renewed": .green
            case "wake", "would-wake", "takeover": .yellow
            case "refused", "conflict", "expired": .red
            default: .plain
            }
        var detail = event.detail
        if let reason = event.reason, !detail.contains(reason) { detail += " (\(reason))" }
        return [
            TextTable.Cell(clockTime(event.time)),
            TextTable.Cell(event.kind, style),
            TextTable.Cell(event.interface),
            TextTable.Cell(event.host ?? event.ownerMAC ?? "-"),
            TextTable.Cell(Self.source(address: event.sourceAddress, port: event.sourcePort) ?? "-"),
            TextTable.Cell(detail),
        ]
    }

    // MARK: Pieces

    /// `192.0.2.7 port 51234`, the address alone without a port, nil without an address.
    static func source(address: String?, port: Int?) -> String? {
        guard let address else { return nil }
        guard let port else { return address }
        return "\(address) port \(port)"
    }

    /// Items joined with commas, `-` for none.
    static func list(_ items: [String]) -> String {
        items.isEmpty ? "-" : items.joined(separator: ", ")
    }

    /// `1 record`, `14 records`.
    static func count(_ value: Int, _ noun: String) -> String {
        value == 1 ? "1 \(noun)" : "\(value) \(noun)s"
    }

    /// Labelled lines, the values aligned: `label:  value`.
    private func fields(_ pairs: [(String, TextTable.Cell)]) -> String {
        var table = TextTable(headers: ["", ""])
        for (label, value) in pairs {
            table.append([TextTable.Cell(label + ":"), value])
        }
        return table.rows.map { table.line($0, colour: colour) + "\n" }.joined()
    }
}

/// Where clock times are read: the system's local time, or a fixed offset from UTC.
///
/// Local time is the C library's (`localtime_r`): the `TZ` variable, else `/etc/localtime`, as `date` shows it,
/// with no time zone database of our own.
struct ClockZone: Hashable, Sendable {
    private enum Code: Hashable, Sendable {
        case local
        case offset(seconds: Int)
    }
    private let code: Code

    /// The system's local time, summer time included.
    static let local = ClockZone(code: .local)
    /// Coordinated Universal Time.
    static let utc = ClockZone(code: .offset(seconds: 0))

    /// A fixed offset east of UTC, in seconds (`7200` is UTC+2).
    static func fixed(secondsFromUTC: Int) -> ClockZone {
        ClockZone(code: .offset(seconds: secondsFromUTC))
    }

    /// The calendar fields of `date` in this zone (whole seconds, rounded down).
    func fields(of date: Date) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        var moment = tm()
        switch code {
        case .local:
            var time = time_t(seconds)
            localtime_r(&time, &moment)
        case .offset(let offset):
            var time = time_t(seconds) + time_t(offset)
            gmtime_r(&time, &moment)
        }
        return (
            Int(moment.tm_year) + 1900, Int(moment.tm_mon) + 1, Int(moment.tm_mday), Int(moment.tm_hour),
            Int(moment.tm_min), Int(moment.tm_sec)
        )
    }
}
