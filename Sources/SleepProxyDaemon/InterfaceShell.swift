public import Dispatch
public import Frames
public import Logging
public import NetworkAddresses
import NetworkIO
public import SleepProxyCore

#if canImport(Glibc)
    import Glibc
#endif

/// What one interface hands the daemon: decoded just enough to reach the core.
public enum ShellInput: Sendable {
    /// Registration datagrams read together, to be committed as one batch.
    case registrations([RegistrationDatagram])
    /// An mDNS message the capture saw (to port 5353), with the sender's MAC, and when it was captured (since the
    /// epoch).
    case mdns(MDNSPacket, captured: Duration)
    /// Any other captured frame: ARP, Neighbour Discovery, IP to a held address; parsed once, here.
    case frame(EthernetFrame, InterfaceName, captured: Duration)
}

/// Everything the daemon does on one interface: its registration sockets, its mDNS sockets, its capture, its
/// neighbour table and multicast memberships. Adding an interface is creating one; removing it is `stop()`.
///
/// A shell keeps no protocol state: the core owns that, and the shell carries out what the core's actions say
/// about this interface (`InterfaceEffects`). All its methods run on the daemon's queue, given at creation; the
/// capture is read on that queue too, and each frame handled where it is read.
public final class InterfaceShell: InterfaceEffects, @unchecked Sendable {
    public struct Options: Sendable {
        public var registrationPort: UInt16
        /// Answer mDNS and take over addresses (sockets on the mDNS groups, a capture).
        public var responder: Bool
        /// How many datagrams one batch may cover.
        public var maximumBatch: Int

        public init(registrationPort: UInt16, responder: Bool, maximumBatch: Int) {
            self.registrationPort = registrationPort
            self.responder = responder
            self.maximumBatch = maximumBatch
        }
    }

    public let name: InterfaceName
    public private(set) var index: UInt32
    public private(set) var link: Link
    let options: Options
    private let logger: Logger
    private var sockets: [DatagramSocket] = []
    private var mdnsSockets: [DatagramSocket] = []
    private var capture: PacketCapture?
    private var captureFilter = ""
    private var watchedPrefixes: [Link.Prefix] = []
    private var watchedSources: [MACAddress] = []
    private var neighbours: NeighbourTable?
    private var membership: MulticastMembership?
    /// Neighbour entries set for our own host, removed when the shell stops whatever the core says.
    private var neighbourEntries: Set<IPAddress> = []
    /// mDNS messages this shell sent, recognised when the capture sees them leave.
    private var ownTransmissions = OwnTransmissions()
    /// Captured frames that did not parse (dropped here).
    private var unparsedFrames: UInt64 = 0
    /// Whether the capture is handing over a batch of frames: mDNS sent meanwhile waits in `outbox`.
    private var inCaptureBatch = false
    private var outbox: [MDNSTransmission] = []
    private var sources: [any DispatchSourceProtocol] = []
    private let queue: DispatchQueue
    private var stopped = false

    /// Opens the interface's sockets and capture. Throws a `DaemonError` naming the interface and what failed.
    public init(interface: String, options: Options, queue: DispatchQueue, logger: Logger) throws {
        name = InterfaceName(interface)
        self.options = options
        self.queue = queue
        self.logger = logger
        let found: NetworkInterface
        do {
            found = try NetworkInterface.named(interface)
        } catch {
            throw DaemonError(description: "interface \(interface): \(error)")
        }
        index = found.index
        link = try Self.link(of: found)
        for family in [DatagramSocket.Family.ipv4, .ipv6] {
            do {
                let socket = try DatagramSocket(family: family, interface: interface, port: options.registrationPort)
                Self.enlargeReceiveBuffer(socket.fileDescriptor, logger: logger, what: "registration socket")
                sockets.append(socket)
            } catch {
                throw DaemonError(description: "registration socket on \(interface): \(error)")
            }
        }
        if options.responder {
            try openResponder(found)
        }
    }

    /// Registrations must survive a burst from a busy or hostile host while the daemon is at other work: 4 MiB
    /// holds thousands of datagrams, where the kernel's default (about 200 KiB) holds a few hundred. With
    /// CAP_NET_ADMIN the size is forced past `net.core.rmem_max`; without it, the kernel grants what it allows.
    public static let registrationReceiveBuffer: Int32 = 4 << 20

