public import DNSWire
import NetworkAddresses

/// How the proxy presents itself under `_sleep-proxy._udp`: the instance label `AA-BB-CC-DD[.F] name` that
/// clients rank proxies by (lower is better; PROTOCOL.md section 1), and the host name its SRV points at.
public struct AdvertisementConfiguration: Hashable, Sendable {
    /// Intent: 20 dedicated sleep proxy, 30/40 primary infrastructure hardware/software, 50/60 secondary,
    /// 70/80 incidentally available hardware/software.
    public var intent: Int
    /// 100 - 10·log10(mass in mg): 30 is about 10 kg, a desktop-class server.
    public var portability: Int
    /// 10·log10(µW) of the extra power spent serving as proxy: 50 is 0.1 W (the server is on anyway).
    public var marginalPower: Int
    /// 10·log10(µW) of the total draw while serving: 73 is about 20 W, a small home server.
    public var totalPower: Int
    /// The feature digit, only for features that exist: 1 is TCP keepalive offload, advertised where the proxy can
    /// put its own frames on the wire. Nil writes no digit, which clients read as 0.
    public var features: Int?
    /// The name after the numbers.
    public var name: String
    /// The host name (a single label, `.local` is added) the SRV record points at and whose A/AAAA records
    /// carry the proxy's addresses on each link.
    public var hostName: String

    public init(
        intent: Int = 20, portability: Int = 30, marginalPower: Int = 50, totalPower: Int = 73, features: Int? = nil,
        name: String, hostName: String
    ) {
        self.intent = intent
        self.portability = portability
        self.marginalPower = marginalPower
        self.totalPower = totalPower
        self.features = features
        self.name = name
        self.hostName = hostName
    }

    /// Checks the numbers as clients parse them (`ValidSPSName`, `PrototypeSPSName` in mDNSResponder), so that a
    /// configuration clients would ignore is refused at start-up with the reason.
    public func validate() throws(AdvertisementError) {
        for (field, value) in [
            ("intent", intent), ("portability", portability), ("marginal power", marginalPower),
            ("total power", totalPower),
        ] where !(10...99).contains(value) {
            throw AdvertisementError("\(field) \(value) must be a two-digit number from 10 to 99")
        }
        if portability == 99 && marginalPower == 99 && totalPower == 99 {
            throw AdvertisementError("99-99-99 is the placeholder clients ignore; give real numbers")
        }
        if let features, features != 1 {
            throw AdvertisementError(
                "feature digit \(features): the only feature clients know is 1 (keepalive offload)")
        }
        guard !name.isEmpty, !hostName.isEmpty, hostName.utf8.count <= 63, !hostName.contains(".") else {
            throw AdvertisementError("the name and a host name of one label (at most 63 bytes) are needed")
        }
    }

    /// The instance label, cut to 63 bytes so it stays one label.
    public func instanceLabel(renames: Int = 0) -> [UInt8] {
        var label = "\(intent)-\(portability)-\(marginalPower)-\(totalPower)"
        if let features { label += ".\(features)" }
        label += " \(name)"
        if renames > 0 { label += " (\(renames + 1))" }
        return Array(Array(label.utf8).prefix(63))
    }

    func hostLabel(renames: Int) -> [UInt8] {
        Array(Array((renames > 0 ? "\(hostName)-\(renames + 1)" : hostName).utf8).prefix(63))
    }
}

public struct AdvertisementError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = "sleep proxy advertisement: \(description)" }
}

/// The proxy's own service on one link: probed, then announced, defended, renamed on conflict.
struct Advertisement: Sendable {
    enum State: Hashable, Sendable {
        /// Probe `sent` of 3 has gone out; the next is due at `next`.
        case probing(sent: Int, next: UnixTime)
        /// Announced (`sent` of 2), the next announcement at `next`; then answering.
        case announcing(sent: Int, next: UnixTime)
        case announced
    }

    var configuration: AdvertisementConfiguration
    var port: UInt16
    var renames = 0
    var state: State
    var records: [DNSRecord] = []

    static let serviceType: DNSName = "_sleep-proxy._udp.local."

