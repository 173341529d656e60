/// The `[hosts.NAME]` table for a machine heard (`sleepproxyctl seen --toml`, and the daemon's page): its MAC and interface, which is
/// all a machine that announces itself needs; what it announces is said in comments.
public struct SeenDeclaration: Sendable {
    public var machine: SeenReport

    public init(_ machine: SeenReport) {
        self.machine = machine
    }

    /// The machine `text` names: its MAC, its host name (with or without `.local`, any case), one of its addresses,
    /// the name of its declaration, or one of its services' names.
    public static func find(_ text: String, in machines: [SeenReport]) -> Result<SeenReport, ControlError> {
        let wanted = text.lowercased()
        let bare = wanted.hasSuffix(".local") ? String(wanted.dropLast(6)) : wanted
        let tests: [(SeenReport) -> Bool] = [
            { $0.mac.lowercased() == String(wanted.map { $0 == "-" ? ":" : $0 }) },
            { machine in
                machine.hostName.map { name in
                    let lower = name.lowercased()
                    return lower == wanted || lower == bare + ".local"
                } ?? false
            },
            { $0.addresses.contains(text) },
            { $0.declared?.lowercased() == wanted },
            { $0.services.contains { $0.name.lowercased() == wanted } },
        ]
        for test in tests {
            let matches = machines.filter(test)
            if matches.count == 1 { return .success(matches[0]) }
            if matches.count > 1 {
                let listed = matches.map { "\($0.mac) on \($0.interface)" }.joined(separator: ", ")
                return .failure(
                    ControlError(.ambiguousHost, "\(text) names several machines (\(listed)): give the MAC"))
            }
        }
        return .failure(
            ControlError(
                .unknownHost,
                "no machine heard is \(text); `sleepproxyctl seen` lists them (by MAC, host name, address or service)"))
    }

    /// The table's name: the machine's host name as a lower-case label of letters, digits and hyphens
    /// (`annas-imac` for `Annas-iMac.local`), else its first service's name, else `host-` and its MAC's digits.
    public var tableName: String {
        let candidates =
            [machine.hostName.map { String($0.split(separator: ".").first ?? "") }] + [
                machine.services.first?.name
            ]
        for candidate in candidates.compactMap({ $0 }) {
            let name = Self.label(candidate)
            if !name.isEmpty { return name }
        }
        return "host-" + machine.mac.filter(\.isHexDigit).lowercased()
    }

    /// `text` in lower case, each run of other characters than letters and digits a hyphen, at most 63 bytes.
    static func label(_ text: String) -> String {
        var label = ""
        for scalar in text.lowercased().unicodeScalars {
            if scalar.isASCII, scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) {
                label.unicodeScalars.append(scalar)
            } else if !label.isEmpty, !label.hasSuffix("-") {
                label += "-"
            }
        }
        label = String(label.prefix(63))
        while label.hasSuffix("-") { label.removeLast() }
        return label
    }

    public var text: String {
        var lines: [String] = []
        let vendor = machine.vendor.map { " (\(Self.comment($0)))" } ?? ""
        lines.append(
            "# \(Self.comment(machine.hostName ?? machine.mac))\(vendor) on \(Self.comment(machine.interface))")
        if !machine.addresses.isEmpty { lines.append("# heard at \(machine.addresses.joined(separator: ", "))") }
        if machine.services.isEmpty {
            lines.append("# It announces no services: add wake_ports for the connections that should wake it.")
        } else {
            lines.append("# It announces these services; the proxy learns them while it is awake and answers them")
            lines.append("# while it sleeps, and a connection to one of their ports wakes it:")
            for service in machine.services {
                lines.append("#   \(Self.comment(service.name)) (\(Self.comment(service.type)), port \(service.port))")
            }
        }
        switch machine.role {
        case "declared":
            lines.append("# Already declared as [hosts.\(Self.comment(machine.declared ?? "?"))].")
        case "registers":
            lines.append("# It registers with this proxy already: it needs no declaration unless it stops.")
        default: break
        }
        lines.append("[hosts.\(tableName)]")
        lines.append("mac = \"\(machine.mac)\"")
        lines.append("interface = \"\(Self.escaped(machine.interface))\"")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` fit for a comment line: control characters (a newline in an instance name) shown as `?`.
    static func comment(_ text: String) -> String {
        String(
            String.UnicodeScalarView(text.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : $0 }))
    }

    /// `text` as the inside of a TOML basic string.
    static func escaped(_ text: String) -> String {
        var escaped = ""
        for character in text {
            if character == "\\" || character == "\"" { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }
}
