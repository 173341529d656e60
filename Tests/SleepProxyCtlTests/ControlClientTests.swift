import Foundation
import SleepProxyControl
import Testing

@testable import sleepproxyctl

#if canImport(Glibc)
    import Glibc
#endif

/// The client against a canned peer on a real Unix socket: what it sends, what it makes of each kind of answer,
/// and how it names each way of not getting one.
@Suite struct ControlClientTests {
    static let sample = HostSummary(
        name: "Sleeper.local", ownerMAC: "00:11:22:33:44:55", wakeMAC: "00:11:22:33:44:55", interface: "eth0",
        addresses: ["192.0.2.20"], services: ["Sleeper SSH._ssh._tcp"], state: "held", wakeReason: nil,
        recordCount: 6, registeredAt: Date(timeIntervalSince1970: 1_750_000_000), leaseExpiresAt: nil, lastWake: nil)

    static func event(_ id: Int64, _ kind: String) -> EventReport {
        EventReport(
            id: id, time: Date(timeIntervalSince1970: 1_750_000_000 + Double(id)), kind: kind, interface: "eth0",
            ownerMAC: "00:11:22:33:44:55", host: "Sleeper.local", sourceAddress: nil, sourcePort: nil, reason: nil,
            detail: "event \(id)")
    }

    /// Runs `body` and returns the `ControlClientError` it throws, failing the test when it throws none.
    func failure(_ body: () throws -> Void) -> ControlClientError? {
        do {
            try body()
            Issue.record("expected a ControlClientError")
        } catch let error as ControlClientError {
            return error
        } catch {
            Issue.record("expected a ControlClientError, not \(error)")
        }
        return nil
    }

    @Test func anAnswerIsDecodedAndTheRequestIsOneLine() throws {
        let peer = try CannedPeer(.answer(try line(ControlResponse(hosts: [Self.sample]))))
        let response = try ControlClient(socketPath: peer.path).request(ControlRequest(command: .hosts))
        #expect(response.ok && response.hosts == [Self.sample])
        let sent = try #require(peer.receivedRequest())
        let request = try ControlProtocol.decoder().decode(ControlRequest.self, from: Data(sent.utf8))
        #expect(request == ControlRequest(command: .hosts))
    }

