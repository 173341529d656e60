import DNSWire
import FoundationEssentials
import SleepProxyClientCore

#if canImport(Glibc)
    import Glibc
#endif

/// What `sleepproxy-client status` reports: for each interface, the proxies seen and which would be chosen, the
/// records that would be registered, Wake-on-LAN, and the registration kept from the last sleep.
public struct ClientStatusReport: Codable, Sendable, Hashable {
    public struct Proxy: Codable, Sendable, Hashable {
        public var name: String
        public var metric: Int
        public var features: Int
        public var address: String?
        public var port: Int?
        /// 1 for the proxy `register` would try first, 2 and 3 for the next ones, nil for one it would not try.
        public var choice: Int?
        public var excluded: Bool
    }

    public struct Record: Codable, Sendable, Hashable {
        public var name: String
        public var type: String
        public var ttl: Int
        public var unique: Bool
        public var data: String
    }

    public struct Registration: Codable, Sendable, Hashable {
        public var proxy: String
        public var address: String
        public var port: Int
        public var lease: Int
        public var registeredAt: Int64
        public var expiresAt: Int64
        public var sequence: Int
        public var messages: Int
    }

    public struct Interface: Codable, Sendable, Hashable {
        public var name: String
        public var mac: String
        public var addresses: [String]
        /// `on`, `off`, `enable` (off, and `register` would turn it on), `skip`, or `unavailable`.
        public var wakeOnLAN: String
        public var wakeOnLANDetail: String
        public var hostName: String?
        public var proxies: [Proxy]
        public var records: [Record]
        public var services: [String]
        public var lastRegistration: Registration?
    }

    /// The kept sequence number; nil when none is kept yet, or it cannot be read (the unit's state directory is
    /// root's).
    public var sequence: Int?
    public var stateDirectory: String
    public var interfaces: [Interface]

    public func json() -> String { Self.encoded(self) }

    /// What `status --json` prints when it fails: `{"error": "..."}`.
    public static func errorJSON(_ message: String) -> String { encoded(["error": message]) }

