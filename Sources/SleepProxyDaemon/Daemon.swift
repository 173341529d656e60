import CNetSupport
import Dispatch
import Frames
import LeaseStore
public import Logging
public import NetworkAddresses
public import SleepProxyCore

#if canImport(Glibc)
    import Glibc
#endif

/// How the daemon is set up: from the command line now, from the config file later.
public struct DaemonConfiguration: Sendable {
    /// The registration port: any fixed UDP port works (clients learn it from the SRV record). 5354 sits next to
    /// mDNS and is registered to nothing a home network runs.
    public static let defaultRegistrationPort: UInt16 = 5354

    public var interface: String
    public var stateDirectory: String
    public var registrationPort: UInt16
    public var core: CoreConfiguration
    /// Newest events kept in the history.
    public var eventHistoryLimit: Int
    /// How many datagrams one commit may cover (group commit); replies wait for that commit.
    public var maximumBatch: Int
    /// Answer mDNS for held hosts (sockets on the mDNS groups, a capture of UDP port 5353).
    public var responder: Bool
    /// How the proxy advertises itself under `_sleep-proxy._udp`; nil advertises nothing.
    public var advertisement: AdvertisementConfiguration?
    /// On a clean stop, wake every held host (so that it can find another proxy) instead of keeping the leases
    /// for the next start.
    public var wakeAllOnExit: Bool = false

    public init(
        interface: String, stateDirectory: String, registrationPort: UInt16 = Self.defaultRegistrationPort,
        core: CoreConfiguration = CoreConfiguration(), eventHistoryLimit: Int = 10_000, maximumBatch: Int = 256,
        responder: Bool = true, advertisement: AdvertisementConfiguration? = nil
    ) {
        self.interface = interface
        self.stateDirectory = stateDirectory
        self.registrationPort = registrationPort
        self.core = core
        self.eventHistoryLimit = eventHistoryLimit
        self.maximumBatch = maximumBatch
        self.responder = responder
        self.advertisement = advertisement
    }
}

/// A failure that stops the daemon from starting, with what to do about it.
public struct DaemonError: Error, CustomStringConvertible {
    public let description: String
}

/// The daemon: the sockets, the lease store and the timers around one `SleepProxyCore`.
///
/// Everything runs on one serial queue, which owns the core, the store and the sockets. Datagrams that arrive
/// together are handled as one batch: the core decides, the store commits every change of the batch in one
/// transaction, and only then do the replies go out.
public final class Daemon: @unchecked Sendable {
    private let configuration: DaemonConfiguration
    private let logger: Logger
    private let queue = DispatchQueue(label: "sleepproxyd.core")
    private var core: SleepProxyCore
    private let store: LeaseStore
    private let interfaceName: InterfaceName
    private var interfaceIndex: UInt32
    private var linkMAC: MACAddress
    private var sockets: [DatagramSocket] = []
    private var mdnsSockets: [MulticastDNSSocket] = []
    private var unicastHolder: UnicastPortHolder?
    private var capture: PacketCapture?
    private var captureFilter = ""
    private var clock = SteadyClock()
    /// mDNS messages the daemon sent, recognised when the capture sees them leave.
    private var ownTransmissions = OwnTransmissions()
    private var neighbours: NeighbourTable?
    private var membership: MulticastMembership?
    /// Neighbour entries set for our own host; removed on release, and at a clean stop.
    private var neighbourEntries: Set<IPAddress> = []
    /// Held addresses per solicited-node group: two addresses can share a group.
    private var groupUsers: [IPv6Address: Int] = [:]
    private var captureTask: Task<Void, Never>?
    private var sources: [any DispatchSourceProtocol] = []
    private var expiryTimer: (any DispatchSourceTimer)?
    private var stopped = false
    private let finished = DispatchSemaphore(value: 0)

