import DNSWire
import NetworkAddresses
import SleepProxyClientCore
import Testing

/// Learning this host's records from its responder's answers, as avahi-daemon sends them.
@Suite struct HostRecordsTests {
    static let own: [IPAddress] = [.v4(IPv4Address(10, 77, 0, 2)), .v6(IPv6Address("fe80::77:ff:fe00:2")!)]
    static let host: DNSName = "sleeper.local."
    static let ssh: DNSName = "sleeper SSH._ssh._tcp.local."
    static let other: DNSName = "waker SSH._ssh._tcp.local."

    static func response(_ records: [DNSRecord], additionals: [DNSRecord] = []) -> DNSMessage {
        DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records,
            additionals: additionals)
    }

    /// What avahi-daemon on `sleeper` answers to the client's questions, in its record classes and TTLs.
    static var avahiAnswers: [DNSMessage] {
        [
            response([DNSRecord(name: "2.0.77.10.in-addr.arpa.", ttl: 120, cacheFlush: true, rdata: .ptr(host))]),
            response([
                DNSRecord(name: HostRecords.serviceTypes, ttl: 4500, rdata: .ptr("_ssh._tcp.local.")),
                DNSRecord(name: HostRecords.serviceTypes, ttl: 4500, rdata: .ptr("_workstation._tcp.local.")),
            ]),
            response(
                [DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(ssh))],
                additionals: [
                    DNSRecord(name: ssh, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: host))),
                    DNSRecord(name: ssh, ttl: 4500, cacheFlush: true, rdata: .txt(try! TXTData([]))),
                    DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2))),
                ]),
            response([
                DNSRecord(
                    name: "_workstation._tcp.local.", ttl: 4500,
                    rdata: .ptr("sleeper [02:77:00:00:00:02]._workstation._tcp.local."))
            ]),
            response([
                DNSRecord(
                    name: "sleeper [02:77:00:00:00:02]._workstation._tcp.local.", ttl: 120, cacheFlush: true,
                    rdata: .srv(SRVData(port: 9, target: host)))
            ]),
        ]
    }

    /// The records come in the order a Mac's list has them, with the cache-flush bits and TTLs of the answers.
    @Test func ownAnswersGiveTheRecordsInAMacsOrderWithTheirClassesAndTTLs() throws {
        var learner = HostRecords(addresses: Self.own, fallbackHostName: "wrong.local.")
        for message in Self.avahiAnswers {
            let taken = learner.received(message, from: Self.own[0])
            #expect(taken)
        }
        #expect(learner.hostName == Self.host, "the reverse mapping names the host, not the fallback")
        #expect(learner.services == [Self.ssh], "port 9 is a placeholder, not a service")
        let records = learner.records
        // ssh (TXT, enumeration, type PTR, SRV), the workstation placeholder as a Mac registers its own (no TXT
        // answered), the reverse mapping, the address.
        #expect(records.map(\.type) == [.txt, .ptr, .ptr, .srv, .ptr, .ptr, .srv, .ptr, .a])
        #expect(records.first?.name == Self.ssh)
        #expect(records.filter(\.cacheFlush).map(\.type) == [.txt, .srv, .srv, .ptr, .a])
        #expect(records.map(\.ttl) == [4500, 4500, 4500, 120, 4500, 4500, 120, 120, 120])
        #expect(!records.contains { $0.name == HostRecords.serviceTypes && $0.rdata == .ptr("_http._tcp.local.") })
    }

    /// Another host's answers on the same link (the waker's ssh), a goodbye, and a query are not this host's.
    @Test func answersFromOtherAddressesGoodbyesAndQueriesAreLeftOut() throws {
        var learner = HostRecords(addresses: Self.own, fallbackHostName: Self.host)
        let fromWaker = learner.received(
            Self.response([DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(Self.other))]),
            from: .v4(IPv4Address(10, 77, 0, 3)))
        #expect(!fromWaker)
        let query = DNSMessage(
            id: 0, flags: DNSFlags(response: false, opcode: .query),
            answers: [DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(Self.other))])
        let fromQuery = learner.received(query, from: Self.own[0])
        #expect(!fromQuery)
        for message in Self.avahiAnswers { learner.received(message, from: Self.own[1]) }
        learner.received(
            Self.response([DNSRecord(name: "_ssh._tcp.local.", ttl: 0, rdata: .ptr("gone._ssh._tcp.local."))]),
            from: Self.own[0])
        let names = learner.records.compactMap { record -> DNSName? in
            if case .ptr(let target) = record.rdata { target } else { nil }
        }
        #expect(!names.contains(Self.other) && !names.contains("gone._ssh._tcp.local."))
    }

    /// A responder without reverse mappings (systemd-resolved): the client adds them for the addresses the host
    /// announces on this interface, upper-case nibbles for IPv6 as a Mac writes them, unique, with the address
    /// record's TTL. An address of another interface is not registered here.
    @Test func missingReverseMappingsAreAddedForThisInterfacesAddresses() throws {
        let ula = IPv6Address("fd77::a2")!
        var learner = HostRecords(addresses: [Self.own[0], .v6(ula)], fallbackHostName: Self.host)
        learner.received(
            Self.response([
                DNSRecord(name: HostRecords.serviceTypes, ttl: 4500, rdata: .ptr("_ssh._tcp.local.")),
                DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(Self.ssh)),
                DNSRecord(
                    name: Self.ssh, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: Self.host))),
                DNSRecord(name: Self.host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2))),
                DNSRecord(name: Self.host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(192, 168, 9, 9))),
                DNSRecord(name: Self.host, ttl: 120, cacheFlush: true, rdata: .aaaa(ula)),
            ]), from: Self.own[0])
        #expect(learner.hostName == Self.host, "the fallback, with no reverse mapping published")
        let reverse = learner.records.filter { $0.type == .ptr && $0.cacheFlush }
        #expect(
            reverse.map(\.name) == [
                "2.0.77.10.in-addr.arpa.",
                "2.A.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.7.7.D.F.ip6.arpa.",
            ])
        #expect(reverse.allSatisfy { $0.ttl == 120 && $0.rdata == .ptr(Self.host) })
        #expect(!learner.records.contains { $0.rdata == .a(IPv4Address(192, 168, 9, 9)) })
        #expect(HostRecords.reverseName(of: .v6(ula)).labels.first == Array("2".utf8))
    }

    /// `answers` as a responder sends them to a one-shot query: every record in the answer section, the TTL cut to
    /// 10 s, no cache-flush bit (RFC 6762 section 6.7; avahi-daemon's `avahi_server_generate_response`).
    static func legacyUnicast(_ answers: [DNSMessage]) -> [DNSMessage] {
        answers.map { message in
            var records = message.answers + message.additionals
            for index in records.indices {
                records[index].ttl = min(records[index].ttl, 10)
                records[index].cacheFlush = false
            }
            return DNSMessage(
                id: 0x1234, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records)
        }
    }

    /// Only legacy-unicast answers, as when a proxy holding the host (or a cache) keeps the host's responder from
    /// answering by multicast: the same records, with the TTLs and cache-flush bits avahi-daemon publishes them
    /// with (120 s for the address, SRV and reverse mapping, 4500 s for the rest; browsing PTRs shared).
    @Test func legacyUnicastAnswersGiveTheRecordsAsPublished() throws {
        var multicast = HostRecords(addresses: Self.own, fallbackHostName: nil)
        for message in Self.avahiAnswers { multicast.received(message, from: Self.own[0]) }
        var oneShot = HostRecords(addresses: Self.own, fallbackHostName: nil)
        for message in Self.legacyUnicast(Self.avahiAnswers) {
            let taken = oneShot.received(message, from: Self.own[0], via: .legacyUnicast)
            #expect(taken)
        }
        #expect(oneShot.hostName == Self.host && oneShot.services == [Self.ssh])
        #expect(oneShot.records == multicast.records)
        #expect(oneShot.records.allSatisfy { $0.ttl > 10 })
    }

    /// A multicast answer's TTL and cache-flush bit win over the rules, whichever comes first: a responder that
    /// publishes other TTLs than RFC 6762 suggests (systemd-resolved gives 120 s to every record) keeps them.
    @Test func multicastAnswersKeepTheirTTLsOverLegacyUnicastOnes() throws {
        let published = Self.response([
            DNSRecord(name: Self.ssh, ttl: 120, cacheFlush: true, rdata: .txt(try TXTData([])))
        ])
        let legacy = Self.legacyUnicast([published])[0]
        // The instance, listed under its type with an SRV: what makes `records` take its TXT.
        let listing = [
            Self.response([DNSRecord(name: HostRecords.serviceTypes, ttl: 4500, rdata: .ptr("_ssh._tcp.local."))]),
            Self.response([DNSRecord(name: "_ssh._tcp.local.", ttl: 4500, rdata: .ptr(Self.ssh))]),
            Self.response([
                DNSRecord(name: Self.ssh, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 22, target: Self.host)))
            ]),
        ]
        let orders: [([DNSMessage], [HostRecords.AnswerPath], UInt32)] = [
            ([legacy, published, legacy], [.legacyUnicast, .multicast, .legacyUnicast], 120),
            ([published, legacy], [.multicast, .legacyUnicast], 120),
            ([legacy], [.legacyUnicast], 4500),
        ]
        for (messages, paths, ttl) in orders {
            var learner = HostRecords(addresses: Self.own, fallbackHostName: Self.host)
            for message in listing { learner.received(message, from: Self.own[0]) }
            for (message, path) in zip(messages, paths) { learner.received(message, from: Self.own[0], via: path) }
            let txt = learner.records.filter { $0.type == .txt }
            #expect(txt.count == 1 && txt.first?.ttl == ttl && txt.first?.cacheFlush == true, "\(paths): \(txt)")
        }
    }

    /// The rules for a record known only from a legacy-unicast answer, by kind.
    @Test(arguments: [
        (DNSRecord(name: host, ttl: 10, rdata: .a(IPv4Address(10, 77, 0, 2))), UInt32(120), true),
        (DNSRecord(name: host, ttl: 10, rdata: .aaaa(IPv6Address("fd77::2")!)), 120, true),
        (DNSRecord(name: "2.0.77.10.in-addr.arpa.", ttl: 10, rdata: .ptr(host)), 120, true),
        (DNSRecord(name: ssh, ttl: 10, rdata: .srv(SRVData(port: 22, target: host))), 120, true),
        (DNSRecord(name: ssh, ttl: 10, rdata: .txt(try! TXTData([]))), 4500, true),
        (DNSRecord(name: "_ssh._tcp.local.", ttl: 10, rdata: .ptr(ssh)), 4500, false),
        (DNSRecord(name: HostRecords.serviceTypes, ttl: 10, rdata: .ptr("_ssh._tcp.local.")), 4500, false),
    ])
    func standardizedTTLsAndUniqueness(record: DNSRecord, ttl: UInt32, unique: Bool) {
        let standardized = HostRecords.standardized(record)
        #expect(standardized.ttl == ttl && standardized.cacheFlush == unique)
        #expect(standardized.name == record.name && standardized.rdata == record.rdata)
    }

    /// Whether a responder on this host answered at all: what the message of "nothing to register" turns on.
    @Test func aResponderThatAnsweredIsKnownEvenWithoutServices() throws {
        var learner = HostRecords(addresses: Self.own, fallbackHostName: Self.host)
        learner.received(Self.response([]), from: .v4(IPv4Address(10, 77, 0, 1)), via: .legacyUnicast)
        #expect(!learner.responderAnswered)
        learner.received(
            Self.response([DNSRecord(name: Self.host, ttl: 10, rdata: .a(IPv4Address(10, 77, 0, 2)))]),
            from: Self.own[0], via: .legacyUnicast)
        #expect(learner.responderAnswered && learner.services.isEmpty)
    }

    /// What to ask: everything at first; nothing that has been answered.
    @Test func questionsShrinkAsAnswersArrive() throws {
        var learner = HostRecords(addresses: Self.own, fallbackHostName: nil)
        let first = learner.questions
        #expect(first.contains { $0.name == HostRecords.serviceTypes && $0.type == .ptr })
        #expect(first.contains { $0.name == "2.0.77.10.in-addr.arpa." && $0.type == .ptr })
        #expect(!first.contains { $0.type == .a }, "no host name yet")
        for message in Self.avahiAnswers { learner.received(message, from: Self.own[0]) }
        let later = learner.questions
        #expect(!later.contains { $0.name == HostRecords.serviceTypes })
        #expect(!later.contains { $0.name == Self.ssh })
        #expect(later.contains { $0.name == Self.host && $0.type == .aaaa }, "the IPv6 address has no AAAA yet")
        #expect(later.allSatisfy { $0.unicastResponse == false }, "multicast answers keep their real TTLs")
    }
}

