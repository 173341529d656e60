import CNetSupport
public import SleepProxyCore

/// The time the core reasons in: wall-clock time as far as leases are concerned, but advancing with a clock that
/// never steps (time since boot, suspend included), so that timers keep their length when the system clock is
/// set (NTP after boot on a board without a real-time clock, an administrator's `date -s`).
///
/// `step()` compares the wall clock with the steady one; a difference of more than a second is a step: the
/// clock re-anchors and reports it, and the daemon moves what the core holds by that much.
public struct SteadyClock: Sendable {
    private let steady: @Sendable () -> Int64
    private let wall: @Sendable () -> Int64
    private var offset: Int64
    /// Slewing (at most 500 ppm) stays below this between two checks; a step does not.
    public static let stepThreshold: Duration = .seconds(1)

    /// The system's clocks.
    public init() {
        self.init(steady: { sp_boot_clock_ns() }, wall: { sp_wall_clock_ns() })
    }

    /// Clocks of the caller's (tests): nanoseconds of a steady clock, and of the wall clock since the epoch.
    public init(steady: @escaping @Sendable () -> Int64, wall: @escaping @Sendable () -> Int64) {
        self.steady = steady
        self.wall = wall
        offset = wall() - steady()
    }

    public func now() -> UnixTime {
        UnixTime(nanoseconds: steady() + offset)
    }

    /// How far the wall clock stepped since the last check, if it did; the clock follows it from now on.
    public mutating func step() -> Duration? {
        let drift = wall() - steady() - offset
        let threshold = Self.stepThreshold.components.seconds * 1_000_000_000
        guard drift > threshold || drift < -threshold else { return nil }
        offset += drift
        return .nanoseconds(drift)
    }
}