    /// Opens the lease store, restores what it held, and opens the registration sockets.
    public init(configuration: DaemonConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        interfaceName = InterfaceName(configuration.interface)

        let interface: NetworkInterface
        do {
            interface = try NetworkInterface.named(configuration.interface)
        } catch {
            throw DaemonError(description: "interface \(configuration.interface): \(error)")
        }
        interfaceIndex = interface.index
        let link = try Self.link(of: interface)
        linkMAC = link.macAddress
        core = SleepProxyCore(configuration: configuration.core, seed: UInt64(truncatingIfNeeded: sp_wall_clock_ns()))
        core.setLink(link)

        do {
            store = try LeaseStore(
                directory: configuration.stateDirectory,
                configuration: LeaseStore.Configuration(eventHistoryLimit: configuration.eventHistoryLimit))
        } catch {
            throw DaemonError(description: "lease store: \(error)")
        }
        let loaded = try store.loadOwners()
        for problem in loaded.problems {
            logger.error("lease store: \(problem)")
        }
        let restored = core.restore(loaded.owners, now: now())
        try perform(restored)

        for family in [DatagramSocket.Family.ipv4, .ipv6] {
            do {
                sockets.append(
                    try DatagramSocket(
                        family: family, interface: configuration.interface, port: configuration.registrationPort))
            } catch {
                throw DaemonError(description: "registration socket: \(error)")
            }
        }
        if configuration.responder {
            try openResponder(interface: interface)
            warnAboutKernelSettings(interface: interface.name)
        }
        logger.info(
            "sleepproxyd \(SleepProxyVersion.string) on \(configuration.interface) (index \(interfaceIndex)), registrations on UDP port \(configuration.registrationPort), state in \(configuration.stateDirectory)"
        )
    }

    /// The `Link` the core needs: the interface's MAC and on-link prefixes.
    static func link(of interface: NetworkInterface) throws -> Link {
        guard let macBytes = interface.macAddress, let mac = MACAddress(bytes: macBytes) else {
            throw DaemonError(description: "interface \(interface.name) has no Ethernet address")
        }
        let prefixes = (interface.ipv4Addresses + interface.ipv6Addresses).compactMap { address in
            IPAddress(bytes: address.bytes).map { Link.Prefix(address: $0, length: address.prefixLength) }
        }
        return Link(name: InterfaceName(interface.name), macAddress: mac, prefixes: prefixes)
    }

    /// The wall clock, as the lease store and other processes read it.
    public static func now() -> UnixTime {
        UnixTime(nanoseconds: sp_wall_clock_ns())
    }

    /// The core's time: the wall clock when the daemon started, advancing steadily (see `SteadyClock`).
    private func now() -> UnixTime { clock.now() }

    /// Follows a step of the system clock: everything held moves with it, so no lease ends early or late.
    private func followClockSteps() {
        guard let step = clock.step() else { return }
        do {
            try perform(core.clockStepped(by: step))
        } catch {
            logger.error("\(error)")
        }
    }

    /// Runs until SIGTERM, SIGINT or `requestStop()`. Leases stay in the store for the next start.
    public func run() {
        queue.sync {
            for socket in sockets {
                let source = DispatchSource.makeReadSource(fileDescriptor: socket.fileDescriptor, queue: queue)
                source.setEventHandler { [weak self] in self?.drain(socket) }
                source.activate()
                sources.append(source)
            }
            for signalNumber in [SIGTERM, SIGINT] {
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
                source.setEventHandler { [weak self] in
                    self?.logger.notice("received signal \(signalNumber), stopping; leases are kept")
                    self?.stop()
                }
                source.activate()
                sources.append(source)
            }
            for socket in mdnsSockets {
                // Input comes from the capture, which also sees unicast to us and the sender's MAC; what arrives
                // here (including our own packets looped back) is read and dropped so the buffer never fills.
                let source = DispatchSource.makeReadSource(fileDescriptor: socket.fileDescriptor, queue: queue)
                source.setEventHandler { while (try? socket.receive()) != nil {} }
                source.activate()
                sources.append(source)
            }
            if let holder = unicastHolder {
                for descriptor in holder.fileDescriptors {
                    let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
                    source.setEventHandler { holder.drain(descriptor) }
                    source.activate()
                    sources.append(source)
                }
            }
            if let capture {
                let queue = self.queue
                // Frames still queued when the daemon stops find it gone: weak, never unowned.
                captureTask = Task { [weak self] in
                    for await frame in capture.frames {
                        queue.async { [weak self] in self?.handleCaptured(frame) }
                    }
                }
            }
            if let advertisement = configuration.advertisement {
                do {
                    try perform(
                        core.startAdvertising(
                            on: interfaceName, configuration: advertisement, port: configuration.registrationPort,
                            now: now()))
                } catch {
                    logger.error("\(error)")
                }
            }
            // Interface addresses change (DHCP, SLAAC): refresh what is on-link now and then.
            let refresh = DispatchSource.makeTimerSource(queue: queue)
            refresh.schedule(deadline: .now() + .seconds(10), repeating: .seconds(10))
            refresh.setEventHandler { [weak self] in
                self?.followClockSteps()
                self?.refreshLink()
            }
            refresh.activate()
            sources.append(refresh)
            scheduleExpiry()
        }
        finished.wait()
    }