    /// The records for `link`: PTRs (shared), SRV and empty TXT (unique), A/AAAA of our addresses on that link.
    mutating func buildRecords(for link: Link) {
        let instance = try! DNSName(labels: [configuration.instanceLabel(renames: renames)] + Self.serviceType.labels)
        let host = try! DNSName(labels: [configuration.hostLabel(renames: renames), Array("local".utf8)])
        self.records =
            ServiceRecords.service(
                instance: instance, type: Self.serviceType, port: port, target: host, txt: try! TXTData([""]))
            + ServiceRecords.addresses(of: host, link.prefixes.map(\.address))
    }

    var uniqueRecords: [DNSRecord] { records.filter(\.cacheFlush) }
    var isAnswering: Bool { state == .announced || { if case .announcing = state { true } else { false } }() }
    /// What it answers questions with: its records once announcing, none while it probes.
    var answered: [DNSRecord] { isAnswering ? records : [] }
}

/// The proxy's advertisement on each interface, and a `generation` that moves whenever what they answer changes
/// (their records, or whether they answer at all), never with their timers: it is one of the two sources of the
/// answer cache's one validity rule (`AnswerSources`).
struct Advertisements: Sendable {
    private var byInterface: [InterfaceName: Advertisement] = [:]
    private(set) var generation: UInt64 = 0

    subscript(interface: InterfaceName) -> Advertisement? { byInterface[interface] }

    /// The interfaces advertised on, in order.
    var interfaces: [InterfaceName] { byInterface.keys.sorted() }

    var all: Dictionary<InterfaceName, Advertisement>.Values { byInterface.values }

    /// Keeps `advertisement` for `interface` (nil stops it), moving `generation` on if what it answers changed.
    mutating func set(_ advertisement: Advertisement?, on interface: InterfaceName) {
        if byInterface[interface]?.answered ?? [] != advertisement?.answered ?? [] { generation &+= 1 }
        byInterface[interface] = advertisement
    }
}

extension SleepProxyCore {
    /// Starts advertising the proxy on `interface`: three probes 250 ms apart, then two announcements a second
    /// apart (RFC 6762 section 8), then answering queries for it.
    mutating func advertise(
        on interface: InterfaceName, configuration: AdvertisementConfiguration, port: UInt16, now: UnixTime
    ) -> [Action] {
        guard let link = links[interface] else { return [.log(.error, "advertise: \(interface) is not served")] }
        var advertisement = Advertisement(
            configuration: configuration, port: port, state: .probing(sent: 0, next: now))
        advertisement.buildRecords(for: link)
        advertisements.set(advertisement, on: interface)
        return stepAdvertisement(on: interface, now: now)
    }

    /// Stops advertising on `interface`, or everywhere, saying goodbye (TTL 0) for every record that was
    /// announced.
    mutating func withdrawAdvertisement(on only: InterfaceName?, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for interface in advertisements.interfaces where only.map({ $0 == interface }) ?? true {
            guard let advertisement = advertisements[interface] else { continue }
            defer { advertisements.set(nil, on: interface) }
            guard advertisement.isAnswering else { continue }
            let goodbyes = advertisement.records.map { record in
                var copy = record
                copy.ttl = 0
                return copy
            }
            actions += multicastNow(goodbyes, interface: interface)
            actions.append(.log(.info, "advertisement on \(interface) withdrawn"))
        }
        return actions
    }

    /// The instance name the proxy currently advertises on `interface`.
    public func advertisedInstance(on interface: InterfaceName) -> DNSName? {
        advertisements[interface]?.records.first { $0.type == .srv }?.name
    }

    /// Moves an advertisement through probing and announcing as its times come; kept back only when a step was
    /// taken.
    mutating func stepAdvertisement(on interface: InterfaceName, now: UnixTime) -> [Action] {
        guard var advertisement = advertisements[interface] else { return [] }
        var actions: [Action] = []
        switch advertisement.state {
        case .probing(let sent, let next) where next <= now:
            if sent < 3 {
                // A probe: QU questions of type ANY for each unique name, our proposed records as authorities.
                let names = uniqueNames(advertisement.uniqueRecords)
                let probe = DNSMessage(
                    id: 0, flags: DNSFlags(response: false, opcode: .query),
                    questions: names.map { DNSQuestion(name: $0, type: .any, unicastResponse: true) },
                    authorities: advertisement.uniqueRecords.map { record in
                        var copy = record
                        copy.cacheFlush = false
                        return copy
                    })
                actions += multicastNow(message: probe, interface: interface)
                advertisement.state = .probing(sent: sent + 1, next: now + .milliseconds(250))
            } else {
                advertisement.state = .announcing(sent: 0, next: now)
                advertisements.set(advertisement, on: interface)
                return actions + stepAdvertisement(on: interface, now: now)
            }
        case .announcing(let sent, let next) where next <= now:
            actions += multicastNow(advertisement.records, interface: interface)
            if sent == 0, let instance = advertisement.records.first(where: { $0.type == .srv })?.name {
                actions.append(.log(.notice, "advertising \(instance) on \(interface)"))
            }
            advertisement.state = sent + 1 < 2 ? .announcing(sent: sent + 1, next: now + .seconds(1)) : .announced
        default:
            return []
        }
        advertisements.set(advertisement, on: interface)
        return actions
    }

