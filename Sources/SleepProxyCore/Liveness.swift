/// Whether a declared host (one that never registers) is awake, judged from the wire alone.
///
/// Any frame from the host's MAC means it is awake. When it has been silent for ``Timing/quiet``, the proxy asks:
/// a probe (an ARP request or Neighbour Solicitation for one of its addresses, unicast to its MAC), then more, each
/// wait longer than the last (``Timing/waits``). A frame from the host at any point ends the questions; a host
/// that answers none of them is asleep, and the proxy takes it over. Asleep, it stays asleep until a frame from
/// its MAC says it is back; then the proxy lets go at once.
///
/// An idle host that is awake costs one probe every ``Timing/quiet`` at most, and none while it talks; a host that
/// falls asleep just after its last frame is found asleep ``Timing/quiet`` plus the sum of ``Timing/waits``
/// later (17 s with the defaults), and then taken over after the three one-second probes of its addresses that
/// every take-over makes: about 20 s, within the half-minute a user waits before trying again.
///
/// Pure: the caller passes the time in, sends the probes ``step(at:)`` asks for, and arms a timer for
/// ``deadline``.
public struct Liveness: Hashable, Sendable {
    /// How long silence and unanswered probes last.
    public struct Timing: Hashable, Sendable {
        /// Silence before the first probe.
        public var quiet: Duration
        /// After each probe, how long to wait for a frame before the next probe (or, after the last, before the
        /// host counts as asleep). One probe per element; each wait longer than the one before.
        public var waits: [Duration]

        public init(quiet: Duration = .seconds(10), waits: [Duration] = [.seconds(1), .seconds(2), .seconds(4)]) {
            self.quiet = quiet
            self.waits = waits
        }
    }

    public enum State: Hashable, Sendable, CustomStringConvertible {
        /// Heard from within ``Timing/quiet`` (or not yet asked).
        case awake
        /// Silent; `probes` probes sent and none answered yet.
        case probing(probes: Int)
        /// Answered no probe: taken over until it is heard from again.
        case asleep

        public var description: String {
            switch self {
            case .awake: "awake"
            case .probing: "probing"
            case .asleep: "asleep"
            }
        }
    }

    /// What ``step(at:)`` asks of the caller.
    public enum Step: Hashable, Sendable {
        /// Send probe number `attempt` (from 1).
        case probe(attempt: Int)
        /// The host answered none: take it over.
        case fellAsleep(probes: Int)
    }

    /// What a frame from the host changed.
    public enum Change: Hashable, Sendable {
        /// It answered while being asked: it is awake after all.
        case answered(afterProbes: Int)
        /// It was asleep and is back: let go of it.
        case back
    }

    public let timing: Timing
    public private(set) var state: State
    /// When the host was last heard from (or when watching began).
    public private(set) var lastHeard: UnixTime
    /// When ``step(at:)`` next has something to do; nil while asleep (only a frame changes that).
    public private(set) var deadline: UnixTime?

    /// Starts watching at `now`, counting the host awake: it is asked only after ``Timing/quiet`` of silence, so
    /// a host that is already asleep is found out as one that falls asleep now.
    public init(timing: Timing = Timing(), now: UnixTime) {
        precondition(!timing.waits.isEmpty && timing.quiet > .zero, "a host is asked at least once, after silence")
        self.timing = timing
        self.state = .awake
        self.lastHeard = now
        self.deadline = now + timing.quiet
    }

    /// A frame from the host's MAC at `now`.
    public mutating func heard(at now: UnixTime) -> Change? {
        let previous = state
        lastHeard = max(lastHeard, now)
        state = .awake
        deadline = lastHeard + timing.quiet
        switch previous {
        case .awake: return nil
        case .probing(let probes): return .answered(afterProbes: probes)
        case .asleep: return .back
        }
    }

    /// What is due at `now`: at most one step; call again while ``deadline`` is not after `now`. Each wait counts
    /// from the probe's real sending time, so a late timer never runs the probes together and never finds a host
    /// asleep that had no time to answer.
    public mutating func step(at now: UnixTime) -> Step? {
        guard let due = deadline, due <= now else { return nil }
        switch state {
        case .awake:
            state = .probing(probes: 1)
            deadline = now + timing.waits[0]
            return .probe(attempt: 1)
        case .probing(let probes) where probes < timing.waits.count:
            state = .probing(probes: probes + 1)
            deadline = now + timing.waits[probes]
            return .probe(attempt: probes + 1)
        case .probing(let probes):
            state = .asleep
            deadline = nil
            return .fellAsleep(probes: probes)
        case .asleep:
            deadline = nil
            return nil
        }
    }

    /// The clock stepped by `step` (the host's times are wall-clock): every time moves with it, so that a step
    /// neither hurries nor delays a probe.
    public mutating func moveTimes(by step: Duration) {
        lastHeard = lastHeard + step
        deadline = deadline.map { $0 + step }
    }
}
