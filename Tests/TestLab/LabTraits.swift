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
