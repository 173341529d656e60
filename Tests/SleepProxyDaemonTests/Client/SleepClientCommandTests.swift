import Foundation
import SleepProxyClient
import SleepProxyClientCore
import TestLab
import Testing

/// The client as a program, where no network is needed: its config file and its state directory across runs.
struct SleepClientCommandTests {
    static func temporaryDirectory() throws -> String {
        var template = Array("/tmp/sleepproxy-client-test-XXXXXX".utf8CString)
        guard let path = mkdtemp(&template) else { throw LabError("mkdtemp failed") }
        return String(cString: path)
    }

    /// Each run is a new process (and `return` with no registration kept sends nothing): the number survives it
    /// and goes up by one at each wake.
    @Test func theSequenceNumberSurvivesRestartsAndAdvancesOnEachWake() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "".write(toFile: directory + "/client.toml", atomically: true, encoding: .utf8)
        func run(_ command: String) throws -> CommandResult {
            try Lab.runInTestNamespace(
                [
                    try SleepClientLabTests.clientPath(), command, "--config", directory + "/client.toml",
                    "--state-directory", directory + "/state",
                ], timeout: .seconds(20))
        }
        func stored() throws -> Int {
            let text = try String(contentsOfFile: directory + "/state/sequence", encoding: .utf8)
            return try #require(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        }
        let first = try run("return")
        #expect(first.status == 0, "\(first)")
        #expect(first.stderr.contains("nothing to return"), "\(first)")
        let afterFirst = try stored()
        for step in 1...3 {
            let again = try run("return")
            #expect(again.status == 0, "\(again)")
            #expect(try stored() == (afterFirst + step) % 256)
            #expect(again.stderr.contains("the sequence number is now \((afterFirst + step) % 256)"), "\(again)")
        }

        try "x\n".write(toFile: directory + "/state/sequence", atomically: true, encoding: .utf8)
        let broken = try run("return")
        #expect(broken.status == 73, "\(broken)")
        #expect(broken.stderr.contains("remove the file to start a new sequence"), "\(broken)")
    }

    @Test func theConfigFileIsReadWithClearErrors() throws {
        let config = try ClientConfig.parse(
            """
            interfaces = ["enp3s0"]
            lease = 3600
            prefer = ["homeserver"]
            exclude = ["10-34-10-70 Kitchen"]
            wake_on_lan = "enable"
            state_directory = "/srv/client"
            timeout = 6
            """, path: "client.toml")
        #expect(config.interfaces == ["enp3s0"])
        #expect(config.lease == 3600 && config.timeout == 6)
        #expect(config.prefer == ["homeserver"] && config.exclude == ["10-34-10-70 Kitchen"])
        #expect(config.wakeOnLAN == .enable && config.stateDirectory == "/srv/client")
        #expect(try ClientConfig.parse("", path: "client.toml") == ClientConfig())

        let cases: [(String, String)] = [
            ("lease = 10", "client.toml:1: lease: expected seconds from 60 to 86400, found the integer 10"),
            ("\n\nwake_on_lan = \"yes\"", "client.toml:3: wake_on_lan: expected \"check\", \"enable\" or \"skip\""),
            ("leese = 7200", "client.toml:1: leese: unknown key; the keys are exclude, interfaces, lease"),
            ("interfaces = \"eth0\"", "client.toml:1: interfaces: expected an array of interface names, found"),
            ("state_directory = \"state\"", "state_directory: expected an absolute path"),
            ("interfaces = [\"a/b\"]", "\"a/b\" cannot be an interface name"),
            ("lease = ", "client.toml:1: not valid TOML"),
        ]
        for (text, message) in cases {
            #expect {
                _ = try ClientConfig.parse(text, path: "client.toml")
            } throws: { error in
                "\(error)".contains(message)
            }
        }
    }

    /// A config file named on the command line must exist; the default one may be missing.
    @Test func aNamedConfigFileMustExist() throws {
        let result = try Lab.runInTestNamespace(
            [try SleepClientLabTests.clientPath(), "status", "--config", "/nonexistent/client.toml"],
            timeout: .seconds(20))
        #expect(result.status == 64, "\(result)")
        #expect(
            result.stderr.contains("/nonexistent/client.toml: cannot read it: No such file or directory"), "\(result)")
    }

    /// The manual page and the sample file describe exactly the keys the client knows, and the sample's
    /// commented-out values are the defaults.
    @Test func theManualPageAndTheSampleDescribeEveryKey() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let page = try String(contentsOf: root.appendingPathComponent("man/sleepproxy-client.toml.5"), encoding: .utf8)
        let documented = page.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix(".It Cm ") else { return nil }
            return line.dropFirst(".It Cm ".count).split(separator: " ").first.map(String.init)
        }
        #expect(documented.sorted() == ClientConfig.keyNames)

        let sample = try String(contentsOf: root.appendingPathComponent("Config/client.toml"), encoding: .utf8)
        let settings = sample.split(separator: "\n").filter { $0.hasPrefix("# ") && $0.contains(" = ") }
            .map { String($0.dropFirst(2)) }
        #expect(
            settings.compactMap { $0.split(separator: " ").first.map(String.init) }.sorted() == ClientConfig.keyNames)
        #expect(try ClientConfig.parse(settings.joined(separator: "\n"), path: "Config/client.toml") == ClientConfig())
    }
}
