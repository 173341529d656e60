import Logging
import NetworkAddresses
import SleepProxyCore

extension Settings {
    /// The settings as a config file that sets every key: what `sleepproxyd --check-config` prints. Values left
    /// to the machine (the interface, the names) are shown as set, with what they stand for here in a comment.
    public func toml(context: SettingsContext? = nil) -> String {
        func quoted(_ text: String) -> String {
            var escaped = ""
            for character in text.unicodeScalars {
                switch character {
                case "\"": escaped += "\\\""
                case "\\": escaped += "\\\\"
                case "\n": escaped += "\\n"
                case "\t": escaped += "\\t"
                default:
                    if character.value < 0x20 || character.value == 0x7F {
                        let hex = String(character.value, radix: 16)
                        escaped += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    } else {
                        escaped.unicodeScalars.append(character)
                    }
                }
            }
            return "\"\(escaped)\""
        }
        func list(_ items: [String]) -> String { "[" + items.map(quoted).joined(separator: ", ") + "]" }
        func note(_ condition: Bool, _ text: @autoclosure () -> String?) -> String {
            guard condition, let text = text() else { return "" }
            return "  # \(text)"
        }

        var lines: [String] = []
        lines.append(
            "interfaces = \(list(interfaces))"
                + note(
                    interfaces.isEmpty,
                    context.map { "the default route's: \($0.defaultRouteInterface ?? "none found")" }))
        lines.append("state_directory = \(quoted(stateDirectory))")
        lines.append("registration_port = \(registrationPort)")
        lines.append("log_level = \(quoted(logLevel.rawValue))")
        lines.append("wake_all_on_exit = \(wakeAllOnExit)")
        lines.append("")
        lines.append("[advertisement]")
        lines.append("enabled = \(advertise)")
        lines.append("metrics = \(quoted(metrics.description))")
        lines.append("keepalive_offload = \(keepaliveOffload)")
        lines.append(
            "name = \(quoted(advertisedName))" + note(advertisedName.isEmpty, context.map { "here: \($0.hostName)" }))
        lines.append(
            "host_name = \(quoted(advertisedHostName))"
                + note(advertisedHostName.isEmpty, context.map { "here: \($0.hostName)-sleepproxy" }))
        lines.append("")
        lines.append("[limits]")
        lines.append("maximum_lease = \(maximumLease)")
        lines.append("maximum_records_per_host = \(maximumRecordsPerHost)")
        lines.append("maximum_records = \(maximumRecords)")
        lines.append("event_history = \(eventHistory)")
        lines.append("maximum_batch = \(maximumBatch)")
        lines.append("maximum_registration_bytes = \(maximumRegistrationBytes)")
        lines.append("maximum_hosts_per_interface = \(maximumHostsPerInterface)")
        lines.append("registrations_per_second = \(registrationsPerSecond)")
        lines.append("registration_burst = \(registrationBurst)")
        lines.append("control_connections = \(controlConnections)")
        lines.append("queries_per_second = \(queriesPerSecond)")
        lines.append("query_burst = \(queryBurst)")
        lines.append("maximum_questions_per_query = \(maximumQuestionsPerQuery)")
        lines.append("maximum_pending_responses = \(maximumPendingResponses)")
        lines.append("")
        lines.append("[control]")
        lines.append("socket = \(quoted(controlSocket))")
        lines.append("group = \(quoted(controlGroup))")
        lines.append("")
        lines.append("[metrics]")
        lines.append("listen = \(quoted(metricsListen))")
        lines.append("")
        lines.append("[takeover]")
        lines.append("claim = \(quoted(addressClaim.rawValue))")
        lines.append("")
        lines.append("[wake]")
        lines.append("dry_run = \(dryRun)")
        lines.append("ignore_sources = \(list(ignoreSources.map(\.description)))")
        lines.append("never_wake = \(list(neverWake.map(\.description)))")
        lines.append("")
        lines.append("[wake.extra_ports]")
        for extra in extraPorts {
            lines.append("\(quoted(extra.host.description)) = \(list(extra.ports.map(\.description)))")
        }
        for host in declaredHosts {
            lines.append("")
            lines.append("[hosts.\(host.name)]")
            lines.append("mac = \(quoted(host.mac.description))")
            if !host.interface.rawValue.isEmpty { lines.append("interface = \(quoted(host.interface.rawValue))") }
            lines.append(
                "addresses = \(list(host.addresses.map(\.description) + (host.learnsAddresses ? ["learn"] : [])))")
            if !host.wakePorts.isEmpty { lines.append("wake_ports = \(list(host.wakePorts.map(\.description)))") }
            if let hostName = host.hostName { lines.append("host_name = \(quoted(hostName))") }
            if !host.services.isEmpty {
                let services = host.services.map { service in
                    "{ name = \(quoted(service.name)), type = \(quoted(service.type)), port = \(service.port), txt = \(list(service.txt)) }"
                }
                lines.append("services = [\(services.joined(separator: ", "))]")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The settings in a few log lines, one per table, for the start-up log.
    public func logLines() -> [String] {
        toml().split(separator: "\n\n").map { section in
            let lines = section.split(separator: "\n")
            guard let first = lines.first else { return "" }
            if first.hasPrefix("[") {
                return "configuration \(first): " + lines.dropFirst().joined(separator: ", ")
            }
            return "configuration: " + lines.joined(separator: ", ")
        }.filter { !$0.hasSuffix(": ") }
    }
}
