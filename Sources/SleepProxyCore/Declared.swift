import DNSWire
import Frames
public import NetworkAddresses

/// A host the configuration declares (`[hosts.NAME]`): it never registers, so the proxy finds out from the wire
/// when it sleeps (`Liveness`) and then holds it as it would hold a registered host: its addresses taken over,
/// its declared records and those it announced while awake (`LearnedRecords`) answered, a connection to one of its
/// wake ports or its services' ports waking it.
public struct DeclaredHost: Hashable, Sendable {
    /// A DNS-SD service to answer for while the host sleeps, so that browsing still finds it.
    public struct Service: Hashable, Sendable {
        /// The instance name, one label of any characters (`iMac`, `Living Room NAS`).
        public var name: String
        /// The service type, `_smb._tcp` or `_ssh._tcp` (`.local` is added).
        public var type: String
        public var port: UInt16
        /// TXT strings, `key=value` each; none gives the empty TXT record DNS-SD requires.
        public var txt: [String]

        public init(name: String, type: String, port: UInt16, txt: [String] = []) {
            self.name = name
            self.type = type
            self.port = port
            self.txt = txt
        }
    }

    /// The name of its table in the configuration (`imac` for `[hosts.imac]`): how logs and events name it.
    public var name: String
    public var interface: InterfaceName
    public var mac: MACAddress
    /// Its addresses as configured.
    public var addresses: [IPAddress]
    /// Whether the addresses it uses are learned from its own frames, besides `addresses`.
    public var learnsAddresses: Bool
    /// Traffic to these ports wakes it, as to the ports of its services.
    public var wakePorts: [WakePolicy.Port]
    /// Its mDNS host name without `.local` (`iMac`): its address records are answered under it while it sleeps.
    public var hostName: String?
    public var services: [Service]
    /// Where the records answered for it while it sleeps come from: its declaration and what it announces while
    /// awake, or its declaration alone.
    public var recordSource: RecordSource

    /// Where a declared host's records come from (`records` in its table).
    public enum RecordSource: String, Hashable, Sendable, CaseIterable {
        /// Its declaration, and the mDNS records it sends from its own MAC while awake (`LearnedRecords`): a
        /// declared record overrides a learned one of its name and type.
        case learn
        /// Its declaration alone: nothing is learned from what it sends.
        case declared
    }

    public init(
        name: String, interface: InterfaceName, mac: MACAddress, addresses: [IPAddress] = [],
        learnsAddresses: Bool = false, wakePorts: [WakePolicy.Port] = [], hostName: String? = nil,
        services: [Service] = [], recordSource: RecordSource = .learn
    ) {
        self.name = name
        self.interface = interface
        self.mac = mac
        self.addresses = addresses
        self.learnsAddresses = learnsAddresses
        self.wakePorts = wakePorts
        self.hostName = hostName
        self.services = services
        self.recordSource = recordSource
    }

    /// Whether the records it sends while awake are kept, to be answered while it sleeps.
    public var learnsRecords: Bool { recordSource == .learn }

    public var key: OwnerKey { OwnerKey(interface: interface, primaryMAC: mac) }

    /// Why the records of this declaration cannot be built (a label too long, a type that is not `_x._tcp` or
    /// `_x._udp`, a TXT string over 255 bytes), or nil: the configuration checks this when it reads the file.
    public func validate() -> String? {
        if (try? hostDomainName(name)) == nil { return "\"\(name)\" is not one DNS label of 1 to 63 bytes" }
        if let hostName, hostName.contains(".") || (try? hostDomainName(hostName)) == nil {
            return "host_name \"\(hostName)\" is not one DNS label of 1 to 63 bytes (no dots; .local is added)"
        }
        if !services.isEmpty, hostName == nil {
            return "services need host_name: their SRV records point at the host's name"
        }
        for service in services {
            if let problem = Self.problem(with: service) { return problem }
        }
        return nil
    }