/// The proxies on a link, from browse answers.
@Suite struct ProxyDirectoryTests {
    static func response(_ answers: [DNSRecord], _ additionals: [DNSRecord] = []) -> DNSMessage {
        DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: answers,
            additionals: additionals)
    }

    @Test func browseAnswersGiveProxiesInTheOrderSeenWithTheirTargets() throws {
        let homeServer: DNSName = "20-30-50-73.1 homeserver._sleep-proxy._udp.local."
        let appleTV: DNSName = "10-34-10-70 Living Room._sleep-proxy._udp.local."
        var directory = ProxyDirectory()
        directory.received(
            Self.response(
                [DNSRecord(name: ProxyDirectory.serviceType, ttl: 4500, rdata: .ptr(homeServer))],
                [
                    DNSRecord(
                        name: homeServer, ttl: 120, cacheFlush: true,
                        rdata: .srv(SRVData(port: 5354, target: "hs.local."))),
                    DNSRecord(name: "hs.local.", ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fe80::1")!)),
                    DNSRecord(name: "hs.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 0, 0, 1))),
                ]))
        directory.received(
            Self.response([DNSRecord(name: ProxyDirectory.serviceType, ttl: 4500, rdata: .ptr(appleTV))]))
        #expect(directory.proxies.map(\.instance) == [homeServer, appleTV])
        #expect(
            directory.target(of: homeServer)
                == ProxyDirectory.Target(address: .v4(IPv4Address(10, 0, 0, 1)), port: 5354))
        #expect(directory.target(of: appleTV) == nil)
        #expect(directory.questions(about: directory.proxies) == [DNSQuestion(name: appleTV, type: .srv)])

        // Its SRV names a target with only a link-local IPv6 address: that is where the registration goes.
        directory.received(
            Self.response([
                DNSRecord(
                    name: appleTV, ttl: 120, cacheFlush: true, rdata: .srv(SRVData(port: 57143, target: "tv.local."))),
                DNSRecord(name: "tv.local.", ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fd00::5")!)),
                DNSRecord(name: "tv.local.", ttl: 120, cacheFlush: true, rdata: .aaaa(IPv6Address("fe80::5")!)),
            ]))
        #expect(
            directory.target(of: appleTV) == ProxyDirectory.Target(address: .v6(IPv6Address("fe80::5")!), port: 57143))

        // A goodbye for a proxy's PTR: it is gone.
        directory.received(
            Self.response([DNSRecord(name: ProxyDirectory.serviceType, ttl: 0, rdata: .ptr(homeServer))]))
        #expect(directory.proxies.map(\.instance) == [appleTV])
    }
}
