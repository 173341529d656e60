// libFuzzer target for the frame parser. Built by Fuzz/run.sh with -sanitize=fuzzer,address.
//
// Oracle: parsing never traps; a parsed frame rebuilt with its checksums preserved gives back the input bytes,
// and strict checksum verification never accepts what the lenient parse rejects.
import Frames

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrame(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let frame = try? EthernetFrame(parsing: bytes) else {
        if (try? EthernetFrame(parsing: bytes, verifying: .all)) != nil {
            fatalError("strict parse accepted what the lenient parse rejected")
        }
        return 0
    }
    guard frame.serialized(checksums: .preserve) == bytes else {
        fatalError("a parsed frame does not rebuild to its input")
    }
    _ = try? EthernetFrame(parsing: bytes, verifying: .all)
    return 0
}
