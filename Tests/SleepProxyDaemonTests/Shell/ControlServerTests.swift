import Dispatch
import Foundation
import Logging
import SleepProxyControl
import SleepProxyDaemon
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The control server on a real Unix socket, without root.
@Suite struct ControlServerTests {
    /// Connections beyond the limit are told the daemon is busy and closed; those within it are served.
    @Test func connectionsBeyondTheLimitAreTurnedAway() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("control-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let queue = DispatchQueue(label: "control-test")
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let server = try ControlServer(
            path: directory + "/control.sock", group: nil, queue: queue, logger: logger, maximumConnections: 2)
        server.start { _, _ in ControlResponse(message: "served") }
        defer { queue.sync { server.stop() } }

        // Two idle connections fill the table.
        let first = try connectToControlSocket(server.path)
        let second = try connectToControlSocket(server.path)
        defer {
            close(first)
            close(second)
        }
        // Until the server has accepted both (its queue takes them in its own time).
        let deadline = ContinuousClock.now + .seconds(5)
        while queue.sync(execute: { server.openConnections }) < 2, ContinuousClock.now < deadline {
            usleep(1_000)
        }
        try #require(queue.sync { server.openConnections } == 2, "the server accepted the two connections")
        let third = try connectToControlSocket(server.path)
        defer { close(third) }
        let refused = readUntilClosed(third)
        #expect(refused.contains("\"busy\""), "\(refused)")

        // One of the two asks and is answered.
        let request = try ControlProtocol.line(ControlRequest(command: .status))
        _ = request.withUnsafeBytes { send(first, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let answer = readUntilClosed(first)
        #expect(answer.contains("served"), "\(answer)")
    }

    /// One answer larger than the bound on unread output (the host list of a large network) goes out whole; the
    /// bound is for a client that leaves answers unread.
    @Test func anAnswerLargerThanTheUnreadBoundArrivesWhole() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("control-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let queue = DispatchQueue(label: "control-test")
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let server = try ControlServer(path: directory + "/control.sock", group: nil, queue: queue, logger: logger)
        let text = String(repeating: "x", count: 3 << 20)
        server.start { _, _ in ControlResponse(message: text) }
        defer { queue.sync { server.stop() } }

        let client = try connectToControlSocket(server.path)
        defer { close(client) }
        let request = try ControlProtocol.line(ControlRequest(command: .status))
        _ = request.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let answer = readUntilClosed(client)
        #expect(answer.count > 3 << 20, "\(answer.count) bytes")
        let response = try ControlProtocol.decoder().decode(ControlResponse.self, from: Data(answer.utf8))
        #expect(response.message == text)
    }
}
