import DNSWire
import Foundation
import NetworkAddresses
import SleepProxyCore
import Synchronization
import Testing

@testable import LeaseStore

struct OwnerRoundTripTests {
    static let variants: [(password: [UInt8]?, source: Endpoint?)] = [
        (nil, nil),
        ([1, 2, 3, 4], Endpoint(address: .v4(IPv4Address(10, 77, 0, 2)), port: 5353)),
        ([0, 0xFF, 2, 3, 4, 0x80], Endpoint(address: .v6(IPv6Address("fe80::1")!), port: 49_152)),
        ([], Endpoint(address: .v6(IPv6Address("2001:db8::10:0:0:1")!), port: 0)),
    ]

    @Test("owners with every record type come back identical, before and after reopening", arguments: variants)
    func roundTrip(password: [UInt8]?, source: Endpoint?) throws {
        try withTemporaryDirectory { directory in
            let owner = makeOwner(password: password, source: source, records: held(try macRecords()))
            let other = makeOwner(interface: "wlan0", primary: mac(1), records: held(try macRecords(), sequence: 255))
            let store = try LeaseStore(directory: directory)
            try store.apply([.saveOwner(owner), .saveOwner(other)])
            let loaded = try store.loadOwners()
            #expect(loaded.problems == [])
            #expect(loaded.owners == [owner, other])
            store.close()

            let reopened = try LeaseStore(directory: directory)
            let again = try reopened.loadOwners()
            #expect(again.problems == [])
            #expect(again.owners == [owner, other])
            let restored = try #require(again.owners.first)
            #expect(restored.password == password)
            #expect(restored.lastSource == source)
            // Record by record on the wire as well: case, class, cache-flush bit, TTL and RDATA bytes.
            for (original, back) in zip(owner.records, restored.records) {
                #expect(try back.record.encodedStandalone() == original.record.encodedStandalone())
                #expect(back.isUnique == original.isUnique)
                #expect(back.record.name.description == original.record.name.description)
            }
            #expect(restored.records.filter(\.isUnique).count == owner.records.filter(\.isUnique).count)
            #expect(restored.proxiedAddresses.count == 3)
        }
    }

    @Test func ownerWithoutRecordsRoundTrips() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            let owner = makeOwner(records: [])
            try store.apply([.saveOwner(owner)])
            #expect(try store.loadOwners().owners == [owner])
        }
    }

    @Test func saveReplacesAndRemoveDeletes() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            let first = smallOwner(1)
            let second = smallOwner(2)
            try store.apply([.saveOwner(first), .saveOwner(second)])

            var replacement = first
            replacement.sequence = 8
            replacement.wakeMAC = mac(0xBB)
            replacement.password = [9, 9, 9, 9]
            replacement.lastSource = nil
            replacement.records = HeldRecords(
                held(Array(try macRecords().prefix(3)), sequence: 8, at: baseTime + .seconds(60)))
            try store.apply([.saveOwner(replacement)])
            #expect(try store.loadOwners().owners == [replacement, second])

            try store.apply([.removeOwner(second.key)])
            #expect(try store.loadOwners().owners == [replacement])
            // Removing an owner the store does not hold is not an error.
            try store.apply([.removeOwner(second.key)])
            // The same primary MAC on another interface is another owner.
            try store.apply([.removeOwner(OwnerKey(interface: "wlan0", primaryMAC: first.key.primaryMAC))])
            #expect(try store.loadOwners().owners == [replacement])
        }
    }
}

struct TransactionTests {
    /// An owner whose records cannot be encoded: more than 65,535 bytes in one message.
    static func unencodableOwner() -> Owner {
        let big = DNSRecord(name: "big.local.", ttl: 120, rdata: .null([UInt8](repeating: 0x5A, count: 40_000)))
        return makeOwner(primary: mac(0xEE), records: held([big, big]))
    }

    @Test("a batch whose third change fails leaves nothing of the batch behind")
    func failedBatchIsInvisible() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            let kept = smallOwner(1)
            try store.apply([.saveOwner(kept), .appendEvent(makeEvent(0))])

