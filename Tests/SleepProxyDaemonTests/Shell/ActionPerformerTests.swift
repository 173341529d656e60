import DNSWire
import LeaseStore
import Logging
import NetworkAddresses
import SleepProxyCore
import SleepProxyDaemon
import Synchronization
import Testing

/// The rules of carrying out actions, without root: a recording store and recording interface effects.
@Suite struct ActionPerformerTests {
    /// What happened, in order, as the test reads it.
    final class Journal: @unchecked Sendable {
        var entries: [String] = []
    }

    final class RecordingStore: LeaseStoring, @unchecked Sendable {
        let journal: Journal
        var fails = false
        /// Every change committed, in order.
        var committed: [StoreChange] = []
        init(journal: Journal) { self.journal = journal }
        func apply(_ changes: [StoreChange]) throws {
            if fails {
                journal.entries.append("commit failed")
                throw CommitFailure()
            }
            journal.entries.append("commit \(changes.count)")
            committed += changes
        }
        func loadOwners() throws -> LoadedOwners { LoadedOwners(owners: [], problems: []) }
    }

    struct CommitFailure: Error {}
    struct SendFailure: Error {}

    final class RecordingEffects: InterfaceEffects {
        let journal: Journal
        let name: String
        var failSends = false
        init(journal: Journal, name: String) {
            self.journal = journal
            self.name = name
        }
        func sendReply(_ reply: RegistrationReply) throws { journal.entries.append("\(name) reply") }
        func sendMDNS(_ transmission: MDNSTransmission) throws {
            if failSends { throw SendFailure() }
            journal.entries.append("\(name) mdns")
        }
        func inject(_ frame: [UInt8]) throws { journal.entries.append("\(name) inject \(frame.count)") }
        func watch(_ prefixes: [Link.Prefix]) throws {
            journal.entries.append("\(name) watch \(prefixes.map(\.description).joined(separator: ","))")
        }
        func watchSources(_ sources: [MACAddress]) throws {
            journal.entries.append("\(name) sources \(sources.map(\.description).joined(separator: ","))")
        }
        func joinGroup(_ group: IPv6Address) throws { journal.entries.append("\(name) join \(group)") }
        func leaveGroup(_ group: IPv6Address) throws { journal.entries.append("\(name) leave \(group)") }
        func setNeighbour(_ address: IPAddress, mac: MACAddress) throws {
            journal.entries.append("\(name) neighbour \(address) \(mac)")
        }
        func removeNeighbour(_ address: IPAddress) throws { journal.entries.append("\(name) forget \(address)") }
    }

    let reply = RegistrationReply(
        interface: "eth0", bytes: [1, 2, 3], destination: Endpoint(address: IPAddress("10.0.0.2")!, port: 5353),
        destinationScopeID: 0, source: Endpoint(address: IPAddress("10.0.0.1")!, port: 5354))
    let event = Event(time: UnixTime(nanoseconds: 0), kind: .registered, interface: "eth0", detail: "test")

    /// Recording effects for eth0 and vlan20, writing to one journal.
    func twoInterfaces(_ journal: Journal) -> [String: RecordingEffects] {
        [
            "eth0": RecordingEffects(journal: journal, name: "eth0"),
            "vlan20": RecordingEffects(journal: journal, name: "vlan20"),
        ]
    }

    func performer(_ journal: Journal, store: RecordingStore, effects: [String: RecordingEffects]) -> ActionPerformer {
        ActionPerformer(
            store: store, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
            effects: { effects[$0.rawValue] })
    }

