import TOMLKit

/// A config file's text that is not TOML: where (lines and columns from 1, when known) and why.
public struct TOMLSyntaxError: Error, Hashable, Sendable {
    public var line: Int?
    public var message: String
}

/// A TOML value as the config readers see it: the parser's own types stay inside this target, so the daemon and
/// the client read values without depending on it. Literals make one, for command-line options and tests.
public enum TOMLValue: Sendable, Hashable {
    case string(String)
    case integer(Int)
    case boolean(Bool)
    case float(Double)
    case array([TOMLValue])
    case table([String: TOMLValue])
    /// A date, a time or both: no config key takes one.
    case dateOrTime

    public var string: String? { if case .string(let text) = self { text } else { nil } }
    public var int: Int? { if case .integer(let number) = self { number } else { nil } }
    public var bool: Bool? { if case .boolean(let flag) = self { flag } else { nil } }
    public var array: [TOMLValue]? { if case .array(let elements) = self { elements } else { nil } }
    public var table: [String: TOMLValue]? { if case .table(let entries) = self { entries } else { nil } }

    /// How the value reads in a message: `the string "high"`, `the integer 70000`.
    public var summary: String {
        switch self {
        case .string(let text): "the string \"\(text)\""
        case .integer(let number): "the integer \(number)"
        case .boolean(let flag): "\(flag)"
        case .float(let number): "the number \(number)"
        case .array: "an array"
        case .table: "a table"
        case .dateOrTime: "a date or time"
        }
    }

    fileprivate init(_ value: any TOMLValueConvertible) {
        switch value.type {
        case .string: self = .string(value.string ?? "")
        case .int: self = .integer(value.int ?? 0)
        case .bool: self = .boolean(value.bool ?? false)
        case .double: self = .float(value.double ?? 0)
        case .array: self = .array(value.array.map { $0.map(TOMLValue.init) } ?? [])
        case .table: self = .table(value.table.map(Self.entries) ?? [:])
        case .date, .time, .dateTime: self = .dateOrTime
        }
    }

    fileprivate static func entries(_ table: TOMLTable) -> [String: TOMLValue] {
        var entries: [String: TOMLValue] = [:]
        for key in table.keys {
            if let value = table[key] { entries[key] = TOMLValue(value) }
        }
        return entries
    }
}

extension TOMLValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(booleanLiteral value: Bool) { self = .boolean(value) }
    public init(arrayLiteral elements: TOMLValue...) { self = .array(elements) }
}

/// Parsing a config file's text into its top-level table, safely.
public enum TOMLDocument {
    /// The table `text` describes. toml++ 3.4 (inside TOMLKit) asserts on a few malformed texts instead of reporting
    /// them, which would abort the program, release builds included: ``TOMLPrecheck`` refuses those first.
    public static func parse(_ text: String) throws(TOMLSyntaxError) -> [String: TOMLValue] {
        if let problem = TOMLPrecheck.problem(in: text) {
            throw TOMLSyntaxError(
                line: problem.line, message: "not valid TOML (column \(problem.column)): \(problem.message)")
        }
        do {
            return TOMLValue.entries(try TOMLTable(string: text))
        } catch let error as TOMLParseError {
            throw TOMLSyntaxError(
                line: error.source.begin.line,
                message: "not valid TOML (column \(error.source.begin.column)): \(error.description)")
        } catch {
            throw TOMLSyntaxError(line: nil, message: "not valid TOML: \(error)")
        }
    }
}

/// The first line each key appears on, from a plain scan of the text: TOMLKit parses values but keeps no
/// positions. Table headers (`[wake]`, `[wake.extra_ports]`), dotted keys and quoted keys are understood.
public struct KeyLines {
    private var lines: [[String]: Int] = [:]

    public init(_ text: String) {
        var table: [String] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("[") {
                let inner = line.drop { $0 == "[" }.prefix { $0 != "]" }
                table = Self.keyPath(String(inner))
                record(table, index + 1)
            } else if let equals = line.firstIndex(of: "="), !line.hasPrefix("#") {
                let path = table + Self.keyPath(String(line[..<equals]))
                record(path, index + 1)
            }
        }
    }

    private mutating func record(_ path: [String], _ line: Int) {
        for length in 1...max(path.count, 1) where length <= path.count {
            let prefix = Array(path.prefix(length))
            if lines[prefix] == nil { lines[prefix] = line }
        }
    }

    /// `a.b`, `"a b".c`, `'x'`: the keys of a dotted key.
    static func keyPath(_ text: String) -> [String] {
        var keys: [String] = []
        var current = ""
        var quote: Character?
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == "." {
                keys.append(current.trimmingSpaces())
                current = ""
            } else {
                current.append(character)
            }
        }
        keys.append(current.trimmingSpaces())
        return keys
    }

    public func line(of path: [String]) -> Int? {
        var path = path
        while !path.isEmpty {
            if let line = lines[path] { return line }
            path.removeLast()
        }
        return nil
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
