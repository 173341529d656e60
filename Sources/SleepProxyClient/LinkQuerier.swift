import DNSWire
import NetworkAddresses
import NetworkIO
import SleepProxyClientCore

#if canImport(Glibc)
    import Glibc
#endif

/// The client's mDNS on one interface: the group's sockets (port 5353, shared with the responder on this host),
/// a one-shot querier's sockets (an ephemeral port each), the queries, and the responses that come back, its own
/// host's included (they are looped back).
///
/// Multicast queries go to the group from port 5353 without the unicast-response bit, so answers come back
/// multicast with their real TTLs and cache-flush bits; but a responder keeps such an answer back when another
/// responder has just given it (a proxy holding this host does). One-shot queries go to the group from the
/// ephemeral ports: every responder answers those at once, by unicast to that port, whatever else was said on the
/// link (legacy unicast, RFC 6762 section 6.7), with TTLs cut to 10 s and no cache-flush bits.
final class LinkQuerier {
    let interface: ClientInterface
    private let sockets: [DatagramSocket]
    private let oneShotSockets: [DatagramSocket]

    /// `oneShot`: open the one-shot querier's sockets too (to learn records; `return` only announces).
    init(_ interface: ClientInterface, oneShot: Bool = true) throws(ClientError) {
        self.interface = interface
        var sockets: [DatagramSocket] = []
        var oneShotSockets: [DatagramSocket] = []
        do {
            if interface.addresses.contains(where: { if case .v4 = $0 { true } else { false } }) {
                sockets.append(try DatagramSocket.multicastDNS(family: .ipv4, interfaceIndex: interface.index))
                if oneShot {
                    oneShotSockets.append(try DatagramSocket.oneShotQuerier(family: .ipv4, interface: interface.name))
                }
            }
            if interface.addresses.contains(where: { if case .v6 = $0 { true } else { false } }) {
                sockets.append(try DatagramSocket.multicastDNS(family: .ipv6, interfaceIndex: interface.index))
                if oneShot {
                    oneShotSockets.append(try DatagramSocket.oneShotQuerier(family: .ipv6, interface: interface.name))
                }
            }
        } catch {
            for socket in sockets + oneShotSockets { socket.close() }
            throw ClientError(.network, "cannot open the mDNS sockets on \(interface.name): \(error)")
        }
        guard !sockets.isEmpty else {
            throw ClientError(.interface, "\(interface.name) has no IPv4 or IPv6 address to send mDNS from")
        }
        self.sockets = sockets
        self.oneShotSockets = oneShotSockets
    }

    deinit {
        for socket in sockets + oneShotSockets { socket.close() }
    }

    /// Sends each of `questions` as a one-shot query of its own to the group, on every family. One question a
    /// message: avahi-daemon puts a legacy-unicast answer in a single message of at most 512 bytes, with the
    /// question copied into it, and leaves out what does not fit.
    func askOneShot(_ questions: [DNSQuestion]) {
        for socket in oneShotSockets {
            let isIPv4 = socket.family == .ipv4
            let group = isIPv4 ? MulticastDNS.ipv4Group : MulticastDNS.ipv6Group
            for question in questions {
                let message = Self.query([question], id: UInt16.random(in: 1...0xFFFF))
                do {
                    try socket.send(message, to: group, scopeID: isIPv4 ? 0 : interface.index)
                } catch {
                    ClientLog.debug("one-shot mDNS query on \(interface.name): \(error)")
                }
            }
        }
    }

    /// Sends `questions` as multicast queries on every family, in as many messages as they need.
    func ask(_ questions: [DNSQuestion]) {
        var messages: [[UInt8]] = []
        var pending: [DNSQuestion] = []
        for question in questions {
            let trial = Self.query(pending + [question])
            if trial.count > SleepRegistration.normalMessageData + 12, !pending.isEmpty {
                messages.append(Self.query(pending))
                pending = [question]
            } else {
                pending.append(question)
            }
        }
        if !pending.isEmpty { messages.append(Self.query(pending)) }
        send(messages)
    }

    /// Sends `messages` to the group on every family; returns how many datagrams went out.
    @discardableResult
    func send(_ messages: [[UInt8]]) -> Int {
        var sent = 0
        for socket in sockets {
            guard let group = socket.group else { continue }
            for message in messages {
                do {
                    try socket.send(message, to: group)
                    sent += 1
                } catch {
                    ClientLog.warning("mDNS on \(interface.name): \(error)")
                }
            }
        }
        return sent
    }

