import CNetSupport
import DNSWire
import NetworkAddresses
import NetworkIO
import SleepProxyClientCore

#if canImport(Glibc)
    import Glibc
#endif

/// The sleep client's three commands, each ending in an exit status and one log line per interface.
public struct SleepClient: Sendable {
    /// Exit statuses of `register` besides the ``ClientError/Kind`` ones.
    public enum Status {
        public static let registered: Int32 = 0
        public static let noProxy: Int32 = 2
        public static let unanswered: Int32 = 3
        public static let wakeOnLANOff: Int32 = 4
        public static let nothingToRegister: Int32 = 5
    }

    /// How long the client listens for proxies and its own records before registering, at most.
    static let surveyLimit: Duration = .milliseconds(2_500)

    public let config: ClientConfig
    let state: StateDirectory

    public init(config: ClientConfig) {
        self.config = config
        self.state = StateDirectory(path: config.stateDirectory)
    }

    // MARK: register

    /// Registers this host with the best proxy on each interface. 0 when at least one interface is registered;
    /// else 3 when a registration went out unconfirmed on one (kept, so that the unit stays active and its stop
    /// runs `return`); otherwise the status of the first interface's failure.
    public func register() -> Int32 {
        let interfaces: [ClientInterface]
        let sequence: SequenceNumber
        do {
            interfaces = try ClientInterface.select(config.interfaces)
            sequence = try state.sequence()
        } catch {
            ClientLog.error(error.description)
            return error.kind.status
        }
        // One budget for every interface together: the suspend waits for all of them.
        let deadline = ContinuousClock.now + .seconds(Int64(config.timeout))
        var statuses: [Int32] = []
        for interface in interfaces {
            statuses.append(register(on: interface, sequence: sequence, until: deadline))
        }
        if statuses.contains(Status.registered) { return Status.registered }
        if statuses.contains(Status.unanswered) { return Status.unanswered }
        return statuses.first ?? Status.noProxy
    }

    /// Registers on one interface and logs how that ended, in one line (the debug lines of `--verbose` aside).
    private func register(
        on interface: ClientInterface, sequence: SequenceNumber, until deadline: ContinuousClock.Instant
    ) -> Int32 {
        let wakeOnLAN: String?
        switch checkWakeOnLAN(interface) {
        case .refused(let reason):
            ClientLog.error(reason)
            return Status.wakeOnLANOff
        case .wakes(let note):
            wakeOnLAN = note
        }
        let outcome = attempt(on: interface, sequence: sequence, until: deadline)
        let line = outcome.line + (wakeOnLAN.map { " (\($0))" } ?? "")
        if outcome.status == Status.registered { ClientLog.notice(line) } else { ClientLog.error(line) }
        return outcome.status
    }

    /// How registering on one interface ended: the exit status and the line that says so.
    private struct Outcome {
        var status: Int32
        var line: String
    }

