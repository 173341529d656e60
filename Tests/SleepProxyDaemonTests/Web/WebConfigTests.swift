import NetworkAddresses
import NetworkIO
import Testing

@testable import SleepProxyDaemon

/// `[web]`: where the page listens and the token its actions need, from the file or from a credential.
@Suite struct WebConfigTests {
    /// A context whose files are `files` (path to contents) and whose credentials are in `credentials`.
    static func context(credentials: String? = nil, files: [String: String] = [:]) -> SettingsContext {
        SettingsContext(
            hostName: "server", defaultRouteInterface: "eth0", groupID: { _ in nil },
            credentialsDirectory: credentials,
            readFile: { path in
                files[path].map { .success($0) } ?? .failure(SystemCallError("open \(path)", code: 2) as any Error)
            })
    }

    static func configuration(_ text: String, context: SettingsContext = context()) throws(ConfigError)
        -> DaemonConfiguration
    {
        try ConfigFile.parse(text, path: "/etc/sleepproxy/sleepproxy.toml", onto: Settings())
            .daemonConfiguration(context: context)
    }

    static func error(_ text: String, context: SettingsContext = context()) -> ConfigError? {
        do {
            _ = try configuration(text, context: context)
            return nil
        } catch {
            return error
        }
    }

    @Test func thePageIsOffUnlessItHasAnAddress() throws {
        let none = try Self.configuration("")
        #expect(none.webListen == nil && none.webToken == nil)
        let page = try Self.configuration(
            """
            [web]
            listen = "192.168.1.10:8080"
            token = "0123456789abcdef0123"
            """)
        #expect(page.webListen == MetricsAddress(address: .v4(IPv4Address(192, 168, 1, 10)), port: 8080))
        #expect(page.webToken == WebToken("0123456789abcdef0123"))
    }

    @Test func aTokenFileNamedWithoutASlashIsACredential() throws {
        let context = Self.context(
            credentials: "/run/credentials/sleepproxyd.service",
            files: ["/run/credentials/sleepproxyd.service/web-token": "fedcba9876543210fedc\n"])
        let configuration = try Self.configuration(
            "[web]\nlisten = \"192.168.1.10:8080\"\ntoken_file = \"web-token\"\n", context: context)
        #expect(configuration.webToken == WebToken("fedcba9876543210fedc"))
        let absolute = Self.context(files: ["/etc/sleepproxy/web-token": "fedcba9876543210fedc\r\n"])
        #expect(
            try Self.configuration(
                "[web]\nlisten = \"192.168.1.10:8080\"\ntoken_file = \"/etc/sleepproxy/web-token\"\n", context: absolute
            ).webToken
                == WebToken("fedcba9876543210fedc"))
    }

    /// The token is never in the start-up log or `--check-config`'s output; the full writer keeps it.
    @Test func theTokenIsNeverLogged() throws {
        let token = "0123456789abcdef0123"
        let settings = try ConfigFile.parse(
            "[web]\nlisten = \"192.168.1.10:8080\"\ntoken = \"\(token)\"\n", path: "/etc/sleepproxy/sleepproxy.toml",
            onto: Settings())
        #expect(!settings.logLines().joined().contains(token))
        #expect(settings.logLines().contains { $0.contains("token = \"(set, not shown)\"") }, "\(settings.logLines())")
        #expect(!settings.toml(hidingSecrets: true).contains(token))
        #expect(settings.toml().contains(token))
        // Not set: nothing is said to be set.
        #expect(Settings().logLines().contains { $0.contains("token = \"\"") })
    }

    @Test func aBadTokenSaysWhatIsWrong() {
        let short = Self.error("[web]\ntoken = \"short\"\n")
        #expect(short?.description.contains("web.token") == true)
        #expect(short?.description.contains("at least 16") == true)
        let both = Self.error(
            "[web]\nlisten = \"192.168.1.10:8080\"\ntoken = \"0123456789abcdef0123\"\ntoken_file = \"web-token\"\n")
        #expect(both?.description.contains("not both") == true)
        let noCredentials = Self.error("[web]\nlisten = \"192.168.1.10:8080\"\ntoken_file = \"web-token\"\n")
        #expect(noCredentials?.description.contains("CREDENTIALS_DIRECTORY") == true)
        let missing = Self.error(
            "[web]\nlisten = \"192.168.1.10:8080\"\ntoken_file = \"/etc/sleepproxy/web-token\"\n",
            context: Self.context())
        #expect(missing?.description.contains("cannot read /etc/sleepproxy/web-token") == true)
        let twoLines = Self.error(
            "[web]\nlisten = \"192.168.1.10:8080\"\ntoken_file = \"/t\"\n",
            context: Self.context(files: ["/t": "0123456789abcdef\nsecond\n"]))
        #expect(twoLines?.description.contains("one line") == true)
        let shortInFile = Self.error(
            "[web]\nlisten = \"192.168.1.10:8080\"\ntoken_file = \"/t\"\n",
            context: Self.context(files: ["/t": "0123\n"]))
        #expect(shortInFile?.description.contains("at least 16") == true)
        // Without a page the token file is not read: an unreadable one does not stop the daemon.
        #expect(Self.error("[web]\ntoken_file = \"/etc/sleepproxy/web-token\"\n") == nil)
        let badAddress = Self.error("[web]\nlisten = \"homeserver:8080\"\n")
        #expect(badAddress?.description.contains("web.listen") == true)
    }
}
