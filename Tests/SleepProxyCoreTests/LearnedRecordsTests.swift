import DNSWire
import Frames
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// A declared host's own mDNS records, learned while it is awake and answered while it sleeps: declared with its
/// MAC alone, it is browsed with the services it announces.
struct LearnedRecordsTests {
    static let mac = DeclaredHostTests.mac
    static let ipv4 = DeclaredHostTests.ipv4
    static let key = DeclaredHostTests.key
    /// Where its responder sends from.
    static let source = Endpoint(address: .v4(ipv4), port: 5353)
    static let hostName: DNSName = "Annas-iMac.local."
    static let screenType: DNSName = "_rfb._tcp.local."
    static let screen: DNSName = "Anna's iMac._rfb._tcp.local."
    static let smbType: DNSName = "_smb._tcp.local."
    static let smb: DNSName = "Anna's iMac._smb._tcp.local."

    /// Declared with its MAC alone: its address and its records are learned.
    static func declaration(
        records: DeclaredHost.RecordSource = .learn, hostName: String? = nil, services: [DeclaredHost.Service] = []
    ) -> DeclaredHost {
        DeclaredHost(
            name: "imac", interface: Harness.interface, mac: mac, learnsAddresses: true, hostName: hostName,
            services: services, recordSource: records)
    }

    static func harness(
        _ declaration: DeclaredHost = declaration(), others: [DeclaredHost] = [], recordLimit: Int = 1_000
    ) -> Harness {
        var configuration = CoreConfiguration(maximumRecordsPerOwner: recordLimit)
        configuration.declaredHosts = [declaration] + others
        var harness = Harness(configuration: configuration)
        harness.log += harness.core.watchDeclaredHosts(now: harness.now)
        return harness
    }

    /// Its address record and reverse mapping, as a Mac announces them.
    static let addressRecords = [
        DNSRecord(name: hostName, ttl: 120, cacheFlush: true, rdata: .a(ipv4)),
        DNSRecord(name: ReverseMapping.name(of: .v4(ipv4)), ttl: 120, cacheFlush: true, rdata: .ptr(hostName)),
    ]

    /// A service of the host: the enumeration PTR, the browse PTR, SRV and TXT.
    static func service(_ instance: DNSName, port: UInt16, target: DNSName = hostName) -> [DNSRecord] {
        ServiceRecords.service(
            instance: instance, type: instance.droppingFirstLabels(1), port: port, target: target,
            txt: try! TXTData(["txtvers=1"]))
    }

    /// Everything it announces when it wakes: its address, Screen Sharing on 5900 and file sharing on 445.
    static let announcement = addressRecords + service(screen, port: 5900) + service(smb, port: 445)

