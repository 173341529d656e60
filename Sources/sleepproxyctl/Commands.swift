import ArgumentParser
import SleepProxyControl

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The help text for the argument naming a host.
private let hostHelp = ArgumentHelp(
    "The host: its name (imac or imac.local), one of its addresses, or its MAC.", valueName: "host")

extension SleepProxyCtl {
    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the daemon: version, uptime, store, totals, and each interface it serves.",
            discussion: """
                --json prints a StatusReport object: daemonVersion, startedAt, uptimeSeconds, hostCount, \
                recordCount, storePath, controlSocket, dryRun, and interfaces, an array of objects with name, \
                mac, addresses, advertisedName, registrationPort, hostCount, recordCount, captureReceived and \
                captureDropped.
                """)

        @OptionGroup var options: GlobalOptions

        func run() throws {
            try Console(options).report(ControlRequest(command: .status), "status", \.status) { $0.status($1) }
        }
    }

    struct Hosts: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the held and declared hosts: addresses, services, state, lease and last wake.",
            discussion: """
                STATE of a registered host is taking-over (checking the host is gone before answering for its \
                addresses), held (its addresses are the proxy's), or waking with the reason. A declared host \
                (one that never registers, [hosts.NAME] in the configuration) is awake, probing (silent, being \
                asked), asleep: taking-over, asleep: held, waking, or asleep: not held (why). LEASE is when the \
                registration runs out unless renewed, or "declared".

                --json prints an array of HostSummary objects: name, ownerMAC, wakeMAC, interface, addresses, \
                services, state, wakeReason, recordCount, registeredAt, leaseExpiresAt, lastWake (time, reason, \
                sourceAddress, sourcePort), and for a declared host declared (its table name), lastHeard (when \
                a frame from it was last seen) and learnedRecords (the records kept of what it announced, when it \
                learns them). An empty list is [].
                """)

        @OptionGroup var options: GlobalOptions

        func run() throws {
            try Console(options).report(ControlRequest(command: .hosts), "hosts", \.hosts) { $0.hosts($1) }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show everything held for one host: its facts, addresses and records.",
            discussion: """
                Records marked UNIQUE were registered with the cache-flush bit: the host defends them as its own.

                --json prints a HostDetail object: summary (a HostSummary, as hosts --json prints them), \
                sequence, lastSource, records (name, type, ttl, data, unique, expiresAt) and addresses \
                (address, state).
                """)

        @Argument(help: hostHelp) var host: String
        @OptionGroup var options: GlobalOptions

        func run() throws {
            try Console(options).report(ControlRequest(command: .show, host: host), "host", \.host) { $0.host($1) }
        }
    }

    struct Wake: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Wake a held host now (Wake-on-LAN), as a connection to one of its services would.",
            discussion: "--json prints {\"message\": \"...\"}, the daemon's sentence.")

        @Argument(help: hostHelp) var host: String
        @OptionGroup var options: GlobalOptions

        func run() throws {
            try sendMessageCommand(.wake, host: host, options: options)
        }
    }

    struct Forget: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a held host: send goodbyes for its records and release its addresses, without waking it.",
            discussion: "--json prints {\"message\": \"...\"}, the daemon's sentence.")

        @Argument(help: hostHelp) var host: String
        @OptionGroup var options: GlobalOptions

        func run() throws {
            try sendMessageCommand(.forget, host: host, options: options)
        }
    }

    struct Events: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the event history: registrations, take-overs, wakes and why, releases.",
            discussion: """
                Columns: TIME, KIND, INTERFACE, HOST (its name, else its MAC), SOURCE (the peer: address and \
                port), DETAIL. TIME is the local clock time, HH:mm:ss for today and yyyy-MM-dd HH:mm:ss before. \
                With --follow, the history is printed first, then each new event as it happens, until \
                interrupted (Ctrl-C ends it with status 0); if the daemon stops, the stream ends with status 3.

                --json prints an array of EventReport objects: id, time, kind, interface, ownerMAC, host, \
                sourceAddress, sourcePort, reason, detail. With --follow it prints one compact EventReport \
                object per line instead, the history first.
                """)

        @Option(help: "Show at most this many of the newest events (the daemon's default: 50).")
        var limit: Int?

        @Option(help: ArgumentHelp("Only this host's events: a name, an address or a MAC.", valueName: "host"))
        var host: String?

        @Flag(name: [.short, .long], help: "Keep printing new events as they happen, until interrupted.")
        var follow = false

        @OptionGroup var options: GlobalOptions

        func validate() throws {
            if let limit, limit <= 0 {
                throw ValidationError("--limit must be a positive whole number, not \(limit)")
            }
        }

        func run() throws {
            let console = Console(options)
            let request = ControlRequest(command: .events, host: host, limit: limit, follow: follow ? true : nil)
            guard follow else {
                let events = try console.require(try console.ask(request).events, "events")
                if options.json {
                    console.writeJSON(events)
                } else {
                    console.write(console.presentation.events(events))
                }
                return
            }
            // Interrupting is how a follow ends; every line is already written, so leave at once, successfully.
            signal(SIGINT) { _ in _exit(0) }
            var table: TextTable?
            var failure: ControlClientError?
            do {
                try console.client.stream(request) { response in
                    if table != nil {
                        // Later lines carry one event each; a line without one is tolerated and skipped.
                        guard let event = response.event else { return true }
                        if options.json {
                            console.writeJSONLine(event)
                        } else {
                            let row = console.presentation.eventRow(event)
                            table?.fit(row)
                            console.write((table?.line(row, colour: console.presentation.colour) ?? "") + "\n")
                        }
                        return true
                    }
                    guard let history = response.events else {
                        failure = .missingPayload(socketPath: console.client.socketPath, field: "events")
                        return false
                    }
                    let start = console.presentation.eventTable(history, streaming: true)
                    if options.json {
                        for event in history { console.writeJSONLine(event) }
                    } else {
                        console.write(start.render(colour: console.presentation.colour))
                    }
                    table = start
                    return true
                }
            } catch {
                throw console.fail(error)
            }
            throw console.fail(failure ?? .streamEnded(socketPath: console.client.socketPath))
        }
    }
}

/// `wake` and `forget`: both answer with a sentence.
private func sendMessageCommand(_ command: ControlRequest.Command, host: String, options: GlobalOptions) throws {
    let console = Console(options)
    let message = try console.require(
        try console.ask(ControlRequest(command: command, host: host)).message, "message")
    if options.json {
        console.writeJSON(MessageReport(message: message))
    } else {
        console.write(message + "\n")
    }
}
