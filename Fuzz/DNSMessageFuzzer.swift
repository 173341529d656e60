// libFuzzer target for the DNS decoder. Built by Fuzz/run.sh with -sanitize=fuzzer,address.
//
// Oracle: decoding never traps; whatever decodes re-encodes under every compression policy and decodes back
// to an equal message; its records moved into compact storage (as held records are) are equal and encode to the
// same bytes.
import DNSWire

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDNSMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let message = try? DNSMessage(decoding: bytes) else { return 0 }
    for compression in [NameCompression.all, .none, .exceptSRVTargets] {
        let encoded: [UInt8]
        do {
            encoded = try message.encoded(compression: compression)
        } catch {
            fatalError("decoded message does not encode: \(error)")
        }
        guard let again = try? DNSMessage(decoding: encoded), again == message else {
            fatalError("round trip changed the message under \(compression)")
        }
    }
    for section in [message.answers, message.authorities, message.additionals] {
        let compact = section.withCompactStorage()
        guard compact == section else { fatalError("compact storage changed the records") }
        for (moved, original) in zip(compact, section) {
            guard (try? moved.encodedStandalone()) == (try? original.encodedStandalone()) else {
                fatalError("compact storage changed a record's bytes")
            }
        }
    }
    if let first = message.answers.first ?? message.additionals.first {
        // A standalone record round-trips too.
        guard let standalone = try? first.encodedStandalone(), (try? DNSRecord(decodingStandalone: standalone)) == first
        else { fatalError("standalone record round trip failed") }
    }
    return 0
}
