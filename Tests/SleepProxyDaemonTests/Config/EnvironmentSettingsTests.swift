import Foundation
import Logging
import SleepProxyDaemon
import TOMLConfig
import TestLab
import Testing

/// The `SLEEPPROXY_*` environment variables a container sets instead of a file: what each sets, and their place
/// between the file and the options, through the real `sleepproxyd --check-config`.
@Suite struct EnvironmentSettingsTests {
    @Test func eachVariableSetsItsKey() throws {
        let overrides = EnvironmentSettings.overrides([
            "SLEEPPROXY_INTERFACES": "eth0, eth1\tbr0",
            "SLEEPPROXY_METRICS_LISTEN": "[::]:9187",
            "SLEEPPROXY_WEB_LISTEN": "192.168.1.10:8080",
            "SLEEPPROXY_WEB_TOKEN_FILE": "/run/secrets/web-token",
            "SLEEPPROXY_LOG_LEVEL": "debug",
            "SLEEPPROXY_UNKNOWN": "x",
        ])
        #expect(overrides.map(\.variable) == EnvironmentSettings.names)
        var settings = Settings()
        for override in overrides {
            settings = try ConfigFile.apply(override.value, at: override.key, onto: settings)
        }
        #expect(settings.interfaces == ["eth0", "eth1", "br0"])
        #expect(settings.logLevel == .debug)
        let printed = settings.toml(hidingSecrets: true)
        #expect(printed.contains("listen = \"[::]:9187\""), "\(printed)")
        #expect(printed.contains("listen = \"192.168.1.10:8080\""), "\(printed)")
        #expect(printed.contains("token_file = \"/run/secrets/web-token\""), "\(printed)")
    }

    /// A compose file's `VARIABLE: ${X:-}` gives an empty value: that is no setting, not an empty one.
    @Test func anEmptyVariableIsUnset() {
        #expect(EnvironmentSettings.overrides(["SLEEPPROXY_INTERFACES": "", "SLEEPPROXY_LOG_LEVEL": ""]).isEmpty)
        #expect(EnvironmentSettings.overrides(["SLEEPPROXY_INTERFACES": " , "]).isEmpty)
        #expect(
            EnvironmentSettings.describe(["SLEEPPROXY_LOG_LEVEL": "", "SLEEPPROXY_INTERFACES": "eth0"]) == [
                "SLEEPPROXY_INTERFACES=eth0"
            ])
    }

    /// The daemon built next to the test bundle.
    static func daemon() throws -> String {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("sleepproxyd").path
        try #require(FileManager.default.isExecutableFile(atPath: path), "sleepproxyd is not built at \(path)")
        return path
    }

    /// `sleepproxyd --check-config` with `variables` set and `file` as its config file.
    static func checkConfig(_ variables: [String], file: String, _ options: [String] = []) throws -> CommandResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "env-settings-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("sleepproxy.toml").path
        try file.write(toFile: path, atomically: true, encoding: .utf8)
        // No traffic: the daemon only reads its settings and prints them.
        return try Lab.runInTestNamespace(
            ["env"] + variables + [try daemon(), "--config", path, "--check-config"] + options, timeout: .seconds(20))
    }

    @Test func theEnvironmentGoesOverTheFileAndUnderTheOptions() throws {
        let file = "interfaces = [\"eth9\"]\nlog_level = \"error\"\n[metrics]\nlisten = \"127.0.0.1:9187\"\n"
        let result = try Self.checkConfig(
            ["SLEEPPROXY_INTERFACES=lo", "SLEEPPROXY_LOG_LEVEL=debug"], file: file, ["--log-level", "warning"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("interfaces = [\"lo\"]"), "\(result.stdout)")
        #expect(result.stdout.contains("log_level = \"warning\""), "\(result.stdout)")
        // What the environment does not set stays as the file has it.
        #expect(result.stdout.contains("listen = \"127.0.0.1:9187\""), "\(result.stdout)")
        #expect(
            result.stdout.contains("the environment (SLEEPPROXY_INTERFACES=lo SLEEPPROXY_LOG_LEVEL=debug)"),
            "\(result.stdout)")
    }

    /// A bad value is a usage error (64), as a bad option is, naming the variable.
    @Test func aBadValueNamesItsVariable() throws {
        let result = try Self.checkConfig(["SLEEPPROXY_LOG_LEVEL=loud"], file: "")
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("SLEEPPROXY_LOG_LEVEL: "), "\(result.stderr)")
        let listen = try Self.checkConfig(["SLEEPPROXY_METRICS_LISTEN=nowhere"], file: "")
        #expect(listen.status == 64 && listen.stderr.contains("SLEEPPROXY_METRICS_LISTEN: "), "\(listen.stderr)")
    }
}