    /// Why `service` cannot be answered for, or nil.
    public static func problem(with service: Service) -> String? {
        let labels = service.type.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard labels.count == 2, labels[0].hasPrefix("_"), (2...16).contains(labels[0].utf8.count),
            labels[1] == "_tcp" || labels[1] == "_udp"
        else {
            return "service type \"\(service.type)\" is not _name._tcp or _name._udp (1 to 15 characters after _)"
        }
        guard (1...63).contains(service.name.utf8.count) else {
            return "service name \"\(service.name)\" is not 1 to 63 bytes"
        }
        guard service.port > 0 else { return "service \"\(service.name)\": port 0" }
        guard (try? TXTData(service.txt.isEmpty ? [""] : service.txt)) != nil else {
            return "service \"\(service.name)\": a TXT string is longer than 255 bytes"
        }
        return nil
    }

    func hostDomainName(_ label: String) throws(DNSWireError) -> DNSName {
        try DNSName(labels: [label, "local"])
    }

    /// The records declared for it while it sleeps with `addresses` taken over: the reverse mapping of each
    /// address (what the take-over follows, as for a registered host), its address records when its host name is
    /// known, and its services. The reverse mappings point at its declared host name, else at `learnedHostName`
    /// (the name it announced its addresses under), else at its table's name.
    func records(addresses: [IPAddress], learnedHostName: DNSName? = nil) -> [DNSRecord] {
        // The configuration checked both names: a label of 1 to 63 bytes.
        guard let named = try? hostDomainName(hostName ?? name) else { return [] }
        let host = hostName == nil ? learnedHostName ?? named : named
        var records = addresses.map { address in
            DNSRecord(
                name: ReverseMapping.name(of: address), ttl: ServiceRecords.hostNameTTL, cacheFlush: true,
                rdata: .ptr(host))
        }
        guard hostName != nil else { return records }
        records += ServiceRecords.addresses(of: host, addresses)
        for service in services {
            guard let type = try? DNSName(labels: service.type.split(separator: ".").map(String.init) + ["local"]),
                let instance = try? DNSName(
                    labels: [service.name] + type.labels.map { String(decoding: $0, as: UTF8.self) }),
                let txt = try? TXTData(service.txt.isEmpty ? [""] : service.txt)
            else { continue }
            records += ServiceRecords.service(
                instance: instance, type: type, port: service.port, target: host, txt: txt)
        }
        return records
    }

    /// The names its declaration makes its own, lower case: its host name's and its services' instance names.
    var declaredNames: [DNSName] {
        guard let hostName, let host = try? hostDomainName(hostName) else { return [] }
        var names = [host.lowercased()]
        for service in services {
            let labels = [service.name] + service.type.split(separator: ".").map(String.init) + ["local"]
            if let instance = try? DNSName(labels: labels) { names.append(instance.lowercased()) }
        }
        return names
    }
}

/// What the proxy knows of one declared host between its sleeps.
struct DeclaredWatch: Hashable, Sendable {
    /// Addresses learned from its frames, at most this many (the most recently heard kept).
    static let learnedLimit = 8

    var host: DeclaredHost
    var liveness: Liveness
    /// Learned addresses, the most recently heard last.
    var learned: [IPAddress] = []
    /// The mDNS records it sent while awake, when its declaration learns them (`LearnedRecords.swift`).
    var records = LearnedRecords()
    /// The version of `records` the lease store holds (`SleepProxyCore.saveLearned`).
    var saved = LearnedRecords.Version()
    /// When its learned records are next looked over (records not sent for a week forgotten, the times they
    /// were sent saved): hourly while its declaration learns them, never otherwise.
    var checkAt: UnixTime?
    static let checkInterval: Duration = .seconds(3_600)
    /// When a record it sent was last refused (not its own, or over the limit) in a log line: one a minute.
    var refusalLogged: UnixTime?
    /// What the proxy asked the link about its services (`askForServices`).
    var questions = ServiceQuestions()
    /// Why the host, found asleep, is not held (its own registration holds it, no address to take over).
    var unheld: String?
    /// When to try again to hold a host found asleep and not held: what kept it (an address held for another
    /// host, the host limit, an interface not served) may pass while it sleeps on.
    var retryAt: UnixTime?
    static let retryInterval: Duration = .seconds(30)
    /// Its addresses another machine was found using (it answered the take-over's probe, or used the address as
    /// its own), with that machine's MAC and until when they are left out of its take-overs.
    var inUse: [IPAddress: InUse] = [:]
    struct InUse: Hashable, Sendable {
        var mac: MACAddress
        var until: UnixTime
    }
    /// How long an address found in use by another machine is left alone before it is asked about again.
    static let inUseHold: Duration = .seconds(600)