    /// Stops a running daemon from any thread; `run()` returns once the sockets and the store are closed.
    public func requestStop() {
        queue.async { [self] in
            logger.notice("stopping; leases are kept")
            stop()
        }
    }

    private func stop() {
        guard !stopped else { return }
        stopped = true
        // Goodbyes for the advertisement (and magic packets, if asked) go out while the sockets are still open.
        if configuration.wakeAllOnExit {
            try? perform(core.wakeEveryone(now: now(), reason: "the proxy is stopping"))
        }
        try? perform(core.stopAdvertising(now: now()))
        if let statistics = try? capture?.statistics() {
            logger.notice(
                "capture statistics: received \(statistics.received), dropped by the kernel \(statistics.droppedByKernel), by the interface \(statistics.droppedByInterface), by the daemon \(statistics.droppedByStream)"
            )
        }
        for source in sources { source.cancel() }
        expiryTimer?.cancel()
        captureTask?.cancel()
        capture?.close()
        for socket in sockets { socket.close() }
        for socket in mdnsSockets { socket.close() }
        unicastHolder?.close()
        membership?.close()
        for address in neighbourEntries { _ = try? neighbours?.remove(address) }
        neighbours?.close()
        store.close()
        finished.signal()
    }

    /// What the daemon holds now, for status output and tests.
    public var heldOwners: [Owner] {
        queue.sync { Array(core.owners.values) }
    }

    private func refreshLink() {
        guard let interface = try? NetworkInterface.named(configuration.interface),
            let link = try? Self.link(of: interface)
        else {
            logger.warning("interface \(configuration.interface) is gone; registrations wait for it")
            return
        }
        interfaceIndex = interface.index
        core.setLink(link)
    }

    /// Reads every pending datagram (up to a batch), then commits once and replies.
    private func drain(_ socket: DatagramSocket) {
        var actions: [Action] = []
        for _ in 0..<configuration.maximumBatch {
            let datagram: ReceivedDatagram?
            do {
                datagram = try socket.receive()
            } catch {
                logger.error("registration socket: \(error)")
                break
            }
            guard let datagram else { break }
            guard !datagram.truncated else {
                logger.warning("dropped a registration from \(datagram.source): larger than 65,535 bytes")
                continue
            }
            let input = RegistrationDatagram(
                interface: interfaceName, source: datagram.source, sourceScopeID: datagram.sourceScopeID,
                destination: Endpoint(address: datagram.destination, port: datagram.destinationPort),
                bytes: datagram.bytes)
            actions += core.handleRegistration(input, now: now())
        }
        do {
            try perform(actions)
        } catch {
            logger.error("\(error)")
        }
        scheduleExpiry()
    }

    private func expire() {
        do {
            try perform(core.tick(now: now()))
        } catch {
            logger.error("\(error)")
        }
        scheduleExpiry()
    }

