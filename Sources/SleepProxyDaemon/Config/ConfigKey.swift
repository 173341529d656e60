import NetworkAddresses
import SleepProxyCore
import TOMLConfig

/// One key of the config file and everything about it: where it is in the file, how its value is read (and why
/// it is refused), how `--check-config` writes it, and what it means. `Schema.keys` lists them in the order the
/// file is written; the reader, the writer and the tests of the manual page and the sample file go by that list.
struct ConfigKey: Sendable {
    enum Form: Sendable {
        /// `name = value`, landing in one property of `Settings`.
        case value(
            read: @Sendable (TOMLValue, inout Settings) throws(Problem) -> Void,
            write: @Sendable (Settings, SettingsContext?) -> String)
        /// A table whose keys are hosts (a MAC or a name), each with a value: `[wake.extra_ports]`.
        case hostTable(
            read: @Sendable (String, TOMLValue, inout Settings) throws(Problem) -> Void,
            write: @Sendable (Settings) -> [String])
        /// A table of tables, one per name (`[hosts.imac]`), each with the keys of `keys`.
        case namedTables(
            keys: [HostKey], read: @Sendable (String, [String: TOMLValue], inout Settings) throws(Problem) -> Void,
            write: @Sendable (Settings) -> [(name: String, lines: [String])])
    }

    /// The tables and the key: `["limits", "maximum_lease"]`.
    let path: [String]
    let form: Form
    /// What the key is for, in one line.
    let doc: String

    /// `limits.maximum_lease`, as errors and `sleepproxyd --help` name it.
    var name: String { path.joined(separator: ".") }
}

/// A key whose value lands in one property of `Settings`, with the default that property starts with.
struct Setting<Value: Sendable>: Sendable {
    let path: [String]
    let target: any WritableKeyPath<Settings, Value> & Sendable
    /// The value in force when neither the file nor the command line sets it (`Settings()`).
    let defaultValue: Value
    let parse: @Sendable (TOMLValue) throws(Problem) -> Value
    /// The value as the file spells it, with a comment on what it stands for on this machine where that helps.
    let render: @Sendable (Value, SettingsContext?) -> String
    let doc: String

    /// - Parameter path: the key with its tables, dotted: `"limits.maximum_lease"`.
    init(
        _ path: String, _ target: any WritableKeyPath<Settings, Value> & Sendable, default defaultValue: Value,
        doc: String, parse: @escaping @Sendable (TOMLValue) throws(Problem) -> Value,
        render: @escaping @Sendable (Value, SettingsContext?) -> String
    ) {
        self.path = path.split(separator: ".").map(String.init)
        self.target = target
        self.defaultValue = defaultValue
        self.parse = parse
        self.render = render
        self.doc = doc
    }

    /// The row of `Schema.keys`.
    var key: ConfigKey {
        let target = target
        let parse = parse
        let render = render
        return ConfigKey(
            path: path,
            form: .value(
                read: { value, settings throws(Problem) in settings[keyPath: target] = try parse(value) },
                write: { settings, context in render(settings[keyPath: target], context) }),
            doc: doc)
    }
}

extension Setting where Value == Int {
    /// An integer in `range`.
    init(
        _ path: String, _ target: any WritableKeyPath<Settings, Int> & Sendable, default: Int,
        in range: ClosedRange<Int>, doc: String
    ) {
        self.init(
            path, target, default: `default`, doc: doc,
            parse: { value throws(Problem) in try Schema.integer(value, in: range) }, render: { value, _ in "\(value)" }
        )
    }
}

extension Setting where Value == Bool {
    init(_ path: String, _ target: any WritableKeyPath<Settings, Bool> & Sendable, default: Bool, doc: String) {
        self.init(
            path, target, default: `default`, doc: doc,
            parse: { value throws(Problem) in try Schema.boolean(value) }, render: { value, _ in "\(value)" })
    }
}

/// A key of a declared host's table (`[hosts.NAME]`). What a host has when its table leaves a key out is
/// `Schema.undeclared(name:mac:)`.
struct HostKey: Sendable {
    let name: String
    /// Reads the value onto the host being declared; the keys are read in the order of `Schema.declaredHostKeys`.
    let read: @Sendable (TOMLValue, inout DeclaredHost) throws(Problem) -> Void
    /// The value as the file spells it; nil leaves the key out, for what a table without it means.
    let write: @Sendable (DeclaredHost) -> String?
    let doc: String
}