    /// Its addresses: the configured ones, then the learned ones.
    var addresses: [IPAddress] {
        host.addresses + learned.filter { !host.addresses.contains($0) }
    }

    /// Whether `name` (in any case) is its own: its declared host name or service, or a unique record it sent.
    func claims(_ name: DNSName) -> Bool {
        records.claims(name) || host.declaredNames.contains(name.lowercased())
    }

    /// Notes that the host used `address`.
    mutating func learn(_ address: IPAddress) {
        guard !host.addresses.contains(address) else { return }
        if let index = learned.firstIndex(of: address) {
            guard index != learned.count - 1 else { return }
            learned.remove(at: index)
        } else if learned.count >= Self.learnedLimit {
            learned.removeFirst()
        }
        learned.append(address)
    }
}

/// A declared host as the administrator sees it.
public struct DeclaredStatus: Hashable, Sendable {
    public var host: DeclaredHost
    public var liveness: Liveness.State
    public var lastHeard: UnixTime
    /// Configured and learned addresses.
    public var addresses: [IPAddress]
    /// Whether the proxy holds it (asleep, taken over), as `owners` lists it.
    public var isHeld: Bool
    /// Why it is asleep and not held, if so.
    public var unheld: String?
    /// The mDNS records learned from it while awake (`LearnedRecords`).
    public var learnedRecordCount: Int
}

/// Declared hosts: watching them, taking them over when they fall silent, letting go when they speak. They are not
/// stored as held hosts: the configuration brings them back at start, counted awake, and a sleeping one is found
/// asleep again within a minute. What they announced while awake is stored (`saveLearned`), and comes back with
/// them: a host asleep when the proxy restarts is held with it.
extension SleepProxyCore {
    // MARK: Watching

    /// Brings the watched hosts in line with the configuration: new ones are watched from `now` (counted awake),
    /// changed ones start again (let go of first, if held), removed ones are let go of, and the learned records of
    /// removed ones, or of ones that no longer learn, are deleted from the lease store. At start, `restoring` is
    /// what the store kept of what each host announced: a new host that learns starts with it, less what was not
    /// sent for a week (`LearnedRecords.forgetAfter`); what is kept for a host not declared, or that does not
    /// learn, is deleted.
    mutating func syncDeclared(now: UnixTime, restoring stored: [OwnerKey: [LearnedRecord]] = [:]) -> [Action] {
        var actions: [Action] = []
        var wanted: [OwnerKey: DeclaredHost] = [:]
        for host in configuration.declaredHosts where wanted[host.key] == nil { wanted[host.key] = host }
        let before = declaredSources
        for key in declared.keys.sorted() where wanted[key] == nil {
            actions += letGoOfDeclared(key, why: "it is no longer declared in the configuration", now: now)
            if declared[key]?.host.learnsRecords == true { actions.append(.store(.saveLearned(key, []))) }
            declared[key] = nil
            actions.append(.log(.info, "stopped watching \(key)"))
        }
        for (key, records) in stored.sorted(by: { $0.key < $1.key })
        where wanted[key]?.learnsRecords != true && !records.isEmpty {
            actions.append(.store(.saveLearned(key, [])))
            actions.append(
                .log(
                    .info,
                    "forgot the \(records.count) records learned from \(key): \(wanted[key] == nil ? "it is no longer declared" : "its declaration no longer learns them")"
                ))
        }
        for (key, host) in wanted.sorted(by: { $0.key < $1.key }) {
            if let watch = declared[key] {
                guard watch.host != host else { continue }
                actions += letGoOfDeclared(key, why: "its declaration changed", now: now)
                var renewed = DeclaredWatch(host: host, liveness: Liveness(now: now))
                if host.learnsAddresses { renewed.learned = watch.learned }
                if host.learnsRecords {
                    renewed.records = watch.records
                    renewed.saved = watch.saved
                    renewed.checkAt = watch.checkAt ?? now + DeclaredWatch.checkInterval
                } else if watch.host.learnsRecords {
                    actions.append(.store(.saveLearned(key, [])))
                }
                declared[key] = renewed
                actions.append(.log(.info, "declared host \(host.name) (\(key)) changed; watching it afresh"))
            } else {
                let new = newWatch(of: host, restoring: stored[key], now: now)
                declared[key] = new.watch
                actions += new.restored
                actions += askForServices(of: key, now: now)
                // The store follows what the restore left out.
                actions += saveLearned(of: key, heardToo: false)
                actions.append(
                    .log(
                        .info,
                        "watching declared host \(host.name) (\(key)): probed when silent for \(Liveness.Timing().quiet.components.seconds) s, taken over when it answers none"
                    ))
            }
        }
        // Every interface, changed or not: one served since the last time needs its list too (the shell keeps its
        // filter when the list is the same).
        let after = declaredSources
        for interface in Set(before.keys).union(after.keys).sorted() {
            actions.append(.watchSources(interface, after[interface] ?? []))
        }
        return actions
    }

