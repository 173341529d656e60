import ArgumentParser
import Foundation
import SleepProxyControl
import Testing

@testable import sleepproxyctl

/// What `--help` promises matches what the daemon sends: every state a host can be in and every field of the JSON.
@Suite struct HelpTests {
    /// The states the daemon reports for a held host and for a declared one (`ControlAnswers`).
    static let states = [
        "taking-over", "held", "waking", "awake", "probing", "asleep: taking-over", "asleep: held",
        "asleep: not held",
    ]

    @Test func hostsHelpNamesEveryStateAndEveryJSONField() throws {
        let help = SleepProxyCtl.Hosts.helpMessage(columns: 10_000)
        for state in Self.states {
            #expect(help.contains(state), "\(state) in: \(help)")
        }
        // A declared host's summary has every field set: each key of its JSON is named.
        var declared = try #require(PresentationTests.hosts.first)
        declared.declared = "imac"
        declared.lastHeard = PresentationTests.at(-30)
        let object = try JSONSerialization.jsonObject(with: ControlProtocol.encoder().encode(declared))
        let keys = try #require(object as? [String: Any]).keys
        #expect(keys.contains("declared") && keys.contains("lastHeard"))
        for key in keys {
            #expect(help.contains(key), "\(key) in: \(help)")
        }
    }
}
