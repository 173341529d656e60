import NetworkAddresses
import SleepProxyCore

/// What the daemon remembers of hosts beyond what it holds: the newest wake of each owner, for `hosts` (filled
/// from the event history at start), and the names of hosts held since the start, by OWNER primary MAC, so that
/// events name hosts that have gone.
struct HostHistory: Sendable {
    private(set) var lastWakes: [OwnerKey: Event] = [:]
    private(set) var knownNames: [MACAddress: String] = [:]

    /// Keeps `event` if it is a wake (or a wake a dry run left out) of an owner.
    mutating func note(_ event: Event) {
        guard event.kind == .wake || event.kind == .wouldWake, let owner = event.owner else { return }
        lastWakes[OwnerKey(interface: event.interface, primaryMAC: owner)] = event
    }

    /// Keeps `owner`'s name, if it has one.
    mutating func remember(_ owner: Owner) {
        if let name = owner.firstHostName { knownNames[owner.key.primaryMAC] = name }
    }
}