    /// The watch of a host newly declared, counted awake from `now`. At start, `kept` is what the lease store kept of
    /// what it announced: it starts with that, less what was not sent for a week, and with the addresses of its
    /// address records (a host declared by its MAC alone is taken over at them, though it sleeps and sends
    /// nothing). `restored` says so in the log.
    private func newWatch(
        of host: DeclaredHost, restoring kept: [LearnedRecord]?, now: UnixTime
    ) -> (watch: DeclaredWatch, restored: [Action]) {
        var watch = DeclaredWatch(host: host, liveness: Liveness(now: now))
        guard host.learnsRecords else { return (watch, []) }
        watch.checkAt = now + DeclaredWatch.checkInterval
        guard let kept else { return (watch, []) }
        watch.records = LearnedRecords(
            restoring: kept, forgettingBefore: now - LearnedRecords.forgetAfter,
            limit: configuration.maximumRecordsPerOwner)
        if host.learnsAddresses, let link = links[host.interface] {
            for record in watch.records.records where record.type == .a || record.type == .aaaa {
                guard let address = record.ownAddress, link.isOnLink(address) else { continue }
                watch.learn(address)
            }
        }
        let left = kept.count - watch.records.count
        return (
            watch,
            [
                .log(
                    .info,
                    "declared host \(host.name) (\(host.key)): \(watch.records.count) records learned before the restart\(left > 0 ? ", \(left) more forgotten (not sent for a week, or over the limit)" : "")"
                )
            ]
        )
    }

    /// The MACs of declared hosts per interface: the capture must see their frames.
    var declaredSources: [InterfaceName: [MACAddress]] {
        var sources: [InterfaceName: [MACAddress]] = [:]
        for key in declared.keys.sorted() { sources[key.interface, default: []].append(key.primaryMAC) }
        return sources
    }

    /// Lets go of a declared host the proxy holds, with goodbyes: its records are no longer to be answered.
    private mutating func letGoOfDeclared(_ key: OwnerKey, why: String, now: UnixTime) -> [Action] {
        guard hosts[key]?.isDeclared == true else { return [] }
        return drop(
            key,
            reason: DropReason(kind: .released, release: .undeclared, detail: why, goodbyes: true, level: .notice),
            now: now)
    }

    /// The next time a declared host is to be probed or found asleep.
    var declaredDeadline: UnixTime? {
        var earliest: UnixTime?
        for watch in declared.values {
            for due in [watch.liveness.deadline, watch.retryAt, watch.checkAt].compactMap(\.self)
            where earliest.map({ due < $0 }) ?? true {
                earliest = due
            }
        }
        return earliest
    }

    // MARK: Hearing

