/// A DNS response received by ``Lab/multicastQuery(from:message:ipVersion:sourcePort:listen:maxResponses:)``:
/// the raw message and where it came from and went to.
public struct MDNSQueryResponse: Sendable, Hashable, CustomStringConvertible {
    /// The sender's address, without a scope: `10.77.0.2`, `fe80::77:ff:fe00:2`.
    public var source: String
    public var sourcePort: UInt16
    /// The IP destination address: `224.0.0.251` or `ff02::fb` for a multicast response, the querier's own
    /// address for a unicast one.
    public var destination: String
    /// The whole DNS message.
    public var bytes: [UInt8]

    public init(source: String, sourcePort: UInt16, destination: String, bytes: [UInt8]) {
        self.source = source
        self.sourcePort = sourcePort
        self.destination = destination
        self.bytes = bytes
    }

    /// Whether the response was sent to the mDNS group rather than to the querier.
    public var isMulticast: Bool { destination == "224.0.0.251" || destination == "ff02::fb" }

    public var id: UInt16 { headerField(0) }
    public var flags: UInt16 { headerField(1) }
    public var questionCount: UInt16 { headerField(2) }
    public var answerCount: UInt16 { headerField(3) }
    public var authorityCount: UInt16 { headerField(4) }
    public var additionalCount: UInt16 { headerField(5) }

    /// Whether `pattern` occurs in the message (an address's bytes, a label).
    public func contains(_ pattern: [UInt8]) -> Bool {
        guard !pattern.isEmpty, pattern.count <= bytes.count else { return pattern.isEmpty }
        return (0...(bytes.count - pattern.count)).contains { bytes[$0..<($0 + pattern.count)].elementsEqual(pattern) }
    }

    public var description: String {
        let hex = bytes.map { ($0 < 0x10 ? "0" : "") + String($0, radix: 16) }.joined()
        return "from \(source):\(sourcePort) to \(destination), \(bytes.count) bytes, \(answerCount) answers: \(hex)"
    }

    private func headerField(_ index: Int) -> UInt16 {
        guard bytes.count >= 12 else { return 0 }
        return UInt16(bytes[2 * index]) << 8 | UInt16(bytes[2 * index + 1])
    }
}

extension Lab {
    /// Sends one mDNS query for `name`/`type` from `role` to 224.0.0.251:5353 (or `[ff02::fb%eth0]:5353`) and
    /// collects the DNS responses that arrive within `listen` (at most `maxResponses`).
    ///
    /// `unicastResponse` sets the QU bit. From `sourcePort` 5353 the query is a full mDNS one (the script joins
    /// the group, so it also receives multicast answers); from `sourcePort` 0 (an ephemeral port) it is a
    /// one-shot query, which responders answer by unicast with the query's `id`. A host that runs its own avahi
    /// shares port 5353 with it: unicast answers to port 5353 may then reach avahi instead.
    /// `type` is a mnemonic (`A`, `AAAA`, `PTR`, `SRV`, `TXT`, `ANY`, …), `TYPE<n>` or a number.
    public func multicastQuery(
        from role: Role,
        name: String,
        type: String,
        unicastResponse: Bool = false,
        ipVersion: IPVersion = .v4,
        sourcePort: UInt16 = 5353,
        id: UInt16 = 0,
        listen: Duration = .seconds(1),
        maxResponses: Int = 100
    ) async throws -> [MDNSQueryResponse] {
        let message = try Self.mdnsQuery(name: name, type: type, unicastResponse: unicastResponse, id: id)
        return try await multicastQuery(
            from: role,
            message: message,
            ipVersion: ipVersion,
            sourcePort: sourcePort,
            listen: listen,
            maxResponses: maxResponses
        )
    }