            var changedKept = kept
            changedKept.sequence = 99
            let batch: [StoreChange] = [
                .saveOwner(smallOwner(2)), .appendEvent(makeEvent(1)), .saveOwner(Self.unencodableOwner()),
                .saveOwner(changedKept), .removeOwner(kept.key),
            ]
            let error = #expect(throws: LeaseStoreError.self) { try store.apply(batch) }
            #expect(error?.kind == .encoding)
            #expect(error?.operation.contains("apply change 3 of 5") == true)
            #expect(error?.description.contains(directory) == true)

            #expect(try store.loadOwners().owners == [kept])
            #expect(try store.eventCount() == 1)
            // The store stays usable, and the next batch commits.
            try store.apply([.saveOwner(smallOwner(3))])
            #expect(try store.loadOwners().owners.map(\.key) == [kept.key, smallOwner(3).key])
            store.close()
            #expect(try LeaseStore(directory: directory).loadOwners().owners.count == 2)
        }
    }

    @Test func emptyBatchDoesNothing() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            try store.apply([])
            #expect(try store.loadOwners().owners == [])
            #expect(try store.eventCount() == 0)
        }
    }

    @Test("a second connection reading while batches commit sees whole batches only")
    func readerSeesWholeBatches() throws {
        try withTemporaryDirectory { directory in
            let writer = try LeaseStore(directory: directory)
            let reader = try LeaseStore(directory: directory)
            // A thread of its own, so that the writer runs whatever the test pool is doing.
            let failure = Mutex<String?>(nil)
            let finished = Mutex(false)
            let thread = Thread {
                do {
                    for round in 0..<50 {
                        try writer.apply((0..<10).map { StoreChange.saveOwner(smallOwner(round * 10 + $0)) })
                    }
                } catch {
                    failure.withLock { $0 = "\(error)" }
                }
                finished.withLock { $0 = true }
            }
            thread.start()
            var counts: [Int] = []
            while true {
                let done = finished.withLock { $0 }
                counts.append(try reader.loadOwners().owners.count)
                if done { break }
            }
            #expect(failure.withLock { $0 } == nil)
            #expect(counts.allSatisfy { $0 % 10 == 0 }, "partial batches seen: \(counts.filter { $0 % 10 != 0 })")
            #expect(counts == counts.sorted())
            #expect(counts.last == 500)
            #expect(Set(counts).count > 2, "the reader should have seen the writer at work")
        }
    }
}

struct LifecycleTests {
    @Test func reopenKeepsOwnersAndEvents() throws {
        try withTemporaryDirectory { directory in
            let owners = (0..<50).map { smallOwner($0, interface: $0 % 2 == 0 ? "eth0" : "eth1") }
            let events = (0..<30).map { makeEvent($0) }
            do {
                let store = try LeaseStore(directory: directory)
                try store.apply(owners.map { .saveOwner($0) } + events.map { .appendEvent($0) })
                store.close()
                store.close()
                let error = #expect(throws: LeaseStoreError.self) { try store.loadOwners() }
                #expect(error?.kind == .closed)
                #expect(throws: LeaseStoreError.self) { try store.apply([.appendEvent(makeEvent(99))]) }
            }
            let store = try LeaseStore(directory: directory)
            #expect(try store.loadOwners().owners == owners.sorted { $0.key < $1.key })
            #expect(try store.events(limit: 100).events.map(\.event) == events)
        }
    }

    @Test func directoryIsCreatedPrivateWithParents() throws {
        try withTemporaryDirectory { base in
            let directory = base + "/var/lib/sleepproxy"
            let store = try LeaseStore(directory: directory)
            try store.apply([.saveOwner(smallOwner(1))])
            let attributes = try FileManager.default.attributesOfItem(atPath: directory)
            #expect((attributes[.posixPermissions] as? Int) == 0o700)
            #expect(FileManager.default.fileExists(atPath: directory + "/leases.sqlite"))
            #expect(store.path == directory + "/leases.sqlite")
            let mode = try String(contentsOfFile: directory + "/leases.sqlite", encoding: .isoLatin1).prefix(16)
            #expect(mode.hasPrefix("SQLite format 3"))
        }
    }

