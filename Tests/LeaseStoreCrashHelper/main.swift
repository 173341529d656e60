// Applies batches to a lease store until it is killed, printing "committed K" after batch K is applied.
// The crash test in LeaseStoreTests runs it, SIGKILLs it mid-stream and checks what the reopened store holds.
//
// Usage: lease-store-crash-helper DIRECTORY
// Batch K saves 8 owners on eth0 with primary MACs 02:cc:K2:K1:K0:J (J = 0...7, K big-endian), each with 25
// records whose first is the A record `crash-K-J.local.`, and appends one event with the detail "batch K".
import DNSWire
import Glibc
import LeaseStore
import NetworkAddresses
import SleepProxyCore

/// Writes a line straight to a file descriptor: no stdio buffer, so a line is out before the next batch starts.
func writeLine(_ line: String, to descriptor: Int32) {
    var line = line + "\n"
    line.withUTF8 { bytes in _ = write(descriptor, bytes.baseAddress, bytes.count) }
}

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    writeLine("usage: lease-store-crash-helper DIRECTORY", to: STDERR_FILENO)
    exit(2)
}

func batch(_ k: Int) throws -> [StoreChange] {
    let now = UnixTime(seconds: 1_700_000_000 + Int64(k))
    var changes: [StoreChange] = []
    for j in 0..<8 {
        let primary = MACAddress(
            0x02, 0xCC, UInt8(truncatingIfNeeded: k >> 16), UInt8(truncatingIfNeeded: k >> 8),
            UInt8(truncatingIfNeeded: k), UInt8(j))
        let host = try DNSName(labels: ["crash-\(k)-\(j)", "local"])
        var records = [DNSRecord(name: host, ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 1, UInt8(j), 1)))]
        for s in 0..<24 {
            let instance = try DNSName(labels: ["Service \(s) of \(k)-\(j)", "_http", "_tcp", "local"])
            records.append(
                DNSRecord(
                    name: instance, ttl: 120, cacheFlush: true,
                    rdata: .srv(SRVData(port: UInt16(8000 + s), target: host))))
        }
        let held = records.map {
            HeldRecord(record: $0, sequence: UInt8(k % 256), registeredAt: now, expiresAt: now + .seconds(7200))
        }
        changes.append(
            .saveOwner(
                Owner(
                    key: OwnerKey(interface: "eth0", primaryMAC: primary), wakeMAC: primary, sequence: UInt8(k % 256),
                    registeredAt: now, updatedAt: now, records: held)))
    }
    changes.append(.appendEvent(Event(time: now, kind: .registered, interface: "eth0", detail: "batch \(k)")))
    return changes
}

do {
    let store = try LeaseStore(directory: arguments[1], configuration: .init(eventHistoryLimit: 1_000_000))
    var k = 0
    while true {
        try store.apply(try batch(k))
        writeLine("committed \(k)", to: STDOUT_FILENO)
        k += 1
    }
} catch {
    writeLine("lease-store-crash-helper: \(error)", to: STDERR_FILENO)
    exit(1)
}
