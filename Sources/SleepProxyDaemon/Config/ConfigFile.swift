import NetworkAddresses
import NetworkIO
public import TOMLConfig

#if canImport(Glibc)
    import Glibc
#endif

/// A configuration problem: the file and line where known, the key, and what is allowed.
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    public var file: String?
    public var line: Int?
    /// The key as written in the file, with its table: `registration_port`, `limits.maximum_lease`.
    public var key: String?
    public var message: String

    public init(file: String? = nil, line: Int? = nil, key: String? = nil, _ message: String) {
        self.file = file
        self.line = line
        self.key = key
        self.message = message
    }

    /// `/etc/sleepproxy/sleepproxy.toml:3: registration_port: expected ...`: the form editors and compilers use.
    public var description: String {
        var text = ""
        if let file { text += line.map { "\(file):\($0): " } ?? "\(file): " }
        if let key { text += "\(key): " }
        return text + message
    }
}

/// Reads the TOML config file onto `Settings`. Every key is optional; an unknown key, a value of the wrong type
/// or out of range is an error naming the file, the line, the key and what is allowed.
public enum ConfigFile {
    /// Reads `path` onto `settings`. A missing file leaves the settings as they are and returns false.
    public static func load(path: String, onto settings: inout Settings) throws(ConfigError) -> Bool {
        let text: String
        switch readTextFile(path) {
        case .success(let contents): text = contents
        case .failure(let error) where error.code == ENOENT: return false
        case .failure(let error): throw ConfigError(file: path, "cannot read the config file: \(error)")
        }
        settings = try parse(text, path: path, onto: settings)
        return true
    }

    /// The settings `text` describes on top of `base`.
    public static func parse(_ text: String, path: String, onto base: Settings) throws(ConfigError) -> Settings {
        let table: [String: TOMLValue]
        do {
            table = try TOMLDocument.parse(text)
        } catch {
            throw ConfigError(file: path, line: error.line, error.message)
        }
        var reader = Reader(path: path, lines: KeyLines(text))
        var settings = base
        try reader.read(table, schema: Schema.root, at: [], into: &settings)
        return settings
    }

    /// `settings` with one key set to `value`, checked as the file's key is: for command-line options.
    public static func apply(
        _ value: TOMLValue, at key: [String], onto settings: Settings
    ) throws(ConfigError) -> Settings {
        var schema = Schema.root
        var settings = settings
        for (index, name) in key.enumerated() {
            switch schema[name] {
            case .table(let inner) where index < key.count - 1:
                schema = inner
            case .value(let apply) where index == key.count - 1:
                do {
                    try apply(value, &settings)
                } catch let problem {
                    throw ConfigError(key: key.joined(separator: "."), problem.message)
                }
                return settings
            default:
                break
            }
        }
        throw ConfigError(key: key.joined(separator: "."), "not a key of the configuration")
    }

    private struct Reader {
        let path: String
        let lines: KeyLines

        func error(_ key: [String], _ message: String) -> ConfigError {
            ConfigError(file: path, line: lines.line(of: key), key: key.joined(separator: "."), message)
        }

        /// The keys of the table at `path` in the order of the file, so that the first problem reported is the
        /// first one written.
        func inFileOrder(_ keys: Dictionary<String, TOMLValue>.Keys, under path: [String]) -> [String] {
            keys.sorted { (lines.line(of: path + [$0]) ?? .max, $0) < (lines.line(of: path + [$1]) ?? .max, $1) }
        }

        mutating func read(
            _ table: [String: TOMLValue], schema: [String: Schema.Entry], at path: [String],
            into settings: inout Settings
        ) throws(ConfigError) {
            for key in inFileOrder(table.keys, under: path) {
                let keyPath = path + [key]
                guard let value = table[key] else { continue }
                guard let entry = schema[key] else {
                    let known = schema.keys.sorted().joined(separator: ", ")
                    let place = path.isEmpty ? "at the top level" : "in [\(path.joined(separator: "."))]"
                    var message = "unknown key \(place); known keys: \(known)"
                    if let close = Schema.closest(to: key, among: Array(schema.keys)) {
                        message += " (did you mean \(close)?)"
                    }
                    throw error(keyPath, message)
                }
                switch entry {
                case .table(let inner):
                    guard let nested = value.table else {
                        throw error(
                            keyPath, "expected a table ([\(keyPath.joined(separator: "."))]), found \(value.summary)")
                    }
                    try read(nested, schema: inner, at: keyPath, into: &settings)
                case .value(let apply):
                    do {
                        try apply(value, &settings)
                    } catch let problem {
                        throw error(keyPath, problem.message)
                    }
                case .namedTables(let apply):
                    guard let nested = value.table else {
                        throw error(
                            keyPath,
                            "expected tables such as [\(keyPath.joined(separator: ".")).imac], found \(value.summary)")
                    }
                    for name in inFileOrder(nested.keys, under: keyPath) {
                        guard let entry = nested[name] else { continue }
                        guard let inner = entry.table else {
                            throw error(
                                keyPath + [name],
                                "expected a table ([\((keyPath + [name]).joined(separator: "."))]), found \(entry.summary)"
                            )
                        }
                        do {
                            try apply(name, inner, &settings)
                        } catch let problem {
                            throw error(keyPath + [name] + problem.key, problem.message)
                        }
                    }
                case .hostTable(let apply):
                    guard let nested = value.table else {
                        throw error(keyPath, "expected a table of host = [ports], found \(value.summary)")
                    }
                    for host in inFileOrder(nested.keys, under: keyPath) {
                        guard let ports = nested[host] else { continue }
                        do {
                            try apply(host, ports, &settings)
                        } catch let problem {
                            throw error(keyPath + [host], problem.message)
                        }
                    }
                }
            }
        }
    }
}