    /// Hands each mDNS message that arrives before `deadline` to `handle`, with its source address and the way it
    /// came: to the group's sockets, or by unicast to the one-shot querier's.
    func receive(
        until deadline: ContinuousClock.Instant, _ handle: (DNSMessage, IPAddress, HostRecords.AnswerPath) -> Void
    ) {
        let all =
            sockets.map { ($0, HostRecords.AnswerPath.multicast) }
            + oneShotSockets.map { ($0, HostRecords.AnswerPath.legacyUnicast) }
        while true {
            let now = ContinuousClock.now
            guard now < deadline else { return }
            guard waitForInput(all.map(\.0.fileDescriptor), until: deadline) else { return }
            for (socket, path) in all {
                while let datagram = try? socket.receive() {
                    guard let message = try? DNSMessage(decoding: datagram.bytes) else { continue }
                    handle(message, datagram.source.address, path)
                }
            }
        }
    }

    private static func query(_ questions: [DNSQuestion], id: UInt16 = 0) -> [UInt8] {
        // Questions of plain names always encode.
        (try? DNSMessage(id: id, flags: DNSFlags(response: false, opcode: .query), questions: questions).encoded())
            ?? []
    }
}

/// Waits until one of `descriptors` is readable or `deadline` passes; returns whether one is.
func waitForInput(_ descriptors: [Int32], until deadline: ContinuousClock.Instant) -> Bool {
    let remaining = ContinuousClock.now.duration(to: deadline)
    guard remaining > .zero else { return false }
    let milliseconds = Int32(
        clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
    var entries = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    let result = poll(&entries, nfds_t(entries.count), milliseconds)
    return result > 0
}

/// What the client sees of one link in a short listen: this host's records and the proxies.
struct LinkSurvey {
    var host: HostRecords
    var proxies = ProxyDirectory()

    /// How long proxies get to answer the browse. A responder multicasts a record at most once a second (RFC 6762
    /// section 6): a proxy that has just answered someone else's browse (or this host's `status`) stays quiet for
    /// up to a second, and answers only the round after that. Stopping at the first proxy heard would miss a
    /// better one; the listen lasts until the last round has had its answers.
    static let listenAtLeast: Duration = .milliseconds(2_200)
    /// When to ask again what is still unanswered; the rounds go on past the one second a responder may stay quiet.
    static let rounds: [Duration] = [
        .zero, .milliseconds(300), .milliseconds(800), .milliseconds(1_400), .milliseconds(2_000),
    ]

    /// Listens on `querier`'s link until what matters is known and nothing new has come for a while, or `limit`.
    /// `choose` picks the proxies that will be tried, whose addresses must be known.
    static func run(
        _ querier: LinkQuerier, fallbackHostName: DNSName?, choose: ([DiscoveredProxy]) -> [DiscoveredProxy],
        limit: Duration
    ) -> LinkSurvey {
        var survey = LinkSurvey(
            host: HostRecords(addresses: querier.interface.addresses, fallbackHostName: fallbackHostName))
        let start = ContinuousClock.now
        var lastNews = start
        var round = 0
        // Asked one-shot already: a new question (a type, an instance, the host name just learned) is asked at once,
        // and every open one again at each round.
        var askedOneShot: Set<DNSQuestion> = []
        while true {
            let now = ContinuousClock.now
            let elapsed = start.duration(to: now)
            if elapsed >= limit { break }
            if elapsed >= listenAtLeast, lastNews.duration(to: now) >= .milliseconds(400),
                survey.settled(choosing: choose(survey.proxies.proxies))
            {
                break
            }
            if round < rounds.count, elapsed >= rounds[round] {
                round += 1
                let chosen = choose(survey.proxies.proxies)
                let hostQuestions = survey.host.questions
                querier.ask(
                    [DNSQuestion(name: ProxyDirectory.serviceType, type: .ptr)] + hostQuestions
                        + survey.proxies.questions(about: chosen))
                querier.askOneShot(hostQuestions)
                askedOneShot.formUnion(hostQuestions)
            }
            let next = round < rounds.count ? start + rounds[round] : start + limit
            querier.receive(until: min(next, now + .milliseconds(100), start + limit)) { message, source, path in
                let before = (survey.host.records.count, survey.proxies.proxies.count)
                survey.host.received(message, from: source, via: path)
                // Proxies answer for themselves, and only the browse's multicast answers are theirs.
                if path == .multicast { survey.proxies.received(message) }
                if (survey.host.records.count, survey.proxies.proxies.count) != before { lastNews = .now }
            }
            let fresh = survey.host.questions.filter { !askedOneShot.contains($0) }
            if !fresh.isEmpty {
                querier.askOneShot(fresh)
                askedOneShot.formUnion(fresh)
            }
        }
        return survey
    }

    /// Whether every question that matters has an answer: at least one proxy is seen, and only reverse mappings,
    /// which some responders never publish, may be open.
    func settled(choosing chosen: [DiscoveredProxy]) -> Bool {
        guard !proxies.proxies.isEmpty else { return false }
        let open = host.questions.filter { !($0.type == .ptr && $0.name.isReverseMapping) }
        return open.isEmpty && proxies.questions(about: chosen).isEmpty
    }
}
