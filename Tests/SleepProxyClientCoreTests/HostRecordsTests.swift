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
