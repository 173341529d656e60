public import Testing

extension Trait where Self == ConditionTrait {
    /// Enables a test only where a ``Lab`` can be built and `tools` are installed; otherwise the test is
    /// reported as skipped with the reason.
    public static func requiresLab(tools: [String] = []) -> Self {
        let missing = Lab.missingTools(tools)
        let reason =
            Lab.unsupportedReason
            ?? (missing.isEmpty ? "" : "lab tests need \(missing.joined(separator: ", ")) installed")
        return .enabled(if: Lab.isSupported && missing.isEmpty, Comment(rawValue: reason))
    }
}

extension Trait where Self == ConditionTrait {
    /// Enables a test only where Apple's `mDNSResponderPosix` is built (see ``Lab/mdnsPosixDirectory``);
    /// otherwise the test is reported as skipped with how to build it.
    public static var requiresMDNSPosix: Self {
        let reason = Lab.mdnsPosixMissingReason
        return .enabled(if: reason == nil, Comment(rawValue: reason ?? ""))
    }
}
