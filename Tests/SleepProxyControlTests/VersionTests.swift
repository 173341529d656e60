import Foundation
import SleepProxyControl
import Testing

/// The version the programs print and the version of the Debian package built from the same sources.
@Suite struct VersionTests {
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// debian/changelog's newest entry is this release, with a Debian revision: `sleepproxyd (0.3.0-1) ...`.
    @Test func theChangelogNamesThisRelease() throws {
        let changelog = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("debian/changelog"), encoding: .utf8)
        let first = try #require(changelog.split(separator: "\n").first)
        let match = try #require(first.wholeMatch(of: /sleepproxyd \(([0-9][0-9A-Za-z.+~]*)-([0-9A-Za-z.+~]+)\) .*/))
        #expect(String(match.1) == SleepProxyVersion.release, "\(first) against \(SleepProxyVersion.release)")
    }

    /// A build from source (these tests are one) calls itself by the release; only the package build sets
    /// another version.
    @Test func aBuildFromSourceIsTheRelease() {
        #expect(SleepProxyVersion.package == nil)
        #expect(SleepProxyVersion.string == SleepProxyVersion.release)
    }
}
