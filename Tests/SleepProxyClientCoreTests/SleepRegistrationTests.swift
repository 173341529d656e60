import DNSWire
import FixtureSupport
import Foundation
import NetworkAddresses
import SleepProxyClientCore
import Testing

/// The registration messages, against the OS X 10.9 registration a Mac really sent.
@Suite struct SleepRegistrationTests {
    static let macOwner = OwnerOption(sequence: 21, primaryMAC: MACAddress(0xD4, 0x9A, 0x20, 0xDE, 0x9D, 0x38))

    /// The same records, ID, OWNER and lease give the Mac's message byte for byte: one message (it fits),
    /// header, update section with cache-flush classes and TTLs, SRV targets in full, the OPT as Apple writes it.
    @Test(arguments: ["A", "B"])
    func theMacsRegistrationComesOutByteForByte(_ source: String) throws {
        let mac = try Fixture.macRegistration(source)
        let registration = SleepRegistration(id: mac.id, records: mac.records.map(\.record), owner: Self.macOwner)
        let datagrams = try registration.datagrams()
        #expect(datagrams == [try mac.message.encoded(compression: .exceptSRVTargets)])
        let bytes = try #require(datagrams.first)
        #expect(Array(bytes[2..<4]) == [0x28, 0x00] && Array(bytes[4..<8]) == [0, 0, 0, 0])
        #expect(
            Array(bytes.suffix(31))
                == HexDump.bytes("00 0029 05A0 00001194 0014 0002 0004 00001C20 0004 0008 00 15 D49A20DE9D38"))
    }

    /// A host with 40 services does not fit in one message: several, none over 1,440 bytes of DNS data, each with
    /// its own ID (the first one given, then the next) and the same OPT, together holding every record once, in
    /// order.
    @Test func manyServicesAreSplitAcrossMessages() throws {
        let host: DNSName = "desktop.local."
        var records = [DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))]
        for n in 0..<40 {
            let type = try DNSName(labels: ["_service\(n)", "_tcp", "local"])
            let instance = try DNSName(
                labels: ["desktop service \(n)"] + type.labels.map { String(decoding: $0, as: UTF8.self) })
            records += [
                DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr(type)),
                DNSRecord(name: type, ttl: 4500, rdata: .ptr(instance)),
                DNSRecord(
                    name: instance, ttl: 120, cacheFlush: true,
                    rdata: .srv(SRVData(port: UInt16(8000 + n), target: host))),
                DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData(["path=/\(n)"]))),
            ]
        }
        let owner = OwnerOption(sequence: 7, primaryMAC: MACAddress(0x02, 0x77, 0, 0, 0, 2))
        let registration = SleepRegistration(id: 0x5151, records: records, owner: owner, lease: 3600)
        let datagrams = try registration.datagrams()
        #expect(datagrams.count > 1)
        var carried: [DNSRecord] = []
        for (index, bytes) in datagrams.enumerated() {
            #expect(bytes.count <= 12 + SleepRegistration.normalMessageData, "\(bytes.count) bytes")
            let message = try DNSMessage(decoding: bytes)
            #expect(message.id == 0x5151 + UInt16(index) && message.id == registration.messageID(index))
            #expect(message.flags.opcode == .update && message.zones.isEmpty)
            #expect(message.additionals == [registration.opt])
            carried += message.updates
        }
        #expect(carried == records)
        // Each message but the last is as full as it can be: the next record would not have fitted.
        for (index, bytes) in datagrams.dropLast().enumerated() {
            let count = try DNSMessage(decoding: bytes).updates.count
            let first = datagrams[..<index].reduce(0) { $0 + ((try? DNSMessage(decoding: $1).updates.count) ?? 0) }
            let bigger = SleepRegistration(
                id: registration.messageID(index), records: Array(records[first...(first + count)]), owner: owner,
                lease: 3600)
            #expect(try bigger.datagrams().count == 2)
        }
    }

    /// A record larger than a normal message goes alone, up to 8,940 bytes of DNS data; a larger one cannot be
    /// registered, and the error names it.
    @Test func aLargeRecordGoesAloneAndAHugeOneIsRefused() throws {
        let owner = OwnerOption(sequence: 1, primaryMAC: MACAddress(0x02, 0x77, 0, 0, 0, 2))
        let small = DNSRecord(name: "host.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 77, 0, 2)))
        let strings = (0..<12).map { _ in String(repeating: "x", count: 250) }
        let large = DNSRecord(name: "large.local.", ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData(strings)))
        let datagrams = try SleepRegistration(id: 1, records: [small, large, small], owner: owner).datagrams()
        #expect(try datagrams.map { try DNSMessage(decoding: $0).updates.count } == [1, 1, 1])
        #expect(datagrams[1].count > 12 + SleepRegistration.normalMessageData)

        let huge = DNSRecord(
            name: "huge.local.", ttl: 4500, cacheFlush: true,
            rdata: .txt(try TXTData((0..<40).map { _ in String(repeating: "y", count: 250) })))
        let error = #expect(throws: SleepRegistrationError.self) {
            try SleepRegistration(id: 1, records: [small, huge], owner: owner).datagrams()
        }
        #expect(error?.description.contains("huge.local.") == true, "\(String(describing: error))")
    }

    /// IDs go on past 0xFFFF without ever being zero.
    @Test func messageIDsWrapAroundZero() {
        let owner = OwnerOption(sequence: 1, primaryMAC: MACAddress(0x02, 0x77, 0, 0, 0, 2))
        let registration = SleepRegistration(id: 0xFFFE, records: [], owner: owner)
        #expect((0..<4).map(registration.messageID) == [0xFFFE, 0xFFFF, 1, 2])
    }
}
