import DNSWire
import NetworkAddresses
import SleepProxyCore
import Testing

@Suite("Lease expiry and restore")
struct LeaseTests {
    /// Apple's proxy always wakes a host whose lease ends; if it gives no sign, goodbyes follow and it goes.
    @Test func expiryWakesTheHostThenDropsIt() throws {
        var harness = Harness()
        harness.register(Update.bytes(records: Update.host("a", ipv4: IPv4Address(10, 77, 0, 2))))
        let deadline = try #require(harness.core.nextLeaseExpiry)
        #expect(deadline == harness.now + .seconds(7200))

        harness.run(until: harness.now + .seconds(7199))
        #expect(harness.core.owners.count == 1)

        harness.advance(.seconds(1))
        let actions = harness.tick()
        #expect(actions.events.map(\.kind) == [.expired, .wake])
        #expect(actions.events.last?.detail == "lease expired")
        #expect(actions.events.map(\.owner) == [Update.mac, Update.mac])
        #expect(!actions.injectedFrames.isEmpty, "the first magic packets go out at once")
        // While it is woken the owner is still held, but its records are no longer answered.
        #expect(harness.core.owners.count == 1)
        #expect(harness.core.nextLeaseExpiry == nil)
        #expect(harness.mdns(Query.bytes("a.local.", .a)).transmissions.isEmpty)

        let rest = harness.run(until: harness.now + .seconds(40))
        #expect(harness.core.owners.isEmpty)
        #expect(harness.core.recordCount == 0)
        #expect(rest.storeChanges.contains(.removeOwner(OwnerKey(interface: "eth0", primaryMAC: Update.mac))))
        #expect(rest.events.last?.detail.contains("no sign after 15 wake rounds") == true)
        // Three goodbyes, to both groups, with TTL 0.
        let goodbyes = rest.sentMessages.filter { $0.answers.allSatisfy { $0.ttl == 0 } }
        #expect(goodbyes.count == 6)
    }

    /// A record renewed later keeps its owner alive only until the earliest expiry: the owner is woken when
    /// any of its records runs out, as Apple's proxy does.
    @Test func theEarliestRecordExpiryEndsTheOwner() throws {
        var harness = Harness()
        let records = Update.host("a", ipv4: IPv4Address(10, 77, 0, 2))
        harness.register(Update.bytes(records: Array(records[0..<2]), lease: UpdateLease(lease: 100)))
        harness.advance(.seconds(50))
        harness.register(Update.bytes(records: Array(records[2...]), lease: UpdateLease(lease: 7200)))
        #expect(harness.core.nextLeaseExpiry == harness.now + .seconds(50))
    }

    @Test func restoreDropsExpiredOwnersAndClampsFarExpiries() throws {
        var harness = Harness()
        let now = harness.now
        func owner(_ last: UInt8, expiresIn seconds: Int64) -> Owner {
            let mac = MACAddress(0x02, 0, 0, 0, 0, last)
            let records = Update.host("h\(last)", ipv4: IPv4Address(10, 77, 0, last)).map {
                HeldRecord(
                    record: $0, sequence: 1, registeredAt: now + .seconds(-10), expiresAt: now + .seconds(seconds))
            }
            return Owner(
                key: OwnerKey(interface: "eth0", primaryMAC: mac), wakeMAC: mac, sequence: 1,
                registeredAt: now + .seconds(-10), updatedAt: now + .seconds(-10), records: records)
        }
        let saved = [owner(2, expiresIn: 3600), owner(3, expiresIn: -1), owner(4, expiresIn: 10 * 86_400)]
        let actions = harness.core.restore(saved, now: now)
        #expect(Set(harness.core.owners.keys.map(\.primaryMAC.bytes.5)) == [2, 4])
        #expect(actions.storeChanges.contains(.removeOwner(saved[1].key)))
        #expect(actions.events.map(\.kind) == [.expired])
        #expect(actions.events.first?.detail.contains("while the proxy was not running") == true)
        let clamped = try #require(harness.core.owners[saved[2].key])
        #expect(clamped.records.allSatisfy { $0.expiresAt == now + .seconds(86_400) })
        #expect(actions.savedOwners.map(\.key) == [saved[2].key])
        #expect(harness.core.recordCount == 10)
        harness.checkInvariants()

        // The restored names are defended like fresh ones.
        let intruder = MACAddress(0x02, 0, 0, 0, 0, 0x66)
        let hijack = harness.register(
            Update.bytes(
                records: Update.host("h2", ipv4: IPv4Address(10, 77, 0, 2)),
                owner: OwnerOption(sequence: 1, primaryMAC: intruder)))
        #expect(hijack.events.first?.reason == .nameHijack)
    }