    /// A frame from `mac` on `interface`, using `addresses` as its own: a declared host is heard from. Asleep and
    /// held, it is back: the proxy lets go at once, silently, and hands its claimed addresses back to it.
    mutating func hearDeclared(
        _ mac: MACAddress, on interface: InterfaceName, using addresses: [IPAddress], what: @autoclosure () -> String,
        now: UnixTime
    ) -> [Action] {
        guard !declared.isEmpty else { return [] }
        let key = OwnerKey(interface: interface, primaryMAC: mac)
        guard var watch = declared[key] else { return [] }
        if watch.host.learnsAddresses, let link = links[interface] {
            for address in addresses where link.isOnLink(address) && !address.isUnspecifiedOrMulticast {
                watch.learn(address)
            }
        }
        // The host itself uses them again: they are its own after all.
        for address in addresses where watch.inUse[address] != nil { watch.inUse[address] = nil }
        let change = watch.liveness.heard(at: now)
        if change == .back {
            watch.unheld = nil
            watch.retryAt = nil
        }
        let withdrawn = watch.records.confirmGoodbyes(by: now - DeclaredWatch.goodbyeGrace)
        declared[key] = watch
        // The store follows the records withdrawn, whatever else hearing it does.
        let saving = saveLearned(of: key, heardToo: false)
        let withdrawal: [Action] =
            withdrawn.isEmpty
            ? saving
            : saving + [
                .log(
                    .info,
                    "declared host \(watch.host.name) (\(key)) said goodbye to \(withdrawn.count) records and is still awake: they are withdrawn (\(withdrawn[0].name) \(withdrawn[0].type)...)"
                )
            ]
        // Awake: if it has not said what it offers yet, it is asked (at most once a minute).
        let asking = watch.questions.answered ? [] : askForServices(of: key, now: now)
        switch change {
        case nil:
            return withdrawal + asking
        case .answered(let probes):
            return withdrawal + asking + [
                .log(.debug, "declared host \(watch.host.name) (\(key)) is awake: heard after \(probes) probes")
            ]
        case .back:
            guard let host = hosts[key], host.isDeclared else {
                return saving + asking + [
                    .log(.info, "declared host \(watch.host.name) (\(key)) is awake again: \(what())")
                ]
            }
            // The hand-back first: on an interface being removed, the last host's drop closes it.
            return saving + handBack(host.claimedAddresses, to: mac, on: interface)
                + drop(
                    key, reason: .released("declared host \(watch.host.name) is back: \(what()) from its MAC"),
                    now: now) + asking
        }
    }

    // MARK: Probing

    /// Probes the declared hosts that have been silent, and takes over those that answered none.
    mutating func advanceDeclared(now: UnixTime) -> [Action] {
        guard let due = declaredDeadline, due <= now else { return [] }
        var actions: [Action] = []
        for key in declared.keys.sorted() {
            actions += checkLearned(of: key, now: now)
            guard var watch = declared[key] else { continue }
            if let retry = watch.retryAt, retry <= now, watch.liveness.state == .asleep {
                actions += takeOverDeclared(key, probes: 0, now: now)
                continue
            }
            guard let deadline = watch.liveness.deadline, deadline <= now else { continue }
            let step = watch.liveness.step(at: now)
            // Found asleep: the goodbyes it said last were its sleep burst, not withdrawals (`LearnedRecords`).
            if case .fellAsleep = step { watch.records.keepWithdrawn() }
            declared[key] = watch
            switch step {
            case .probe(let attempt):
                actions += probeDeclared(watch, attempt: attempt)
            case .fellAsleep(let probes):
                // What it announced is saved as it stands: it sends nothing more while it sleeps.
                actions += saveLearned(of: key, heardToo: true)
                actions += takeOverDeclared(key, probes: probes, now: now)
            case nil:
                break
            }
        }
        return actions
    }

    /// "Is the host there?": the take-over's own probe (an ARP probe, or a duplicate-address NS) for one of its
    /// addresses, unicast to its MAC, IPv4 addresses first and in turn. Nothing goes out for a host with no
    /// address known yet or on an interface not served; it is found asleep all the same.
    private func probeDeclared(_ watch: DeclaredWatch, attempt: Int) -> [Action] {
        let key = watch.host.key
        let addresses = watch.addresses.sorted { $0.isV4 && !$1.isV4 }
        guard let link = links[key.interface], !addresses.isEmpty else { return [] }
        let address = addresses[(attempt - 1) % addresses.count]
        return [.injectFrame(key.interface, Self.probe(address, to: watch.host.mac, link: link))]
    }

