#if canImport(Glibc)
    import Glibc
#endif

/// A raw client of the control socket, for the tests that send it what `sleepproxyctl` never would or hold its
/// connections open: the descriptor of a stream connected to `path`, reads timing out after 5 s.
func connectToControlSocket(_ path: String) throws -> Int32 {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { buffer in
        buffer.copyBytes(from: bytes)
        buffer[bytes.count] = 0
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    guard connected == 0 else {
        let reason = String(cString: strerror(errno))
        close(descriptor)
        throw TestFailure("connect to \(path): \(reason)")
    }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    return descriptor
}

/// Everything `descriptor` receives until the other end closes it (or a read times out), as text.
func readUntilClosed(_ descriptor: Int32) -> String {
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { break }
        received += buffer[0..<count]
    }
    return String(decoding: received, as: UTF8.self)
}