    @Test func databaseIsInWALMode() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            try store.apply([.saveOwner(smallOwner(1))])
            // The WAL file exists while a connection is open, and the header marks WAL (bytes 18 and 19 are 2).
            #expect(FileManager.default.fileExists(atPath: directory + "/leases.sqlite-wal"))
            store.close()
            let header = try Data(contentsOf: URL(fileURLWithPath: directory + "/leases.sqlite")).prefix(20)
            #expect(Array(header.suffix(2)) == [2, 2])
        }
    }

    @Test func fileInPlaceOfDirectoryIsRefused() throws {
        try withTemporaryDirectory { base in
            let path = base + "/not-a-directory"
            try #require(FileManager.default.createFile(atPath: path, contents: Data([1])))
            let error = #expect(throws: LeaseStoreError.self) { try LeaseStore(directory: path) }
            #expect(error?.kind == .cannotCreateDirectory)
            #expect(error?.description.contains(path) == true)
        }
    }

    @Test func fileThatIsNotADatabaseIsRefused() throws {
        try withTemporaryDirectory { directory in
            let garbage = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
            try #require(FileManager.default.createFile(atPath: directory + "/leases.sqlite", contents: garbage))
            let error = #expect(throws: LeaseStoreError.self) { try LeaseStore(directory: directory) }
            #expect(error?.kind == .damaged)
            #expect(error?.description.contains(directory + "/leases.sqlite") == true)
            #expect(error?.reason.contains("not a database") == true)
        }
    }

    @Test func newerSchemaIsRefusedAndLeftAlone() throws {
        try withTemporaryDirectory { directory in
            try LeaseStore(directory: directory).apply([.saveOwner(smallOwner(1))])
            try executeRawSQL("PRAGMA user_version = 7", inDirectory: directory)
            let error = #expect(throws: LeaseStoreError.self) { try LeaseStore(directory: directory) }
            #expect(error?.kind == .newerSchema)
            #expect(error?.description.contains("schema version 7") == true)
            #expect(error?.description.contains(directory + "/leases.sqlite") == true)
            // Back to the known version, the data is still there.
            try executeRawSQL("PRAGMA user_version = \(LeaseStore.schemaVersion)", inDirectory: directory)
            #expect(try LeaseStore(directory: directory).loadOwners().owners == [smallOwner(1)])
        }
    }

    @Test func invalidConfigurationIsRefused() throws {
        try withTemporaryDirectory { directory in
            let error = #expect(throws: LeaseStoreError.self) {
                try LeaseStore(directory: directory, configuration: .init(eventHistoryLimit: 0))
            }
            #expect(error?.kind == .invalidConfiguration)
            #expect(!FileManager.default.fileExists(atPath: directory + "/leases.sqlite"))
        }
    }
}

