import NetworkAddresses
import SleepProxyCore

extension Endpoint {
    /// Parses the text form `Endpoint.description` writes: `10.77.0.2:5353` or `[fe80::1]:5353`.
    ///
    /// IPv4 addresses stand bare, IPv6 addresses stand in brackets; the port is 1 to 5 decimal digits up to 65535.
    /// Anything else (a bare IPv6 address, a zone suffix, a sign on the port) is rejected.
    init?(parsing text: some StringProtocol) {
        let text = Substring(text)
        let addressText: Substring
        let portText: Substring
        if text.first == "[" {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let afterClose = text[text.index(after: close)...]
            guard afterClose.first == ":" else { return nil }
            addressText = text[text.index(after: text.startIndex)..<close]
            portText = afterClose.dropFirst()
            guard let v6 = IPv6Address(addressText), let port = Self.port(portText) else { return nil }
            self.init(address: .v6(v6), port: port)
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            addressText = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard let v4 = IPv4Address(addressText), let port = Self.port(portText) else { return nil }
            self.init(address: .v4(v4), port: port)
        }
    }

    private static func port(_ text: Substring) -> UInt16? {
        guard (1...5).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        return UInt16(text)
    }
}
