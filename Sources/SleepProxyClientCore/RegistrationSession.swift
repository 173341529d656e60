import DNSWire

/// One registration attempt, from the first datagram to the last answer, with time as an input: which datagram
/// goes to which proxy when, and how it ends (mDNS.c `SendSPSRegistration`, `RetrySPSRegistrations`;
/// PROTOCOL.md section 2.10).
///
/// The unanswered datagrams go to the best proxy, again every second; after three sendings with one still
/// unanswered, everything goes to the next proxy (up to three), from the start: a registration is held by one
/// proxy or none. It is done when every datagram is answered; a reply with an error code (a proxy that refuses
/// says so, where Macs would not look) moves on at once. Past the deadline it gives up, so that a suspend is not
/// held up for long.
public struct RegistrationSession: Sendable {
    /// How a session ended.
    public enum Outcome: Hashable, Sendable {
        /// Every datagram was answered by proxy `proxy` (an index into the proxies given), which granted `lease`
        /// seconds (3600 when its replies carry no lease, as Macs assume).
        case registered(proxy: Int, lease: UInt32)
        /// There was no proxy to try.
        case noProxy
        /// Every proxy was tried and none answered every datagram; `refused` lists those that answered with an
        /// error code, with the code; `last` is the last one the datagrams went to.
        case unanswered(refused: [Int: UInt8], last: Int)
        /// The deadline came first, while the datagrams went to proxy `last` (nil: before any went out).
        case timedOut(last: Int?)
    }

    public enum Action: Hashable, Sendable {
        /// Send datagram `datagram` (an index into the datagrams given) to proxy `proxy`.
        case send(datagram: Int, proxy: Int)
        case finished(Outcome)
    }

    /// The gap between sendings to one proxy, and how many sendings it gets.
    public static let retryInterval: Duration = .seconds(1)
    public static let sendingsPerProxy = 3
    /// How many proxies are tried, best first (mDNS.c keeps three, `NextSPSAttempt / 3`).
    public static let proxiesTried = 3
    /// What a Mac assumes when the reply has no lease.
    public static let assumedLease: UInt32 = 3_600

    private let ids: [UInt16]
    private let proxyCount: Int
    private let deadline: Duration
    /// The proxy the datagrams go to now (an index into the proxies given).
    public private(set) var proxy = 0
    private var sendings = 0
    private var answered: Set<Int> = []
    private var granted: UInt32?
    private var refused: [Int: UInt8] = [:]
    private var nextSending: Duration = .zero
    public private(set) var outcome: Outcome?

    /// A session for datagrams with `ids` (one each, in order), to `proxyCount` proxies in the order to try
    /// them, ending at `deadline` after it starts.
    public init(ids: [UInt16], proxyCount: Int, deadline: Duration = .seconds(8)) {
        self.ids = ids
        self.proxyCount = min(proxyCount, Self.proxiesTried)
        self.deadline = deadline
    }

    /// When `tick` has work next, if the session is not over.
    public var nextDeadline: Duration? { outcome == nil ? min(nextSending, deadline) : nil }

    /// Starts: the first sending to the best proxy.
    public mutating func start() -> [Action] {
        guard proxyCount > 0, !ids.isEmpty else { return finish(.noProxy) }
        return tick(now: .zero)
    }

    /// Does what is due at `now` (time since the start): the deadline, a sending, the move to the next proxy.
    public mutating func tick(now: Duration) -> [Action] {
        guard outcome == nil else { return [] }
        if now >= deadline {
            // The last proxy the datagrams went to: the one now, unless a refusal moved on to it just before.
            let last = sendings > 0 ? proxy : proxy > 0 ? proxy - 1 : nil
            return finish(.timedOut(last: last))
        }
        guard now >= nextSending else { return [] }
        if sendings == Self.sendingsPerProxy {
            return moveOn(now: now)
        }
        sendings += 1
        nextSending = now + Self.retryInterval
        return ids.indices.filter { !answered.contains($0) }.map { .send(datagram: $0, proxy: proxy) }
    }

    /// A reply from proxy `from` (give it ``proxy`` when the source is that proxy's): a response to the UPDATE with
    /// one of the datagrams' IDs, from the proxy those datagrams went to, marks that datagram answered; anything
    /// else is ignored.
    public mutating func received(_ bytes: [UInt8], from: Int, now: Duration) -> [Action] {
        guard outcome == nil, from == proxy, let reply = try? DNSMessage(decoding: bytes),
            reply.flags.isResponse, reply.flags.opcode == .update, let datagram = ids.firstIndex(of: reply.id)
        else { return [] }
        let code = reply.flags.responseCode.rawValue
        if code != 0 {
            refused[proxy] = code
            return moveOn(now: now)
        }
        answered.insert(datagram)
        if let lease = reply.optRecords.first?.optData?.updateLease?.lease {
            granted = min(granted ?? lease, lease)
        }
        guard answered.count == ids.count else { return [] }
        return finish(.registered(proxy: proxy, lease: granted ?? Self.assumedLease))
    }

    private mutating func moveOn(now: Duration) -> [Action] {
        guard proxy + 1 < proxyCount else { return finish(.unanswered(refused: refused, last: proxy)) }
        proxy += 1
        sendings = 0
        answered = []
        granted = nil
        nextSending = now
        return tick(now: now)
    }

    private mutating func finish(_ outcome: Outcome) -> [Action] {
        self.outcome = outcome
        return [.finished(outcome)]
    }
}