    /// Learns the records and the proxies, then registers; how that ended.
    private func attempt(
        on interface: ClientInterface, sequence: SequenceNumber, until deadline: ContinuousClock.Instant
    ) -> Outcome {
        let start = ContinuousClock.now
        let querier: LinkQuerier
        do {
            querier = try LinkQuerier(interface)
        } catch {
            return Outcome(status: error.kind.status, line: error.description)
        }
        let survey = LinkSurvey.run(
            querier, fallbackHostName: ClientInterface.systemHostName, choose: candidates,
            limit: min(Self.surveyLimit, start.duration(to: deadline) / 2))
        let records = survey.host.records
        guard !survey.host.services.isEmpty else {
            return Outcome(
                status: Status.nothingToRegister, line: Self.nothingToRegister(on: interface.name, survey.host))
        }
        let seen = survey.proxies.proxies
        let candidates = candidates(seen)
        let targets = candidates.compactMap { proxy in
            survey.proxies.target(of: proxy.instance).map { (proxy: proxy, target: $0) }
        }
        guard !targets.isEmpty else {
            if seen.isEmpty {
                return Outcome(
                    status: Status.noProxy,
                    line: "no sleep proxy seen on \(interface.name) (browsed _sleep-proxy._udp.local)")
            }
            return Outcome(
                status: Status.noProxy,
                line:
                    "no usable sleep proxy on \(interface.name): seen \(seen.map { "\"\($0.label)\"" }.joined(separator: ", ")), none of them both allowed by the config and resolved to an address"
            )
        }
        for (index, entry) in targets.enumerated() {
            ClientLog.debug(
                "\(interface.name): proxy \(index + 1): \"\(entry.proxy.label)\" metric \(entry.proxy.metric) at \(entry.target.address) port \(entry.target.port)"
            )
        }

        let owner = OwnerOption(sequence: sequence.value, primaryMAC: interface.mac)
        let registration = SleepRegistration(
            id: UInt16.random(in: 1...0xFFFF), records: records, owner: owner, lease: config.lease)
        let datagrams: [[UInt8]]
        do {
            datagrams = try registration.datagrams()
        } catch {
            return Outcome(status: Status.nothingToRegister, line: "cannot register on \(interface.name): \(error)")
        }
        let outcome = runSession(
            datagrams: datagrams, ids: datagrams.indices.map(registration.messageID), targets: targets.map(\.target),
            interface: interface, until: deadline)
        // A registration that was not confirmed may still be held in part (some datagrams answered, or replies
        // lost): it is kept with lease 0, so that `return` announces the host's return all the same.
        func keepUnconfirmed(last index: Int) {
            let last = targets[index]
            do {
                try state.save(
                    SavedRegistration(
                        interface: interface.name, proxyAddress: last.target.address, proxyPort: last.target.port,
                        proxyName: last.proxy.instance.description, lease: 0, registeredAt: Int64(time(nil)),
                        sequence: sequence, messages: datagrams))
            } catch {
                ClientLog.warning("\(error): return will announce nothing for \(interface.name)")
            }
        }
        switch outcome {
        case .registered(let index, let lease):
            let entry = targets[index]
            let saved = SavedRegistration(
                interface: interface.name, proxyAddress: entry.target.address, proxyPort: entry.target.port,
                proxyName: entry.proxy.instance.description, lease: lease, registeredAt: Int64(time(nil)),
                sequence: sequence, messages: datagrams)
            do {
                try state.save(saved)
            } catch {
                ClientLog.warning("\(error): return will announce nothing for \(interface.name)")
            }
            return Outcome(
                status: Status.registered,
                line:
                    "registered \(interface.name) with \"\(entry.proxy.label)\" at \(entry.target.address) port \(entry.target.port) for \(lease) s: \(records.count) records in \(datagrams.count) message\(datagrams.count == 1 ? "" : "s"), sequence \(sequence), wake MAC \(interface.mac)"
            )
        case .unanswered(let refused, let last):
            let tried = targets.prefix(last + 1).enumerated().map { index, entry in
                "\"\(entry.proxy.label)\"" + (refused[index].map { " (refused: RCODE \($0))" } ?? " (silent)")
            }
            keepUnconfirmed(last: last)
            return Outcome(
                status: Status.unanswered,
                line:
                    "no sleep proxy answered on \(interface.name): tried \(tried.joined(separator: ", ")), \(RegistrationSession.sendingsPerProxy) sendings each"
            )
        case .timedOut(let last):
            if let last { keepUnconfirmed(last: last) }
            return Outcome(
                status: Status.unanswered,
                line:
                    "registration on \(interface.name) ran out of time (timeout = \(config.timeout) s) before a proxy answered every message"
            )
        case .noProxy:
            return Outcome(status: Status.noProxy, line: "no sleep proxy to register with on \(interface.name)")
        }
    }

    /// Why `host` has nothing to register on `interface`: no responder on this host answered at all (one-shot
    /// queries, which nothing else on the link can keep it from answering, included), or it answered and publishes
    /// no service of this host.
    static func nothingToRegister(on interface: String, _ host: HostRecords) -> String {
        let name = host.hostName.map { "\($0)" } ?? "this host"
        guard host.responderAnswered else {
            return
                "nothing to register on \(interface): no mDNS responder on this host answered on \(interface), not even its one-shot queries; is avahi-daemon running, and does it use \(interface) (allow-interfaces and deny-interfaces in avahi-daemon.conf)?"
        }
        return
            "nothing to register on \(interface): this host's mDNS responder answered, but publishes no service of \(name) there (placeholders on port 9 such as _workstation._tcp do not count, nor services of other hosts); publish one, such as ssh in /etc/avahi/services"
    }

    /// The proxies to try, in order, with the config's preferences and exclusions.
    func candidates(_ seen: [DiscoveredProxy]) -> [DiscoveredProxy] {
        ProxyRanking.choose(seen, prefer: config.prefer, exclude: config.exclude)
    }

    /// Sends the datagrams to the proxies as the session says until it ends.
    private func runSession(
        datagrams: [[UInt8]], ids: [UInt16], targets: [ProxyDirectory.Target], interface: ClientInterface,
        until deadline: ContinuousClock.Instant
    ) -> RegistrationSession.Outcome {
        let start = ContinuousClock.now
        var session = RegistrationSession(
            ids: ids, proxyCount: targets.count, deadline: start.duration(to: deadline))
        var sockets: [Bool: DatagramSocket] = [:]
        defer { for socket in sockets.values { socket.close() } }
        func socket(for address: IPAddress) -> DatagramSocket? {
            let isIPv4 = address.bytes.count == 4
            if let socket = sockets[isIPv4] { return socket }
            do {
                let socket = try DatagramSocket(family: isIPv4 ? .ipv4 : .ipv6, interface: interface.name, port: 0)
                sockets[isIPv4] = socket
                return socket
            } catch {
                ClientLog.warning("cannot open a socket to \(address) on \(interface.name): \(error)")
                return nil
            }
        }
        var actions = session.start()
        while true {
            for action in actions {
                switch action {
                case .send(let datagram, let proxy):
                    let target = targets[proxy]
                    let scope: UInt32 =
                        if case .v6(let v6) = target.address, v6.isLinkLocal { interface.index } else { 0 }
                    do {
                        try socket(for: target.address)?.send(
                            datagrams[datagram], to: Endpoint(address: target.address, port: target.port),
                            scopeID: scope)
                    } catch {
                        ClientLog.debug("sending to \(target.address) port \(target.port): \(error)")
                    }
                case .finished(let outcome):
                    return outcome
                }
            }
            let now = ContinuousClock.now
            let wake = session.nextDeadline.map { start + $0 } ?? now
            actions = []
            if waitForInput(sockets.values.map(\.fileDescriptor), until: wake) {
                for socket in sockets.values {
                    while let datagram = try? socket.receive() {
                        // Only from the proxy being tried (two instance names can lead to one proxy: the reply
                        // is that one's).
                        let current = targets[session.proxy]
                        guard current.address == datagram.source.address, current.port == datagram.source.port
                        else { continue }
                        actions += session.received(datagram.bytes, from: session.proxy, now: start.duration(to: .now))
                    }
                }
            }
            actions += session.tick(now: start.duration(to: .now))
        }
    }

    /// What the Wake-on-LAN check says about an interface.
    private enum WakeOnLANCheck {
        /// Register; `note`, if any, goes on the outcome's line (the check skipped, Wake-on-LAN turned on).
        case wakes(note: String?)
        /// Do not register, for this reason (the whole line).
        case refused(String)
    }

    /// Whether the client may register on `interface` for its Wake-on-LAN (turning it on under `enable`).
    private func checkWakeOnLAN(_ interface: ClientInterface) -> WakeOnLANCheck {
        if config.wakeOnLAN == .skip {
            return .wakes(note: "Wake-on-LAN not checked: wake_on_lan = \"skip\"")
        }
        let current: WakeOnLANState
        switch WakeOnLANState.read(interface.name) {
        case .success(let state): current = state
        case .failure(let error): return .refused("not registering \(interface.name): \(error)")
        }
        switch WakeOnLANDecision.decide(
            config.wakeOnLAN, interface: interface.name, state: current, configPath: ClientConfig.defaultPath)
        {
        case .wakes:
            return .wakes(note: nil)
        case .refuse(let reason):
            return .refused("not registering \(interface.name): \(reason)")
        case .enable(let modes):
            if let error = WakeOnLANState.set(interface.name, modes: modes) {
                return .refused("not registering \(interface.name): \(error)")
            }
            return .wakes(
                note: "Wake-on-LAN turned on, as ethtool -s \(interface.name) wol \(WakeOnLANState.text(modes))")
        }
    }

    // MARK: return

    /// After a wake: advances the sequence number and announces, on each interface with a kept registration, the
    /// registered records with the OWNER option, twice a second apart, so that any proxy holding the host lets go.
    public func returnFromSleep() -> Int32 {
        let sequence: SequenceNumber
        do {
            sequence = try state.sequence().advanced()
            try state.save(sequence)
        } catch {
            ClientLog.error(error.description)
            return error.kind.status
        }
        let names = config.interfaces.isEmpty ? state.registeredInterfaces() : config.interfaces
        var status = Status.registered
        var announced = 0
        // One wait for every interface together, and one for addresses still in duplicate address detection,
        // inside the unit's TimeoutStopSec= (15 s) with a second per interface for the two announcements.
        let linkDeadline = ContinuousClock.now + .seconds(10)
        let settleDeadline = linkDeadline + .seconds(2)
        for name in names {
            let saved: SavedRegistration?
            do {
                saved = try state.registration(on: name)
            } catch {
                ClientLog.error(error.description)
                state.removeRegistration(on: name)
                status = error.kind.status
                continue
            }
            guard let saved else { continue }
            guard let interface = waitForLink(name, until: linkDeadline) else {
                ClientLog.error(
                    "cannot announce the return on \(name): no carrier or no address 10 s after the wake; the registration is kept for the next return"
                )
                status = ClientError.Kind.interface.status
                continue
            }
            do {
                let records = WakeAnnouncement.records(try saved.records(), addresses: interface.addresses)
                let owner = OwnerOption(sequence: sequence.value, primaryMAC: interface.mac)
                let messages = try WakeAnnouncement.messages(records: records, owner: owner)
                let querier = try LinkQuerier(interface, oneShot: false)
                // Announced twice, a second apart (RFC 6762 section 8.3), so that one lost packet does not leave
                // the proxy holding the host; then nothing more. With each, the addresses for the neighbour caches
                // (those whose duplicate address detection is over; any still in it are announced once it is).
                var neighbours = NeighbourFrames(interface: interface)
                var sent = querier.send(messages)
                neighbours.send()
                querier.receive(until: .now + .seconds(1)) { _, _, _ in }
                sent += querier.send(messages)
                neighbours.send()
                neighbours.settle(until: min(.now + .seconds(2), settleDeadline))
                guard sent > 0 else {
                    ClientLog.error(
                        "cannot announce the return on \(name): nothing could be sent; the registration is kept for the next return"
                    )
                    status = ClientError.Kind.network.status
                    continue
                }
                state.removeRegistration(on: name)
                announced += 1
                // A registration kept unconfirmed (lease 0): the proxy never answered, and may hold some of it.
                let proxy = "\"\(saved.proxyLabel)\" at \(saved.proxyAddress)"
                let release =
                    saved.lease == 0
                    ? "\(proxy) never confirmed the registration; a proxy that holds any of it lets go"
                    : "\(proxy) lets go of this host"
                ClientLog.notice(
                    "returned on \(name): announced \(records.count) records with sequence \(sequence)\(neighbours.announced.isEmpty ? "" : " and \(neighbours.announced.count) addresses"); \(release)"
                )
            } catch let error as ClientError {
                ClientLog.error(error.description)
                status = error.kind.status
            } catch {
                ClientLog.error("cannot announce the return on \(name): \(error)")
                status = ClientError.Kind.state.status
            }
        }
        if announced == 0, status == Status.registered {
            ClientLog.notice("nothing to return: no registration is kept; the sequence number is now \(sequence)")
        }
        return status
    }

    /// The interface once its link is up again (carrier: a NIC takes a few seconds after a resume, and what is
    /// sent before is dropped without an error) and it has an address.
    private func waitForLink(_ name: String, until deadline: ContinuousClock.Instant) -> ClientInterface? {
        while true {
            let carrier = readTextFile("/sys/class/net/\(name)/carrier").map { $0.hasPrefix("1") } == .success(true)
            if carrier, let interface = try? ClientInterface.select([name]), !interface[0].addresses.isEmpty {
                return interface[0]
            }
            guard ContinuousClock.now < deadline else { return nil }
            usleep(100_000)
        }
    }
}

