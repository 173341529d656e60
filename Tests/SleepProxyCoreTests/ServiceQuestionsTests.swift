import DNSWire
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// A machine declared while it is awake is asked what it offers, so that its services are learned before it sleeps
/// rather than at its next announcement.
struct ServiceQuestionsTests {
    typealias Learned = LearnedRecordsTests

    /// The questions of the queries among `actions`.
    static func asked(_ actions: [Action]) -> [[DNSQuestion]] {
        actions.compactMap { action -> [DNSQuestion]? in
            guard case .sendMDNS(let transmission) = action,
                let message = try? DNSMessage(decoding: transmission.bytes), !message.flags.isResponse
            else { return nil }
            return message.questions
        }
    }

    /// The host's answer to the service-type enumeration: one PTR per type.
    static func enumeration(_ types: [DNSName]) -> [DNSRecord] {
        types.map { DNSRecord(name: ServiceRecords.serviceEnumeration, ttl: 4_500, rdata: .ptr($0)) }
    }

    @Test func aHostDeclaredWhileAwakeIsAskedForItsServicesAndTheirTypesAndLearnsThem() throws {
        var harness = Learned.harness()
        // Watching it starts with one question to one group, as a browser asks: which service types are there.
        let start = Self.asked(harness.log)
        #expect(start == [[DNSQuestion(name: ServiceRecords.serviceEnumeration, type: .ptr)]])
        let sends = harness.log.filter { if case .sendMDNS = $0 { true } else { false } }
        #expect(sends.count == 1)

        // Another machine's answer asks nothing; the host's asks after each of its types, once, in one query.
        let other = harness.mdns(
            Learned.response(Self.enumeration(["_ipp._tcp.local."])), from: Harness.waker,
            mac: MACAddress(2, 0, 0, 0, 0, 3))
        #expect(Self.asked(other).isEmpty)
        let types = harness.mdns(
            Learned.response(Self.enumeration([Learned.screenType, Learned.smbType, "_sub.bad.local."])),
            from: Learned.source, mac: Learned.mac)
        #expect(
            Self.asked(types) == [
                [DNSQuestion(name: Learned.screenType, type: .ptr), DNSQuestion(name: Learned.smbType, type: .ptr)]
            ])
        let again = harness.mdns(
            Learned.response(Self.enumeration([Learned.smbType])), from: Learned.source, mac: Learned.mac)
        #expect(Self.asked(again).isEmpty, "a type asked after already")

        // Its answers (PTR, with SRV, TXT and its address as additional records) are learned.
        let screen = Learned.service(Learned.screen, port: 5900)
        harness.mdns(
            Learned.response(
                screen.filter { $0.type == .ptr },
                additionals: screen.filter { $0.type != .ptr } + Learned.addressRecords),
            from: Learned.source, mac: Learned.mac)
        #expect(Learned.learned(harness).contains { $0.name == Learned.screen && $0.type == .srv })
    }

    @Test func aHostAsleepWhenFirstWatchedIsAskedWhenHeardAgainAtMostOnceAMinute() throws {
        var harness = Learned.harness()
        #expect(Self.asked(harness.log).count == 1)
        // Heard within the minute: not asked again.
        harness.advance(.seconds(20))
        #expect(Self.asked(harness.frame(DeclaredHostTests.arpFromHost())).isEmpty)
        // A minute on, still without an answer: asked again.
        harness.advance(.seconds(45))
        #expect(
            Self.asked(harness.frame(DeclaredHostTests.arpFromHost()))
                == [[DNSQuestion(name: ServiceRecords.serviceEnumeration, type: .ptr)]])
        // Once it answered, never again.
        harness.mdns(Learned.response(Self.enumeration([Learned.smbType])), from: Learned.source, mac: Learned.mac)
        harness.advance(.seconds(120))
        #expect(Self.asked(harness.frame(DeclaredHostTests.arpFromHost())).isEmpty)
    }

    @Test func aHostWhoseRecordsAreDeclaredIsNotAsked() {
        let harness = Learned.harness(Learned.declaration(records: .declared))
        #expect(Self.asked(harness.log).isEmpty)
    }

    @Test func atMostSixteenTypesAreAskedAfter() throws {
        var harness = Learned.harness()
        let many = try (0..<40).map { try DNSName("_t\($0)._tcp.local.") }
        let asked = Self.asked(
            harness.mdns(Learned.response(Self.enumeration(many)), from: Learned.source, mac: Learned.mac))
        #expect(asked.flatMap { $0 }.count == ServiceQuestions.typeLimit)
    }
}
