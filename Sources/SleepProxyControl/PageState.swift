#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// What the daemon's page shows, from one snapshot of the daemon: served as `/state.json` for the page's script,
/// and rendered into the page itself for a browser without JavaScript.
public struct PageState: Codable, Hashable, Sendable {
    /// When the snapshot was taken.
    public var generatedAt: Date
    /// The daemon's version (`sleepproxyd --version`).
    public var version: String
    /// The name of the machine the daemon runs on.
    public var serverName: String
    /// The interfaces served.
    public var interfaces: [String]
    /// Every held or declared host, as `sleepproxyctl hosts` lists them.
    public var hosts: [HostSummary]
    /// Machines heard on the links that neither register nor are declared, with the `[hosts.NAME]` table that
    /// would declare each.
    public var seen: [SeenMachine]
    /// The most recent events, newest first.
    public var events: [EventReport]
    /// Whether waking and forgetting from the page is possible: a token is configured (`web.token`).
    public var actionsEnabled: Bool

    public init(
        generatedAt: Date, version: String, serverName: String, interfaces: [String], hosts: [HostSummary],
        seen: [SeenMachine], events: [EventReport], actionsEnabled: Bool
    ) {
        self.generatedAt = generatedAt
        self.version = version
        self.serverName = serverName
        self.interfaces = interfaces
        self.hosts = hosts
        self.seen = seen
        self.events = events
        self.actionsEnabled = actionsEnabled
    }
}

/// A machine heard but not declared, and the declaration to copy into the config file.
public struct SeenMachine: Codable, Hashable, Sendable {
    public var machine: SeenReport
    /// The `[hosts.NAME]` table, as `sleepproxyctl seen --toml` prints it.
    public var declaration: String

    public init(machine: SeenReport, declaration: String) {
        self.machine = machine
        self.declaration = declaration
    }

    public init(_ machine: SeenReport) {
        self.init(machine: machine, declaration: SeenDeclaration(machine).text)
    }
}

/// What the page asks the daemon to do (`POST /api/wake`, `POST /api/forget`, JSON): the host as
/// `sleepproxyctl` takes it (a name, an address or a MAC).
public struct PageActionRequest: Codable, Hashable, Sendable {
    public var host: String

    public init(host: String) {
        self.host = host
    }
}

/// The daemon's answer to a page action: what it did, or why not.
public struct PageActionResponse: Codable, Hashable, Sendable {
    public var ok: Bool
    public var message: String

    public init(ok: Bool, message: String) {
        self.ok = ok
        self.message = message
    }
}
