import DNSWire
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// The answer rules as a table: a query to a proxy holding one settled host, and what goes by unicast and what by
/// multicast, decided without changing anything.
@Suite("Answer decisions")
struct AnswerDecisionTests {
    static let address = DNSRecord(
        name: "imac.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
    static let legacySource = Endpoint(address: Harness.waker.address, port: 40_000)

    struct Row: Sendable, CustomTestStringConvertible {
        var rule: String
        var configuration = CoreConfiguration()
        /// Time passed after the host settled (its records were last multicast 18 s before).
        var later: Duration = .zero
        var prepare: @Sendable (inout Harness) -> Void = { _ in }
        var source = Harness.waker
        var destination: IPAddress = .v4(.mdnsGroup)
        var query: @Sendable () -> [UInt8]
        var unicast: String
        var multicast: String
        var testDescription: String { rule }
    }

    static func summary(_ unicast: AnswerDecision.Unicast) -> String {
        switch unicast {
        case .nothing: "-"
        case .again(let bytes): "again with ID \(UInt16(bytes[0]) << 8 | UInt16(bytes[1]))"
        case .reply(let records, let legacy, let additionalsOf, let keptAs):
            "\(records.count) \(legacy ? "legacy" : "mDNS")"
                + (additionalsOf == nil ? "" : ", cached additionals") + (keptAs == nil ? "" : ", kept")
        }
    }

    static func summary(_ multicast: AnswerDecision.Multicast) -> String {
        switch multicast {
        case .nothing: "-"
        case .dropped(let waiting): "dropped, \(waiting) waiting"
        case .after(let delay, let records, let whole): "\(records.count) \(delay)" + (whole == nil ? "" : ", whole")
        }
    }

    static let fullPending: CoreConfiguration = {
        var configuration = CoreConfiguration()
        configuration.maximumPendingResponses = 0
        return configuration
    }()

    static let rows: [Row] = [
        Row(
            rule: "QM, unique records", query: { Query.bytes("imac.local.", .a) }, unicast: "-",
            multicast: "1 immediate, whole"),
        Row(
            rule: "QM, a shared record", query: { Query.bytes("_ssh._tcp.local.", .ptr) }, unicast: "-",
            multicast: "1 shared, whole"),
        Row(
            rule: "a truncated query",
            query: { Query.bytes([DNSQuestion(name: "imac.local.", type: .a)], truncated: true) },
            unicast: "-", multicast: "1 forKnownAnswers, whole"),
        Row(
            rule: "QU, multicast within a quarter of its TTL", query: { Query.bytes("imac.local.", .a, unicast: true) },
            unicast: "1 mDNS, cached additionals", multicast: "-"),
        Row(
            rule: "QU, not multicast for a quarter of its TTL", later: .seconds(20),
            query: { Query.bytes("imac.local.", .a, unicast: true) }, unicast: "-", multicast: "1 immediate, whole"),
        Row(
            rule: "sent straight to the proxy", destination: Harness.proxyIPv4,
            query: { Query.bytes("imac.local.", .a) }, unicast: "1 mDNS, cached additionals", multicast: "-"),
        Row(
            rule: "legacy unicast", source: legacySource, query: { Query.bytes(id: 7, "imac.local.", .a) },
            unicast: "1 legacy, cached additionals, kept", multicast: "-"),
        Row(
            rule: "legacy unicast asked again",
            prepare: { harness in harness.mdns(Query.bytes(id: 7, "imac.local.", .a), from: legacySource) },
            source: legacySource, query: { Query.bytes(id: 8, "imac.local.", .a) }, unicast: "again with ID 8",
            multicast: "-"),
        Row(
            rule: "legacy unicast with a known answer", source: legacySource,
            query: {
                Query.bytes(
                    [DNSQuestion(name: "_ssh._tcp.local.", type: .ptr)],
                    knownAnswers: [
                        DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr("other._ssh._tcp.local."))
                    ])
            }, unicast: "1 legacy, cached additionals", multicast: "-"),
        Row(
            rule: "a known answer with half our TTL suppresses ours",
            query: {
                var known = address
                known.ttl = 60
                return Query.bytes([DNSQuestion(name: "imac.local.", type: .a)], knownAnswers: [known])
            }, unicast: "-", multicast: "-"),
        Row(
            rule: "a known answer with less than half our TTL does not",
            query: {
                var known = address
                known.ttl = 59
                return Query.bytes([DNSQuestion(name: "imac.local.", type: .a)], knownAnswers: [known])
            }, unicast: "-", multicast: "1 immediate, whole"),
        Row(
            rule: "a type a unique name lacks: NSEC", query: { Query.bytes("imac.local.", .aaaa) }, unicast: "-",
            multicast: "1 immediate, whole"),
        Row(rule: "a name not held", query: { Query.bytes("other.local.", .a) }, unicast: "-", multicast: "-"),
        Row(
            rule: "a class other than IN",
            query: { Query.bytes([DNSQuestion(name: "imac.local.", type: .a, questionClass: DNSClass(3))]) },
            unicast: "-", multicast: "-"),
        Row(
            rule: "too many responses waiting", configuration: fullPending, query: { Query.bytes("imac.local.", .a) },
            unicast: "-", multicast: "dropped, 0 waiting"),
        Row(
            rule: "two questions, one by unicast",
            query: {
                Query.bytes([
                    DNSQuestion(name: "imac.local.", type: .a, unicastResponse: true),
                    DNSQuestion(name: "_ssh._tcp.local.", type: .ptr),
                ])
            }, unicast: "1 mDNS", multicast: "1 shared"),
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) throws {
        var harness = Harness(configuration: row.configuration)
        harness.register(Update.bytes(records: Update.host("imac", ipv4: IPv4Address(10, 77, 0, 2))))
        harness.run(until: harness.now + .seconds(20))
        row.prepare(&harness)
        harness.advance(row.later)
        let packet = MDNSPacket(
            interface: Harness.interface, source: row.source, destination: row.destination, bytes: row.query())
        let message = try DNSMessage(decoding: packet.bytes)
        // The records each question finds, as `answer` looks them up.
        var found: [FoundAnswer] = []
        for question in message.questions where question.questionClass == .internet {
            let key = AnswerCacheKey(
                interface: Harness.interface, name: question.name.lowercased(), type: question.type)
            found.append(
                FoundAnswer(
                    question: question, key: key,
                    records: harness.core.cachedAnswer(key, question.name, now: harness.now).records))
        }
        let pending = harness.core.schedule.pendingCount
        let decision = harness.core.decideAnswer(to: message, packet, found: found, now: harness.now)
        #expect(Self.summary(decision.unicast) == row.unicast)
        #expect(Self.summary(decision.multicast) == row.multicast)
        #expect(harness.core.schedule.pendingCount == pending, "deciding changes nothing")
        // Carried out, the decision is what goes out.
        let actions = harness.core.handleMDNS(packet, now: harness.now)
        let unicastSent = actions.transmissions.filter { $0.destination == row.source }
        #expect(unicastSent.isEmpty == (row.unicast == "-"))
        if row.multicast.contains("immediate") {
            #expect(actions.transmissions.contains { $0.destination.port == 5353 && $0.destination != row.source })
        } else {
            #expect(
                harness.core.schedule.pendingCount == pending
                    + (row.multicast.contains("dropped") || row.multicast == "-" ? 0 : 1))
        }
    }
}
