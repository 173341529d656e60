#if canImport(Glibc)
    import Glibc
#endif

/// A system call that failed: what was being done, and the `errno` it left.
///
/// `description` reads `open /etc/sleepproxy/sleepproxy.toml: Permission denied`.
public struct SystemCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was being done: the call and its object (`bind UDP [::]:5354 on eth0`).
    public var operation: String
    /// The `errno` value.
    public var code: Int32

    /// The error for `operation`, with the current `errno` unless `code` is given.
    public init(_ operation: String, code: Int32? = nil) {
        self.operation = operation
        self.code = code ?? errno
    }

    /// The system's words for `code`.
    public var reason: String { String(cString: strerror(code)) }

    public var description: String { "\(operation): \(reason)" }
}
