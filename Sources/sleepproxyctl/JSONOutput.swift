import SleepProxyControl

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What `sleepproxyctl wake` and `forget` print with `--json`: the daemon's sentence.
struct MessageReport: Codable, Hashable, Sendable {
    var message: String
}

extension ControlProtocol {
    /// The protocol's encoder, indented for people: what `sleepproxyctl --json` prints, apart from the one line
    /// per event of a `follow` stream.
    static func prettyEncoder() -> JSONEncoder {
        let encoder = encoder()
        encoder.outputFormatting.insert(.prettyPrinted)
        return encoder
    }

    /// `value` as `sleepproxyctl --json` prints it: indented, with a final newline. An empty array is `[]`
    /// (the encoder on its own spreads it over three lines).
    static func prettyText(_ value: some Encodable) throws -> String {
        let text = String(decoding: try prettyEncoder().encode(value), as: UTF8.self)
        if text.count < 8, text.allSatisfy({ $0 == "[" || $0 == "]" || $0.isWhitespace }) { return "[]\n" }
        return text + "\n"
    }
}
