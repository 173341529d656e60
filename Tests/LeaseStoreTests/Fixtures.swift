import CSQLite
import DNSWire
import FixtureSupport
import Foundation
import LeaseStore
import NetworkAddresses
import SleepProxyCore
import Testing

/// Runs `body` with a fresh directory under the system temporary directory and removes it afterwards.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("lease-store-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: base) }
    return try body(base.path)
}

let baseTime = UnixTime(seconds: 1_700_000_000)

func mac(_ last: UInt8, _ fifth: UInt8 = 0) -> MACAddress { MACAddress(0x02, 0x77, 0x00, 0x00, fifth, last) }

/// A Mac's registration: every record type the store must keep exactly, in mixed case, unique and shared.
func macRecords() throws -> [DNSRecord] {
    let v4 = IPv4Address(10, 77, 0, 10)
    let v6 = IPv6Address("fe80::1c2b:3aff:fe4d:5e6f")!
    let instance = try DNSName(labels: ["70-35-60-63.1 Apple TV", "_airplay", "_tcp", "local"])
    let upperReverse = DNSName(
        stringLiteral: ReverseMapping.name(of: .v6(IPv6Address("fd00::ab:cd")!)).description.uppercased())
    let owner = OwnerOption(
        sequence: 21, primaryMAC: mac(1), wakeMAC: mac(2), password: [1, 2, 3, 4, 5, 6])
    return [
        DNSRecord(name: "MacBook-Pro.local.", ttl: 120, cacheFlush: true, rdata: .a(v4)),
        DNSRecord(name: "MacBook-Pro.local.", ttl: 120, cacheFlush: true, rdata: .aaaa(v6)),
        DNSRecord(
            name: ReverseMapping.name(of: .v4(v4)), ttl: 120, cacheFlush: true, rdata: .ptr("MacBook-Pro.local.")),
        DNSRecord(
            name: ReverseMapping.name(of: .v6(v6)), ttl: 120, cacheFlush: true, rdata: .ptr("MacBook-Pro.local.")),
        DNSRecord(name: upperReverse, ttl: 120, cacheFlush: true, rdata: .ptr("macbook-pro.LOCAL.")),
        DNSRecord(name: "_airplay._tcp.local.", ttl: 4500, cacheFlush: false, rdata: .ptr(instance)),
        DNSRecord(name: "_services._dns-sd._udp.local.", ttl: 4500, rdata: .ptr("_airplay._tcp.local.")),
        DNSRecord(
            name: instance, ttl: 120, cacheFlush: true,
            rdata: .srv(SRVData(priority: 1, weight: 2, port: 7000, target: "MacBook-Pro.local."))),
        DNSRecord(name: instance, ttl: 4500, cacheFlush: true, rdata: .txt(try TXTData(["deviceid=02:77", "", "x"]))),
        DNSRecord(name: "empty-txt.local.", ttl: 0, rdata: .txt(try TXTData(strings: []))),
        DNSRecord(name: "null.local.", ttl: .max, cacheFlush: true, rdata: .null([0, 1, 2, 0xFF, 0])),
        DNSRecord(name: "MacBook-Pro.local.", ttl: 120, rdata: .hinfo(HINFOData(cpu: Array("ARM".utf8), os: []))),
        DNSRecord(
            name: "MacBook-Pro.local.", ttl: 120, cacheFlush: true,
            rdata: .nsec(NSECData(nextName: "MacBook-Pro.local.", types: [.a, .aaaa, .txt, .srv]))),
        DNSRecord(
            name: "opaque.local.", type: DNSType(65_323), recordClass: DNSClass(3), cacheFlush: true, ttl: 7,
            rdata: .opaque([0xDE, 0xAD, 0xBE, 0xEF])),
        DNSRecord(name: "opaque-empty.local.", type: DNSType(99), ttl: 1, rdata: .opaque([])),
        // An OPT-typed record with a name: its CLASS is a payload size with the top bit set, kept whole.
        DNSRecord(
            name: "Odd.Opt.local.", type: .opt, recordClass: DNSClass(0x85A0), cacheFlush: false, ttl: 0x1194,
            rdata: .opt(
                OPTData(options: [
                    .updateLease(UpdateLease(lease: 7200)), .owner(owner), .other(code: 65_001, data: [9, 8]),
                ]))),
        ClientMessage.registrationOPT(owner: nil, lease: UpdateLease(lease: 60)),
    ]
}