    private func scheduleExpiry() {
        expiryTimer?.cancel()
        expiryTimer = nil
        guard !stopped, let deadline = core.nextDeadline else { return }
        let delay = max(0, deadline.nanoseconds - now().nanoseconds)
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(Int(min(delay, Int64(Int32.max) * 1_000_000))))
        timer.setEventHandler { [weak self] in self?.expire() }
        timer.activate()
        expiryTimer = timer
    }

    /// Carries out actions in order: first every store change, in one transaction, then the rest. A reply is
    /// never sent before the changes it acknowledges are committed; if the commit fails, no reply goes out and
    /// the client's retransmission gets another chance.
    private func perform(_ actions: [Action]) throws {
        let changes = actions.compactMap { if case .store(let change) = $0 { change } else { nil } }
        var committed = true
        if !changes.isEmpty {
            do {
                try store.apply(changes)
            } catch {
                committed = false
                logger.error("lease store: commit of \(changes.count) changes failed, replies withheld: \(error)")
            }
        }
        for action in actions {
            switch action {
            case .store:
                break
            case .reply(let reply):
                guard committed else { continue }
                send(reply)
            case .log(let level, let text):
                logger.log(level: Self.level(level), "\(text)")
            case .sendMDNS(let transmission):
                sendMDNS(transmission)
            case .injectFrame(_, let bytes):
                inject(bytes)
            case .proxiedAddressesChanged:
                updateCaptureFilter()
            case .joinMulticastGroup(_, let group):
                joinGroup(group)
            case .leaveMulticastGroup(_, let group):
                leaveGroup(group)
            case .setNeighbour(_, let address, let mac):
                setNeighbour(address, mac)
            case .removeNeighbour(_, let address):
                removeNeighbour(address)
            }
        }
    }

    // MARK: mDNS

    /// Opens the mDNS sockets (sending; bound to the groups so that an avahi-daemon keeps its unicast), holds
    /// unicast port 5353 when nobody else does (so that legacy queries to our address get no ICMP error before
    /// our answer), and captures UDP to port 5353: the capture is the input, with the sender's MAC and the
    /// unicast that an avahi-daemon on this host would otherwise take.
    private func openResponder(interface: NetworkInterface) throws {
        // The unicast port first: our own group sockets share the port, which would make it look taken.
        unicastHolder = UnicastPortHolder(port: MulticastDNS.port)
        if let holder = unicastHolder {
            logger.info(
                "holding UDP port \(MulticastDNS.port) for unicast (\(holder.families)); no other mDNS stack runs here")
        } else {
            logger.info("another mDNS stack holds UDP port \(MulticastDNS.port); unicast to it is seen by the capture")
        }
        for family in [DatagramSocket.Family.ipv4, .ipv6] {
            do {
                mdnsSockets.append(try MulticastDNSSocket(family: family, interfaceIndex: interface.index))
            } catch {
                throw DaemonError(description: "mDNS socket: \(error)")
            }
        }
        do {
            neighbours = try NeighbourTable(interfaceIndex: interface.index)
            membership = try MulticastMembership(interfaceIndex: interface.index)
        } catch {
            throw DaemonError(description: "address take-over: \(error)")
        }
        do {
            let capture = try PacketCapture(
                interface: interface.name,
                options: PacketCapture.Options(
                    kernelBufferSize: 16 * 1024 * 1024, streamBufferSize: 16_384, direction: .both))
            captureFilter = "udp dst port \(MulticastDNS.port) or arp or (icmp6 and ip6[7] = 255)"
            try capture.setFilter(captureFilter)
            self.capture = capture
        } catch {
            throw DaemonError(description: "mDNS capture: \(error)")
        }
    }

    private func handleCaptured(_ captured: CapturedFrame) {
        guard !stopped, let frame = try? EthernetFrame(parsing: captured.bytes) else { return }
        guard let udp = frame.udp, udp.destinationPort == MulticastDNS.port else {
            handleFrame(captured)
            return
        }
        // Outgoing frames are captured too: programs on this host (its avahi-daemon, a browser) ask for held
        // names like anyone else. Only the messages the daemon sent itself are left out.
        if frame.header.source == linkMAC, ownTransmissions.claim(udp.payload) { return }
        let source: IPAddress
        let destination: IPAddress
        if let ipv4 = frame.ipv4 {
            source = .v4(ipv4.header.source)
            destination = .v4(ipv4.header.destination)
        } else if let ipv6 = frame.ipv6 {
            source = .v6(ipv6.header.source)
            destination = .v6(ipv6.header.destination)
        } else {
            return
        }
        let scope: UInt32 = if case .v6(let address) = source, address.isLinkLocal { interfaceIndex } else { 0 }
        let packet = MDNSPacket(
            interface: interfaceName, source: Endpoint(address: source, port: udp.sourcePort), sourceScopeID: scope,
            destination: destination, sourceMAC: frame.header.source, bytes: udp.payload)
        do {
            try perform(core.handleMDNS(packet, now: now()))
        } catch {
            logger.error("\(error)")
        }
        scheduleExpiry()
    }

    private func handleFrame(_ captured: CapturedFrame) {
        do {
            try perform(
                core.handleFrame(CapturedFrameInput(interface: interfaceName, bytes: captured.bytes), now: now()))
        } catch {
            logger.error("\(error)")
        }
        scheduleExpiry()
    }

    // MARK: Take-over

    /// The triggering SYN must only be observed: a forwarding or redirecting kernel would answer or pass it on
    /// (PROTOCOL.md section 6 item 8), and proxy ARP/ND would answer for the sleeper alongside the proxy.
    private func warnAboutKernelSettings(interface name: String) {
        let checks: [(String, String)] = [
            ("net.ipv4.ip_forward", "/proc/sys/net/ipv4/ip_forward"),
            ("net.ipv4.conf.\(name).forwarding", "/proc/sys/net/ipv4/conf/\(name)/forwarding"),
            ("net.ipv4.conf.\(name).proxy_arp", "/proc/sys/net/ipv4/conf/\(name)/proxy_arp"),
            ("net.ipv4.conf.all.send_redirects", "/proc/sys/net/ipv4/conf/all/send_redirects"),
            ("net.ipv4.conf.\(name).send_redirects", "/proc/sys/net/ipv4/conf/\(name)/send_redirects"),
            ("net.ipv6.conf.\(name).forwarding", "/proc/sys/net/ipv6/conf/\(name)/forwarding"),
            ("net.ipv6.conf.\(name).proxy_ndp", "/proc/sys/net/ipv6/conf/\(name)/proxy_ndp"),
        ]
        for (sysctl, path) in checks {
            guard let value = Self.readSysctl(path), value != "0" else { continue }
            logger.warning(
                "\(sysctl) is \(value): this host may answer or forward traffic for sleeping hosts; set \(sysctl)=0")
        }
    }

    static func readSysctl(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].filter { $0 > 0x20 }, as: UTF8.self)
    }

    private func inject(_ frame: [UInt8]) {
        do {
            try capture?.inject(frame)
        } catch {
            logger.warning("inject: \(error)")
        }
    }

    /// The kernel filter: mDNS to us, all ARP, ICMPv6 with hop limit 255 (Neighbour Discovery), and IP to the
    /// held addresses. Held addresses are listed one by one while few; with many, they are folded into the
    /// narrowest prefixes that keep the program small (the kernel caps classic BPF at 4,096 instructions), so
    /// that traffic to other addresses stays in the kernel. The core checks every packet exactly.
    private func updateCaptureFilter() {
        guard let capture else { return }
        let addresses = core.proxiedAddresses(on: interfaceName)
        var parts = ["udp dst port \(MulticastDNS.port)", "arp", "(icmp6 and ip6[7] = 255)"]
        parts += Self.destinationTerms(for: addresses, limit: 64)
        let filter = parts.joined(separator: " or ")
        guard filter != captureFilter else { return }
        do {
            try capture.setFilter(filter)
            captureFilter = filter
        } catch {
            logger.error("capture filter: \(error)")
        }
    }

    /// `dst host` or `dst net` terms covering `addresses` with at most `limit` terms.
    public static func destinationTerms(for addresses: [IPAddress], limit: Int) -> [String] {
        let v4 = addresses.compactMap { if case .v4(let a) = $0 { a } else { nil } }
        let v6 = addresses.compactMap { if case .v6(let a) = $0 { a } else { nil } }
        var terms: [String] = []
        for length in [32, 28, 24, 20, 16, 8, 0] {
            let prefixes = Set(v4.map { length == 0 ? 0 : $0.value & (UInt32.max << UInt32(32 - length)) })
            if prefixes.count <= limit / 2 || length == 0 {
                terms += prefixes.sorted().map { prefix in
                    length == 32
                        ? "dst host \(IPv4Address(value: prefix))" : "dst net \(IPv4Address(value: prefix))/\(length)"
                }
                break
            }
        }
        if v4.isEmpty { terms.removeAll() }
        var v6Terms: [String] = []
        for length in [128, 120, 112, 104, 96, 80, 64, 48, 0] {
            let prefixes = Set(
                v6.map { address -> IPv6Address in
                    if length >= 64 {
                        let mask = length == 128 ? UInt64.max : UInt64.max << UInt64(128 - length)
                        return IPv6Address(high: address.high, low: address.low & mask)
                    }
                    let mask = length == 0 ? 0 : UInt64.max << UInt64(64 - length)
                    return IPv6Address(high: address.high & mask, low: 0)
                })
            if prefixes.count <= limit / 2 || length == 0 {
                v6Terms = prefixes.sorted().map { prefix in
                    length == 128 ? "dst host \(prefix)" : "dst net \(prefix)/\(length)"
                }
                break
            }
        }
        if v6.isEmpty { v6Terms.removeAll() }
        return terms + v6Terms
    }

    private func joinGroup(_ group: IPv6Address) {
        groupUsers[group, default: 0] += 1
        guard groupUsers[group] == 1 else { return }
        do {
            try membership?.join(group)
        } catch {
            logger.error("join \(group): \(error)")
        }
    }

    private func leaveGroup(_ group: IPv6Address) {
        guard let users = groupUsers[group] else { return }
        if users > 1 {
            groupUsers[group] = users - 1
            return
        }
        groupUsers[group] = nil
        do {
            try membership?.leave(group)
        } catch {
            logger.error("leave \(group): \(error)")
        }
    }

    private func setNeighbour(_ address: IPAddress, _ mac: MACAddress) {
        do {
            try neighbours?.set(address, mac: mac)
            neighbourEntries.insert(address)
        } catch {
            logger.error("\(error)")
        }
    }

    private func removeNeighbour(_ address: IPAddress) {
        neighbourEntries.remove(address)
        do {
            try neighbours?.remove(address)
        } catch {
            logger.error("\(error)")
        }
    }

    private func sendMDNS(_ transmission: MDNSTransmission) {
        let family = Self.family(of: transmission.destination.address)
        guard let socket = mdnsSockets.first(where: { $0.family == family }) else { return }
        ownTransmissions.note(transmission.bytes)
        do {
            try socket.send(
                transmission.bytes, to: transmission.destination, scopeID: transmission.destinationScopeID,
                from: transmission.source)
        } catch {
            logger.warning("mDNS to \(transmission.destination): \(error)")
        }
    }

    private func send(_ reply: RegistrationReply) {
        let family = Self.family(of: reply.destination.address)
        guard let socket = sockets.first(where: { $0.family == family }) else { return }
        do {
            try socket.send(
                reply.bytes, to: reply.destination, scopeID: reply.destinationScopeID, from: reply.source.address,
                interfaceIndex: interfaceIndex)
        } catch {
            logger.warning("reply to \(reply.destination): \(error)")
        }
    }

    static func family(of address: IPAddress) -> DatagramSocket.Family {
        switch address {
        case .v4: .ipv4
        case .v6: .ipv6
        }
    }

    static func level(_ level: LogLevel) -> Logger.Level {
        switch level {
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        default: .error
        }
    }
}
