public import NetworkAddresses

/// Where the metrics endpoint listens: `metrics.listen`, an IP address and a TCP port (`127.0.0.1:9187`,
/// `0.0.0.0:9187`, `[::]:9187`). A host name is not taken: the address must be one of this host's.
public struct MetricsAddress: Hashable, Sendable, CustomStringConvertible {
    public var address: IPAddress
    public var port: Int

    public init(address: IPAddress, port: Int) {
        self.address = address
        self.port = port
    }

    /// `ADDRESS:PORT`, with an IPv6 address in brackets; nil with what is wrong.
    public static func parse(_ text: String) -> Result<MetricsAddress, MetricsAddressError> {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return .failure(MetricsAddressError("an IPv6 address goes in brackets before the port: \"[::]:9187\""))
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else {
                return .failure(
                    MetricsAddressError(
                        "expected ADDRESS:PORT, such as \"127.0.0.1:9187\", \"0.0.0.0:9187\" or \"[::]:9187\""))
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard let port = Int(portText), (1...65_535).contains(port) else {
            return .failure(MetricsAddressError("the port \"\(portText)\" is not a number from 1 to 65535"))
        }
        let address: IPAddress
        if text.hasPrefix("[") {
            guard let v6 = IPv6Address(host) else {
                return .failure(MetricsAddressError("\"\(host)\" is not an IPv6 address"))
            }
            address = .v6(v6)
        } else {
            guard let v4 = IPv4Address(host) else {
                return .failure(
                    MetricsAddressError(
                        "\"\(host)\" is not an IPv4 address (a host name is not taken; IPv6 in brackets)"))
            }
            address = .v4(v4)
        }
        return .success(MetricsAddress(address: address, port: port))
    }

    public var description: String {
        switch address {
        case .v4(let v4): "\(v4):\(port)"
        case .v6(let v6): "[\(v6)]:\(port)"
        }
    }

    /// The address as text, without brackets: what a socket library takes as a host.
    var host: String {
        switch address {
        case .v4(let v4): v4.description
        case .v6(let v6): v6.description
        }
    }
}

/// Why a `metrics.listen` value is not an address to listen on.
public struct MetricsAddressError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
