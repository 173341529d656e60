import Logging
import NetworkAddresses
import SleepProxyCore

extension Settings {
    /// The settings as a config file that sets every key: what `sleepproxyd --check-config` prints. Values left
    /// to the machine (the interface, the names) are shown as set, with what they stand for here in a comment.
    /// `hidingSecrets` writes a token that is set as `"(set, not shown)"`: for the log and the terminal.
    public func toml(context: SettingsContext? = nil, hidingSecrets: Bool = false) -> String {
        var lines: [String] = []
        // The table the next `name = value` line lands in; nil after `[wake.extra_ports]` or `[hosts.NAME]`, which
        // a key written after them leaves by opening its own table (top-level keys come first: TOML has no
        // header for the top level).
        var table: [String]? = []
        func open(_ path: [String]) {
            if !lines.isEmpty { lines.append("") }
            lines.append("[\(path.joined(separator: "."))]")
        }
        for key in Schema.keys {
            switch key.form {
            case .value(_, let write):
                let parent = Array(key.path.dropLast())
                if parent != table {
                    open(parent)
                    table = parent
                }
                if hidingSecrets, Schema.secretKeys.contains(key.name), !webToken.isEmpty {
                    lines.append("\(key.path[key.path.count - 1]) = \"(set, not shown)\"")
                } else {
                    lines.append("\(key.path[key.path.count - 1]) = \(write(self, context))")
                }
            case .hostTable(_, let write):
                open(key.path)
                table = nil
                lines += write(self)
            case .namedTables(_, _, let write):
                for (name, body) in write(self) {
                    open(key.path + [name])
                    lines += body
                }
                table = nil
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The settings in a few log lines, one per table, for the start-up log.
    public func logLines() -> [String] {
        toml(hidingSecrets: true).split(separator: "\n\n").map { section in
            let lines = section.split(separator: "\n")
            guard let first = lines.first else { return "" }
            if first.hasPrefix("[") {
                return "configuration \(first): " + lines.dropFirst().joined(separator: ", ")
            }
            return "configuration: " + lines.joined(separator: ", ")
        }.filter { !$0.hasSuffix(": ") }
    }
}