    private static func encoded(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    public var text: String {
        var lines: [String] = []
        for interface in interfaces {
            lines.append("\(interface.name)  \(interface.mac)  \(interface.addresses.joined(separator: " "))")
            lines.append("  Wake-on-LAN: \(interface.wakeOnLAN) (\(interface.wakeOnLANDetail))")
            lines.append("  host name:   \(interface.hostName ?? "not known")")
            if interface.proxies.isEmpty {
                lines.append("  proxies:     none seen")
            } else {
                lines.append("  proxies:")
                for proxy in interface.proxies {
                    let mark = proxy.choice.map { "\($0)." } ?? (proxy.excluded ? "x" : "-")
                    let place = proxy.address.map { "\($0) port \(proxy.port ?? 0)" } ?? "no address"
                    let numbers = proxy.metric >= ProxyRanking.unusable ? "unusable" : "metric \(proxy.metric)"
                    lines.append(
                        "    \(mark) \(proxy.name)  (\(numbers), features \(proxy.features), \(place))")
                }
            }
            lines.append("  records:     \(interface.records.count) (services: \(interface.services.count))")
            for record in interface.records {
                lines.append(
                    "    \(record.name) \(record.ttl) \(record.unique ? "unique" : "shared") \(record.type) \(record.data)"
                )
            }
            if let last = interface.lastRegistration, last.lease == 0 {
                lines.append(
                    "  registered:  not confirmed: sent to \(last.proxy) at \(last.address) port \(last.port), no answer to every message; return announces it all the same"
                )
            } else if let last = interface.lastRegistration {
                lines.append(
                    "  registered:  with \(last.proxy) at \(last.address) port \(last.port), lease \(last.lease) s until \(Self.clock(last.expiresAt)), sequence \(last.sequence), \(last.messages) message(s)"
                )
            } else {
                lines.append("  registered:  no registration kept")
            }
        }
        lines.append(
            "sequence number: \(sequence.map(String.init) ?? "none kept, or not readable here") (\(stateDirectory)/sequence)"
        )
        return lines.joined(separator: "\n") + "\n"
    }

    /// Local time, `2026-11-25 07:40:12`.
    static func clock(_ seconds: Int64) -> String {
        var value = time_t(seconds)
        var parts = tm()
        localtime_r(&value, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension SleepClient {
    /// Looks at each interface as `register` would, without registering or changing anything.
    public func status() -> Result<ClientStatusReport, ClientError> {
        do {
            let interfaces = try ClientInterface.select(config.interfaces)
            let sequence = state.keptSequence()
            var reports: [ClientStatusReport.Interface] = []
            for interface in interfaces {
                let querier = try LinkQuerier(interface)
                let survey = LinkSurvey.run(
                    querier, fallbackHostName: ClientInterface.systemHostName, choose: candidates,
                    limit: Self.surveyLimit)
                let listed = ProxyRanking.listed(
                    survey.proxies.proxies, prefer: config.prefer, exclude: config.exclude)
                let proxies = listed.map { entry in
                    let proxy = entry.proxy
                    let target = survey.proxies.target(of: proxy.instance)
                    return ClientStatusReport.Proxy(
                        name: proxy.label, metric: proxy.metric, features: proxy.features,
                        address: target.map { "\($0.address)" }, port: target.map { Int($0.port) },
                        choice: entry.choice, excluded: entry.excluded)
                }
                let records = survey.host.records.map { record in
                    ClientStatusReport.Record(
                        name: record.name.description, type: record.type.description, ttl: Int(record.ttl),
                        unique: record.cacheFlush, data: Self.text(of: record.rdata))
                }
                let (wake, detail) = wakeOnLANSummary(interface.name)
                let last = (try? state.registration(on: interface.name))?.map { saved in
                    ClientStatusReport.Registration(
                        proxy: saved.proxyName, address: "\(saved.proxyAddress)", port: Int(saved.proxyPort),
                        lease: Int(saved.lease), registeredAt: saved.registeredAt,
                        expiresAt: saved.registeredAt + Int64(saved.lease), sequence: Int(saved.sequence.value),
                        messages: saved.messages.count)
                }
                reports.append(
                    ClientStatusReport.Interface(
                        name: interface.name, mac: "\(interface.mac)", addresses: interface.addresses.map { "\($0)" },
                        wakeOnLAN: wake, wakeOnLANDetail: detail, hostName: survey.host.hostName?.description,
                        proxies: proxies, records: records, services: survey.host.services.map(\.description),
                        lastRegistration: last))
            }
            return .success(
                ClientStatusReport(
                    sequence: sequence.map { Int($0.value) }, stateDirectory: config.stateDirectory, interfaces: reports
                ))
        } catch {
            return .failure(error)
        }
    }

    private func wakeOnLANSummary(_ name: String) -> (String, String) {
        if config.wakeOnLAN == .skip { return ("skip", "not checked: wake_on_lan = \"skip\"") }
        switch WakeOnLANState.read(name) {
        case .failure(let error): return ("unavailable", error.description)
        case .success(let state):
            switch WakeOnLANDecision.decide(
                config.wakeOnLAN, interface: name, state: state, configPath: ClientConfig.defaultPath)
            {
            case .wakes: return ("on", "\(state)")
            case .enable(let modes):
                return (
                    "enable",
                    "\(state); register turns magic-packet wake on (ethtool -s \(name) wol \(WakeOnLANState.text(modes)))"
                )
            case .refuse(let reason): return ("off", reason)
            }
        }
    }

    static func text(of rdata: RData) -> String {
        switch rdata {
        case .a(let address): "\(address)"
        case .aaaa(let address): "\(address)"
        case .ptr(let name): name.description
        case .srv(let srv): "\(srv.priority) \(srv.weight) \(srv.port) \(srv.target)"
        case .txt(let txt):
            txt.strings.map { "\"\(String(decoding: $0, as: UTF8.self))\"" }.joined(separator: " ")
        default: "\(rdata)"
        }
    }
}
