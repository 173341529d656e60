import DNSWire
import NetworkAddresses
import NetworkIO
import SleepProxyClientCore
import SleepProxyCore

#if canImport(Glibc)
    import Glibc
#endif

/// The client's mDNS on one interface: the group's sockets (port 5353, shared with the responder on this host),
/// multicast queries, and the responses that come back, its own host's included (they are looped back).
///
/// Queries go to the group from port 5353 without the unicast-response bit, so answers come back multicast with
/// their real TTLs; a query from another port would get legacy-unicast answers, whose TTLs are cut to 10 s.
final class LinkQuerier {
    let interface: ClientInterface
    private let sockets: [DatagramSocket]

    init(_ interface: ClientInterface) throws(ClientError) {
        self.interface = interface
        var sockets: [DatagramSocket] = []
        do {
            if interface.addresses.contains(where: { if case .v4 = $0 { true } else { false } }) {
                sockets.append(try DatagramSocket.multicastDNS(family: .ipv4, interfaceIndex: interface.index))
            }
            if interface.addresses.contains(where: { if case .v6 = $0 { true } else { false } }) {
                sockets.append(try DatagramSocket.multicastDNS(family: .ipv6, interfaceIndex: interface.index))
            }
        } catch {
            throw ClientError(.network, "cannot open the mDNS sockets on \(interface.name): \(error)")
        }
        guard !sockets.isEmpty else {
            throw ClientError(.interface, "\(interface.name) has no IPv4 or IPv6 address to send mDNS from")
        }
        self.sockets = sockets
    }

    deinit {
        for socket in sockets { socket.close() }
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

    /// Hands each mDNS message that arrives before `deadline` to `handle`, with its source address.
    func receive(until deadline: ContinuousClock.Instant, _ handle: (DNSMessage, IPAddress) -> Void) {
        while true {
            let now = ContinuousClock.now
            guard now < deadline else { return }
            guard waitForInput(sockets.map(\.fileDescriptor), until: deadline) else { return }
            for socket in sockets {
                while let datagram = try? socket.receive() {
                    guard let message = try? DNSMessage(decoding: datagram.bytes) else { continue }
                    handle(message, datagram.source.address)
                }
            }
        }
    }

    private static func query(_ questions: [DNSQuestion]) -> [UInt8] {
        // Questions of plain names always encode.
        (try? DNSMessage(id: 0, flags: DNSFlags(response: false, opcode: .query), questions: questions).encoded())
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
                querier.ask(
                    [DNSQuestion(name: ProxyDirectory.serviceType, type: .ptr)] + survey.host.questions
                        + survey.proxies.questions(about: chosen))
            }
            let next = round < rounds.count ? start + rounds[round] : start + limit
            querier.receive(until: min(next, now + .milliseconds(100), start + limit)) { message, source in
                let before = (survey.host.records.count, survey.proxies.proxies.count)
                survey.host.received(message, from: source)
                survey.proxies.received(message)
                if (survey.host.records.count, survey.proxies.proxies.count) != before { lastNews = .now }
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