/// Held records with varied times: some registered before the owner's `registeredAt`, one that expires at the
/// largest instant, one at the smallest.
func held(_ records: [DNSRecord], sequence: UInt8 = 7, at time: UnixTime = baseTime) -> [HeldRecord] {
    records.enumerated().map { index, record in
        let registeredAt = UnixTime(nanoseconds: time.nanoseconds + Int64(index % 3 - 1) * 1_234_567)
        let expiresAt: UnixTime =
            switch index {
            case 1: UnixTime(nanoseconds: .max)
            case 2: UnixTime(nanoseconds: .min)
            default: registeredAt + .seconds(7200)
            }
        return HeldRecord(
            record: record, sequence: sequence &+ UInt8(index % 2), registeredAt: registeredAt, expiresAt: expiresAt)
    }
}

func makeOwner(
    interface: InterfaceName = "eth0", primary: MACAddress = mac(1), password: [UInt8]? = nil,
    source: Endpoint? = Endpoint(address: .v4(IPv4Address(10, 77, 0, 10)), port: 5353), records: [HeldRecord]
) -> Owner {
    Owner(
        key: OwnerKey(interface: interface, primaryMAC: primary), wakeMAC: mac(0xAA), password: password,
        sequence: 7, registeredAt: baseTime, updatedAt: baseTime + .milliseconds(1500), lastSource: source,
        records: records)
}

/// A small owner for tests that only count and compare owners.
func smallOwner(_ n: Int, interface: InterfaceName = "eth0") -> Owner {
    let address = IPv4Address(10, 77, UInt8(n / 250), UInt8(n % 250 + 1))
    let records = [
        DNSRecord(name: try! DNSName(labels: ["host-\(n)", "local"]), ttl: 120, cacheFlush: true, rdata: .a(address)),
        DNSRecord(
            name: ReverseMapping.name(of: .v4(address)), ttl: 120, cacheFlush: true,
            rdata: .ptr(try! DNSName(labels: ["host-\(n)", "local"]))),
    ]
    return makeOwner(
        interface: interface, primary: mac(UInt8(n % 256), UInt8(n / 256)), records: held(records, at: baseTime))
}

func makeEvent(_ n: Int, kind: Event.Kind = .registered) -> Event {
    Event(
        time: baseTime + .seconds(n), kind: kind, interface: "eth0", owner: mac(UInt8(n % 256)),
        source: Endpoint(address: .v4(IPv4Address(10, 77, 0, 10)), port: 5353), detail: "event \(n)")
}

/// Runs `body` with a connection of the test's own to the store's file in `directory`.
func withRawConnection<R>(inDirectory directory: String, _ body: (OpaquePointer?) throws -> R) throws -> R {
    var db: OpaquePointer?
    let path = directory + "/" + LeaseStore.fileName
    guard sqlite3_open(path, &db) == SQLITE_OK else {
        sqlite3_close(db)
        throw RawSQLError(message: "cannot open \(path)")
    }
    defer { sqlite3_close(db) }
    return try body(db)
}

/// Runs SQL against the store's file over a connection of the test's own, for corrupting rows or versions.
func executeRawSQL(_ sql: String, inDirectory directory: String) throws {
    try withRawConnection(inDirectory: directory) { db in
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
            defer { sqlite3_free(message) }
            throw RawSQLError(message: message.map { String(cString: $0) } ?? "unknown error")
        }
    }
}

struct RawSQLError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// The first column of every row `sql` returns, as text, over a connection of the test's own.
func rawTexts(_ sql: String, inDirectory directory: String) throws -> [String] {
    try withRawConnection(inDirectory: directory) { db in
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else {
            throw RawSQLError(message: String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(statement) }
        var texts: [String] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            texts.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "NULL")
        }
        return texts
    }
}