struct CorruptRowTests {
    @Test(
        "a row that does not decode is reported and skipped, the others load",
        arguments: [
            ("records = x'00000000'", "records blob does not decode"),
            ("records = x''", "records blob does not decode"),
            ("record_times = x'02'", "format byte"),
            ("record_times = substr(record_times, 1, 5)", "record_times blob ends at record"),
            ("record_times = record_times || x'00'", "bytes after the times"),
            ("primary_mac = x'0102'", "primary_mac is not 6 bytes"),
            ("wake_mac = NULL", "wake_mac is not 6 bytes"),
            ("sequence = 300", "sequence 300"),
            ("last_source = 'fe80::1:5353'", "last_source \"fe80::1:5353\""),
            ("records = NULL", "NULL"),
        ])
    func corruptRow(assignment: String, expectedProblem: String) throws {
        try withTemporaryDirectory { directory in
            let owners = (1...3).map { smallOwner($0) }
            try LeaseStore(directory: directory).apply(owners.map { .saveOwner($0) })
            // Drop the NOT NULL constraints so that a NULL can be planted, as a damaged file could hold.
            try executeRawSQL(
                """
                PRAGMA writable_schema = ON;
                UPDATE sqlite_schema SET sql = replace(sql, 'NOT NULL', '') WHERE name = 'owners';
                PRAGMA writable_schema = OFF;
                """, inDirectory: directory)
            try executeRawSQL(
                "UPDATE owners SET \(assignment) WHERE primary_mac = x'\(hex(owners[1].key.primaryMAC.array))'",
                inDirectory: directory)
            let loaded = try LeaseStore(directory: directory).loadOwners()
            #expect(loaded.owners.map(\.key) == [owners[0].key, owners[2].key])
            #expect(loaded.owners == [owners[0], owners[2]])
            try #require(loaded.problems.count == 1)
            #expect(loaded.problems[0].contains(expectedProblem), "\(loaded.problems[0])")
            #expect(loaded.problems[0].hasPrefix("owner row 2"))
        }
    }

    @Test func corruptEventIsReportedAndSkipped() throws {
        try withTemporaryDirectory { directory in
            try LeaseStore(directory: directory).apply((0..<3).map { .appendEvent(makeEvent($0)) })
            try executeRawSQL("UPDATE events SET kind = 'hibernated' WHERE id = 2", inDirectory: directory)
            let loaded = try LeaseStore(directory: directory).events(limit: 10)
            #expect(loaded.events.map(\.id) == [1, 3])
            #expect(loaded.problems == ["event row 2: unknown kind \"hibernated\""])
        }
    }

    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}

struct EventTests {
    static let kinds: [Event.Kind] = [.registered, .renewed, .replaced, .refused, .expired, .released]

    @Test func eventsRoundTripEveryField() throws {
        try withTemporaryDirectory { directory in
            var events: [Event] = []
            for (index, kind) in Self.kinds.enumerated() {
                events.append(
                    Event(
                        time: UnixTime(nanoseconds: baseTime.nanoseconds + Int64(index) * 1_000_000_007), kind: kind,
                        interface: InterfaceName("enp\(index)s0"), owner: mac(UInt8(index)),
                        source: Endpoint(address: .v6(IPv6Address("fe80::\(index + 1)")!), port: 5353),
                        detail: "détail \(kind) ✓\nsecond line"))
            }
            for reason in RefusalReason.all {
                events.append(
                    Event(
                        time: UnixTime(nanoseconds: -5), kind: .refused, interface: "eth0", owner: nil,
                        source: Endpoint(address: .v4(IPv4Address(192, 168, 1, 10)), port: 65_535), reason: reason,
                        detail: "refused: \(reason)"))
            }
            events.append(Event(time: baseTime, kind: .expired, interface: "eth0", detail: ""))
            let store = try LeaseStore(directory: directory)
            try store.apply(events.map { .appendEvent($0) })
            store.close()

            let reopened = try LeaseStore(directory: directory)
            let loaded = try reopened.events(limit: 1000)
            #expect(loaded.problems == [])
            #expect(loaded.events.map(\.event) == events)
            #expect(loaded.events.map(\.id) == (1...Int64(events.count)).map { $0 })
            #expect(try reopened.eventCount() == events.count)
        }
    }