    /// Holds a declared host that answered none of its probes: its records built from its declaration and what it
    /// announced while awake (`DeclaredWatch.heldRecords`), its addresses taken over after the take-over's own
    /// three probes, exactly as for a host that registered.
    private mutating func takeOverDeclared(_ key: OwnerKey, probes: Int, now: UnixTime) -> [Action] {
        guard var watch = declared[key] else { return [] }
        let name = watch.host.name
        func unheld(_ why: String) -> [Action] {
            let changed = watch.unheld != why
            watch.unheld = why
            watch.retryAt = now + DeclaredWatch.retryInterval
            declared[key] = watch
            guard changed else { return [] }
            let found = probes > 0 ? "answered none of \(probes) probes: asleep; " : "asleep; "
            return [.log(.info, "declared host \(name) (\(key)) \(found)not held: \(why)")]
        }
        if let held = hosts[key] {
            return held.isDeclared ? [] : unheld("its own registration holds it")
        }
        guard let link = links[key.interface], !retiring.contains(key.interface) else {
            return unheld("\(key.interface) is not served")
        }
        var addresses: [IPAddress] = []
        var skipped: [String] = []
        for address in watch.addresses {
            if !link.isOnLink(address) {
                skipped.append("\(address) is not on \(link.name)")
            } else if let other = watch.inUse[address], other.until > now {
                skipped.append("\(address) is in use by \(other.mac)")
            } else if let holder = hosts.holder(of: address, on: key.interface) {
                skipped.append("\(address) is held for \(holder.primaryMAC)")
            } else {
                addresses.append(address)
            }
        }
        let skippedText = skipped.isEmpty ? "" : " (\(skipped.joined(separator: "; ")))"
        guard !addresses.isEmpty else {
            return unheld(
                (watch.addresses.isEmpty ? "no address known yet" : "no address to take over") + skippedText)
        }
        let held = hosts.count(on: key.interface)
        guard held < configuration.maximumHostsPerInterface else {
            return unheld("\(key.interface) holds \(held) hosts, limit \(configuration.maximumHostsPerInterface)")
        }
        let merged = watch.heldRecords(
            addresses: addresses, limit: configuration.maximumRecordsPerOwner,
            othersNames: seen.hostNames(on: key.interface, other: key.primaryMAC))
        var dropped = merged.leftOut
        let records = merged.records.filter { record in
            guard HeldRecord.claimsUniqueName(record),
                let holder = hosts.uniqueHolder(of: record.name, on: key.interface)
            else { return true }
            dropped.append("\(record.name) \(record.type) is held for \(holder.primaryMAC)")
            return false
        }
        let owner = Owner(
            key: key, wakeMAC: key.primaryMAC, sequence: 0, registeredAt: now, updatedAt: now,
            records: records.map {
                HeldRecord(record: $0, sequence: 0, registeredAt: now, expiresAt: Self.declaredExpiry)
            })
        hold(owner, as: .declared(watch.host), now: now)
        watch.retryAt = nil
        watch.unheld = nil
        declared[key] = watch
        scheduleAnnouncement(of: records, on: link, now: now)
        var detail =
            "declared host \(name) \(probes > 0 ? "answered none of \(probes) probes: asleep" : "asleep still, and nothing keeps it now"); taking over \(addresses.map(\.description).joined(separator: " ")), \(records.count) records"
        if merged.learned > 0 { detail += " (\(merged.learned) learned from its announcements)" }
        detail += skippedText
        if !dropped.isEmpty { detail += "; not answered: \(dropped.joined(separator: "; "))" }
        let event = Event(time: now, kind: .asleep, interface: key.interface, owner: key.primaryMAC, detail: detail)
        return [.store(.appendEvent(event)), .log(.info, "\(key): \(detail)")] + updateTakeovers(of: key, now: now)
    }

    /// A declared host's records never expire: it holds no lease; the proxy lets go when the host is back.
    static let declaredExpiry = UnixTime(nanoseconds: .max / 2)

