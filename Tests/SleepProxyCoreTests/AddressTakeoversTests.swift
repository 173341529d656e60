import NetworkAddresses
import Testing

@testable import SleepProxyCore

/// A host's take-overs, kept as a short sorted list: read back by address whatever the order they were set in,
/// walked in address order, removed by setting nil, and compared by their addresses only.
@Suite("Address take-overs")
struct AddressTakeoversTests {
    static let start = UnixTime(seconds: 1_700_000_000)
    static let v4a = IPAddress.v4(IPv4Address(10, 0, 0, 9))
    static let v4b = IPAddress.v4(IPv4Address(10, 0, 0, 20))
    static let v6 = IPAddress.v6(IPv6Address(high: 0xfe80_0000_0000_0000, low: 0x1))

    static func takeover(_ sent: Int, at seconds: Int64) -> AddressTakeover {
        AddressTakeover(phase: .probing(sent: sent), next: start + .seconds(seconds))
    }

    @Test func setInAnyOrderReadBackByAddressAndWalkedInOrder() {
        var takeovers = AddressTakeovers()
        // Into an empty list, before the first, between two, after the last.
        takeovers[Self.v4b] = Self.takeover(1, at: 2)
        takeovers[Self.v4a] = Self.takeover(0, at: 1)
        takeovers[Self.v6] = Self.takeover(2, at: 3)
        #expect(takeovers.addresses == [Self.v4a, Self.v4b, Self.v6])
        let between = IPAddress.v4(IPv4Address(10, 0, 0, 10))
        takeovers[between] = Self.takeover(0, at: 9)
        #expect(takeovers.count == 4)
        #expect(takeovers.addresses == [Self.v4a, between, Self.v4b, Self.v6])
        #expect(takeovers[between] == Self.takeover(0, at: 9))
        takeovers[between] = nil
        #expect(takeovers[Self.v4b] == Self.takeover(1, at: 2))
        #expect(takeovers[Self.v6] == Self.takeover(2, at: 3))
        #expect(takeovers[between] == nil)
        #expect(takeovers[.v4(IPv4Address(10, 0, 0, 11))] == nil)
        #expect(takeovers.map(\.takeover.next) == [1, 2, 3].map { Self.start + .seconds($0) })

        // Set again: replaced in place, not added twice.
        takeovers[Self.v4b] = Self.takeover(2, at: 5)
        #expect(takeovers.count == 3)
        #expect(takeovers[Self.v4b] == Self.takeover(2, at: 5))

        // Nil removes; removing what is not there changes nothing.
        takeovers[Self.v4a] = nil
        takeovers[.v4(IPv4Address(192, 168, 1, 1))] = nil
        #expect(takeovers.addresses == [Self.v4b, Self.v6])
        #expect(takeovers[Self.v4a] == nil)
    }

    @Test func changedInPlaceAndMappedWithTheirAddresses() {
        var takeovers: AddressTakeovers = [Self.v6: Self.takeover(0, at: 1), Self.v4a: Self.takeover(0, at: 1)]
        #expect(takeovers.addresses == [Self.v4a, Self.v6])
        takeovers.update(at: 1) { $0.phase = .defending }
        #expect(takeovers[Self.v6]?.phase == .defending)
        #expect(takeovers[Self.v4a]?.phase == .probing(sent: 0))

        let moved = takeovers.mapTakeovers { takeover in
            var copy = takeover
            copy.next = copy.next.map { $0 + .seconds(60) }
            return copy
        }
        #expect(moved.addresses == takeovers.addresses)
        #expect(moved[Self.v4a]?.next == Self.start + .seconds(61))
        #expect(moved[Self.v6]?.phase == .defending)
    }

    @Test func sameAddressesWhateverTheirPhases() {
        let probing: AddressTakeovers = [Self.v4a: Self.takeover(0, at: 1), Self.v6: Self.takeover(0, at: 1)]
        var claimed = probing
        claimed.update(at: 0) { $0.phase = .announcing(sent: 1) }
        #expect(probing.holdsTheSameAddresses(as: claimed))
        var other = probing
        other[Self.v6] = nil
        #expect(!probing.holdsTheSameAddresses(as: other))
        other[Self.v4b] = Self.takeover(0, at: 1)
        #expect(!probing.holdsTheSameAddresses(as: other))
        #expect(AddressTakeovers().holdsTheSameAddresses(as: [:]))
    }
}
