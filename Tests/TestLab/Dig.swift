import Foundation

/// A resource record as dig prints it: `sleeper.local.  10  IN  A  10.77.0.2`.
public struct DigRecord: Sendable, Hashable, CustomStringConvertible {
    /// In presentation format, with dig's escapes (`sleeper\032SSH._ssh._tcp.local.`).
    public var name: String
    public var ttl: UInt32
    /// `IN`; mDNS cache-flush records show as `CLASS32769`.
    public var recordClass: String
    /// `A`, `AAAA`, `PTR`, `SRV`, `TXT`, …
    public var type: String
    /// The rest of the line: `10.77.0.2`, `0 0 22 sleeper.local.`, `"u=test"`.
    public var data: String

    public init(name: String, ttl: UInt32, recordClass: String, type: String, data: String) {
        self.name = name
        self.ttl = ttl
        self.recordClass = recordClass
        self.type = type
        self.data = data
    }

    /// Parses a record line; `nil` if it is not one.
    public init?<Line: StringProtocol>(line: Line) {
        var rest = Substring(line)
        var fields: [Substring] = []
        while fields.count < 4 {
            rest = rest.drop(while: \.isWhitespace)
            let field = rest.prefix(while: { !$0.isWhitespace })
            guard !field.isEmpty else { return nil }
            fields.append(field)
            rest = rest.dropFirst(field.count)
        }
        guard let ttl = UInt32(fields[1]) else { return nil }
        let data = rest.drop(while: \.isWhitespace)
        self.init(
            name: String(fields[0]),
            ttl: ttl,
            recordClass: String(fields[2]),
            type: String(fields[3]),
            data: String(data.reversed().drop(while: \.isWhitespace).reversed())
        )
    }

    public var description: String { "\(name) \(ttl) \(recordClass) \(type) \(data)" }
}

/// One DNS message in dig's output: the query it sent (`+qr`) or the response it got.
public struct DigMessage: Sendable, Hashable {
    public var id: UInt16
    /// `QUERY`.
    public var opcode: String
    /// `NOERROR`, `NXDOMAIN`, …
    public var status: String
    /// `qr`, `aa`, `rd`, …
    public var flags: [String]
    /// Question lines without the leading `;`: `sleeper.local. IN A` (dig's spacing).
    public var questions: [String]
    public var answers: [DigRecord]
    public var authority: [DigRecord]
    public var additional: [DigRecord]
    /// Whether the message carried an OPT record (dig's "OPT PSEUDOSECTION").
    public var hasEDNS: Bool

    public init(
        id: UInt16,
        opcode: String,
        status: String,
        flags: [String] = [],
        questions: [String] = [],
        answers: [DigRecord] = [],
        authority: [DigRecord] = [],
        additional: [DigRecord] = [],
        hasEDNS: Bool = false
    ) {
        self.id = id
        self.opcode = opcode
        self.status = status
        self.flags = flags
        self.questions = questions
        self.answers = answers
        self.authority = authority
        self.additional = additional
        self.hasEDNS = hasEDNS
    }
}

/// What `dig +qr` printed, parsed: the query it sent and the response it got, if any.
public struct DigResult: Sendable, Hashable {
    /// dig's exit status and output; status 9 means no reply.
    public var command: CommandResult
    public var query: DigMessage?
    public var response: DigMessage?
    /// dig's warnings (`;; Warning: ID mismatch: …`, `;; WARNING: .local is reserved for Multicast DNS`).
    public var warnings: [String]
    /// dig's errors (`;; communications error to …: timed out`).
    public var errors: [String]

    public init(command: CommandResult) {
        self.command = command
        self.warnings = []
        self.errors = []
        parse(command.stdout + "\n" + command.stderr)
    }

    /// Whether a response arrived.
    public var answered: Bool { response != nil }
    /// Whether a response arrived and carries the query's ID.
    public var idMatched: Bool { query != nil && query?.id == response?.id }
    /// The response's status, `nil` without a response.
    public var status: String? { response?.status }
    /// The response's flags; empty without a response.
    public var flags: [String] { response?.flags ?? [] }
    /// The response's answer section; empty without a response.
    public var answers: [DigRecord] { response?.answers ?? [] }
    /// The response's additional section; empty without a response.
    public var additional: [DigRecord] { response?.additional ?? [] }

