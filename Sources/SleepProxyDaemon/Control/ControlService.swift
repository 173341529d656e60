import LeaseStore
import NetworkAddresses
import SleepProxyControl
import SleepProxyCore

/// The answers to control requests, each read from one snapshot of the daemon (`DaemonSnapshot`) and, for
/// `events`, from the store's history. The two commands that change something (`wake`, `forget`) are not carried
/// out here: the answer says what to do, and the daemon does it through the core like any other input before it
/// sends the response.
struct ControlService {
    let state: DaemonSnapshot
    let store: LeaseStore

    /// A change the administrator asked for, for the daemon to carry out.
    enum Command: Equatable {
        case wake(OwnerKey, reason: String, source: Endpoint?)
        case forget(OwnerKey, reason: String, source: Endpoint?)
    }

    /// The response, and what to do first.
    struct Answer {
        var command: Command?
        var response: ControlResponse

        init(_ response: ControlResponse, after command: Command? = nil) {
            self.command = command
            self.response = response
        }
    }

    func answer(_ request: ControlRequest, on connection: ControlConnection) -> Answer {
        switch request.command {
        case .status:
            return Answer(ControlResponse(status: state.statusReport()))
        case .hosts:
            return Answer(ControlResponse(hosts: state.hostSummaries()))
        case .show:
            return withHost(request) { key in
                Answer(ControlResponse(host: state.detail(of: key)))
            }
        case .wake:
            return withHost(request) { key in wake(key, reason: "the administrator asked (sleepproxyctl wake)") }
        case .forget:
            return withHost(request) { key in forget(key, reason: "the administrator asked (sleepproxyctl forget)") }
        case .events:
            return Answer(events(request, on: connection))
        case .seen:
            return Answer(ControlResponse(seen: state.seenReports()))
        default:
            return Answer(
                .failure(
                    ControlError(
                        .unknownCommand,
                        "unknown command \"\(request.command)\"; known: \(ControlRequest.Command.all.map(\.rawValue).joined(separator: ", "))"
                    )))
        }
    }

    /// Wakes the host `key` (from `source` when the request came over the network: the page).
    func wake(_ key: OwnerKey, reason: String, source: Endpoint? = nil) -> Answer {
        let name = state.displayName(key)
        let wake = Command.wake(key, reason: reason, source: source)
        if state.configuration.core.wakePolicy.dryRun {
            return Answer(
                ControlResponse(
                    message:
                        "would wake \(name) (\(key.primaryMAC) on \(key.interface)): wake.dry_run is on, no magic packet sent"
                ), after: wake)
        }
        return Answer(ControlResponse(message: "waking \(name) (\(key.primaryMAC) on \(key.interface))"), after: wake)
    }

    /// Forgets the host `key`, with goodbyes.
    func forget(_ key: OwnerKey, reason: String, source: Endpoint? = nil) -> Answer {
        let name = state.displayName(key)
        return Answer(
            ControlResponse(
                message: "forgot \(name) (\(key.primaryMAC) on \(key.interface)): goodbyes sent, records dropped"),
            after: .forget(key, reason: reason, source: source))
    }

    /// The host `text` names (a name, an address or a MAC), for `body`; a failure when it names none held.
    func withHost(_ text: String?, command: String, _ body: (OwnerKey) -> Answer) -> Answer {
        guard let text, !text.isEmpty else {
            return Answer(.failure(ControlError(.badArgument, "\(command) needs a host: a name, an address or a MAC")))
        }
        switch state.resolve(text) {
        case .success(let key): return body(key)
        case .failure(let error): return Answer(.failure(error))
        }
    }

    private func withHost(_ request: ControlRequest, _ body: (OwnerKey) -> Answer) -> Answer {
        withHost(request.host, command: request.command.rawValue, body)
    }

    // MARK: Events

    private func events(_ request: ControlRequest, on connection: ControlConnection) -> ControlResponse {
        let limit = request.limit ?? 50
        guard limit >= 0, limit <= 100_000 else {
            return .failure(ControlError(.badArgument, "limit \(limit) must be from 0 to 100000"))
        }
        var owner: String?
        if let host = request.host, !host.isEmpty {
            if let mac = MACAddress(host) {
                owner = mac.description
            } else if case .success(let key) = state.resolve(host) {
                owner = key.primaryMAC.description
            } else if let declared = state.core.declaredHosts.first(where: {
                $0.host.name.lowercased() == host.lowercased()
            }) {
                owner = declared.host.mac.description
            } else if let match = WakePolicy.HostMatch.name(host),
                let known = state.history.knownNames.first(where: { WakePolicy.HostMatch.name($0.value) == match })
            {
                owner = known.key.description
            } else {
                return .failure(
                    ControlError(
                        .unknownHost,
                        "no host \(host) is held or was seen since the daemon started; give its MAC to search the history"
                    ))
            }
        }
        let reports: [EventReport]
        let newest: Int64
        do {
            // Filtering by host reads further back, so that the limit counts that host's events.
            let loaded = try store.events(limit: owner == nil ? limit : state.configuration.eventHistoryLimit)
            newest = loaded.events.last?.id ?? 0
            var matching = loaded.events.filter { owner == nil || $0.event.owner?.description == owner }
            if matching.count > limit { matching.removeFirst(matching.count - limit) }
            reports = matching.map(state.report)
        } catch {
            return .failure(ControlError(.failed, "cannot read the event history: \(error)"))
        }
        if request.follow == true {
            connection.follow(from: newest, owner: owner)
        }
        return ControlResponse(events: reports)
    }

    /// Sends each of `followers` the events committed since the last it saw.
    func sendEvents(to followers: [ControlConnection]) {
        for follower in followers {
            guard let loaded = try? store.events(after: follower.lastEventID, limit: 10_000) else { continue }
            for stored in loaded.events {
                follower.lastEventID = stored.id
                if let owner = follower.ownerFilter, stored.event.owner?.description != owner { continue }
                follower.send(ControlResponse(event: state.report(stored)))
            }
        }
    }
}