    /// Frames and answers go first (a wake does not wait for the disk), then the commit, then what must follow
    /// it: the reply, and the event in the report.
    @Test func wireEffectsGoFirstThenTheCommitThenTheReply() {
        let journal = Journal()
        let store = RecordingStore(journal: journal)
        let eth0 = RecordingEffects(journal: journal, name: "eth0")
        let actions: [Action] = [
            .injectFrame("eth0", [0, 1]), .store(.appendEvent(event)), .reply(reply),
            .store(.removeOwner(OwnerKey(interface: "eth0", primaryMAC: MACAddress(2, 0, 0, 0, 0, 1)))),
        ]
        let report = performer(journal, store: store, effects: ["eth0": eth0]).perform(actions)
        #expect(report.committed)
        #expect(report.events == [event])
        #expect(report.heldChanged, "an owner was removed")
        #expect(journal.entries == ["eth0 inject 2", "commit 2", "eth0 reply"])
    }

    @Test func aFailedCommitWithholdsTheReplyAndTheEventButNotTheRest() {
        let journal = Journal()
        let store = RecordingStore(journal: journal)
        store.fails = true
        let eth0 = RecordingEffects(journal: journal, name: "eth0")
        let actions: [Action] = [
            .store(.appendEvent(event)), .reply(reply), .injectFrame("eth0", [9]),
        ]
        let report = performer(journal, store: store, effects: ["eth0": eth0]).perform(actions)
        #expect(!report.committed)
        #expect(report.events.isEmpty, "an event not committed is not reported")
        #expect(journal.entries == ["eth0 inject 1", "commit failed"])
    }