    private enum Section {
        case none
        case question
        case answer
        case authority
        case additional
    }

    private mutating func parse(_ output: String) {
        var current: DigMessage?
        var isResponse = false
        var section = Section.none
        func finish() {
            if let message = current {
                if isResponse { response = message } else { query = message }
            }
            current = nil
            section = .none
        }
        for rawLine in output.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line == ";; Sending:" || line == ";; Got answer:" {
                finish()
                isResponse = line == ";; Got answer:"
            } else if line.hasPrefix(";; Warning:") || line.hasPrefix(";; WARNING:") {
                warnings.append(String(line.dropFirst(3)))
            } else if line.hasPrefix(";; communications error") || line.hasPrefix(";; no servers could be reached") {
                errors.append(String(line.dropFirst(3)))
            } else if line.hasPrefix(";; ->>HEADER<<-") {
                let fields = Self.headerFields(line.dropFirst(";; ->>HEADER<<-".count))
                current = DigMessage(
                    id: fields["id"].flatMap { UInt16($0) } ?? 0,
                    opcode: fields["opcode"] ?? "",
                    status: fields["status"] ?? ""
                )
            } else if line.hasPrefix(";; flags:"), current != nil {
                let flags = line.dropFirst(";; flags:".count).prefix(while: { $0 != ";" })
                current?.flags = flags.split(separator: " ").map(String.init)
            } else if line == ";; OPT PSEUDOSECTION:" {
                current?.hasEDNS = true
            } else if line == ";; QUESTION SECTION:" {
                section = .question
            } else if line == ";; ANSWER SECTION:" {
                section = .answer
            } else if line == ";; AUTHORITY SECTION:" {
                section = .authority
            } else if line == ";; ADDITIONAL SECTION:" {
                section = .additional
            } else if line.isEmpty {
                section = .none
            } else if section == .question, line.hasPrefix(";") {
                current?.questions.append(String(line.dropFirst()))
            } else if !line.hasPrefix(";"), let record = DigRecord(line: line) {
                switch section {
                case .answer: current?.answers.append(record)
                case .authority: current?.authority.append(record)
                case .additional: current?.additional.append(record)
                case .none, .question: break
                }
            } else if line.hasPrefix(";; Query time:") || line.hasPrefix(";; QUERY SIZE:") {
                // Sizes and timings close a message.
                finish()
            }
        }
        finish()
    }

    /// `opcode: QUERY, status: NOERROR, id: 42754` as a dictionary.
    private static func headerFields(_ text: Substring) -> [String: String] {
        var fields: [String: String] = [:]
        for part in text.split(separator: ",") {
            let pair = part.split(separator: ":", maxSplits: 1)
            guard pair.count == 2 else { continue }
            fields[pair[0].trimmingCharacters(in: .whitespaces)] = pair[1].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }
}

extension Lab {
    /// Sends one legacy-unicast DNS query from `role` with
    /// `dig +norecurse +time=2 +tries=1 +qr -p <port> @<server> <name> <type>` and parses what it printed.
    ///
    /// Query a responder's unicast address (`10.77.0.2`, `fd77::2`): BIND 9.18's dig uses a connected socket,
    /// so it drops replies from any other address. That rules out 224.0.0.251, and also a link-local server
    /// address (`fe80::77:ff:fe00:2%eth0`) while the responder has a global one: avahi answers from the IPv6
    /// address it publishes, which is then the global one. `options` go before the server, for example
    /// `+noedns`, `+nocookie`, `+time=1`. An unanswered query is no error: check ``DigResult/answered``.
    public func dig(
        from role: Role,
        server: String,
        port: UInt16 = 5353,
        name: String,
        type: String,
        options: [String] = []
    ) async throws -> DigResult {
        let arguments =
            ["dig", "+norecurse", "+time=2", "+tries=1", "+qr"] + options
            + ["-p", String(port), "@" + server, name, type]
        let result = try await run(role, arguments, timeout: .seconds(10))
        guard result.status == 0 || result.status == 9 else {
            throw LabError("dig in \(role.rawValue) failed: \(result)")
        }
        return DigResult(command: result)
    }
}
