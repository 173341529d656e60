public import DNSWire
public import NetworkAddresses

/// The sequence number of the OWNER option, kept in the state directory (`sequence`): this host's sleep/wake
/// epoch, 8 bits, advanced on every wake and wrapping (`SleepSeqNum`; PROTOCOL.md section 2.12). A registration
/// carries the current value; `return` advances it, so that proxies see a new epoch and let go.
public struct SequenceNumber: Hashable, Sendable, CustomStringConvertible {
    public var value: UInt8

    public init(_ value: UInt8) { self.value = value }

    /// The number after a wake.
    public func advanced() -> SequenceNumber { SequenceNumber(value &+ 1) }

    /// The file's text: the number and a newline.
    public var fileText: String { "\(value)\n" }

    /// Reads the file's text: a number from 0 to 255, spaces and a final newline allowed.
    public init(fileText: String) throws(ClientStateError) {
        let trimmed = fileText.filter { !$0.isWhitespace }
        guard let value = UInt8(trimmed) else {
            throw ClientStateError("the sequence number \"\(trimmed)\" is not a number from 0 to 255")
        }
        self.value = value
    }

    public var description: String { "\(value)" }
}

/// A registration that succeeded on one interface, kept in the state directory (`registration-<interface>`) for
/// `return`, which announces the same records, and for `status`.
///
/// The text form has one `key value` per line; `message` lines hold the UPDATE datagrams in hex, in order, so the
/// records come back exactly as they were sent:
///
/// ```
/// interface eth0
/// proxy 10.77.0.1 5354 20-30-50-73.1 Lab Proxy._sleep-proxy._udp.local.
/// lease 7200
/// registered-at 1764072000
/// sequence 42
/// message 4b2e28000000000000090001...
/// ```
public struct SavedRegistration: Hashable, Sendable {
    public var interface: String
    public var proxyAddress: IPAddress
    public var proxyPort: UInt16
    /// The proxy's instance name, as text.
    public var proxyName: String
    /// The lease granted, in seconds.
    public var lease: UInt32
    /// When it was granted, in seconds since 1970.
    public var registeredAt: Int64
    public var sequence: SequenceNumber
    public var messages: [[UInt8]]

    public init(
        interface: String, proxyAddress: IPAddress, proxyPort: UInt16, proxyName: String, lease: UInt32,
        registeredAt: Int64, sequence: SequenceNumber, messages: [[UInt8]]
    ) {
        self.interface = interface
        self.proxyAddress = proxyAddress
        self.proxyPort = proxyPort
        self.proxyName = proxyName
        self.lease = lease
        self.registeredAt = registeredAt
        self.sequence = sequence
        self.messages = messages
    }

    /// The records registered, from the saved messages' update sections.
    public func records() throws(ClientStateError) -> [DNSRecord] {
        var records: [DNSRecord] = []
        for (index, bytes) in messages.enumerated() {
            do {
                records += try DNSMessage(decoding: bytes).updates
            } catch {
                throw ClientStateError("saved message \(index + 1) does not decode: \(error)")
            }
        }
        return records
    }

    public var fileText: String {
        var lines = [
            "interface \(interface)",
            "proxy \(proxyAddress) \(proxyPort) \(proxyName)",
            "lease \(lease)",
            "registered-at \(registeredAt)",
            "sequence \(sequence)",
        ]
        let hex = Array("0123456789abcdef")
        for message in messages {
            lines.append("message " + String(message.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0xF)]] }))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    public init(fileText: String) throws(ClientStateError) {
        var values: [String: String] = [:]
        var messages: [[UInt8]] = []
        for (number, line) in fileText.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard !line.isEmpty else { continue }
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { throw ClientStateError("line \(number + 1) has no value: \"\(line)\"") }
            let key = String(parts[0])
            let value = String(parts[1])
            if key == "message" {
                guard let bytes = Self.bytes(hex: value) else {
                    throw ClientStateError("line \(number + 1): the message is not an even number of hex digits")
                }
                messages.append(bytes)
            } else {
                values[key] = value
            }
        }
        func value(_ key: String) throws(ClientStateError) -> String {
            guard let value = values[key] else { throw ClientStateError("it has no \(key) line") }
            return value
        }
        let proxy = try value("proxy").split(separator: " ", maxSplits: 2)
        guard proxy.count == 3, let address = IPAddress(proxy[0]), let port = UInt16(proxy[1]) else {
            throw ClientStateError("the proxy line is not \"ADDRESS PORT NAME\"")
        }
        guard let lease = UInt32(try value("lease")) else { throw ClientStateError("the lease is not a number") }
        guard let registeredAt = Int64(try value("registered-at")) else {
            throw ClientStateError("registered-at is not a number")
        }
        guard !messages.isEmpty else { throw ClientStateError("it has no message line") }
        self.init(
            interface: try value("interface"), proxyAddress: address, proxyPort: port, proxyName: String(proxy[2]),
            lease: lease, registeredAt: registeredAt, sequence: try SequenceNumber(fileText: try value("sequence")),
            messages: messages)
    }

    private static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        case 0x41...0x46: digit - 0x41 + 10
        default: nil
        }
    }
}

/// State in the state directory that does not read back.
public struct ClientStateError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}
