import DNSWire
import FixtureSupport
import SleepProxyClientCore
import Testing

/// Sendings, retries, the move to the next proxy and the end of one registration, with time injected.
@Suite struct RegistrationSessionTests {
    /// A proxy's reply to datagram `id`, as sleepproxyd and Apple's proxy send it: the ID, QR and UPDATE, the
    /// granted lease in an OPT (or none), and an error code when it refuses.
    static func reply(
        _ id: UInt16, lease: UInt32? = 7_200, code: DNSResponseCode = .noError, opcode: DNSOpcode = .update
    ) -> [UInt8] {
        try! DNSMessage(
            id: id, flags: DNSFlags(response: true, opcode: opcode, responseCode: code),
            additionals: lease.map {
                [ClientMessage.registrationOPT(owner: nil, lease: UpdateLease(lease: $0))]
            } ?? []
        ).encoded()
    }

    /// Runs the session's timer until `end`, collecting what it does.
    static func run(_ session: inout RegistrationSession, until end: Duration) -> [(
        Duration, RegistrationSession.Action
    )] {
        var done: [(Duration, RegistrationSession.Action)] = []
        while let next = session.nextDeadline, next <= end {
            done += session.tick(now: next).map { (next, $0) }
        }
        return done
    }

    @Test func everyDatagramAnsweredIsARegistration() {
        var session = RegistrationSession(ids: [10, 11, 12], proxyCount: 2)
        #expect(
            session.start() == [
                .send(datagram: 0, proxy: 0), .send(datagram: 1, proxy: 0), .send(datagram: 2, proxy: 0),
            ])
        #expect(session.received(Self.reply(11, lease: 3_000), from: 0, now: .milliseconds(5)).isEmpty)
        #expect(session.received(Self.reply(10), from: 0, now: .milliseconds(6)).isEmpty)
        // A second later only the one still unanswered goes again.
        #expect(session.tick(now: .seconds(1)) == [.send(datagram: 2, proxy: 0)])
        // The lease granted is the shortest of the answers.
        #expect(
            session.received(Self.reply(12), from: 0, now: .seconds(1.2)) == [
                .finished(.registered(proxy: 0, lease: 3_000))
            ])
        #expect(session.nextDeadline == nil)
    }

    @Test func aReplyWithoutALeaseMeansAnHour() {
        var session = RegistrationSession(ids: [7], proxyCount: 1)
        _ = session.start()
        #expect(
            session.received(Self.reply(7, lease: nil), from: 0, now: .zero) == [
                .finished(.registered(proxy: 0, lease: 3_600))
            ])
    }

    /// Three sendings a second apart, then the next proxy gets everything, from the start.
    @Test func aSilentProxyIsLeftAfterThreeSendings() {
        var session = RegistrationSession(ids: [1, 2], proxyCount: 3)
        var done = session.start().map { (Duration.zero, $0) }
        _ = session.received(Self.reply(1), from: 0, now: .milliseconds(10))
        done += Self.run(&session, until: .seconds(3.5))
        #expect(done.map(\.0) == [.zero, .zero, .seconds(1), .seconds(2), .seconds(3), .seconds(3)])
        #expect(
            done.map(\.1) == [
                .send(datagram: 0, proxy: 0), .send(datagram: 1, proxy: 0), .send(datagram: 1, proxy: 0),
                .send(datagram: 1, proxy: 0), .send(datagram: 0, proxy: 1), .send(datagram: 1, proxy: 1),
            ])
        // A late answer from the first proxy counts for nothing now.
        #expect(session.received(Self.reply(2), from: 0, now: .seconds(3.6)).isEmpty)
        _ = session.received(Self.reply(1), from: 1, now: .seconds(3.7))
        #expect(
            session.received(Self.reply(2), from: 1, now: .seconds(3.8)) == [
                .finished(.registered(proxy: 1, lease: 7_200))
            ])
    }

    @Test func aRefusalMovesOnAtOnceAndIsReported() {
        var session = RegistrationSession(ids: [5], proxyCount: 2)
        _ = session.start()
        #expect(
            session.received(Self.reply(5, code: .refused), from: 0, now: .milliseconds(3)) == [
                .send(datagram: 0, proxy: 1)
            ])
        let end = Self.run(&session, until: .seconds(10)).map(\.1)
        #expect(end.last == .finished(.unanswered(refused: [0: DNSResponseCode.refused.rawValue], last: 1)))
    }

    /// Only a response to the UPDATE, with one of the IDs, from the proxy the datagrams went to, answers.
    @Test func otherPacketsAnswerNothing() {
        var session = RegistrationSession(ids: [9], proxyCount: 2)
        _ = session.start()
        #expect(session.received(Self.reply(8), from: 0, now: .zero).isEmpty)
        #expect(session.received(Self.reply(9), from: 1, now: .zero).isEmpty)
        #expect(session.received(Self.reply(9, opcode: .query), from: 0, now: .zero).isEmpty)
        #expect(session.received([0x00, 0x09, 0xA8], from: 0, now: .zero).isEmpty)
        #expect(session.outcome == nil)
    }

    @Test func theDeadlineEndsItWhateverIsLeft() {
        var session = RegistrationSession(ids: [1], proxyCount: 3, deadline: .seconds(4))
        _ = session.start()
        let done = Self.run(&session, until: .seconds(20))
        #expect(done.last.map { $0.0 } == .seconds(4))
        #expect(done.last.map { $0.1 } == .finished(.timedOut(last: 1)))
        #expect(done.filter { if case .send(_, 1) = $0.1 { true } else { false } }.count == 1)
    }

    /// Five proxies seen: three are tried, as a Mac tries them, and the outcome names the last.
    @Test func onlyThreeProxiesAreTried() {
        var session = RegistrationSession(ids: [1], proxyCount: 5, deadline: .seconds(30))
        var done = session.start().map { (Duration.zero, $0) }
        done += Self.run(&session, until: .seconds(30))
        let proxies = Set(done.compactMap { if case .send(_, let proxy) = $0.1 { proxy } else { nil } })
        #expect(proxies == [0, 1, 2])
        #expect(done.last.map { $0.0 } == .seconds(9))
        #expect(done.last.map { $0.1 } == .finished(.unanswered(refused: [:], last: 2)))
    }

    /// A session whose time is gone before it starts sends nothing, and says so.
    @Test func noTimeLeftSendsNothing() {
        var session = RegistrationSession(ids: [1], proxyCount: 2, deadline: .zero)
        #expect(session.start() == [.finished(.timedOut(last: nil))])
    }

    /// A refusal that comes in with the deadline moves on to a proxy that then gets nothing: the last proxy the
    /// datagrams went to is still the one that refused.
    @Test func theLastProxyIsOneTheDatagramsWentTo() {
        var session = RegistrationSession(ids: [5], proxyCount: 3, deadline: .seconds(4))
        _ = session.start()
        _ = Self.run(&session, until: .seconds(3.9))
        #expect(session.proxy == 1)
        let refused = session.received(Self.reply(5, code: .refused), from: 1, now: .seconds(4))
        #expect(refused == [.finished(.timedOut(last: 1))])
    }

    @Test func withoutAProxyThereIsNothingToDo() {
        var session = RegistrationSession(ids: [1], proxyCount: 0)
        #expect(session.start() == [.finished(.noProxy)])
    }
}
