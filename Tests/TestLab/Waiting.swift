/// A wait that ran out of time.
public struct TimeoutError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Runs `operation`, cancelling it and throwing ``TimeoutError`` if it has not finished after `timeout`.
public func withTimeout<Result: Sendable>(
    _ timeout: Duration,
    _ what: String,
    _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Result.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw TimeoutError("timed out after \(timeout) waiting for \(what)")
        }
        defer { group.cancelAll() }
        guard let result = try await group.next() else {
            throw TimeoutError("no result while waiting for \(what)")
        }
        return result
    }
}

/// The first element of `sequence` that satisfies `predicate`, waiting at most `timeout`.
///
/// Elements before the match are consumed and discarded. On timeout the iteration is cancelled, which ends an
/// `AsyncStream` for good.
public func firstElement<Sequence: AsyncSequence & Sendable>(
    of sequence: Sequence,
    within timeout: Duration = .seconds(5),
    _ what: String,
    where predicate: @escaping @Sendable (Sequence.Element) -> Bool
) async throws -> Sequence.Element where Sequence.Element: Sendable {
    try await elements(of: sequence, within: timeout, what, through: predicate).last!
}

/// The elements of `sequence` up to and including the first one that satisfies `predicate`, waiting at most
/// `timeout` for it.
public func elements<Sequence: AsyncSequence & Sendable>(
    of sequence: Sequence,
    within timeout: Duration = .seconds(5),
    _ what: String,
    through predicate: @escaping @Sendable (Sequence.Element) -> Bool
) async throws -> [Sequence.Element] where Sequence.Element: Sendable {
    try await withTimeout(timeout, what) {
        var seen: [Sequence.Element] = []
        for try await element in sequence {
            seen.append(element)
            if predicate(element) { return seen }
        }
        try Task.checkCancellation()
        throw TimeoutError("the sequence ended after \(seen.count) elements without \(what)")
    }
}
