import DNSWire
import Frames
import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// What is learned from a declared host is kept in the lease store (`StoreChange.saveLearned`), so that a host
/// asleep when the proxy restarts is held with it: written when it changes, not on every announcement; restored
/// with the host; forgotten after a week unheard.
struct LearnedRecordsStoreTests {
    typealias Learned = LearnedRecordsTests
    static let key = Learned.key

    /// The records each `saveLearned` of the declared host carried, in order.
    static func saved(_ actions: [Action]) -> [[LearnedRecord]] {
        actions.storeChanges.compactMap { change in
            guard case .saveLearned(let key, let records) = change, key == Self.key else { return nil }
            return records
        }
    }

    static func heard(_ records: [DNSRecord], at time: UnixTime) -> [LearnedRecord] {
        records.map { LearnedRecord(record: $0, heard: time) }
    }

    /// Keeps the host awake (a frame every 5 s) until `time`, and returns what was done meanwhile.
    static func stayAwake(until time: UnixTime, _ harness: inout Harness) -> [Action] {
        var actions: [Action] = []
        while harness.now < time {
            actions += harness.run(until: min(time, harness.now + .seconds(5)))
            actions += harness.frame(DeclaredHostTests.arpFromHost())
        }
        return actions
    }

    @Test func whatIsLearnedIsSavedWhenItChangesAndNotOnEveryAnnouncement() throws {
        var harness = Learned.harness()
        let start = harness.now
        #expect(
            Self.saved(Learned.announce(Learned.announcement, &harness)) == [
                Self.heard(Learned.announcement, at: start)
            ])
        // The same records again: nothing to write.
        harness.advance(.seconds(2))
        #expect(Self.saved(Learned.announce(Learned.announcement, &harness)).isEmpty)

        // A record sent with another TTL is written at once, as is a new one.
        var srv = try #require(Learned.announcement.first { $0.type == .srv })
        srv.ttl = 4_500
        let afterTTL = Self.saved(Learned.announce([srv], &harness))
        #expect(afterTTL.count == 1 && afterTTL.first?.contains { $0.record == srv } == true)
        let printer = Learned.service("Anna's iMac._ipp._tcp.local.", port: 631)
        let afterNew = Self.saved(Learned.announce(printer, &harness))
        #expect(afterNew.first?.count == Learned.announcement.count + printer.count)

        // A goodbye is pending until it stands; then the record goes from the store too.
        let screenPTR = Learned.service(Learned.screen, port: 5900)[1]
        #expect(Self.saved(Learned.announce(Learned.goodbyes([screenPTR]), &harness)).isEmpty)
        let withdrawn = Self.saved(Self.stayAwake(until: harness.now + .seconds(10), &harness))
        #expect(withdrawn.count == 1 && withdrawn.first?.contains { $0.record == screenPTR } == false)
        let kept = try #require(withdrawn.first)

