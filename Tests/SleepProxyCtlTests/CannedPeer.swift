import Foundation
import SleepProxyControl
import Synchronization

@testable import sleepproxyctl

#if canImport(Glibc)
    import Glibc
#endif

/// A stand-in for the daemon's control socket: listens on a Unix socket in a fresh directory under /tmp, takes one
/// connection, reads the request line and then behaves as told. It records the request so the test can check it.
final class CannedPeer: Sendable {
    /// What the peer does once it has the request line.
    enum Behaviour: Sendable {
        /// Writes these bytes, then closes.
        case answer([UInt8])
        /// Closes without writing.
        case close
        /// Writes nothing and waits until the client closes.
        case silent
        /// Writes the first line, waits `pause` seconds, writes the rest, then closes.
        case stream([[UInt8]], pause: TimeInterval)
    }

    let directory: String
    let path: String
    private let listener: Int32
    private let request = Mutex<String?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    init(_ behaviour: Behaviour) throws {
        directory = try Self.makeDirectory()
        path = directory + "/control.sock"
        listener = try Self.listen(at: path)
        let listener = listener
        Thread.detachNewThread { [self] in
            serve(listener, behaviour)
            finished.signal()
        }
    }

    deinit {
        close(listener)
        unlink(path)
        rmdir(directory)
    }

    /// The request line the client sent, once the peer has finished with the connection.
    func receivedRequest() -> String? {
        guard finished.wait(timeout: .now() + 10) == .success else { return nil }
        return request.withLock { $0 }
    }

    private func serve(_ listener: Int32, _ behaviour: Behaviour) {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        defer { close(connection) }
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while recv(connection, &byte, 1, 0) == 1 {
            if byte == 0x0A { break }
            received.append(byte)
        }
        request.withLock { $0 = String(decoding: received, as: UTF8.self) }
        switch behaviour {
        case .answer(let bytes):
            Self.write(bytes, to: connection)
        case .close:
            break
        case .silent:
            while recv(connection, &byte, 1, 0) == 1 {}
        case .stream(let lines, let pause):
            for (index, line) in lines.enumerated() {
                if index == 1, pause > 0 { Thread.sleep(forTimeInterval: pause) }
                Self.write(line, to: connection)
            }
        }
    }

    private static func write(_ bytes: [UInt8], to connection: Int32) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// A fresh directory for a socket; Unix socket paths are short, so it lives directly under /tmp.
    static func makeDirectory() throws -> String {
        var template = Array("/tmp/sleepproxyctl-test-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw POSIXError(.EIO) }
        return String(cString: created)
    }

    /// A listening Unix stream socket at `path`.
    static func listen(at path: String) throws -> Int32 {
        let descriptor = try bound(at: path)
        guard Glibc.listen(descriptor, 4) == 0 else { throw POSIXError(.EIO) }
        return descriptor
    }

    /// A Unix stream socket bound to `path`, not listening.
    static func bound(at path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else { throw POSIXError(.EIO) }
        return descriptor
    }
}

/// `value` as a control protocol line, in bytes.
func line(_ value: some Encodable) throws -> [UInt8] {
    Array(try ControlProtocol.line(value))
}