    /// Many owners with leases renewed in a shuffled order expire in lease order, each exactly on time.
    @Test func manyOwnersExpireInOrder() throws {
        var harness = Harness(configuration: CoreConfiguration(maximumRecordsTotal: 100_000))
        var generator = SystemRandomNumberGenerator()
        var expected: [(UnixTime, MACAddress)] = []
        let start = harness.now
        for index in (0..<200).shuffled(using: &generator) {
            let mac = MACAddress(0x02, 0x10, 0, 0, UInt8(index >> 8), UInt8(index & 0xFF))
            let lease = UInt32(60 + (index * 37) % 500)
            let records = Update.host("h\(index)", ipv4: IPv4Address(10, 77, UInt8(index >> 8), UInt8(index & 0xFF)))
            // Register twice: the second, longer lease is the one that counts.
            harness.register(
                Update.bytes(
                    records: records, owner: OwnerOption(sequence: 1, primaryMAC: mac),
                    lease: UpdateLease(lease: lease / 2)))
            harness.register(
                Update.bytes(
                    records: records, owner: OwnerOption(sequence: 1, primaryMAC: mac), lease: UpdateLease(lease: lease)
                ))
            expected.append((start + .seconds(Int64(lease)), mac))
        }
        expected.sort { ($0.0, $0.1) < ($1.0, $1.1) }
        var expired: [(UnixTime, MACAddress)] = []
        while let deadline = harness.core.nextDeadline {
            #expect(deadline >= harness.now)
            harness.now = deadline
            for event in harness.tick().events where event.kind == .expired && event.detail.hasPrefix("lease ended") {
                expired.append((harness.now, try #require(event.owner)))
            }
        }
        #expect(expired.count == 200)
        #expect(expired.map(\.0) == expected.map(\.0))
        #expect(expired.map(\.1) == expected.map(\.1))
        #expect(harness.core.owners.isEmpty)
    }

    /// A long story with the clock injected: register, renew at 90 % of the lease for a day, then go quiet.
    @Test func aDayOfMaintenanceWakes() throws {
        var harness = Harness()
        let records = Update.host("a", ipv4: IPv4Address(10, 77, 0, 2))
        var sequence: UInt8 = 250
        for _ in 0..<14 {
            harness.register(Update.bytes(records: records, owner: Update.owner(sequence: sequence)))
            harness.advance(.seconds(6480))
            #expect(!harness.tick().events.contains { $0.kind == .expired })
            sequence &+= 1
        }
        #expect(harness.log.events.filter { $0.kind == .replaced }.count == 13)
        harness.advance(.seconds(720))
        #expect(harness.tick().events.map(\.kind) == [.expired, .wake])
    }
}

/// Timers follow a steady clock: when the system clock steps, the shell moves what the core holds by the same
/// amount, and each lease keeps the time it had left.
@Suite("Clock steps")
struct ClockStepTests {
    static func expiry(after step: Duration) throws -> (registered: UnixTime, expired: UnixTime) {
        var harness = Harness()
        let registered = harness.now
        harness.register(Update.bytes(records: Update.host("sleepy", ipv4: IPv4Address(10, 77, 0, 2))))
        harness.run(until: harness.now + .seconds(10))
        // The shell saw the wall clock step: from now on its time is the stepped one.
        let actions = harness.core.clockStepped(by: step)
        harness.log += actions
        harness.now = harness.now + step
        let saved = try #require(actions.savedOwners.first)
        #expect(saved.expiresAt == registered + .seconds(7200) + step, "the store gets the true wall-clock expiry")
        #expect(actions.logLines.contains { $0.1.contains("stepped by") })
        while let deadline = harness.core.nextDeadline {
            harness.now = max(harness.now, deadline)
            if harness.tick().events.contains(where: { $0.kind == .expired }) { return (registered, harness.now) }
        }
        return (registered, harness.now)
    }

    @Test(arguments: [Duration.seconds(3600), .seconds(-3600), .seconds(86_400 * 365 * 50)])
    func aStepNeitherExpiresNorStretchesALease(step: Duration) throws {
        let (registered, expired) = try Self.expiry(after: step)
        #expect(expired == registered + .seconds(7200) + step)
    }
}