        // Refreshed all hour long: the times it was sent are written once, at the hourly check.
        let refreshed = harness.now
        Learned.announce(Learned.addressRecords, &harness)
        let hour = Self.saved(Self.stayAwake(until: start + DeclaredWatch.checkInterval + .seconds(10), &harness))
        #expect(hour.count == 1, "\(hour.count) writes in the hour")
        let address = try #require(hour.first?.first { $0.record == Learned.addressRecords[0] })
        #expect(address.heard == refreshed)
        #expect(hour.first?.map(\.record) == kept.map(\.record))
        // Nothing sent since: the next check writes nothing.
        let next = Self.stayAwake(until: harness.now + DeclaredWatch.checkInterval, &harness)
        #expect(Self.saved(next).isEmpty)
    }

    @Test func whenTheHostIsFoundAsleepTheTimesItLastSentItsRecordsAreSaved() {
        var harness = Learned.harness()
        Learned.announce(Learned.announcement, &harness)
        harness.advance(.seconds(3))
        let last = harness.now
        #expect(Self.saved(Learned.announce(Learned.announcement, &harness)).isEmpty)
        let before = harness.log.count
        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        #expect(Self.saved(Array(harness.log[before...])) == [Self.heard(Learned.announcement, at: last)])
    }

    /// A new core with the same declaration, started at `now` with what the store kept.
    static func restarted(at now: UnixTime, learned: [OwnerKey: [LearnedRecord]], declared: Bool = true) -> Harness {
        var configuration = CoreConfiguration(maximumRecordsPerOwner: 1_000)
        configuration.declaredHosts = declared ? [Learned.declaration()] : []
        var harness = Harness(configuration: configuration)
        harness.now = now
        harness.log += harness.core.watchDeclaredHosts(now: now, learned: learned)
        return harness
    }

    /// A host declared by its MAC alone, asleep through a restart, is held with what it announced before: its
    /// address (from its address record) taken over, its services browsed.
    @Test func aHostAsleepThroughARestartIsHeldWithWhatItAnnouncedBefore() throws {
        var before = Learned.harness()
        Learned.announce(Learned.announcement, &before)
        let stored = try #require(Self.saved(before.log).last)

        var harness = Self.restarted(at: before.now + .seconds(600), learned: [Self.key: stored])
        #expect(Self.saved(harness.log).isEmpty, "nothing was left out: nothing to write")
        #expect(harness.core.declaredHosts.first?.learnedRecordCount == Learned.announcement.count)
        #expect(harness.core.declaredHosts.first?.addresses == [.v4(Learned.ipv4)])

        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        let owner = try #require(harness.owner(Learned.mac))
        #expect(owner.records.count == Learned.announcement.count)
        #expect(Learned.answers(Learned.screenType, .ptr, &harness).map(\.rdata) == [.ptr(Learned.screen)])
        #expect(Learned.answers(Learned.hostName, .a, &harness).map(\.rdata) == [.a(Learned.ipv4)])
        // Without the store's records, nothing is known of it: not even an address to take over.
        var forgetful = Self.restarted(at: before.now + .seconds(600), learned: [:])
        forgetful.run(until: forgetful.now + .seconds(60))
        #expect(forgetful.owner(Learned.mac) == nil)
        #expect(forgetful.core.declaredHosts.first?.unheld?.contains("no address known") == true)
    }

    @Test func aRecordNotSentForAWeekIsForgottenAtStart() throws {
        let now = UnixTime(seconds: 1_800_000_000)
        let old = now - LearnedRecords.forgetAfter - .seconds(1)
        let recent = now - .seconds(86_400)
        let smb = Learned.service(Learned.smb, port: 445)
        let stored =
            Self.heard(Learned.addressRecords, at: recent) + Self.heard(smb, at: old)
            + Self.heard(Learned.service(Learned.screen, port: 5900), at: recent)
        let harness = Self.restarted(at: now, learned: [Self.key: stored])
        let kept = stored.filter { $0.heard == recent }
        #expect(harness.core.declaredHosts.first?.learnedRecordCount == kept.count)
        #expect(Self.saved(harness.log) == [kept], "the store follows what was forgotten")
    }

    @Test func aRecordNotSentForAWeekIsForgottenWhileRunning() throws {
        var harness = Learned.harness()
        let start = harness.now
        Learned.announce(Learned.announcement, &harness)
        _ = DeclaredHostTests.sleepAndTakeOver(&harness)
        // A day later it wakes, announces its address alone, and sleeps again.
        harness.run(until: start + .seconds(86_400))
        harness.frame(DeclaredHostTests.arpFromHost())
        let woke = harness.now
        Learned.announce(Learned.addressRecords, &harness)
        #expect(harness.owner(Learned.mac) == nil, "awake: let go")
        for _ in 0..<60 where harness.owner(Learned.mac) == nil { harness.run(until: harness.now + .seconds(1)) }
        let held = try #require(harness.owner(Learned.mac)).records.count

        let before = harness.log.count
        harness.run(until: start + LearnedRecords.forgetAfter - .seconds(1))
        #expect(Self.saved(Array(harness.log[before...])).isEmpty)
        let week = harness.run(until: start + LearnedRecords.forgetAfter + DeclaredWatch.checkInterval)
        #expect(Self.saved(week) == [Self.heard(Learned.addressRecords, at: woke)])
        #expect(week.logLines.contains { $0.1.contains("forgot \(Learned.announcement.count - 2) learned records") })
        #expect(Learned.learned(harness) == Learned.addressRecords)
        #expect(harness.owner(Learned.mac)?.records.count == held, "held already: it keeps what it was taken over with")
    }

    @Test func theRecordsOfAHostNoLongerDeclaredAreDeleted() throws {
        let stored = Self.heard(Learned.announcement, at: UnixTime(seconds: 1_800_000_000))
        // At start: kept for a host the configuration no longer declares.
        let undeclared = Self.restarted(
            at: UnixTime(seconds: 1_800_000_100), learned: [Self.key: stored], declared: false)
        #expect(undeclared.log.storeChanges == [.saveLearned(Self.key, [])])

        // On reload: its declaration removed, or made not to learn.
        for declaration in [nil, Learned.declaration(records: .declared)] {
            var harness = Learned.harness()
            Learned.announce(Learned.announcement, &harness)
            var configuration = harness.core.configuration
            configuration.declaredHosts = declaration.map { [$0] } ?? []
            let actions = harness.core.reconfigure(configuration, now: harness.now)
            #expect(actions.storeChanges == [.saveLearned(Self.key, [])])
            #expect(harness.core.storedLearned.isEmpty)
        }
    }
}