    @Test func theDaemonsErrorIsItsOwnKind() throws {
        let refusal = ControlError(.unknownHost, "no held host is nosuchhost; `sleepproxyctl hosts` lists them")
        let peer = try CannedPeer(.answer(try line(ControlResponse.failure(refusal))))
        let error = try #require(
            failure { _ = try ControlClient(socketPath: peer.path).request(ControlRequest(command: .show, host: "x")) })
        #expect(error.kind == .daemon)
        #expect(error.daemonError == refusal && error.controlError == refusal)
        #expect(error.reason.contains("nosuchhost"))
    }

    @Test func aCloseWithoutAnAnswerIsAProtocolError() throws {
        let peer = try CannedPeer(.close)
        let error = try #require(
            failure { _ = try ControlClient(socketPath: peer.path).request(ControlRequest(command: .status)) })
        #expect(error.kind == .protocolViolation)
        #expect(error.reason.contains(peer.path) && error.reason.contains("without an answer"), "\(error)")
        #expect(error.controlError.code == .badAnswer)
    }

    @Test func anAnswerThatIsNotJSONIsAProtocolError() throws {
        let peer = try CannedPeer(.answer(Array("HTTP/1.1 400 Bad Request\r\n\n".utf8)))
        let error = try #require(
            failure { _ = try ControlClient(socketPath: peer.path).request(ControlRequest(command: .status)) })
        #expect(error.kind == .protocolViolation)
        #expect(error.reason.contains("not a control response") && error.reason.contains("HTTP/1.1"), "\(error)")
    }

    @Test func anotherProtocolVersionIsNamed() throws {
        let peer = try CannedPeer(.answer(try line(ControlResponse(message: "hello", version: 2))))
        let error = try #require(
            failure { _ = try ControlClient(socketPath: peer.path).request(ControlRequest(command: .status)) })
        #expect(error.kind == .protocolViolation)
        #expect(error.reason.contains("version 2") && error.reason.contains("version 1"), "\(error)")
    }

    @Test func aMissingSocketMeansTheDaemonIsNotRunning() throws {
        let directory = try CannedPeer.makeDirectory()
        defer { rmdir(directory) }
        let path = directory + "/control.sock"
        let error = try #require(
            failure { _ = try ControlClient(socketPath: path).request(ControlRequest(command: .status)) })
        #expect(error.kind == .unreachable && error.errno == ENOENT)
        #expect(error.socketPath == path)
        #expect(error.reason.contains(path) && error.reason.contains("not running"), "\(error)")
        #expect(error.controlError.code == .unreachable)
    }

    @Test func aSocketNobodyListensOnIsRefused() throws {
        let directory = try CannedPeer.makeDirectory()
        let path = directory + "/control.sock"
        let descriptor = try CannedPeer.bound(at: path)
        defer {
            close(descriptor)
            unlink(path)
            rmdir(directory)
        }
        let error = try #require(
            failure { _ = try ControlClient(socketPath: path).request(ControlRequest(command: .status)) })
        #expect(error.kind == .unreachable && error.errno == ECONNREFUSED)
        #expect(error.reason.contains(path) && error.reason.contains("not running"), "\(error)")
    }

    @Test func aFileThatIsNotASocketIsNamedSo() throws {
        let directory = try CannedPeer.makeDirectory()
        let path = directory + "/control.sock"
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        defer {
            unlink(path)
            rmdir(directory)
        }
        let error = try #require(
            failure { _ = try ControlClient(socketPath: path).request(ControlRequest(command: .status)) })
        #expect(error.kind == .unreachable)
        #expect(error.reason.contains("not a socket"), "\(error)")
    }

    @Test func aPathTooLongForASocketIsNamedSo() throws {
        let path = "/tmp/" + String(repeating: "x", count: 120) + "/control.sock"
        let error = try #require(
            failure { _ = try ControlClient(socketPath: path).request(ControlRequest(command: .status)) })
        #expect(error.kind == .unreachable && error.errno == ENAMETOOLONG)
        #expect(error.reason.contains("longer than"), "\(error)")
    }

    /// Tests run as root, which no file mode keeps out, so a real EACCES cannot be produced here; the lab test
    /// runs `sleepproxyctl` as nobody with `setpriv` for that. This checks the sentence an EACCES becomes.
    @Test(arguments: [EACCES, EPERM])
    func permissionDeniedSaysWhatToDo(_ code: Int32) {
        let error = ControlClientError.unreachable(socketPath: "/run/sleepproxy/control.sock", errno: code)
        #expect(error.kind == .unreachable)
        #expect(error.reason.contains("/run/sleepproxy/control.sock"))
        #expect(error.reason.contains("permission denied") && error.reason.contains("usermod -aG sleepproxy"))
    }

    @Test func aSilentDaemonTimesOut() throws {
        let peer = try CannedPeer(.silent)
        let client = ControlClient(socketPath: peer.path, timeout: .milliseconds(100))
        let error = try #require(failure { _ = try client.request(ControlRequest(command: .status)) })
        #expect(error.kind == .timedOut)
        #expect(error.reason.contains(peer.path) && error.reason.contains("no answer within 100 ms"), "\(error)")
        #expect(error.controlError.code == .timedOut)
        #expect(peer.receivedRequest() != nil)
    }

    @Test func theDefaultTimeoutIsTenSeconds() {
        #expect(ControlClient(socketPath: "/x").timeout == .seconds(10))
        let error = ControlClientError.timedOut(socketPath: "/x", timeout: .seconds(10))
        #expect(error.reason == "sleepproxyd at /x gave no answer within 10 s")
    }

    @Test func aFollowStreamIsHandedOverLineByLineInOrder() throws {
        let history = ControlResponse(events: [Self.event(1, "registered"), Self.event(2, "takeover")])
        let lines = try [line(history)] + (3...5).map { try line(ControlResponse(event: Self.event($0, "wake"))) }
        let peer = try CannedPeer(.stream(lines, pause: 0))
        var received: [ControlResponse] = []
        let request = ControlRequest(command: .events, limit: 2, follow: true)
        try ControlClient(socketPath: peer.path).stream(request) { response in
            received.append(response)
            return true
        }
        #expect(received.count == 4)
        #expect(received.first?.events?.map(\.id) == [1, 2])
        #expect(received.dropFirst().map { $0.event?.id } == [3, 4, 5])
        let sent = try #require(peer.receivedRequest())
        #expect(try ControlProtocol.decoder().decode(ControlRequest.self, from: Data(sent.utf8)) == request)
    }

    @Test func aFollowStreamStopsWhenTheReaderSaysSo() throws {
        let lines =
            try [line(ControlResponse(events: []))]
            + (1...3).map { try line(ControlResponse(event: Self.event($0, "wake"))) }
        let peer = try CannedPeer(.stream(lines, pause: 0))
        var count = 0
        try ControlClient(socketPath: peer.path).stream(ControlRequest(command: .events, follow: true)) { _ in
            count += 1
            return count < 2
        }
        #expect(count == 2)
    }

    @Test func aFollowStreamWaitsPastTheAnswerTimeout() throws {
        let lines = try [line(ControlResponse(events: [])), line(ControlResponse(event: Self.event(1, "wake")))]
        let peer = try CannedPeer(.stream(lines, pause: 0.3))
        var received: [ControlResponse] = []
        let client = ControlClient(socketPath: peer.path, timeout: .milliseconds(100))
        try client.stream(ControlRequest(command: .events, follow: true)) { response in
            received.append(response)
            return true
        }
        #expect(received.map { $0.event?.id } == [nil, 1])
    }

    @Test func anErrorOnAFollowStreamEndsIt() throws {
        let lines = try [
            line(ControlResponse.failure(ControlError(.unknownHost, "no held host is nosuchhost"))),
            line(ControlResponse(event: Self.event(1, "wake"))),
        ]
        let peer = try CannedPeer(.stream(lines, pause: 0))
        var count = 0
        let error = try #require(
            failure {
                try ControlClient(socketPath: peer.path).stream(ControlRequest(command: .events, follow: true)) { _ in
                    count += 1
                    return true
                }
            })
        #expect(error.kind == .daemon && error.daemonError?.code == .unknownHost)
        #expect(count == 0)
    }

    @Test func aFollowStreamClosedBeforeItsFirstLineIsAProtocolError() throws {
        let peer = try CannedPeer(.close)
        let error = try #require(
            failure {
                try ControlClient(socketPath: peer.path).stream(ControlRequest(command: .events, follow: true)) { _ in
                    true
                }
            })
        #expect(error.kind == .protocolViolation)
    }
}