    /// Sends `message` from `role` to the mDNS group and collects DNS responses (QR set) for `listen`, or until
    /// `maxResponses` arrived. Responses from any source are returned, in order of arrival.
    public func multicastQuery(
        from role: Role,
        message: [UInt8],
        ipVersion: IPVersion = .v4,
        sourcePort: UInt16 = 5353,
        listen: Duration = .seconds(1),
        maxResponses: Int = 100
    ) async throws -> [MDNSQueryResponse] {
        let arguments = Self.multicastQueryArguments(message, ipVersion, sourcePort, listen, maxResponses)
        let result = try await run(role, arguments, timeout: listen + .seconds(5))
        guard result.succeeded else { throw LabError("the multicast query from \(role.rawValue) failed: \(result)") }
        return try Self.multicastResponses(result)
    }

    /// The command that sends `message` and listens, for `multicastQuery`.
    static func multicastQueryArguments(
        _ message: [UInt8], _ ipVersion: IPVersion, _ sourcePort: UInt16, _ listen: Duration, _ maxResponses: Int
    ) -> [String] {
        let hex = message.map { ($0 < 0x10 ? "0" : "") + String($0, radix: 16) }.joined()
        let seconds = Double(listen.components.seconds) + Double(listen.components.attoseconds) / 1e18
        return [
            "python3", "-c", multicastQueryScript, hex, ipVersion == .v4 ? "4" : "6", Lab.interfaceName,
            String(sourcePort), String(seconds), String(maxResponses),
        ]
    }

    /// The responses the query's script printed.
    static func multicastResponses(_ result: CommandResult) throws -> [MDNSQueryResponse] {
        try result.stdout.split(separator: "\n").map { line in
            let fields = line.split(separator: " ")
            guard fields.count == 4, let port = UInt16(fields[1]), fields[3].count % 2 == 0 else {
                throw LabError("unexpected output of the multicast query: \(line)")
            }
            var bytes: [UInt8] = []
            var digits = fields[3][...]
            while !digits.isEmpty {
                guard let byte = UInt8(digits.prefix(2), radix: 16) else {
                    throw LabError("unexpected hex from the multicast query: \(line)")
                }
                bytes.append(byte)
                digits = digits.dropFirst(2)
            }
            return MDNSQueryResponse(
                source: String(fields[0]),
                sourcePort: port,
                destination: String(fields[2]),
                bytes: bytes
            )
        }
    }