    var advertisementDeadline: UnixTime? {
        advertisements.all.compactMap { advertisement -> UnixTime? in
            switch advertisement.state {
            case .probing(_, let next), .announcing(_, let next): next
            case .announced: nil
            }
        }.min()
    }

    /// Another host uses one of our unique names with other data (or probes for it and wins the tie-break):
    /// rename and probe again (RFC 6762 section 9).
    mutating func checkAdvertisementConflict(_ message: DNSMessage, _ packet: MDNSPacket, now: UnixTime) -> [Action] {
        guard var advertisement = advertisements[packet.interface] else { return [] }
        if let mac = packet.sourceMAC, let link = links[packet.interface], mac == link.macAddress { return [] }
        let ours = advertisement.uniqueRecords
        let theirs = message.flags.isResponse ? message.answers : message.authorities
        var conflict: DNSRecord?
        for record in theirs {
            let sameName = ours.filter { $0.name.caseInsensitiveEquals(record.name) }
            guard !sameName.isEmpty else { continue }
            if sameName.contains(where: { HeldRecord.identical($0, record) }) { continue }
            if message.flags.isResponse {
                conflict = record
            } else if case .probing = advertisement.state, Self.winsTieBreak(theirs: theirs, ours: sameName) {
                conflict = record
            }
            if conflict != nil { break }
        }
        guard let conflict else { return [] }
        let old = advertisedInstance(on: packet.interface)
        advertisement.renames += 1
        guard let link = links[packet.interface] else { return [] }
        advertisement.buildRecords(for: link)
        advertisement.state = .probing(sent: 0, next: now + .seconds(1))
        advertisements.set(advertisement, on: packet.interface)
        return [
            .log(
                .warning,
                "advertisement conflict on \(packet.interface): \(conflict.name) \(conflict.type) from \(packet.source); renaming \(old.map(\.description) ?? "") to \(advertisedInstance(on: packet.interface).map(\.description) ?? "")"
            )
        ]
    }

    /// RFC 6762 section 8.2: the probe whose records sort later wins (class, then type, then RDATA bytes).
    public static func winsTieBreak(theirs: [DNSRecord], ours: [DNSRecord]) -> Bool {
        func key(_ record: DNSRecord) -> [UInt8] {
            var bytes = [UInt8(record.recordClass.rawValue >> 8), UInt8(record.recordClass.rawValue & 0xFF)]
            bytes += [UInt8(record.type.rawValue >> 8), UInt8(record.type.rawValue & 0xFF)]
            bytes += (try? record.encodedRData()) ?? []
            return bytes
        }
        let a = theirs.map(key).sorted { $0.lexicographicallyPrecedes($1) }
        let b = ours.map(key).sorted { $0.lexicographicallyPrecedes($1) }
        for (x, y) in zip(a, b) where x != y {
            return y.lexicographicallyPrecedes(x)
        }
        return a.count > b.count
    }

    func uniqueNames(_ records: [DNSRecord]) -> [DNSName] {
        var names: [DNSName] = []
        for record in records where !names.contains(where: { $0.caseInsensitiveEquals(record.name) }) {
            names.append(record.name)
        }
        return names
    }

    /// Records of our own advertisement matching a question, when it is answering.
    func advertisementLookup(_ name: DNSName, type: DNSType, interface: InterfaceName) -> [DNSRecord] {
        guard let advertisement = advertisements[interface], advertisement.isAnswering else { return [] }
        return advertisement.records.filter {
            (type == .any || $0.type == type) && $0.name.caseInsensitiveEquals(name)
        }
    }
}
