#if canImport(Glibc)
    import Glibc
#endif

/// Reads a whole small text file (a config file, a state file, a `/proc` or `/sys` entry), or the errno that
/// stopped it; more than 1 MiB is refused with `EFBIG`.
public func readTextFile(_ path: String) -> Result<String, SystemCallError> {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return .failure(SystemCallError("open \(path)")) }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            return .failure(SystemCallError("read \(path)"))
        }
        if count == 0 { break }
        bytes += buffer[0..<count]
        if bytes.count > 1 << 20 {
            return .failure(SystemCallError("read \(path)", code: EFBIG))
        }
    }
    return .success(String(decoding: bytes, as: UTF8.self))
}
