public import DNSWire
public import NetworkAddresses

/// The sleep proxies on one link, from the answers to a browse for `_sleep-proxy._udp.local.` and the SRV, A and
/// AAAA records that go with them (in the same answers' additional section, or asked for afterwards). Answers from
/// any source count: a proxy answers for itself.
public struct ProxyDirectory: Sendable {
    /// `_sleep-proxy._udp.local.`
    public static let serviceType: DNSName = "_sleep-proxy._udp.local."

    /// Where to send a registration.
    public struct Target: Hashable, Sendable {
        public var address: IPAddress
        public var port: UInt16

        public init(address: IPAddress, port: UInt16) {
            self.address = address
            self.port = port
        }
    }

    private var instances: [DNSName] = []
    private var records: [DNSRecord] = []

    public init() {}

    /// Takes the proxy records of `message` if it is an mDNS response. A goodbye (TTL 0) for an instance removes it.
    public mutating func received(_ message: DNSMessage) {
        guard message.flags.isResponse, message.flags.opcode == .query else { return }
        for record in message.answers + message.additionals {
            if record.isPTR(from: Self.serviceType), case .ptr(let instance) = record.rdata {
                if record.ttl == 0 {
                    instances.removeAll { $0.caseInsensitiveEquals(instance) }
                } else if !instances.contains(where: { $0.caseInsensitiveEquals(instance) }) {
                    instances.append(instance)
                }
                continue
            }
            guard record.ttl > 0, [.srv, .a, .aaaa].contains(record.type) else { continue }
            records.removeAll { $0.sameData(as: record) }
            records.append(record)
        }
    }

    /// The proxies seen, in the order they were first seen (which decides ties, as in a Mac's cache).
    public var proxies: [DiscoveredProxy] { instances.map(DiscoveredProxy.init(instance:)) }

    /// Where `instance` takes registrations: its SRV port, at the IPv4 address of the SRV target, or at its IPv6
    /// link-local address when it has no IPv4 one (mDNS.c `SendSPSRegistrationForOwner`). `scopeID` is the
    /// interface's index, for a link-local address.
    public func target(of instance: DNSName) -> Target? {
        guard let srv = srv(of: instance) else { return nil }
        let addresses = records.filter { $0.name.caseInsensitiveEquals(srv.target) }.compactMap(\.address)
        let address =
            addresses.first(where: \.isIPv4)
            ?? addresses.first { if case .v6(let v6) = $0 { v6.isLinkLocal } else { false } }
        return address.map { Target(address: $0, port: srv.port) }
    }

    /// What is still to ask about `chosen`: SRV of an instance without one, A and AAAA of a target without an
    /// address.
    public func questions(about chosen: [DiscoveredProxy]) -> [DNSQuestion] {
        var questions: [DNSQuestion] = []
        for proxy in chosen where target(of: proxy.instance) == nil {
            if let srv = srv(of: proxy.instance) {
                questions.append(DNSQuestion(name: srv.target, type: .a))
                questions.append(DNSQuestion(name: srv.target, type: .aaaa))
            } else {
                questions.append(DNSQuestion(name: proxy.instance, type: .srv))
            }
        }
        return questions
    }

    private func srv(of instance: DNSName) -> SRVData? {
        for record in records where record.name.caseInsensitiveEquals(instance) {
            if case .srv(let srv) = record.rdata { return srv }
        }
        return nil
    }
}

extension DNSRecord {
    func isPTR(from name: DNSName) -> Bool {
        type == .ptr && self.name.caseInsensitiveEquals(name)
    }
}
