import DNSWire
import LeaseStore
import NetworkAddresses
import SleepProxyControl
import SleepProxyCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The reports `sleepproxyctl` and `/hosts.json` show, read from one snapshot.
extension DaemonSnapshot {
    /// The held host `text` names: a MAC (primary or wake), an address it holds or registered, or a host name
    /// (`imac` or `imac.local`, any case).
    func resolve(_ text: String) -> Result<OwnerKey, ControlError> {
        let owners = core.owners
        let matches: [OwnerKey]
        if let mac = MACAddress(text) {
            matches = owners.values.filter { $0.key.primaryMAC == mac || $0.wakeMAC == mac }.map(\.key)
        } else if let address = IPAddress(text) {
            matches = owners.values.filter { owner in
                owner.proxiedAddresses.contains(address)
                    || owner.records.contains { held in
                        switch held.record.rdata {
                        case .a(let v4): .v4(v4) == address
                        case .aaaa(let v6): .v6(v6) == address
                        default: false
                        }
                    }
            }.map(\.key)
        } else if let match = WakePolicy.HostMatch.name(text) {
            // A host name, or the table name of a declared host held now.
            matches = owners.values.filter { owner in
                match.matches(owner, declaredName: core.declaration(of: owner.key)?.name)
            }.map(\.key)
        } else {
            matches = []
        }
        switch matches.count {
        case 0:
            return .failure(
                ControlError(
                    .unknownHost, "no held host is \(text); `sleepproxyctl hosts` lists them (by name, address or MAC)")
            )
        case 1:
            return .success(matches[0])
        default:
            let listed = matches.sorted().map { "\($0.primaryMAC) on \($0.interface)" }.joined(separator: ", ")
            return .failure(ControlError(.ambiguousHost, "\(text) names several held hosts (\(listed)): give the MAC"))
        }
    }

    func displayName(_ key: OwnerKey) -> String {
        core.owners[key]?.firstHostName ?? history.knownNames[key.primaryMAC] ?? key.primaryMAC.description
    }

    /// What `sleepproxyctl hosts` lists (and `/hosts.json` serves): the held hosts, and the declared hosts that are
    /// not held (awake, probing, or asleep and not held).
    func hostSummaries() -> [HostSummary] {
        let held = core.owners.keys.compactMap { self.summary(of: $0) }
        // One line per host: a declared host held through its own registration is listed as held.
        let declared = core.declaredHosts.filter { core.owners[$0.host.key] == nil }.map(summary(of:))
        return (held + declared).sorted { ($0.interface, $0.ownerMAC) < ($1.interface, $1.ownerMAC) }
    }

    func summary(of key: OwnerKey) -> HostSummary? {
        guard let owner = core.owners[key], let state = core.state(of: key) else { return nil }
        let stateText: String
        var wakeReason: String?
        let declaration = core.declaration(of: key)
        let status = declaration == nil ? nil : core.declaredHosts.first { $0.host.key == key }
        // A declared host held is asleep: the states say so.
        let asleep = declaration == nil ? "" : "asleep: "
        switch state {
        case .takingOver: stateText = asleep + "taking-over"
        case .held: stateText = asleep + "held"
        case .waking(let reason, _):
            stateText = "waking"
            wakeReason = reason
        }
        return HostSummary(
            name: owner.firstHostName ?? declaration?.name, ownerMAC: key.primaryMAC.description,
            wakeMAC: owner.wakeMAC.description, interface: key.interface.rawValue,
            addresses: owner.proxiedAddresses.map(\.description), services: owner.serviceInstances, state: stateText,
            wakeReason: wakeReason, recordCount: owner.records.count, registeredAt: Self.date(owner.registeredAt),
            leaseExpiresAt: declaration == nil ? owner.expiresAt.map(Self.date) : nil, lastWake: lastWake(of: key),
            declared: declaration?.name, lastHeard: status.map { Self.date($0.lastHeard) },
            learnedRecords: status.flatMap(Self.learnedRecords))
    }

    /// A declared host that is not held: `awake`, `probing`, or `asleep: not held (why)`.
    func summary(of status: DeclaredStatus) -> HostSummary {
        let host = status.host
        var state = status.liveness.description
        if status.liveness == .asleep { state += ": not held (\(status.unheld ?? "its registration holds it"))" }
        return HostSummary(
            name: host.hostName.map { "\($0).local" } ?? host.name, ownerMAC: host.mac.description,
            wakeMAC: host.mac.description, interface: host.interface.rawValue,
            addresses: status.addresses.map(\.description),
            services: host.services.map { "\($0.name).\($0.type).local" }, state: state, wakeReason: nil,
            recordCount: 0,
            registeredAt: Self.date(status.lastHeard), leaseExpiresAt: nil, lastWake: lastWake(of: host.key),
            declared: host.name, lastHeard: Self.date(status.lastHeard), learnedRecords: Self.learnedRecords(status))
    }

    /// How many records the proxy keeps of what a declared host announced, if its declaration learns them.
    static func learnedRecords(_ status: DeclaredStatus) -> Int? {
        status.host.learnsRecords ? status.learnedRecordCount : nil
    }

    func lastWake(of key: OwnerKey) -> WakeReport? {
        history.lastWakes[key].map { event in
            WakeReport(
                time: Self.date(event.time), reason: event.detail,
                sourceAddress: event.source?.address.description, sourcePort: event.source.map { Int($0.port) })
        }
    }

