/// One line of `avahi-browse --parsable --no-db-lookup` output.
///
/// avahi-browse prints `+` (found), `-` (removed: a goodbye or expiry) and, with `--resolve`, `=` (resolved)
/// lines: `=;eth0;IPv4;sleeper\032SSH;_ssh._tcp;local;sleeper.local;10.77.0.2;22;"u=test"`. The instance name
/// comes escaped (`\032` decimal bytes, `\.` and `\\`); ``name`` holds it unescaped.
public struct AvahiBrowseEntry: Sendable, Hashable, CustomStringConvertible {
    public enum Event: String, Sendable, Hashable {
        case added = "+"
        case removed = "-"
        case resolved = "="
    }

    public var event: Event
    /// `eth0`.
    public var interface: String
    /// The protocol the service was seen on. A resolved entry's ``address`` may be of either version: avahi
    /// publishes AAAA records over IPv4 too (`publish-aaaa-on-ipv4`), and avahi-browse takes either.
    public var ipVersion: Lab.IPVersion
    /// The instance name, unescaped: `sleeper SSH`.
    public var name: String
    /// `_ssh._tcp`.
    public var type: String
    /// `local`.
    public var domain: String
    /// The SRV target, such as `sleeper.local`; resolved entries only.
    public var hostName: String?
    /// `10.77.0.2` or `fe80::77:ff:fe00:2` (no scope); resolved entries only.
    public var address: String?
    /// Resolved entries only.
    public var port: UInt16?
    /// The TXT strings in wire order (avahi-browse prints them reversed; this undoes that). Resolved entries only.
    public var txt: [String]

    public init(
        event: Event,
        interface: String,
        ipVersion: Lab.IPVersion,
        name: String,
        type: String,
        domain: String,
        hostName: String? = nil,
        address: String? = nil,
        port: UInt16? = nil,
        txt: [String] = []
    ) {
        self.event = event
        self.interface = interface
        self.ipVersion = ipVersion
        self.name = name
        self.type = type
        self.domain = domain
        self.hostName = hostName
        self.address = address
        self.port = port
        self.txt = txt
    }

    /// Parses one line; `nil` for anything that is not a browse line.
    public init?<Line: StringProtocol>(line: Line) {
        let fields = String(line).split(separator: ";", maxSplits: 9, omittingEmptySubsequences: false)
            .map(String.init)
        guard fields.count >= 6, let event = Event(rawValue: fields[0]),
            let ipVersion = Lab.IPVersion(rawValue: fields[2])
        else { return nil }
        self.init(
            event: event,
            interface: fields[1],
            ipVersion: ipVersion,
            name: Self.unescapeLabel(fields[3]),
            type: fields[4],
            domain: fields[5]
        )
        guard event == .resolved else { return }
        guard fields.count == 10, let port = UInt16(fields[8]) else { return nil }
        hostName = fields[6]
        address = fields[7]
        self.port = port
        txt = Self.parseTXT(fields[9]).reversed()
    }

    /// Every browse line of `output`, in order.
    public static func parse(_ output: String) -> [AvahiBrowseEntry] {
        output.split(separator: "\n").compactMap { AvahiBrowseEntry(line: $0) }
    }

    public var description: String {
        var text = "\(event.rawValue) \(interface) \(ipVersion.rawValue) \"\(name)\" \(type) \(domain)"
        if event == .resolved {
            text += " \(hostName ?? "?") \(address ?? "?") \(port.map(String.init) ?? "?") \(txt)"
        }
        return text
    }

    /// Undoes avahi's label escaping: `\DDD` is a byte in decimal, `\x` is `x`.
    static func unescapeLabel(_ escaped: String) -> String {
        var bytes: [UInt8] = []
        var input = Array(escaped.utf8)[...]
        while let byte = input.popFirst() {
            guard byte == UInt8(ascii: "\\"), let next = input.first else {
                bytes.append(byte)
                continue
            }
            let digits = input.prefix(3)
            if digits.count == 3, digits.allSatisfy({ (0x30...0x39).contains($0) }),
                let value = UInt8(String(decoding: digits, as: UTF8.self))
            {
                bytes.append(value)
                input = input.dropFirst(3)
            } else {
                bytes.append(next)
                input = input.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `"a=1" "b=\"q\"" "c=\195\169"` as avahi prints a TXT record: quoted strings with `\"`, `\\` and
    /// `\DDD` escapes, separated by spaces.
    static func parseTXT(_ text: String) -> [String] {
        var strings: [String] = []
        var current: [UInt8]?
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            guard current != nil else {
                if byte == UInt8(ascii: "\"") { current = [] }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                strings.append(String(decoding: current!, as: UTF8.self))
                current = nil
            case UInt8(ascii: "\\"):
                let digits = input.prefix(3)
                if digits.count == 3, digits.allSatisfy({ (0x30...0x39).contains($0) }),
                    let value = UInt8(String(decoding: digits, as: UTF8.self))
                {
                    current!.append(value)
                    input = input.dropFirst(3)
                } else if let next = input.popFirst() {
                    current!.append(next)
                }
            default:
                current!.append(byte)
            }
        }
        return strings
    }
}

/// A continuous `avahi-browse` started with ``AvahiInstance/startBrowsing(_:)``: its output accumulates, and
/// ``entries`` parses what has arrived so far. The lab stops it at teardown, or call ``stop()``.
public struct AvahiBrowser: Sendable {
    public let process: LabProcess

    /// Every line so far, in order: additions, resolutions, removals.
    public var entries: [AvahiBrowseEntry] { AvahiBrowseEntry.parse(process.stdout) }

    /// Waits until `condition` holds for the entries so far, at most `timeout`; returns them.
    public func waitForEntries(
        within timeout: Duration = .seconds(10),
        until condition: @escaping @Sendable ([AvahiBrowseEntry]) -> Bool
    ) async throws -> [AvahiBrowseEntry] {
        do {
            return try await eventually("avahi-browse entries", within: timeout, every: .milliseconds(50)) {
                let entries = self.entries
                return condition(entries) ? entries : nil
            }
        } catch let error as TimeoutError {
            throw TimeoutError("\(error); entries so far: \(entries); stderr: \(process.stderr)")
        }
    }

    public func stop() {
        process.terminate(grace: .seconds(1))
    }
}
