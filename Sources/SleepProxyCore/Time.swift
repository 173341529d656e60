/// A wall-clock instant: nanoseconds since the Unix epoch. Leases outlive the process, so the core reasons in wall
/// time; the shell passes the current time in with every input.
public struct UnixTime: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public init(seconds: Int64) { nanoseconds = seconds * 1_000_000_000 }

    public static func < (lhs: UnixTime, rhs: UnixTime) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    public static func + (lhs: UnixTime, seconds: Duration) -> UnixTime {
        let (s, attoseconds) = seconds.components
        return UnixTime(nanoseconds: lhs.nanoseconds + s * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    public static func - (lhs: UnixTime, seconds: Duration) -> UnixTime {
        lhs + (.zero - seconds)
    }

    public static func - (lhs: UnixTime, rhs: UnixTime) -> Duration {
        .nanoseconds(lhs.nanoseconds - rhs.nanoseconds)
    }

    /// Whole seconds since the epoch, rounded down.
    public var seconds: Int64 { nanoseconds >= 0 ? nanoseconds / 1_000_000_000 : (nanoseconds + 1) / 1_000_000_000 - 1 }

    public var description: String { "\(seconds).\(String(nanoseconds % 1_000_000_000 / 1_000_000).leftPadded(3))" }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