    /// A registration from a declared host the proxy holds: the registration wins. The declared hold is dropped
    /// without goodbyes (the registration holds the same records or better ones), and the host stays asleep, held
    /// through its registration from then on.
    mutating func yieldDeclared(_ key: OwnerKey, now: UnixTime) -> [Action] {
        guard let declaration = hosts[key]?.declaration else { return [] }
        return drop(
            key,
            reason: DropReason(
                kind: .released, release: .registered,
                detail: "declared host \(declaration.name) registered itself; its registration holds it now",
                goodbyes: false, level: .info),
            now: now)
    }

    /// A held host whose MAC is declared has gone (`drop`), registered or declared. If it yielded to its own
    /// registration, it sleeps on, held through that registration. Otherwise, if it is still counted asleep (it
    /// left without being heard from: a wake it did not answer, the administrator, an interface no longer served,
    /// its address found in use by another machine, the end of its registration's lease), it is watched afresh,
    /// so that it is probed again and held again as declared while it sleeps.
    mutating func rewatchDeclared(_ key: OwnerKey, after reason: DropReason, now: UnixTime) -> [Action] {
        guard let watch = declared[key] else { return [] }
        guard reason.release != .registered else {
            declared[key]?.unheld = "its own registration holds it"
            return []
        }
        guard watch.liveness.state == .asleep else { return [] }
        declared[key] = DeclaredWatch(
            host: watch.host, liveness: Liveness(now: now), learned: watch.learned, records: watch.records,
            saved: watch.saved, checkAt: watch.checkAt, inUse: watch.inUse)
        return [.log(.info, "declared host \(watch.host.name) (\(key)) is watched afresh")]
    }

    /// Another machine uses an address of a declared host the proxy holds: it answered the take-over's probe
    /// (which asks the whole link), or used the address as its own. The declaration is stale (DHCP gave the
    /// address to someone else, or the MAC is wrong), and the proxy never claims an address another MAC answers
    /// for, nor wakes anyone over it: the host is let go (an address already claimed goes to that machine), the
    /// address is left out of its take-overs for `DeclaredWatch.inUseHold`, and the host, watched afresh, is held
    /// again with what it has left.
    mutating func declaredAddressInUse(
        _ address: IPAddress, by mac: MACAddress, of key: OwnerKey, now: UnixTime, what: String
    ) -> [Action] {
        guard let host = hosts[key], var watch = declared[key] else { return [] }
        watch.inUse[address] = DeclaredWatch.InUse(mac: mac, until: now + DeclaredWatch.inUseHold)
        declared[key] = watch
        let claimed = host.takeovers[address]?.isClaimed == true
        let detail =
            "declared host \(watch.host.name): \(address) is in use by \(mac) (\(what)), not by \(key.primaryMAC); not taken over, nobody woken. Is the declaration stale (an address given to another machine, a wrong MAC)? Asked again in \(DeclaredWatch.inUseHold.components.seconds / 60) min"
        return (claimed ? handBack([address], to: mac, on: key.interface) : [])
            + drop(
                key,
                reason: DropReason(
                    kind: .released, release: .addressInUse, detail: detail, goodbyes: true, level: .warning),
                now: now)
    }

    // MARK: Reports

    /// Every declared host and where it is.
    public var declaredHosts: [DeclaredStatus] {
        declared.keys.sorted().compactMap { key in
            guard let watch = declared[key] else { return nil }
            return DeclaredStatus(
                host: watch.host, liveness: watch.liveness.state, lastHeard: watch.liveness.lastHeard,
                addresses: watch.addresses, isHeld: hosts[key]?.isDeclared == true, unheld: watch.unheld,
                learnedRecordCount: watch.records.count)
        }
    }

    /// The declared host a held host is held as, if it is one (not held through a registration).
    public func declaration(of key: OwnerKey) -> DeclaredHost? {
        hosts[key]?.declaration
    }
}

extension IPAddress {
    public var isV4: Bool {
        if case .v4 = self { true } else { false }
    }

    /// `0.0.0.0`, `::` or a multicast address: never a host's own.
    public var isUnspecifiedOrMulticast: Bool {
        switch self {
        case .v4(let v4): v4.isUnspecified || v4.value >> 28 == 0xE
        case .v6(let v6): v6.isUnspecified || v6.high >> 56 == 0xFF
        }
    }
}
