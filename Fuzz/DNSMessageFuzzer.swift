// libFuzzer target for the DNS decoder. Built by Fuzz/run.sh with -sanitize=fuzzer,address.
//
// Oracle: decoding never traps; whatever decodes re-encodes under every compression policy and decodes back
// to an equal message; its records packed (as held records are) are equal, encode to the same bytes, and read the
// same in place.
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
        let tags = section.indices.map { UInt32(truncatingIfNeeded: $0 &* 7) }
        let packed = PackedRecords(section, tags: tags)
        guard packed.count == section.count, packed.records == section else {
            fatalError("packing changed the records")
        }
        for (position, original) in section.enumerated() {
            guard (try? packed[position].encodedStandalone()) == (try? original.encodedStandalone()) else {
                fatalError("packing changed a record's bytes")
            }
            guard packed.tag(at: position) == tags[position], packed.type(at: position) == original.type,
                packed.cacheFlush(at: position) == original.cacheFlush, packed.name(at: position) == original.name,
                packed.nameEquals(at: position, ignoringCase: original.name.lowercased())
            else { fatalError("a packed record's fields read in place differ") }
        }
    }
    if let first = message.answers.first ?? message.additionals.first {
        // A standalone record round-trips too.
        guard let standalone = try? first.encodedStandalone(), (try? DNSRecord(decodingStandalone: standalone)) == first
        else { fatalError("standalone record round trip failed") }
    }
    return 0
}
