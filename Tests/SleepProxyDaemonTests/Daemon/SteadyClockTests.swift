import SleepProxyCore
import SleepProxyDaemon
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's time: the wall clock at start, advancing steadily; steps of the wall clock are reported once.
@Suite("Steady clock")
struct SteadyClockTests {
    final class Clocks: @unchecked Sendable {
        var steady: Int64 = 5_000_000_000
        var wall: Int64 = 1_800_000_000_000_000_000
    }

    @Test func followsTheSteadyClockAndReportsWallClockSteps() {
        let clocks = Clocks()
        var clock = SteadyClock(steady: { clocks.steady }, wall: { clocks.wall })
        #expect(clock.now() == UnixTime(nanoseconds: clocks.wall))
        clocks.steady += 10_000_000_000
        clocks.wall += 10_000_000_000
        #expect(clock.now() == UnixTime(nanoseconds: 1_800_000_010_000_000_000))
        #expect(clock.step() == nil)
        // Slewing by a few milliseconds is no step.
        clocks.wall += 3_000_000
        #expect(clock.step() == nil)
        // NTP sets the clock an hour ahead: the core's time does not move until the step is reported.
        clocks.wall += 3_600_000_000_000
        #expect(clock.now() == UnixTime(nanoseconds: 1_800_000_010_000_000_000))
        #expect(clock.step() == .nanoseconds(3_600_003_000_000))
        #expect(clock.now() == UnixTime(nanoseconds: clocks.wall))
        #expect(clock.step() == nil, "reported once")
        // And back.
        clocks.wall -= 7_200_000_000_000
        #expect(clock.step() == .seconds(-7200))
    }

    @Test func theSystemClocksAgreeAtStart() {
        let clock = SteadyClock()
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let wall = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        #expect(abs(clock.now().nanoseconds - wall) < 1_000_000_000)
    }
}