    /// A response carrying `answers` (and `additionals`).
    static func response(_ answers: [DNSRecord], additionals: [DNSRecord] = []) -> [UInt8] {
        try! DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: answers,
            additionals: additionals
        ).encoded()
    }

    /// The same records with TTL 0: goodbyes.
    static func goodbyes(_ records: [DNSRecord]) -> [DNSRecord] {
        records.map { record in
            var goodbye = record
            goodbye.ttl = 0
            return goodbye
        }
    }

    /// The shared records of its announcement (its PTRs other than reverse mappings): what a Mac says goodbye to
    /// as it falls asleep without a proxy (mDNS.c `SendSleepGoodbyes`).
    static var sharedRecords: [DNSRecord] { announcement.filter { !$0.cacheFlush } }

    /// `records` sent by the host from its own MAC.
    @discardableResult
    static func announce(_ records: [DNSRecord], _ harness: inout Harness) -> [Action] {
        harness.mdns(response(records), from: source, mac: mac)
    }

    /// What a unicast query for `name` and `type` is answered with, within a second.
    static func answers(_ name: DNSName, _ type: DNSType, _ harness: inout Harness) -> [DNSRecord] {
        let asked = harness.mdns(Query.bytes(name, type, unicast: true))
        return (asked + harness.run(until: harness.now + .seconds(1))).sentMessages.flatMap(\.answers)
            .filter { $0.type == type && $0.name.caseInsensitiveEquals(name) }
    }

    static func learned(_ harness: Harness) -> [DNSRecord] {
        harness.core.declared[key]?.records.records ?? []
    }

    @Test func whatItAnnouncesIsAnsweredWhileItSleepsAndNotWhileItIsAwake() throws {
        var harness = Self.harness()
        Self.announce(Self.announcement, &harness)
        #expect(harness.core.declaredHosts.first?.learnedRecordCount == Self.announcement.count)
        #expect(harness.core.declaredHosts.first?.addresses == [.v4(Self.ipv4)], "its address is learned")
        #expect(Self.answers(Self.screenType, .ptr, &harness).isEmpty, "awake: it answers for itself")

        let start = harness.now
        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        let owner = try #require(harness.owner(Self.mac))
        #expect(owner.records.count == Self.announcement.count, "its reverse mapping once, and the rest")
        let takeover = try #require(harness.log.events.first { $0.kind == .asleep })
        #expect(takeover.detail.contains("learned from its announcements"), "\(takeover.detail)")
        // Its services are announced again after the take-over, for the browsers that saw it go.
        let announced = harness.log.sentMessages.flatMap(\.answers)
        #expect(announced.contains { $0.name == Self.screenType && $0.rdata == .ptr(Self.screen) && $0.ttl == 4500 })
        #expect(harness.now - start < .seconds(30))

        // Answered as sent: the instance, its SRV with its TTL and cache-flush bit, its address.
        #expect(Self.answers(Self.screenType, .ptr, &harness).map(\.rdata) == [.ptr(Self.screen)])
        let srv = try #require(Self.answers(Self.screen, .srv, &harness).first)
        #expect(srv.rdata == .srv(SRVData(port: 5900, target: Self.hostName)) && srv.ttl == 120 && srv.cacheFlush)
        #expect(Self.answers(Self.hostName, .a, &harness).map(\.rdata) == [.a(Self.ipv4)])
        let enumeration = Self.answers(ServiceRecords.serviceEnumeration, .ptr, &harness).map(\.rdata)
        #expect(Set(enumeration) == [.ptr(Self.screenType), .ptr(Self.smbType)])
    }

    @Test func theGoodbyesItSaysAsItFallsAsleepKeepTheirRecords() throws {
        var harness = Self.harness()
        Self.announce(Self.announcement, &harness)
        harness.run(until: harness.now + .seconds(2))
        Self.announce(Self.goodbyes(Self.sharedRecords), &harness)
        #expect(harness.core.declared[Self.key]?.records.withdrawn.count == Self.sharedRecords.count)
        // The last frames of its way down, within the grace, take nothing back.
        harness.run(until: harness.now + .seconds(2))
        harness.frame(DeclaredHostTests.arpFromHost())
        #expect(Self.learned(harness).count == Self.announcement.count)

        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        #expect(harness.core.declared[Self.key]?.records.withdrawn.isEmpty == true, "kept: it fell asleep")
        #expect(Set(Self.answers(Self.screenType, .ptr, &harness).map(\.rdata)) == [.ptr(Self.screen)])
        #expect(Self.answers(Self.smbType, .ptr, &harness).map(\.rdata) == [.ptr(Self.smb)])

        // Back, and asleep again: what it said goodbye to the first time is still its own.
        harness.frame(DeclaredHostTests.arpFromHost())
        #expect(harness.owner(Self.mac) == nil)
        #expect(Self.learned(harness).count == Self.announcement.count)
    }

    @Test func aGoodbyeWhileItStaysAwakeRemovesTheRecord() throws {
        var harness = Self.harness()
        Self.announce(Self.announcement, &harness)
        harness.run(until: harness.now + .seconds(2))
        let screenPTR = Self.service(Self.screen, port: 5900)[1]
        Self.announce(Self.goodbyes([screenPTR]), &harness)
        // Still talking after the grace: the goodbye stands.
        harness.run(until: harness.now + DeclaredWatch.goodbyeGrace + .seconds(1))
        let actions = harness.frame(DeclaredHostTests.arpFromHost())
        #expect(actions.logLines.contains { $0.1.contains("said goodbye to 1 records and is still awake") })
        #expect(!Self.learned(harness).contains(screenPTR))
        #expect(Self.learned(harness).count == Self.announcement.count - 1)

        // A goodbye it takes back by sending the record again is no goodbye.
        let smbPTR = Self.service(Self.smb, port: 445)[1]
        Self.announce(Self.goodbyes([smbPTR]), &harness)
        Self.announce([smbPTR], &harness)
        harness.run(until: harness.now + DeclaredWatch.goodbyeGrace + .seconds(1))
        harness.frame(DeclaredHostTests.arpFromHost())
        #expect(Self.learned(harness).contains(smbPTR))

        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        #expect(Self.answers(Self.screenType, .ptr, &harness).isEmpty)
        #expect(Self.answers(Self.smbType, .ptr, &harness).map(\.rdata) == [.ptr(Self.smb)])
    }

    /// A step of the wall clock moves the time of a goodbye with everything else: it does not make it stand.
    @Test func aClockStepDoesNotMakeAGoodbyeStand() {
        var harness = Self.harness()
        Self.announce(Self.announcement, &harness)
        Self.announce(Self.goodbyes(Self.sharedRecords), &harness)
        harness.log += harness.core.clockStepped(by: .seconds(3_600))
        harness.now = harness.now + .seconds(3_601)
        harness.frame(DeclaredHostTests.arpFromHost())
        #expect(Self.learned(harness).count == Self.announcement.count)
        #expect(harness.core.declared[Self.key]?.records.withdrawn.count == Self.sharedRecords.count)
    }

    /// Held, learned records are probed and defended as any held record (`Conflicts.swift`): another machine that
    /// answers the host's name with other data puts the record back into silent probing, unanswered meanwhile.
    @Test func anotherMachineAnsweringALearnedNameStopsItsAnswersAsForAnyHeldRecord() throws {
        var harness = Self.harness()
        Self.announce(Self.announcement, &harness)
        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        #expect(Self.answers(Self.hostName, .a, &harness).map(\.rdata) == [.a(Self.ipv4)])
        let other = DNSRecord(name: Self.hostName, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 99)))
        let actions = harness.mdns(
            Self.response([other]), from: Endpoint(address: .v4(IPv4Address(10, 77, 0, 99)), port: 5353),
            mac: MACAddress(0x02, 0x42, 0, 0, 0, 9))
        #expect(actions.logLines.contains { $0.1.contains("probing it again") }, "\(actions.logLines)")
        #expect(harness.mdns(Query.bytes(Self.hostName, .a, unicast: true)).sentMessages.isEmpty)
        #expect(harness.owner(Self.mac) != nil, "its other records are still answered")
    }

    @Test func aSYNToALearnedServicePortWakesItAndToAnotherPortDoesNot() throws {
        var harness = Self.harness()
        Self.announce(Self.announcement, &harness)
        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        #expect(harness.frame(WakePolicyTests.syn(port: 8080, to: Self.ipv4)).events.isEmpty)
        let actions = harness.frame(WakePolicyTests.syn(port: 5900, to: Self.ipv4))
        let wake = try #require(actions.events.first { $0.kind == .wake })
        #expect(wake.detail.contains("Anna's iMac"), "\(wake.detail)")
        let magic = DeclaredHostTests.parsed(actions.injectedFrames).compactMap(\.magicPacket)
        #expect(magic.first?.target == Self.mac)
    }

    @Test func whatItSendsBeyondTheRecordLimitIsNotKeptAndIsLoggedOnceAMinute() throws {
        let limit = 10
        var harness = Self.harness(recordLimit: limit)
        var notKept: [String] = []
        // A new service every 5 s for 70 s: it never falls silent long enough to be asked.
        for round in 0..<15 {
            let instance = try DNSName(labels: ["Share \(round)", "_smb", "_tcp", "local"])
            let actions = Self.announce(Self.addressRecords + Self.service(instance, port: 445), &harness)
            notKept += actions.logLines.map(\.1).filter { $0.contains("not kept") }
            harness.run(until: harness.now + .seconds(5))
        }
        #expect(Self.learned(harness).count == limit)
        #expect(notKept.count == 2, "\(notKept)")
        #expect(notKept.first?.contains("the limit") == true, "\(notKept)")

        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        let owner = try #require(harness.owner(Self.mac))
        #expect(owner.records.count == limit)
    }

    @Test func recordsFromAnotherMACOrInAQueryAreNotLearned() throws {
        var harness = Self.harness()
        // Another machine answering with the host's records (a cache, a forger) teaches nothing.
        let other = MACAddress(0x02, 0x42, 0, 0, 0, 9)
        harness.mdns(
            Self.response(Self.announcement), from: Endpoint(address: .v4(IPv4Address(10, 77, 0, 30)), port: 5353),
            mac: other)
        #expect(Self.learned(harness).isEmpty)
        // Nor do the known answers of the host's own queries: they are what it has cached of others.
        let query = Query.bytes([DNSQuestion(name: Self.screenType, type: .ptr)], knownAnswers: Self.announcement)
        harness.mdns(query, from: Self.source, mac: Self.mac)
        #expect(Self.learned(harness).isEmpty)
        // Nor does its reply to a legacy querier, which repeats the question and caps the TTLs at 10 s.
        let legacy = try DNSMessage(
            id: 0x1234, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
            questions: [DNSQuestion(name: Self.hostName, type: .a)],
            answers: [DNSRecord(name: Self.hostName, ttl: 10, rdata: .a(Self.ipv4))]
        ).encoded()
        harness.mdns(legacy, from: Self.source, to: .v4(IPv4Address(10, 77, 0, 3)), mac: Self.mac)
        #expect(Self.learned(harness).isEmpty)
        // Its own response, in its answers and additional records, does.
        harness.mdns(
            Self.response(Self.addressRecords, additionals: Self.service(Self.smb, port: 445)), from: Self.source,
            mac: Self.mac)
        #expect(Self.learned(harness).count == Self.addressRecords.count + 4)

        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        #expect(harness.owner(Self.mac)?.records.contains { $0.record.name == Self.screen } == false)
    }

    @Test func aHostWhoseRecordsAreDeclaredLearnsNothing() throws {
        var harness = Self.harness(Self.declaration(records: .declared))
        Self.announce(Self.announcement, &harness)
        #expect(harness.core.declaredHosts.first?.learnedRecordCount == 0)
        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        let owner = try #require(harness.owner(Self.mac))
        #expect(owner.records.map(\.record.type) == [.ptr], "its reverse mapping alone: \(owner.records)")
        #expect(harness.log.events.first { $0.kind == .asleep }?.detail.contains("learned") == false)
        #expect(harness.frame(WakePolicyTests.syn(port: 5900, to: Self.ipv4)).events.isEmpty)
    }

    @Test func aDeclaredRecordOverridesALearnedOneOfItsNameAndType() throws {
        let declaration = Self.declaration(
            hostName: "iMac", services: [DeclaredHost.Service(name: "Anna's iMac", type: "_rfb._tcp", port: 5901)])
        var harness = Self.harness(declaration)
        Self.announce(Self.announcement, &harness)
        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        // The declared service is the one answered under its instance name, and its port wakes; the learned port
        // of that instance is not answered and wakes nothing.
        let srv = Self.answers(Self.screen, .srv, &harness).map(\.rdata)
        #expect(srv == [.srv(SRVData(port: 5901, target: "iMac.local."))], "\(srv)")
        #expect(Self.answers(Self.screenType, .ptr, &harness).map(\.rdata) == [.ptr(Self.screen)], "once")
        #expect(harness.frame(WakePolicyTests.syn(port: 5900, to: Self.ipv4)).events.isEmpty)
        // Its reverse mapping names the declared host name; what the declaration does not name is added.
        let reverse = Self.answers(ReverseMapping.name(of: .v4(Self.ipv4)), .ptr, &harness).map(\.rdata)
        #expect(reverse == [.ptr("iMac.local.")])
        #expect(Self.answers(Self.smbType, .ptr, &harness).map(\.rdata) == [.ptr(Self.smb)])
        #expect(Self.answers(Self.hostName, .a, &harness).map(\.rdata) == [.a(Self.ipv4)])
        #expect(harness.frame(WakePolicyTests.syn(port: 5901, to: Self.ipv4)).events.map(\.kind) == [.wake])
    }

    @Test func namesAndAddressesThatAreNotItsOwnAreRefusedAndLoggedOnceAMinute() throws {
        let nas = DeclaredHost(
            name: "nas", interface: Harness.interface, mac: MACAddress(0x00, 0x11, 0x32, 0xAA, 0xBB, 0xCC),
            addresses: [.v4(IPv4Address(10, 77, 0, 50))], hostName: "NAS")
        var harness = Self.harness(others: [nas])
        // Another host, registered and held, owns Other.local and 10.77.0.40.
        harness.register(Update.bytes(records: Update.host("Other", ipv4: IPv4Address(10, 77, 0, 40))))
        #expect(harness.owner(Update.mac) != nil)
        let refused: [DNSRecord] =
            [
                DNSRecord(name: "Other.local.", ttl: 120, cacheFlush: true, rdata: .a(Self.ipv4)),
                DNSRecord(name: "NAS.local.", ttl: 120, cacheFlush: true, rdata: .a(Self.ipv4)),
                DNSRecord(name: Self.hostName, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(192, 0, 2, 9))),
                DNSRecord(name: Self.hostName, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 40))),
            ] + Self.service(Self.screen, port: 5900, target: "Other.local.").filter { $0.type == .srv }
        let actions = Self.announce(Self.announcement + refused, &harness)
        #expect(Set(Self.learned(harness)) == Set(Self.announcement))
        let lines = actions.logLines.filter { $0.1.contains("not kept") }
        #expect(lines.count == 1 && lines[0].1.contains("sent 5 records"), "\(lines)")
        #expect(lines.first?.1.contains("Other.local. A is held for \(Update.mac)") == true, "\(lines)")
        // Sent again within the minute: not logged again.
        harness.run(until: harness.now + .seconds(5))
        #expect(Self.announce(refused, &harness).logLines.filter { $0.1.contains("not kept") }.isEmpty)
        // A name the host announces is refused to the other declared host in turn.
        harness.mdns(
            Self.response([
                DNSRecord(name: Self.hostName, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 50)))
            ]),
            from: Endpoint(address: .v4(IPv4Address(10, 77, 0, 50)), port: 5353), mac: nas.mac)
        #expect(harness.core.declared[nas.key]?.records.isEmpty == true)
    }

    /// The host name another machine on the link announces as its own (an address record for the address it sends
    /// from), sent from the host's MAC (by a forger, say, before that machine was heard): it is learned, as the
    /// proxy cannot tell, but never held and answered while the host sleeps, nor pointed at by its reverse mapping
    /// or its services; the take-over says what it left out. The proxy never answers for a name another awake
    /// machine answers for.
    @Test func aHostNameAnotherMachineAnnouncesIsNeverHeld() throws {
        var harness = Self.harness()
        let stolen: DNSName = "waker.local."
        let forged =
            [DNSRecord(name: stolen, ttl: 120, cacheFlush: true, rdata: .a(Self.ipv4))]
            + Self.service("Stolen._smb._tcp.local.", port: 445, target: stolen)
        Self.announce(forged + Self.announcement, &harness)
        let waker = IPv4Address(10, 77, 0, 3)
        let wakerMAC = MACAddress(0x02, 0x77, 0, 0, 0, 3)
        harness.mdns(
            Self.response([DNSRecord(name: stolen, ttl: 120, cacheFlush: true, rdata: .a(waker))]),
            from: Endpoint(address: .v4(waker), port: 5353), mac: wakerMAC)

        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        let held = try #require(harness.owner(Self.mac)).records.map(\.record)
        #expect(!held.contains { $0.name.caseInsensitiveEquals(stolen) }, "\(held)")
        #expect(!held.contains { $0.rdata == .srv(SRVData(port: 445, target: stolen)) }, "\(held)")
        #expect(!held.contains { $0.rdata == .ptr(stolen) }, "\(held)")
        #expect(held.contains { $0.rdata == .ptr(Self.hostName) }, "its reverse mapping names its own: \(held)")
        #expect(Self.answers(stolen, .a, &harness).isEmpty)
        #expect(Self.answers(Self.hostName, .a, &harness).map(\.rdata) == [.a(Self.ipv4)])
        let takeover = try #require(harness.log.events.first { $0.kind == .asleep })
        #expect(takeover.detail.contains("waker.local. A is the host name \(wakerMAC) announces"), "\(takeover.detail)")
    }

    @Test func aUniqueRecordSentAgainFlushesItsOlderNamesakes() {
        var harness = Self.harness()
        Self.announce(Self.announcement, &harness)
        harness.run(until: harness.now + .seconds(3))
        // Its address changed: the new address record, with cache-flush, replaces the old one.
        let moved = IPv4Address(10, 77, 0, 21)
        Self.announce([DNSRecord(name: Self.hostName, ttl: 120, cacheFlush: true, rdata: .a(moved))], &harness)
        let addresses = Self.learned(harness).filter { $0.name == Self.hostName }.map(\.rdata)
        #expect(addresses == [.a(moved)])
        // Records sent together all stay: two addresses in one announcement.
        Self.announce(
            [
                DNSRecord(name: Self.hostName, ttl: 120, cacheFlush: true, rdata: .a(moved)),
                DNSRecord(name: Self.hostName, ttl: 120, cacheFlush: true, rdata: .a(Self.ipv4)),
            ], &harness)
        #expect(Self.learned(harness).filter { $0.name == Self.hostName }.count == 2)
    }
}
