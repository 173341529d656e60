public import TOMLKit

/// A config file's text that is not TOML: where (lines and columns from 1, when known) and why.
public struct TOMLSyntaxError: Error, Hashable, Sendable {
    public var line: Int?
    public var message: String
}

/// Parsing a config file's text into a TOMLKit table, safely.
public enum TOMLDocument {
    /// The table `text` describes. toml++ 3.4 (inside TOMLKit) asserts on a few malformed texts instead of reporting
    /// them, which would abort the program, release builds included: ``TOMLPrecheck`` refuses those first.
    public static func parse(_ text: String) throws(TOMLSyntaxError) -> TOMLTable {
        if let problem = TOMLPrecheck.problem(in: text) {
            throw TOMLSyntaxError(
                line: problem.line, message: "not valid TOML (column \(problem.column)): \(problem.message)")
        }
        do {
            return try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw TOMLSyntaxError(
                line: error.source.begin.line,
                message: "not valid TOML (column \(error.source.begin.column)): \(error.description)")
        } catch {
            throw TOMLSyntaxError(line: nil, message: "not valid TOML: \(error)")
        }
    }
}

/// How a TOML value reads in a message: `the string "high"`, `the integer 70000`.
public func describe(_ value: any TOMLValueConvertible) -> String {
    switch value.type {
    case .string: "the string \"\(value.string ?? "")\""
    case .int: "the integer \(value.int ?? 0)"
    case .bool: "\(value.bool ?? false)"
    case .double: "the number \(value.double ?? 0)"
    case .array: "an array"
    case .table: "a table"
    case .date, .time, .dateTime: "a date or time"
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