    func detail(of key: OwnerKey) -> HostDetail? {
        guard let owner = core.owners[key], let summary = summary(of: key) else { return nil }
        let records = owner.records.map { held in
            RecordReport(
                name: held.record.name.description, type: held.record.type.description, ttl: Int(held.record.ttl),
                data: Self.presentation(held.record.rdata), unique: held.isUnique, expiresAt: Self.date(held.expiresAt))
        }
        let addresses = core.addressStates(of: key, now: now).map {
            AddressReport(address: $0.address.description, state: $0.phase.rawValue)
        }
        let connections = core.keptConnections(of: key).map { kept in
            ConnectionReport(
                local: kept.connection.local.description, remote: kept.connection.remote.description,
                intervalSeconds: Int(kept.connection.interval), keepalivesSent: kept.keepalivesSent,
                lastKeepaliveSent: kept.lastKeepaliveSent.map(Self.date), probesAnswered: kept.probesAnswered,
                lastProbeAnswered: kept.lastProbeAnswered.map(Self.date), lastHeard: kept.lastHeard.map(Self.date),
                silent: kept.reportedSilent)
        }
        return HostDetail(
            summary: summary, sequence: Int(owner.sequence), lastSource: owner.lastSource?.description,
            records: records, addresses: addresses, connections: connections)
    }

    // MARK: Status

    func statusReport() -> StatusReport {
        let owners = core.owners.values
        let interfaces = self.interfaces.map { interface -> InterfaceReport in
            let name = interface.name
            let held = owners.filter { $0.key.interface == name }
            let counts = interface.captureCounts
            return InterfaceReport(
                name: name.rawValue, mac: interface.link.macAddress.description,
                addresses: interface.link.prefixes.map(\.description),
                advertisedName: core.advertisedInstance(on: name).map { Self.instanceText($0) },
                registrationPort: Int(configuration.registrationPort), hostCount: held.count,
                recordCount: held.reduce(0) { $0 + $1.records.count }, captureReceived: counts.map { Int($0.received) },
                captureDropped: counts.map { Int($0.droppedByKernel + $0.droppedByInterface) })
        }
        let uptime = Double((now - startedAt).components.seconds)
        return StatusReport(
            daemonVersion: SleepProxyVersion.string, startedAt: Self.date(startedAt), uptimeSeconds: uptime,
            interfaces: interfaces, hostCount: owners.count, recordCount: core.recordCount, storePath: storePath,
            controlSocket: configuration.controlSocket ?? "", dryRun: configuration.core.wakePolicy.dryRun)
    }

    /// The first label of an instance name, as people read it (`20-30-50-73 Lab Proxy`).
    static func instanceText(_ name: DNSName) -> String {
        guard let label = name.labels.first else { return name.description }
        return String(decoding: label, as: UTF8.self)
    }

    // MARK: Events

    func report(_ stored: StoredEvent) -> EventReport {
        let event = stored.event
        return EventReport(
            id: stored.id, time: Self.date(event.time), kind: event.kind.identifier,
            interface: event.interface.rawValue, ownerMAC: event.owner?.description,
            host: event.owner.flatMap { mac in
                core.owners[OwnerKey(interface: event.interface, primaryMAC: mac)]?.firstHostName
                    ?? history.knownNames[mac]
            }, sourceAddress: event.source?.address.description, sourcePort: event.source.map { Int($0.port) },
            reason: event.reason?.identifier, detail: event.detail)
    }

    /// What `sleepproxyctl seen` lists: every machine heard on the served links, the most recently heard first on
    /// each interface.
    func seenReports() -> [SeenReport] {
        core.seenMachines.map { machine in
            var declared: String?
            let role: String
            switch machine.role {
            case .registers: role = "registers"
            case .declared(let name):
                role = "declared"
                declared = name
            case .neither: role = "neither"
            }
            return SeenReport(
                interface: machine.interface.rawValue, mac: machine.mac.description,
                addresses: machine.addresses.reversed().map(\.description),
                hostName: machine.hostName.map { Owner.text($0) },
                services: machine.services.reversed().map {
                    SeenReport.Service(name: $0.name, type: $0.type, port: Int($0.port))
                }, firstHeard: Self.date(machine.firstHeard), lastHeard: Self.date(machine.lastHeard), role: role,
                declared: declared)
        }
    }

    // MARK: Presentation

    static func date(_ time: UnixTime) -> Date {
        Date(timeIntervalSince1970: Double(time.nanoseconds) / 1e9)
    }

    static func presentation(_ rdata: RData) -> String {
        switch rdata {
        case .a(let address): return address.description
        case .aaaa(let address): return address.description
        case .ptr(let name): return name.description
        case .srv(let srv): return "\(srv.priority) \(srv.weight) \(srv.port) \(srv.target)"
        case .txt(let txt):
            return txt.strings.map { string in
                var quoted = "\""
                for character in String(decoding: string, as: UTF8.self) {
                    if character == "\\" || character == "\"" { quoted.append("\\") }
                    quoted.append(character)
                }
                return quoted + "\""
            }.joined(separator: " ")
        case .hinfo(let hinfo):
            return "\"\(String(decoding: hinfo.cpu, as: UTF8.self))\" \"\(String(decoding: hinfo.os, as: UTF8.self))\""
        case .nsec(let nsec): return "\(nsec.nextName) \(nsec.types.map(\.description).joined(separator: " "))"
        case .null(let bytes), .opaque(let bytes): return "\\# \(bytes.count) " + bytes.map { hex($0) }.joined()
        case .opt: return "OPT"
        }
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
