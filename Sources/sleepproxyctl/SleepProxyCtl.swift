import ArgumentParser
import SleepProxyControl

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sleepproxyctl`: the administrator's view of `sleepproxyd`, over its control socket.
///
/// Each command sends one request line and prints the answer as a table, or with `--json` as the answer's
/// payload, encoded as the control protocol encodes it (sorted keys, RFC 3339 times, indented):
///
/// - `status`: a `StatusReport` object: `daemonVersion`, `startedAt`, `uptimeSeconds`, `hostCount`, `recordCount`,
///   `storePath`, `controlSocket`, `dryRun`, and `interfaces`, each an `InterfaceReport` (`name`, `mac`,
///   `addresses`, `advertisedName`, `registrationPort`, `hostCount`, `recordCount`, `captureReceived`,
///   `captureDropped`).
/// - `hosts`: an array of `HostSummary` objects: `name`, `ownerMAC`, `wakeMAC`, `interface`, `addresses`,
///   `services`, `state`, `wakeReason`, `recordCount`, `registeredAt`, `leaseExpiresAt`, and `lastWake` (`time`,
///   `reason`, `sourceAddress`, `sourcePort`). No hosts is `[]`.
/// - `show`: a `HostDetail` object: `summary` (a `HostSummary`), `sequence`, `lastSource`, `records` (each `name`,
///   `type`, `ttl`, `data`, `unique`, `expiresAt`) and `addresses` (each `address`, `state`).
/// - `wake`, `forget`: `{"message": "..."}`, the daemon's sentence.
/// - `events`: an array of `EventReport` objects: `id`, `time`, `kind`, `interface`, `ownerMAC`, `host`,
///   `sourceAddress`, `sourcePort`, `reason`, `detail`.
/// - `events --follow`: one compact `EventReport` object per line, the history first, then each new event.
/// - `seen`: an array of `SeenReport` objects: `interface`, `mac`, `vendor`, `addresses`, `hostName`, `services`
///   (each `name`, `type`, `port`), `firstHeard`, `lastHeard`, `role`, `declared`.
///
/// Absent optional fields are left out. On failure `--json` prints `{"code": "...", "message": "..."}` on standard
/// output (the daemon's error codes, or the client's own `unreachable`, `timed-out`, `bad-answer`) and the
/// message on standard error.
///
/// Exit status: 0 success, 1 the daemon refused (an unknown host, say), 2 usage, 3 the daemon is unreachable or
/// did not answer properly.
@main
struct SleepProxyCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sleepproxyctl",
        abstract:
            "Show what sleepproxyd holds for sleeping hosts, wake or forget them, and list the machines it hears.",
        discussion: """
            sleepproxyctl talks to the running sleepproxyd over its control socket (newline-delimited JSON, \
            control protocol version \(ControlProtocol.version)). The socket is --socket, else \
            $SLEEPPROXY_SOCKET, else \(ControlProtocol.defaultSocketPath). It is mode 0660: run as root or as a \
            member of the group that owns it (usermod -aG sleepproxy $USER).

            Tables are coloured only on a terminal and never when NO_COLOR is set. With --json every command \
            prints its payload: status a StatusReport object, hosts an array of HostSummary, show a HostDetail, \
            wake and forget {"message": ...}, events an array of EventReport (with --follow: one EventReport \
            object per line), seen an array of SeenReport. On failure --json prints {"code": ..., "message": ...} \
            as well. Each command's --help lists its fields.

            Exit status: 0 success; 1 the daemon refused the request (no such host, say); 2 usage error; \
            3 the daemon is not reachable (not running, no permission) or gave no proper answer within 10 s.
            """,
        version: SleepProxyVersion.string,
        subcommands: [Status.self, Hosts.self, Show.self, Wake.self, Forget.self, Events.self, Seen.self]
    )

    @OptionGroup var options: GlobalOptions

    /// Parses and runs like ArgumentParser's own `main()`, except that usage errors exit with 2 (not 64).
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure {
                Console.writeError(fullMessage(for: error))
                exit(withError: ExitCode(2))
            }
            exit(withError: error)
        }
    }
}

/// The options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The daemon's control socket (default: $SLEEPPROXY_SOCKET, else \(ControlProtocol.defaultSocketPath)).",
            valueName: "path"),
        completion: .file()
    )
    var socket: String?

    @Flag(name: .long, help: "Print the answer as JSON instead of a table.")
    var json = false

    /// `--socket`, else `SLEEPPROXY_SOCKET`, else the default.
    var socketPath: String {
        if let socket { return socket }
        if let fromEnvironment = ProcessInfo.processInfo.environment["SLEEPPROXY_SOCKET"], !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        return ControlProtocol.defaultSocketPath
    }
}

/// Where a command's output goes: the client, the presentation, and writing to standard output and error.
struct Console {
    var options: GlobalOptions
    var client: ControlClient
    var presentation: Presentation

    init(_ options: GlobalOptions) {
        self.options = options
        self.client = ControlClient(socketPath: options.socketPath)
        self.presentation = Presentation(now: Date(), colour: Self.colourWanted)
    }

    /// Colour only on a terminal, and not when `NO_COLOR` is set or the terminal is dumb.
    static var colourWanted: Bool {
        let environment = ProcessInfo.processInfo.environment
        guard isatty(STDOUT_FILENO) == 1 else { return false }
        if let noColour = environment["NO_COLOR"], !noColour.isEmpty { return false }
        return environment["TERM"] != "dumb"
    }

    /// Sends `request`; a failure is reported and becomes the exit status.
    func ask(_ request: ControlRequest) throws -> ControlResponse {
        do {
            return try client.request(request)
        } catch {
            throw fail(error)
        }
    }

    /// The payload the command needs, or a protocol failure when the daemon left it out.
    func require<Payload>(_ payload: Payload?, _ field: String) throws -> Payload {
        guard let payload else { throw fail(.missingPayload(socketPath: client.socketPath, field: field)) }
        return payload
    }

    /// Reports `error` (on standard error, and as JSON on standard output with `--json`) and returns the exit
    /// status it means: 1 when the daemon refused, 3 when it could not be reached or did not answer properly.
    func fail(_ error: ControlClientError) -> ExitCode {
        if options.json { writeJSON(error.controlError) }
        Self.writeError("sleepproxyctl: \(error.reason)")
        return ExitCode(error.kind == .daemon ? 1 : 3)
    }

    /// Asks, then prints the payload in the response's field `name` (at `field`) as JSON (`--json`) or as
    /// `present` writes it.
    func report<Payload: Encodable>(
        _ request: ControlRequest, _ name: String, _ field: KeyPath<ControlResponse, Payload?>,
        present: (Presentation, Payload) -> String
    ) throws {
        let payload = try require(try ask(request)[keyPath: field], name)
        if options.json {
            writeJSON(payload)
        } else {
            write(present(presentation, payload))
        }
    }

    /// `value` as indented JSON.
    func writeJSON(_ value: some Encodable) {
        guard let text = try? ControlProtocol.prettyText(value) else { return }
        write(text)
    }

    /// `value` as one line of compact JSON.
    func writeJSONLine(_ value: some Encodable) {
        guard let data = try? ControlProtocol.line(value) else { return }
        write(String(decoding: data, as: UTF8.self))
    }

    /// Writes `text` to standard output at once (nothing is buffered, so a follow stream shows each line as it
    /// comes).
    func write(_ text: String) {
        Self.write(text, to: STDOUT_FILENO)
    }

    /// Writes `text` and a newline to standard error.
    static func writeError(_ text: String) {
        write(text.hasSuffix("\n") ? text : text + "\n", to: STDERR_FILENO)
    }

    private static func write(_ text: String, to descriptor: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                // The reader has gone (a closed pipe): there is nobody left to tell.
                systemExit(descriptor == STDOUT_FILENO ? 0 : 1)
            }
            bytes = bytes.dropFirst(written)
        }
    }
}

#if canImport(Glibc)
    private let systemWrite = Glibc.write
    private let systemExit = Glibc.exit
#elseif canImport(Darwin)
    private let systemWrite = Darwin.write
    private let systemExit = Darwin.exit
#endif
