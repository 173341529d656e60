import SleepProxyCore
import Testing

/// The liveness of a declared host, with an injected clock: silent → probing → asleep → back, a frame at each
/// step, the back-off, and what an awake host costs.
@Suite("Liveness")
struct LivenessTests {
    static let start = UnixTime(seconds: 1_800_000_000)

    static func at(_ seconds: Double) -> UnixTime {
        start + .milliseconds(Int64(seconds * 1000))
    }

    /// Every step up to `end`, the clock stepped to each deadline as a timer would.
    static func run(_ liveness: inout Liveness, until end: UnixTime) -> [(UnixTime, Liveness.Step)] {
        var steps: [(UnixTime, Liveness.Step)] = []
        while let deadline = liveness.deadline, deadline <= end {
            if let step = liveness.step(at: deadline) { steps.append((deadline, step)) }
        }
        return steps
    }

    @Test func aSilentHostIsProbedWithBackOffThenFoundAsleep() {
        var liveness = Liveness(now: Self.start)
        #expect(liveness.state == .awake)
        #expect(liveness.step(at: Self.at(9.999)) == nil, "nothing before ten seconds of silence")

        let steps = Self.run(&liveness, until: Self.at(60))
        #expect(steps.map(\.1) == [.probe(attempt: 1), .probe(attempt: 2), .probe(attempt: 3), .fellAsleep(probes: 3)])
        #expect(steps.map(\.0) == [Self.at(10), Self.at(11), Self.at(13), Self.at(17)])
        // Each wait longer than the one before.
        let gaps = zip(steps.dropFirst(), steps).map { $0.0 - $1.0 }
        #expect(gaps == [.seconds(1), .seconds(2), .seconds(4)])
        #expect(liveness.state == .asleep)
        #expect(liveness.deadline == nil, "asleep, only a frame changes anything")
        #expect(liveness.step(at: Self.at(3_600)) == nil)
    }

    @Test func aHostThatFallsAsleepIsTakenOverWithinHalfAMinute() throws {
        // Heard at 5 s, asleep from then on: found asleep 17 s later; the take-over's own three one-second
        // probes of its addresses follow.
        var liveness = Liveness(now: Self.start)
        _ = liveness.heard(at: Self.at(5))
        let steps = Self.run(&liveness, until: Self.at(120))
        let asleep = steps.first { if case .fellAsleep = $0.1 { true } else { false } }
        let found = try #require(asleep?.0)
        #expect(found == Self.at(22))
        #expect(found - Self.at(5) + .seconds(3) <= .seconds(30))
    }

    @Test func aFrameAtEachStep() {
        var liveness = Liveness(now: Self.start)
        // Awake: a frame only moves the first probe later.
        #expect(liveness.heard(at: Self.at(8)) == nil)
        #expect(liveness.deadline == Self.at(18))
        #expect(liveness.step(at: Self.at(17.5)) == nil)

        // Probing: a frame is an answer; the host is awake and asked again only after more silence.
        #expect(liveness.step(at: Self.at(18)) == .probe(attempt: 1))
        #expect(liveness.step(at: Self.at(19)) == .probe(attempt: 2))
        #expect(liveness.state == .probing(probes: 2))
        #expect(liveness.heard(at: Self.at(19.2)) == .answered(afterProbes: 2))
        #expect(liveness.state == .awake)
        #expect(liveness.deadline == Self.at(29.2))
        #expect(liveness.step(at: Self.at(21)) == nil, "the old schedule is gone")

        // Asleep: a frame means it is back.
        let steps = Self.run(&liveness, until: Self.at(100))
        #expect(steps.last?.1 == .fellAsleep(probes: 3))
        #expect(liveness.heard(at: Self.at(200)) == .back)
        #expect(liveness.state == .awake)
        #expect(liveness.lastHeard == Self.at(200))
        #expect(liveness.deadline == Self.at(210))
        // And the cycle starts again.
        #expect(liveness.step(at: Self.at(210)) == .probe(attempt: 1))
    }

    @Test func aFrameOlderThanTheLastHeardDoesNotMoveTimeBack() {
        var liveness = Liveness(now: Self.start)
        _ = liveness.heard(at: Self.at(9))
        _ = liveness.heard(at: Self.at(4))
        #expect(liveness.lastHeard == Self.at(9))
        #expect(liveness.deadline == Self.at(19))
    }

    @Test func aLateTimerGivesTheHostItsTimeToAnswer() {
        // The daemon's queue was held up for a minute: the first probe goes out late, and the host still gets a
        // full second to answer it before the next.
        var liveness = Liveness(now: Self.start)
        #expect(liveness.step(at: Self.at(70)) == .probe(attempt: 1))
        #expect(liveness.step(at: Self.at(70)) == nil)
        #expect(liveness.deadline == Self.at(71))
    }

    @Test func anIdleAwakeHostCostsOneProbePerQuietSpell() {
        // Ten minutes of a host that says nothing unless asked, and answers each probe within 5 ms.
        var liveness = Liveness(now: Self.start)
        var probes = 0
        while let deadline = liveness.deadline, deadline <= Self.at(600) {
            guard let step = liveness.step(at: deadline) else { continue }
            #expect(step == .probe(attempt: 1), "only ever one probe, answered")
            probes += 1
            #expect(liveness.heard(at: deadline + .milliseconds(5)) == .answered(afterProbes: 1))
        }
        #expect(probes == 59)
        #expect(liveness.state == .awake)
    }

    @Test func aClockStepMovesEveryTime() {
        var liveness = Liveness(now: Self.start)
        #expect(liveness.step(at: Self.at(10)) == .probe(attempt: 1))
        liveness.moveTimes(by: .seconds(-3_600))
        #expect(liveness.deadline == Self.at(11 - 3_600))
        #expect(liveness.lastHeard == Self.at(-3_600))
        #expect(liveness.step(at: Self.at(11 - 3_600)) == .probe(attempt: 2))
    }

    @Test func otherTimingsAreHonoured() {
        let timing = Liveness.Timing(quiet: .seconds(30), waits: [.seconds(2), .seconds(5)])
        var liveness = Liveness(timing: timing, now: Self.start)
        let steps = Self.run(&liveness, until: Self.at(100))
        #expect(steps.map(\.0) == [Self.at(30), Self.at(32), Self.at(37)])
        #expect(steps.map(\.1) == [.probe(attempt: 1), .probe(attempt: 2), .fellAsleep(probes: 2)])
        #expect(liveness.state.description == "asleep")
    }
}
