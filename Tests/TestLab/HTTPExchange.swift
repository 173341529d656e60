import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP response as it came off the socket.
public struct HTTPReply: CustomStringConvertible, Sendable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    public var body: [UInt8]
    public var text: String { String(decoding: body, as: UTF8.self) }
    public var description: String { "HTTP \(status) \(headers) \(text.prefix(300))" }
}

/// A blocking TCP connection to an IPv4 or IPv6 address in the calling thread's namespace, for tests that speak
/// HTTP to the daemon (or to Prometheus) byte by byte.
public final class TCPConnection {
    public let descriptor: Int32

    public init(host: String, port: Int, timeout: Duration = .seconds(5)) throws {
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        if host.contains(":") {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { throw LabError("bad address \(host)") }
            withUnsafeBytes(of: address) { bytes in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            family = AF_INET6
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw LabError("bad address \(host)") }
            withUnsafeBytes(of: address) { bytes in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) }
            }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            family = AF_INET
        }
        descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw LabError("socket: \(String(cString: strerror(errno)))") }
        var time = timeval(
            tv_sec: Int(timeout.components.seconds),
            tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw LabError("connect to \(host) port \(port): \(reason)")
        }
    }

    deinit { close(descriptor) }

    /// Sends all of `bytes`; false when the peer closed (or reset) first.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Reads until the peer closes, the timeout passes, or `enough` says the bytes so far are a whole response.
    public func receive(until enough: ([UInt8]) -> Bool = { _ in false }) -> (bytes: [UInt8], closed: Bool) {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (bytes, true) }
            if count < 0 { return (bytes, errno == ECONNRESET) }
            bytes += buffer[0..<count]
            if enough(bytes) { return (bytes, false) }
        }
    }

    /// Waits at most `timeout` for the peer to close (or reset) the connection: true once it has, false if it is
    /// still open then or sent bytes instead (they are left unread).
    public func closed(within timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000)) > 0 else { return false }
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count == 0 || (count < 0 && errno == ECONNRESET)
    }

    /// One request and its response (read by its Content-Length).
    public func exchange(_ request: String) throws -> HTTPReply {
        send(Array(request.utf8))
        let (bytes, _) = receive { HTTPReply(parsing: $0)?.isComplete == true }
        guard let reply = HTTPReply(parsing: bytes) else {
            throw LabError("no HTTP response: \(String(decoding: bytes, as: UTF8.self))")
        }
        return reply
    }
}

extension HTTPReply {
    /// Parses a status line, headers and the body after them; nil until the headers are whole.
    public init?(parsing bytes: [UInt8]) {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = bytes.indices.dropLast(3).first(where: { Array(bytes[$0..<$0 + 4]) == separator }) else {
            return nil
        }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        self.init(status: status, headers: headers, body: Array(bytes[(end + 4)...]))
    }

    /// Whether the body is as long as Content-Length says.
    public var isComplete: Bool {
        guard let length = headers["content-length"].flatMap(Int.init) else { return false }
        return body.count >= length
    }
}

/// `GET path` on a new connection.
public func httpGet(host: String, port: Int, _ path: String, timeout: Duration = .seconds(5)) throws -> HTTPReply {
    let connection = try TCPConnection(host: host, port: port, timeout: timeout)
    let name = host.contains(":") ? "[\(host)]" : host
    return try connection.exchange("GET \(path) HTTP/1.1\r\nHost: \(name):\(port)\r\nConnection: close\r\n\r\n")
}