extension SavedRegistration {
    /// The proxy's instance label, `20-30-50-73.1 homeserver`.
    var proxyLabel: String {
        (try? DNSName(proxyName)).map { DiscoveredProxy(instance: $0).label } ?? proxyName
    }
}

/// The gratuitous ARPs and unsolicited Neighbour Advertisements of a return, on one interface.
struct NeighbourFrames {
    let interface: ClientInterface
    /// The addresses announced so far.
    private(set) var announced: Set<IPAddress> = []
    /// IPv6 addresses still in duplicate address detection at the last look.
    private(set) var tentative: [IPv6Address] = []
    private var warnedRead = false
    private var warnedSend = false

    init(interface: ClientInterface) { self.interface = interface }

    /// Sends a frame for each of the interface's IPv4 addresses and for each IPv6 address whose duplicate address
    /// detection is over (`onlyNew`: just those not announced yet). Each kind of failure is logged once, with its
    /// cause (no CAP_NET_RAW, say, when run by hand): the return goes on without them, as the proxy lets go on
    /// the mDNS announcement alone.
    mutating func send(onlyNew: Bool = false) {
        var addresses = interface.addresses.filter { if case .v4 = $0 { true } else { false } }
        switch readTextFile("/proc/self/net/if_inet6") {
        case .success(let text):
            let ipv6 = NeighbourAnnouncement.ipv6Addresses(procText: text, interface: interface.name)
            addresses += ipv6.settled.map(IPAddress.v6)
            tentative = ipv6.tentative
        case .failure(let error):
            // No such file: IPv6 is off (ipv6.disable=1), and there is nothing to announce.
            if !warnedRead, error.code != ENOENT {
                ClientLog.warning(
                    "cannot read /proc/self/net/if_inet6 (\(error)): the IPv6 addresses of \(interface.name) are not announced"
                )
            }
            warnedRead = true
        }
        if onlyNew { addresses.removeAll { announced.contains($0) } }
        guard !addresses.isEmpty else { return }
        let frames = NeighbourAnnouncement.frames(mac: interface.mac, addresses: addresses)
        let result = sp_send_frames(interface.index, frames.flatMap { $0 }, frames.map(\.count), frames.count)
        if result == frames.count {
            announced.formUnion(addresses)
            return
        }
        guard !warnedSend else { return }
        warnedSend = true
        let why =
            result >= 0
            ? "\(frames.count - Int(result)) of \(frames.count) frames could not be sent"
            : String(cString: strerror(-result))
                + (-result == EPERM ? " (ARP and Neighbour Discovery frames need CAP_NET_RAW)" : "")
        ClientLog.warning(
            "cannot announce the addresses of \(interface.name): \(why); peers reach this host again once their neighbour entries for it age out"
        )
    }

    /// Waits, until `deadline` at most, for the IPv6 addresses still tentative (re-added by NetworkManager or
    /// systemd-networkd on the resume: their detection takes a second or two) and announces each once settled.
    mutating func settle(until deadline: ContinuousClock.Instant) {
        while !tentative.isEmpty, ContinuousClock.now < deadline {
            usleep(200_000)
            send(onlyNew: true)
        }
    }
}
