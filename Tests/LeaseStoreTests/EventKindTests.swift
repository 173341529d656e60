import LeaseStore
import NetworkAddresses
import SleepProxyCore
import Testing

/// The store keeps an event's kind as its identifier string: every kind the core records comes back.
struct EventKindTests {
    /// The identifiers as stored; they must never change, or older histories stop loading.
    static let identifiers = [
        "registered", "renewed", "replaced", "refused", "expired", "released", "conflict", "takeover", "wake",
        "wake-cancelled", "wake-ignored", "would-wake", "keepalive", "asleep",
    ]

    @Test func identifiersAreStable() {
        #expect(Event.Kind.all.map(\.identifier) == Self.identifiers)
        #expect(Self.identifiers.compactMap { Event.Kind(identifier: $0) } == Event.Kind.all)
    }

    @Test func everyKindRoundTrips() throws {
        try withTemporaryDirectory { directory in
            let events = Event.Kind.all.enumerated().map { index, kind in
                Event(
                    time: baseTime + .seconds(Int64(index)), kind: kind, interface: "eth0", owner: mac(UInt8(index)),
                    source: Endpoint(address: .v4(IPv4Address(192, 0, 2, UInt8(index + 1))), port: 40_000),
                    detail: "\(kind) event")
            }
            let store = try LeaseStore(directory: directory)
            try store.apply(events.map { .appendEvent($0) })
            store.close()

            let loaded = try LeaseStore(directory: directory).events(limit: 100)
            #expect(loaded.problems == [])
            #expect(loaded.events.map(\.event) == events)
        }
    }
}
