public import TOMLConfig

/// The environment variables `sleepproxyd` reads as settings, for a container, where a mounted file is more work
/// than a line of `docker run -e` or compose.yaml: each stands for one key of the config file. They apply over the
/// file, and the command-line options apply over them. An empty variable is the same as an unset one.
public enum EnvironmentSettings {
    /// One variable and the key it sets.
    public struct Variable: Sendable, Hashable {
        public let name: String
        public let key: [String]
        /// What it holds, for `--help`.
        public let meaning: String
    }

    public static let variables: [Variable] = [
        Variable(
            name: "SLEEPPROXY_INTERFACES", key: ["interfaces"],
            meaning: "the interfaces to serve, separated by commas or spaces"),
        Variable(
            name: "SLEEPPROXY_METRICS_LISTEN", key: ["metrics", "listen"],
            meaning: "where /metrics and /hosts.json are served, ADDRESS:PORT"),
        Variable(
            name: "SLEEPPROXY_WEB_LISTEN", key: ["web", "listen"],
            meaning: "where the page is served, ADDRESS:PORT"),
        Variable(
            name: "SLEEPPROXY_WEB_TOKEN_FILE", key: ["web", "token_file"],
            meaning: "the file holding the page's token, such as a secret's"),
        Variable(
            name: "SLEEPPROXY_LOG_LEVEL", key: ["log_level"],
            meaning: "trace, debug, info, notice, warning, error or critical"),
    ]

    /// The key of the file a variable sets, as `--help` says it: `metrics.listen`.
    public static func keyName(_ variable: Variable) -> String { variable.key.joined(separator: ".") }

    /// The names of the variables, for reading them from the process's environment.
    public static var names: [String] { variables.map(\.name) }

    /// The settings `environment` gives, in the order of ``variables``, each with its variable's name for messages.
    public static func overrides(_ environment: [String: String]) -> [(
        key: [String], variable: String, value: TOMLValue
    )] {
        var overrides: [(key: [String], variable: String, value: TOMLValue)] = []
        for variable in variables {
            guard let text = environment[variable.name], !text.isEmpty else { continue }
            let value: TOMLValue
            if variable.key == ["interfaces"] {
                let names = text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" || $0 == "\n" })
                guard !names.isEmpty else { continue }
                value = .array(names.map { .string(String($0)) })
            } else {
                value = .string(text)
            }
            overrides.append((variable.key, variable.name, value))
        }
        return overrides
    }

    /// `NAME=value` for each variable set in `environment`, for the log.
    public static func describe(_ environment: [String: String]) -> [String] {
        variables.compactMap { variable in
            guard let text = environment[variable.name], !text.isEmpty else { return nil }
            return "\(variable.name)=\(text)"
        }
    }
}