    /// A query message with one question: `name` (presentation format: `\.`, `\\` and `\DDD` escapes), `type`,
    /// class IN, with the QU bit if `unicastResponse`.
    public static func mdnsQuery(name: String, type: String, unicastResponse: Bool, id: UInt16 = 0) throws -> [UInt8] {
        guard let typeCode = dnsTypeCode(type) else { throw LabError("unknown DNS type \(type)") }
        var message: [UInt8] = [UInt8(id >> 8), UInt8(id & 0xFF), 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
        message += try wireName(name)
        message += [UInt8(typeCode >> 8), UInt8(typeCode & 0xFF), unicastResponse ? 0x80 : 0x00, 0x01]
        return message
    }

    /// `name` in DNS wire format, uncompressed.
    private static func wireName(_ name: String) throws -> [UInt8] {
        var labels: [[UInt8]] = [[]]
        var input = Array(name.utf8)[...]
        while let byte = input.popFirst() {
            switch byte {
            case UInt8(ascii: "."):
                labels.append([])
            case UInt8(ascii: "\\"):
                let digits = input.prefix(3)
                if digits.count == 3, digits.allSatisfy({ (0x30...0x39).contains($0) }),
                    let value = UInt8(String(decoding: digits, as: UTF8.self))
                {
                    labels[labels.count - 1].append(value)
                    input = input.dropFirst(3)
                } else if let next = input.popFirst() {
                    labels[labels.count - 1].append(next)
                } else {
                    throw LabError("name ends in a backslash: \(name)")
                }
            default:
                labels[labels.count - 1].append(byte)
            }
        }
        if labels.last?.isEmpty == true { labels.removeLast() }
        guard labels.allSatisfy({ !$0.isEmpty && $0.count <= 63 }) else {
            throw LabError("bad DNS name (empty or over-long label): \(name)")
        }
        let wire = labels.flatMap { label -> [UInt8] in [UInt8(label.count)] + label } + [0]
        guard wire.count <= 255 else { throw LabError("DNS name over 255 bytes: \(name)") }
        return wire
    }

    /// The numeric code of a DNS type mnemonic, `TYPE<n>` or number.
    private static func dnsTypeCode(_ type: String) -> UInt16? {
        let known: [String: UInt16] = [
            "A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "HINFO": 13, "MX": 15, "TXT": 16, "AAAA": 28,
            "SRV": 33, "OPT": 41, "NSEC": 47, "ANY": 255,
        ]
        let upper = type.uppercased()
        if let code = known[upper] { return code }
        return UInt16(upper.hasPrefix("TYPE") ? String(upper.dropFirst(4)) : upper)
    }
}

extension ExtraHost {
    /// Sends one mDNS query for `name`/`type` from this host, as ``Lab/multicastQuery(from:name:type:unicastResponse:ipVersion:sourcePort:id:listen:maxResponses:)``
    /// does from a lab host, and collects the responses that arrive within `listen`.
    public func multicastQuery(
        name: String, type: String, sourcePort: UInt16 = 5353, listen: Duration = .seconds(1)
    ) async throws -> [MDNSQueryResponse] {
        let message = try Lab.mdnsQuery(name: name, type: type, unicastResponse: false)
        let arguments = Lab.multicastQueryArguments(message, .v4, sourcePort, listen, 100)
        let result = try await run(arguments, timeout: listen + .seconds(5))
        guard result.succeeded else { throw LabError("the multicast query from \(self.name) failed: \(result)") }
        return try Lab.multicastResponses(result)
    }
}

/// Sends one datagram to the mDNS group and prints each DNS response as
/// `<source> <source port> <destination> <hex>`. Arguments: message hex, 4 or 6, interface, source port
/// (5353 joins the group), seconds to listen, most responses.
private let multicastQueryScript = #"""
    import select, socket, struct, sys, time

    message = bytes.fromhex(sys.argv[1])
    version, interface = sys.argv[2], sys.argv[3]
    source_port, listen, limit = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
    index = socket.if_nametoindex(interface)
    IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)
    IPV6_RECVPKTINFO = getattr(socket, "IPV6_RECVPKTINFO", 49)
    IPV6_PKTINFO = getattr(socket, "IPV6_PKTINFO", 50)

    if version == "6":
        group = "ff02::fb"
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVPKTINFO, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
        membership = (socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
                      struct.pack("=16sI", socket.inet_pton(socket.AF_INET6, group), index))
        any_address, destination = "::", (group, 5353, 0, index)
    else:
        group = "224.0.0.251"
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("=4s4si", bytes(4), bytes(4), index))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
        membership = (socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                      struct.pack("=4s4si", socket.inet_aton(group), bytes(4), index))
        any_address, destination = "0.0.0.0", (group, 5353)

    if source_port == 5353:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((any_address, source_port))
    if source_port == 5353:
        sock.setsockopt(*membership)

    sock.sendto(message, destination)
    deadline = time.monotonic() + listen
    count = 0
    while count < limit:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
            break
        data, ancillary, _, source = sock.recvmsg(9000, 256)
        if len(data) < 12 or not data[2] & 0x80:
            continue
        to = "?"
        for level, kind, payload in ancillary:
            if version == "6" and level == socket.IPPROTO_IPV6 and kind == IPV6_PKTINFO:
                to = socket.inet_ntop(socket.AF_INET6, payload[:16])
            elif version == "4" and level == socket.IPPROTO_IP and kind == IP_PKTINFO:
                to = socket.inet_ntop(socket.AF_INET, payload[8:12])
        print(source[0].split("%")[0], source[1], to, data.hex(), flush=True)
        count += 1
    """#
