import NetworkAddresses

extension Endpoint {
    /// Parses the text form `Endpoint.description` writes: `10.77.0.2:5353` or `[fe80::1]:5353`.
    ///
    /// IPv4 addresses stand bare, IPv6 addresses stand in brackets; the port is 1 to 5 decimal digits up to 65535.
    /// Anything else (a bare IPv6 address, a zone suffix, a sign on the port) is rejected.
    init?(parsing text: some StringProtocol) {
        // Over the UTF-8 bytes: the store reads one source per held host at start-up, and the separators are ASCII
        // (an index found in the bytes is a valid index of the text).
        let text = Substring(text)
        let bytes = text.utf8
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let afterClose = bytes.index(after: close)
            guard afterClose < bytes.endIndex, bytes[afterClose] == UInt8(ascii: ":") else { return nil }
            let addressText = text[bytes.index(after: bytes.startIndex)..<close]
            guard let v6 = IPv6Address(addressText), let port = Self.port(text[bytes.index(after: afterClose)...])
            else { return nil }
            self.init(address: .v6(v6), port: port)
        } else {
            guard let colon = bytes.lastIndex(of: UInt8(ascii: ":")) else { return nil }
            guard let v4 = IPv4Address(text[..<colon]), let port = Self.port(text[bytes.index(after: colon)...]) else {
                return nil
            }
            self.init(address: .v4(v4), port: port)
        }
    }

    /// One to five decimal digits, at most 65535.
    private static func port(_ text: Substring) -> UInt16? {
        var value = 0
        var digits = 0
        for byte in text.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 5 else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            digits += 1
        }
        guard digits > 0, value <= Int(UInt16.max) else { return nil }
        return UInt16(value)
    }
}