    /// Asks for `registrationReceiveBuffer` bytes of receive buffer on `descriptor`; returns what the kernel
    /// granted (it reports twice the size asked, counting its bookkeeping).
    @discardableResult
    public static func enlargeReceiveBuffer(_ descriptor: Int32, logger: Logger, what: String) -> Int32 {
        var size = registrationReceiveBuffer
        let length = socklen_t(MemoryLayout<Int32>.size)
        if setsockopt(descriptor, SOL_SOCKET, SO_RCVBUFFORCE, &size, length) != 0 {
            _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, length)
        }
        var granted: Int32 = 0
        var grantedLength = length
        if getsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &granted, &grantedLength) == 0 {
            logger.debug("\(what): receive buffer \(granted) bytes")
        }
        return granted
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

    /// Opens the mDNS sockets (sending; bound to the groups so that an avahi-daemon keeps its unicast), and
    /// captures UDP to port 5353: the capture is the input, with the sender's MAC and the unicast that an
    /// avahi-daemon on this host would otherwise take.
    private func openResponder(_ interface: NetworkInterface) throws {
        for family in [DatagramSocket.Family.ipv4, .ipv6] {
            do {
                let socket = try DatagramSocket.multicastDNS(family: family, interfaceIndex: interface.index)
                // Input comes from the capture, which also sees unicast to us and the sender's MAC. What the group
                // socket would receive (every mDNS packet on the link, our own looped back) is dropped by the
                // kernel: a multicast flood then costs the daemon no reads and the socket no buffer.
                try socket.discardInput()
                mdnsSockets.append(socket)
            } catch {
                throw DaemonError(description: "mDNS socket on \(interface.name): \(error)")
            }
        }
        do {
            neighbours = try NeighbourTable(interfaceIndex: interface.index)
            membership = try MulticastMembership(interfaceIndex: interface.index)
        } catch {
            throw DaemonError(description: "address take-over on \(interface.name): \(error)")
        }
        do {
            let capture = try PacketCapture(
                interface: interface.name,
                options: PacketCapture.Options(kernelBufferSize: 16 * 1024 * 1024, direction: .both), queue: queue)
            captureFilter = Self.filter(for: [])
            try capture.setFilter(captureFilter)
            self.capture = capture
        } catch {
            throw DaemonError(description: "capture on \(interface.name): \(error)")
        }
    }

    /// Starts reading: each input goes to `deliver`, on the shell's queue.
    public func start(deliver: @escaping (ShellInput) -> Void) {
        for socket in sockets {
            let source = DispatchSource.makeReadSource(fileDescriptor: socket.fileDescriptor, queue: queue)
            source.setEventHandler { [weak self] in
                guard let self, !self.stopped else { return }
                let batch = self.drain(socket)
                if !batch.isEmpty { deliver(.registrations(batch)) }
            }
            source.activate()
            sources.append(source)
        }
        // Frames are handled on the queue as the capture reads them: no hop to another thread, no queue between.
        // What the frames of one batch bring about (answers above all) goes out when the batch ends.
        capture?.startDelivering(
            { [weak self] frame in
                guard let self, !self.stopped, let input = self.classify(frame) else { return }
                self.inCaptureBatch = true
                deliver(input)
            },
            batchEnded: { [weak self] in
                guard let self else { return }
                self.inCaptureBatch = false
                self.flushMDNS()
            })
    }

    /// Reads every pending datagram, up to a batch.
    private func drain(_ socket: DatagramSocket) -> [RegistrationDatagram] {
        var batch: [RegistrationDatagram] = []
        for _ in 0..<options.maximumBatch {
            let datagram: ReceivedDatagram?
            do {
                datagram = try socket.receive()
            } catch {
                logger.error("registration socket on \(name): \(error)")
                break
            }
            guard let datagram else { break }
            guard !datagram.truncated else {
                logger.warning("dropped a registration from \(datagram.source) on \(name): larger than 65,535 bytes")
                continue
            }
            batch.append(
                RegistrationDatagram(
                    interface: name, source: datagram.source, sourceScopeID: datagram.sourceScopeID,
                    destination: Endpoint(address: datagram.destination, port: datagram.destinationPort),
                    bytes: datagram.bytes))
        }
        return batch
    }

    /// mDNS to port 5353 becomes an `MDNSPacket`; everything else goes to the core as a frame.
    private func classify(_ captured: CapturedFrame) -> ShellInput? {
        guard let frame = try? EthernetFrame(parsing: captured.bytes) else {
            unparsedFrames += 1
            return nil
        }
        guard let udp = frame.udp, udp.destinationPort == MulticastDNS.port else {
            return .frame(frame, name, captured: captured.timestamp)
        }
        // Outgoing frames are captured too: programs on this host (its avahi-daemon, a browser) ask for held
        // names like anyone else. Only the messages the daemon sent itself are left out.
        if frame.header.source == link.macAddress, ownTransmissions.claim(udp.payload) { return nil }
        let source: IPAddress
        let destination: IPAddress
        if let ipv4 = frame.ipv4 {
            source = .v4(ipv4.header.source)
            destination = .v4(ipv4.header.destination)
        } else if let ipv6 = frame.ipv6 {
            source = .v6(ipv6.header.source)
            destination = .v6(ipv6.header.destination)
        } else {
            return nil
        }
        let scope: UInt32 = if case .v6(let address) = source, address.isLinkLocal { index } else { 0 }
        return .mdns(
            MDNSPacket(
                interface: name, source: Endpoint(address: source, port: udp.sourcePort), sourceScopeID: scope,
                destination: destination, sourceMAC: frame.header.source, bytes: udp.payload),
            captured: captured.timestamp)
    }

    /// Reads the interface's addresses again (DHCP, SLAAC); nil when it is gone.
    public func refreshLink() -> Link? {
        guard let found = try? NetworkInterface.named(name.rawValue), let link = try? Self.link(of: found) else {
            return nil
        }
        index = found.index
        self.link = link
        return link
    }

    /// Frames the capture received and dropped, if capturing: by the kernel and the interface (libpcap's
    /// counts), and by the daemon (frames it could not parse; it takes every other frame as it is read).
    public var captureCounts: CaptureCounts? {
        guard let statistics = try? capture?.statistics() else { return nil }
        return CaptureCounts(
            received: statistics.received, droppedByKernel: statistics.droppedByKernel,
            droppedByInterface: statistics.droppedByInterface, droppedByDaemon: unparsedFrames)
    }

    /// Closes everything; neighbour entries the shell set are removed.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        if let statistics = try? capture?.statistics() {
            logger.notice(
                "capture statistics on \(name): received \(statistics.received), dropped by the kernel \(statistics.droppedByKernel), by the interface \(statistics.droppedByInterface)"
            )
        }
        for source in sources { source.cancel() }
        outbox.removeAll()
        inCaptureBatch = false
        capture?.close()
        for socket in sockets { socket.close() }
        for socket in mdnsSockets { socket.close() }
        membership?.close()
        for address in neighbourEntries { _ = try? neighbours?.remove(address) }
        neighbours?.close()
    }

    // MARK: InterfaceEffects

    public func sendReply(_ reply: RegistrationReply) throws {
        guard let socket = sockets.first(where: { $0.family == Self.family(of: reply.destination.address) }) else {
            return
        }
        try socket.send(
            reply.bytes, to: reply.destination, scopeID: reply.destinationScopeID, from: reply.source.address,
            interfaceIndex: index)
    }

    public func sendMDNS(_ transmission: MDNSTransmission) throws {
        let family = Self.family(of: transmission.destination.address)
        guard let socket = mdnsSockets.first(where: { $0.family == family }) else { return }
        // Only what goes to port 5353 comes back through the capture (`udp dst port 5353`). A legacy-unicast
        // answer goes to the querier's own port and is never seen again: noted, it would wait out its lifetime,
        // and a querier asking hundreds of times a second would keep thousands of them, sifted on every send.
        if transmission.destination.port == MulticastDNS.port {
            ownTransmissions.note(transmission.bytes)
        }
        // An answer to a captured query waits for the end of the capture's batch, and goes out with the others
        // in one system call; anything else (a timer's announcement, a response after its delay) goes now.
        if inCaptureBatch {
            outbox.append(transmission)
            if outbox.count >= DatagramSocket.batchLimit { flushMDNS() }
            return
        }
        try socket.send(
            transmission.bytes, to: transmission.destination, scopeID: transmission.destinationScopeID,
            from: transmission.source)
    }

    /// Sends the answers kept back during a capture batch, each family's with `sendmmsg`.
    func flushMDNS() {
        guard !outbox.isEmpty else { return }
        let pending = outbox
        outbox.removeAll(keepingCapacity: true)
        for socket in mdnsSockets {
            let family = pending.filter { Self.family(of: $0.destination.address) == socket.family }
            guard !family.isEmpty else { continue }
            let failures = socket.send(
                batch: family.map {
                    OutgoingDatagram(
                        bytes: $0.bytes, destination: $0.destination, scopeID: $0.destinationScopeID, source: $0.source)
                })
            for failure in failures {
                logger.warning("mDNS to \(family[failure.index].destination) on \(name): \(failure.error)")
            }
        }
    }

    /// Whether frames of our own can go out here (a capture is open): what address take-over and keepalive
    /// offload need.
    public var canSendFrames: Bool { capture != nil }

    public func inject(_ frame: [UInt8]) throws {
        try capture?.inject(frame)
    }

    public func watch(_ prefixes: [Link.Prefix]) throws {
        watchedPrefixes = prefixes
        try updateFilter()
    }

    public func watchSources(_ sources: [MACAddress]) throws {
        watchedSources = sources
        try updateFilter()
    }

    private func updateFilter() throws {
        guard let capture else { return }
        let filter = Self.filter(for: watchedPrefixes, sources: watchedSources)
        guard filter != captureFilter else { return }
        try capture.setFilter(filter)
        captureFilter = filter
    }

    public func joinGroup(_ group: IPv6Address) throws {
        _ = try membership?.join(group)
    }

    public func leaveGroup(_ group: IPv6Address) throws {
        _ = try membership?.leave(group)
    }

    public func setNeighbour(_ address: IPAddress, mac: MACAddress) throws {
        try neighbours?.set(address, mac: mac)
        neighbourEntries.insert(address)
    }

    public func removeNeighbour(_ address: IPAddress) throws {
        neighbourEntries.remove(address)
        _ = try neighbours?.remove(address)
    }

    // MARK: The capture filter

    /// The kernel filter: mDNS to us, all ARP, ICMPv6 with hop limit 255 (Neighbour Discovery), MLD queries (ICMPv6
    /// type 130 behind the 8-byte Hop-by-Hop header every querier sends: the core answers for the groups of held
    /// addresses, `MulticastListener`), IP to the held addresses (the prefixes the core hands over: each address
    /// while few, the narrowest prefixes that keep the program small when many), and every frame from the MACs of
    /// declared hosts (whatever it is, it says the host is awake). Traffic to other addresses stays in the kernel; the core checks every packet exactly.
    static func filter(for prefixes: [Link.Prefix], sources: [MACAddress] = []) -> String {
        var parts = [
            "udp dst port \(MulticastDNS.port)", "arp", "(icmp6 and ip6[7] = 255)",
            "(ip6[6] = 0 and ip6[40] = 58 and ip6[41] = 0 and ip6[48] = 130)",
        ]
        parts += prefixes.map(destinationTerm)
        parts += sources.map { "ether src \($0)" }
        return parts.joined(separator: " or ")
    }

    /// `dst host ADDRESS` or `dst net PREFIX/LENGTH`.
    static func destinationTerm(_ prefix: Link.Prefix) -> String {
        prefix.isHost ? "dst host \(prefix.address)" : "dst net \(prefix.address)/\(prefix.length)"
    }

    /// The capture filter's `dst host` or `dst net` terms for `addresses`, at most `limit`, folded as the core
    /// folds them.
    public static func destinationTerms(for addresses: [IPAddress], limit: Int) -> [String] {
        WatchedPrefixes(addresses).prefixes(limit: limit).map(destinationTerm)
    }

    static func family(of address: IPAddress) -> DatagramSocket.Family {
        switch address {
        case .v4: .ipv4
        case .v6: .ipv6
        }
    }
}