    @Test func eachActionGoesToItsOwnInterface() {
        let journal = Journal()
        let store = RecordingStore(journal: journal)
        let effects = twoInterfaces(journal)
        let group = IPv6Address("ff02::1:ff00:1")!
        let actions: [Action] = [
            .joinMulticastGroup("vlan20", group),
            .watchDestinations("eth0", [Link.Prefix(host: IPAddress("10.0.0.9")!)]),
            .setNeighbour("vlan20", IPAddress("10.1.0.9")!, MACAddress(2, 0, 0, 0, 0, 9)),
            .injectFrame("eth9", [1]), .removeNeighbour("vlan20", IPAddress("10.1.0.9")!),
            .leaveMulticastGroup("vlan20", group),
        ]
        #expect(performer(journal, store: store, effects: effects).perform(actions).committed)
        #expect(
            journal.entries == [
                "vlan20 join ff02::1:ff00:1", "eth0 watch 10.0.0.9/32", "vlan20 neighbour 10.1.0.9 02:00:00:00:00:09",
                "vlan20 forget 10.1.0.9", "vlan20 leave ff02::1:ff00:1",
            ])
    }

    /// Each list of watched prefixes is complete: of several for one interface in a batch (one per registration),
    /// only the last rebuilds the capture filter; another interface's list is kept.
    @Test func onlyTheLastListOfHeldAddressesPerInterfaceIsWatched() {
        let journal = Journal()
        let store = RecordingStore(journal: journal)
        let effects = twoInterfaces(journal)
        let actions: [Action] = [
            .watchDestinations("eth0", [Link.Prefix(host: IPAddress("10.0.0.9")!)]),
            .watchDestinations("vlan20", [Link.Prefix(host: IPAddress("10.1.0.9")!)]),
            .injectFrame("eth0", [1]),
            .watchDestinations(
                "eth0", [Link.Prefix(host: IPAddress("10.0.0.9")!), Link.Prefix(host: IPAddress("10.0.0.10")!)]),
        ]
        #expect(performer(journal, store: store, effects: effects).perform(actions).committed)
        #expect(
            journal.entries == ["vlan20 watch 10.1.0.9/32", "eth0 inject 1", "eth0 watch 10.0.0.9/32,10.0.0.10/32"])
    }

    @Test func aFailingSendDoesNotStopTheActionsAfterIt() {
        let journal = Journal()
        let store = RecordingStore(journal: journal)
        let eth0 = RecordingEffects(journal: journal, name: "eth0")
        eth0.failSends = true
        let transmission = MDNSTransmission(
            interface: "eth0", bytes: [0], destination: Endpoint(address: IPAddress("224.0.0.251")!, port: 5353),
            destinationScopeID: 0, source: nil)
        let actions: [Action] = [.sendMDNS(transmission), .injectFrame("eth0", [1, 2, 3])]
        #expect(performer(journal, store: store, effects: ["eth0": eth0]).perform(actions).committed)
        #expect(journal.entries == ["eth0 inject 3"])
    }

    static let owner = Owner(
        key: OwnerKey(interface: "eth0", primaryMAC: MACAddress(2, 0, 0, 0, 0, 7)),
        wakeMAC: MACAddress(2, 0, 0, 0, 0, 7),
        sequence: 1, registeredAt: UnixTime(nanoseconds: 0), updatedAt: UnixTime(nanoseconds: 0), records: [])

    static func event(_ kind: Event.Kind) -> Event {
        Event(time: UnixTime(nanoseconds: 0), kind: kind, interface: "eth0", detail: "")
    }

    static let learned = [
        LearnedRecord(
            record: DNSRecord(
                name: "Annas-iMac.local.", ttl: 120, cacheFlush: true, rdata: .a(IPv4Address(10, 0, 0, 7))),
            heard: UnixTime(seconds: 1_900_000_000))
    ]

    /// The records learned from a declared host are committed with the other store changes of their batch, in
    /// their order, after what goes on the wire and before a reply; they change nothing held.
    @Test func learnedRecordsAreCommittedWithTheBatch() {
        let journal = Journal()
        let store = RecordingStore(journal: journal)
        let actions: [Action] = [
            .store(.saveLearned(Self.owner.key, Self.learned)), .reply(reply), .injectFrame("eth0", [1]),
            .store(.saveLearned(Self.owner.key, [])),
        ]
        let report = performer(
            journal, store: store, effects: ["eth0": RecordingEffects(journal: journal, name: "eth0")]
        ).perform(actions)
        #expect(report.committed && !report.heldChanged && report.ownersSaved.isEmpty)
        #expect(journal.entries == ["eth0 inject 1", "commit 2", "eth0 reply"])
        #expect(store.committed == [.saveLearned(Self.owner.key, Self.learned), .saveLearned(Self.owner.key, [])])
    }

    /// What the report says was held, saved and changed, one row per kind of store change or event: the daemon
    /// reports its status from this, never from the actions.
    @Test(arguments: [
        ([Action.store(.saveOwner(owner))], true, 1),
        ([.store(.removeOwner(owner.key))], true, 0),
        ([.store(.appendEvent(event(.asleep)))], true, 0),
        ([.store(.appendEvent(event(.released)))], true, 0),
        ([.store(.appendEvent(event(.registered)))], false, 0),
        ([.store(.saveWake(owner.key, nil))], false, 0),
        ([.store(.saveLearned(owner.key, learned))], false, 0),
        ([.injectFrame("eth0", [1])], false, 0),
    ])
    func theReportSaysWhetherWhatIsHeldChanged(_ actions: [Action], _ heldChanged: Bool, _ saved: Int) {
        let journal = Journal()
        let report = performer(
            journal, store: RecordingStore(journal: journal),
            effects: ["eth0": RecordingEffects(journal: journal, name: "eth0")]
        ).perform(actions)
        #expect(report.heldChanged == heldChanged)
        #expect(report.ownersSaved.count == saved)
    }

    /// An interface that stops serving is reported, in order, and nothing more goes out on it after its place
    /// among the actions (a reply included, since replies follow the commit); other interfaces go on.
    @Test func anInterfaceThatStopsServingIsReportedAndGetsNothingMore() {
        let journal = Journal()
        let store = RecordingStore(journal: journal)
        let effects = twoInterfaces(journal)
        let actions: [Action] = [
            .injectFrame("eth0", [1]), .stopServing("eth0"), .injectFrame("eth0", [2, 2]),
            .injectFrame("vlan20", [3, 3, 3]), .reply(reply), .store(.appendEvent(event)),
        ]
        let report = performer(journal, store: store, effects: effects).perform(actions)
        #expect(report.stoppedServing == ["eth0"])
        #expect(journal.entries == ["eth0 inject 1", "vlan20 inject 3", "commit 1"])
    }
}
