/// The secret the page's Wake and Forget need (`web.token` or `web.token_file`). It is never printed.
public struct WebToken: Sendable, Hashable, CustomStringConvertible {
    /// Sixteen characters at least: a token short enough to guess is no guard.
    static let minimumLength = 16

    private let bytes: [UInt8]

    public init(_ text: String) {
        bytes = Array(text.utf8)
    }

    /// What is wrong with `text` as a token, or nil: it goes in an HTTP header, so printable ASCII without spaces.
    static func problem(_ text: String) -> String? {
        if text.utf8.count < minimumLength {
            return
                "a token has at least \(minimumLength) characters (this one has \(text.utf8.count)); `openssl rand -hex 16` makes one"
        }
        if !text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
            return "a token is printable ASCII without spaces (it travels in an HTTP header)"
        }
        return nil
    }

    /// Whether `presented` is the token, in time that depends only on their lengths.
    func matches(_ presented: some Collection<UInt8>) -> Bool {
        var difference = UInt8(bytes.count == presented.count ? 0 : 1)
        var index = 0
        for byte in presented {
            difference |= byte ^ (index < bytes.count ? bytes[index] : 0)
            index += 1
        }
        return difference == 0
    }

    public var description: String { "(a token of \(bytes.count) characters)" }
}