    @Test func eventsReadNewestWindowAndFollow() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory)
            try store.apply((0..<10).map { .appendEvent(makeEvent($0)) })
            let newest = try store.events(limit: 3).events
            #expect(newest.map(\.id) == [8, 9, 10])
            #expect(newest.map(\.event.detail) == ["event 7", "event 8", "event 9"])
            #expect(try store.events(after: 4, limit: 3).events.map(\.id) == [5, 6, 7])
            #expect(try store.events(after: 10, limit: 3).events == [])
            #expect(try store.events(limit: 0).events == [])
        }
    }

    @Test func historyIsTrimmedToTheNewestEvents() throws {
        try withTemporaryDirectory { directory in
            let store = try LeaseStore(directory: directory, configuration: .init(eventHistoryLimit: 50))
            try store.apply((0..<30).map { .appendEvent(makeEvent($0)) })
            #expect(try store.eventCount() == 30)
            // One batch larger than the limit, mixed with owner changes.
            try store.apply([.saveOwner(smallOwner(1))] + (30..<100).map { .appendEvent(makeEvent($0)) })
            #expect(try store.eventCount() == 50)
            for n in 100..<120 { try store.apply([.appendEvent(makeEvent(n))]) }
            #expect(try store.eventCount() == 50)
            let kept = try store.events(limit: 1000).events
            #expect(kept.map(\.event.detail) == (70..<120).map { "event \($0)" })
            #expect(kept.map(\.id) == (71...120).map { Int64($0) })
            // Owner-only batches leave the history alone.
            try store.apply([.removeOwner(smallOwner(1).key)])
            #expect(try store.eventCount() == 50)
            store.close()
            // A store opened with a smaller limit trims at its next append.
            let smaller = try LeaseStore(directory: directory, configuration: .init(eventHistoryLimit: 5))
            try smaller.apply([.appendEvent(makeEvent(120))])
            #expect(try smaller.events(limit: 100).events.map(\.id) == [117, 118, 119, 120, 121])
        }
    }
}

struct EndpointTextTests {
    @Test(arguments: [
        "10.77.0.2:5353", "[fe80::1]:5353", "[2001:db8::1:0:0:1]:0", "0.0.0.0:65535", "[::]:1", "255.255.255.255:1",
        "10.0.100.0:53",
    ])
    func parsesWhatDescriptionWrites(text: String) throws {
        let endpoint = try #require(Endpoint(parsing: text))
        #expect(endpoint.description == text)
    }

    @Test(arguments: [
        "", "10.77.0.2", "10.77.0.2:", "10.77.0.2:65536", "10.77.0.2:+53", "10.77.0.2:-1", "fe80::1:5353",
        "[fe80::1]", "[fe80::1]5353", "[fe80::1%eth0]:5353", "[10.0.0.1]:53", "host:53", "10.77.0.2:5353x",
        "[fe80::1]:123456",
        // IPv4 in dotted-quad form only: four parts of one to three ASCII digits, no leading zero, at most 255.
        "010.77.0.2:53", "00.1.2.3:53", "256.0.0.1:53", "1.2.3:53", "1.2.3.4.5:53", "1..2.3:53", ".1.2.3:53",
        "1.2.3.:53", "1.2.3.1000:53", "1.2.3.0x1:53", "\u{FF11}.2.3.4:53", "1.2.3.4 :53",
    ])
    func rejectsOtherText(text: String) {
        #expect(Endpoint(parsing: text) == nil)
    }
}

struct RecordCodingTests {
    @Test(arguments: [Int64.min, -1, 0, 1, 63, 64, -65, 1_234_567_890_123, Int64.max])
    func zigzagVarintRoundTrips(value: Int64) throws {
        var bytes: [UInt8] = []
        RecordCoding.appendVarint(&bytes, RecordCoding.zigzag(value))
        #expect(bytes.count <= 10)
        #expect(RecordCoding.unzigzag(RecordCoding.zigzag(value)) == value)
    }

    @Test func timesOfOneRegistrationCostFewBytes() throws {
        let records = held(try macRecords().map { $0 }, at: baseTime).map {
            HeldRecord(
                record: $0.record, sequence: 3, registeredAt: baseTime, expiresAt: baseTime + .seconds(7200))
        }
        let times = RecordCoding.encodeTimes(records, ownerRegisteredAt: baseTime)
        // Format byte; the first record: sequence, 0, 7200 s in 7 bytes; the others: sequence, 0, 0.
        #expect(times.count == 1 + 9 + (records.count - 1) * 3)
    }
}
