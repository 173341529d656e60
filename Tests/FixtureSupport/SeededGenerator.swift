/// A small deterministic random generator (SplitMix64), so that generated test cases are the same on every run
/// and a failure names the seed that reproduces it.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func int(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    public mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
    public mutating func u16() -> UInt16 { UInt16(truncatingIfNeeded: next()) }
    public mutating func u32() -> UInt32 { UInt32(truncatingIfNeeded: next()) }
    public mutating func bool() -> Bool { next() & 1 == 1 }
    public mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in byte() } }
    public mutating func bytes(upTo limit: Int) -> [UInt8] { bytes(int(in: 0...limit)) }
}
