// libFuzzer target for the keepalive record parser. Built by Fuzz/run.sh with -sanitize=fuzzer,address.
//
// The input is the RDATA of a NULL record named `1._keepalive._dns-sd._udp.local.`, as a Mac registers one for
// each TCP connection it wants kept alive.
//
// Oracle: parsing never traps and always answers (a NULL record under `_keepalive` is a keepalive record); a
// connection that parses is written back as a Mac writes it, and that RDATA parses to the same connection.
import DNSWire
import SleepProxyCore

let keepaliveName = try! DNSName("1._keepalive._dns-sd._udp.local.")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeepaliveRecord(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let rdata = Array(UnsafeBufferPointer(start: data, count: size))
    let record = DNSRecord(name: keepaliveName, ttl: 120, cacheFlush: true, rdata: .null(rdata))
    switch KeepaliveRecord.parse(record) {
    case nil:
        fatalError("a NULL record under _keepalive was not taken as a keepalive record")
    case .failure:
        return 0
    case .success(let connection):
        let written = KeepaliveRecord.rdata(connection)
        let again = KeepaliveRecord.parse(DNSRecord(name: keepaliveName, ttl: 120, rdata: .null(written)))
        guard again == .success(connection) else {
            fatalError(
                "\(String(decoding: written.dropFirst(), as: UTF8.self)) does not read back as the connection it was "
                    + "written from: \(String(describing: again))")
        }
        guard KeepaliveRecord.parse(KeepaliveRecord.record(connection)) == .success(connection) else {
            fatalError("the record written for a parsed connection does not read back")
        }
        return 0
    }
}
