import Dispatch

/// Calls `attempt` until it returns a value, for at most `timeout`, pausing `interval` between attempts; throws
/// ``TimeoutError`` naming `what` if no attempt succeeded in time.
///
/// For conditions that become true on their own (a daemon finishing its probes, a cache filling); each attempt
/// should itself be bounded.
public func eventually<Value: Sendable>(
    _ what: String,
    within timeout: Duration = .seconds(10),
    every interval: Duration = .milliseconds(100),
    _ attempt: () async throws -> Value?
) async throws -> Value {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try await attempt() { return value }
        if ContinuousClock.now + interval > deadline {
            throw TimeoutError("timed out after \(timeout) waiting for \(what)")
        }
        try await Task.sleep(for: interval)
    }
}

/// Runs blocking `work` on a Dispatch thread, so the cooperative pool stays free for the tests' own tasks.
public func runOffCooperativePool<Value: Sendable>(
    _ work: @escaping @Sendable () throws -> Value
) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

extension LabProcess {
    /// Waits until the process has written `text` to its standard error, for at most `timeout`; throws
    /// ``TimeoutError`` naming `what`, with what it wrote, if it has not.
    public func waitUntilLogged(_ text: String, _ what: String, within timeout: Duration = .seconds(10)) async throws {
        do {
            _ = try await eventually(what, within: timeout) { stderr.contains(text) ? true : nil }
        } catch let timeout as TimeoutError {
            throw TimeoutError("\(timeout): no \"\(text)\" in the log of \(arguments.first ?? "?"): \(stderr)")
        }
    }
}
