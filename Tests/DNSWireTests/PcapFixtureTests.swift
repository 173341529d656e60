import DNSWire
import FixtureSupport
import NetworkAddresses
import Testing

/// The lab capture of a third-party client (awein/SleepProxyClient) registering with a Python sleep proxy.
@Suite("Lab capture: third-party registration and reply")
struct PcapFixtureTests {
    static func udpPayloads() throws -> [UDPPayload] {
        let pcap = try Fixture.pcap("spc-registration-answered.pcap")
        #expect(pcap.linkType == 1)
        return pcap.records.compactMap { UDPPayload(frame: $0.bytes) }
    }

    @Test func everyDatagramDecodesAndRoundTrips() throws {
        let payloads = try Self.udpPayloads()
        #expect(payloads.count == 18)
        for udp in payloads {
            let message = try DNSMessage(decoding: udp.payload)
            for compression in [NameCompression.all, .none, .exceptSRVTargets] {
                #expect(try DNSMessage(decoding: message.encoded(compression: compression)) == message)
            }
        }
    }

    @Test func registrationFromThirdPartyClient() throws {
        let udp = try #require(try Self.udpPayloads().first { $0.destinationPort == 3535 })
        #expect(udp.payload.count == 341)
        let message = try DNSMessage(decoding: udp.payload)
        #expect(message.flags.rawValue == 0x2800)
        #expect(message.flags.opcode == .update)
        // Zone count 1: `. SOA IN`, unlike Macs.
        #expect(message.zones == [DNSQuestion(name: .root, type: .soa, questionClass: .internet)])
        #expect(message.prerequisites.isEmpty)
        #expect(message.updates.count == 8)
        #expect(message.updates.allSatisfy { !$0.cacheFlush && $0.recordClass == .internet })
        #expect(
            message.updates.map(\.type) == [.ptr, .ptr, .a, .aaaa, .txt, .ptr, .ptr, .srv]
                || Set(message.updates.map(\.type)) == [.ptr, .a, .aaaa, .txt, .srv])
        let reverse = message.updates.filter { $0.name.hasSuffix("in-addr.arpa.") || $0.name.hasSuffix("ip6.arpa.") }
        #expect(reverse.count == 2)
        #expect(reverse.allSatisfy { $0.rdata == .ptr("sleeper.local.") && $0.ttl == 120 })
        #expect(reverse.contains { $0.name == "2.0.77.10.in-addr.arpa." })
        // Lower-case nibbles from this client.
        #expect(
            reverse.contains {
                $0.name == "2.0.0.0.0.0.e.f.f.f.0.0.7.7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.e.f.ip6.arpa."
            })
        #expect(
            message.updates.contains {
                $0.type == .txt && $0.ttl == 4500 && $0.rdata == .txt(try! TXTData(["spc=1", "u=test"]))
            })
        #expect(message.updates.contains { $0.rdata == .srv(SRVData(port: 22, target: "sleeper.local.")) })
        #expect(message.updates.contains { $0.rdata == .a(IPv4Address(10, 77, 0, 2)) })

        #expect(message.optRecords.count == 1)
        let opt = try #require(message.optRecords.first)
        #expect(opt.ednsHeader == EDNSHeader(udpPayloadSize: 4096, flags: 0x1194))
        #expect(
            opt.optData?.options == [
                .updateLease(UpdateLease(lease: 7200)),
                .owner(OwnerOption(sequence: 0, primaryMAC: MACAddress(0x02, 0x77, 0, 0, 0, 2))),
            ])
    }

    @Test func replyFromProxy() throws {
        let udp = try #require(try Self.udpPayloads().first { $0.sourcePort == 3535 })
        #expect(udp.payload.count == 36)
        let message = try DNSMessage(decoding: udp.payload)
        let request = try DNSMessage(
            decoding: #require(try Self.udpPayloads().first { $0.destinationPort == 3535 }).payload)
        #expect(message.id == request.id)
        #expect(message.flags.rawValue == 0xA800)
        #expect(message.flags.responseCode == .noError)
        #expect(message.zones.count == 1)
        #expect(message.updates.isEmpty)
        #expect(message.optRecords.first?.optData?.options == [.updateLease(UpdateLease(lease: 7200))])
        #expect(try message.encoded() == udp.payload)
    }

    @Test func proxyAdvertisementNames() throws {
        let announcements = try Self.udpPayloads().filter { $0.sourcePort == 5353 }.map {
            try DNSMessage(decoding: $0.payload)
        }
        let instance = announcements.lazy.flatMap(\.answers).first { $0.type == .srv }
        let srv = try #require(instance)
        // The instance label is one label; its space is a plain byte.
        #expect(srv.name.label(at: 0).map { Array($0) } == Array("10-34-10-70 SleepProxyServer".utf8))
        #expect(srv.name.droppingFirstLabels(1) == "_sleep-proxy._udp.local.")
        guard case .srv(let data) = srv.rdata else {
            Issue.record("SRV without SRV data")
            return
        }
        #expect(data.port == 3535)
    }
}
