public import NetworkAddresses

extension SleepProxyCore {
    /// Stops serving `interface`: the administrator removed it from the configuration, or the lease store kept
    /// hosts on an interface the configuration no longer names. The advertisement there is withdrawn and
    /// registrations there are refused from now on. A declared host there is let go without a wake (it has no other
    /// proxy to find), its claimed addresses handed back to it. Every registered host is woken the way every wake
    /// goes (a round every 2 s, unicast then broadcast, then goodbyes; `Wake.swift`), so that it registers with
    /// another proxy; one already being woken keeps its wake. The interface stays open for those wakes and closes
    /// (`.stopServing`) once its last host is back or its wake is over. In a dry run no host is woken: each gets its
    /// `would-wake` event and is dropped at once, with goodbyes.
    ///
    /// On an interface that cannot be served at all (no link: it could not be opened), the hosts cannot be woken:
    /// they are dropped, and the log says so.
    mutating func retire(_ interface: InterfaceName, now: UnixTime, reason: String) -> [Action] {
        let keys = hosts.keys.filter { $0.interface == interface }.sorted()
        guard links[interface] != nil else {
            return keys.flatMap { key in
                drop(
                    key,
                    reason: .unserved(
                        "\(reason); \(interface) cannot be served, so the host is dropped without a wake"),
                    now: now)
            }
        }
        var actions = stopAdvertising(on: interface, now: now)
        retiring.insert(interface)
        let dryRun = configuration.wakePolicy.dryRun
        for key in keys {
            guard let host = hosts[key] else { continue }
            if host.isDeclared {
                // First: the last host's drop closes the link.
                actions +=
                    handBack(host.claimedAddresses, to: host.owner.wakeMAC, on: interface)
                    + drop(key, reason: .unserved("\(interface) is no longer served: \(reason)"), now: now)
            } else if host.isWakingWhole {
                actions.append(.log(.info, "\(key): already being woken; \(interface) closes once its wake is over"))
            } else if dryRun {
                actions +=
                    wouldWake(key, now: now, reason: reason, limited: false)
                    + drop(key, reason: .unserved("\(interface) is no longer served: \(reason)"), now: now)
            } else {
                actions += startWake(key, now: now, reason: reason, trigger: .unserved, limited: false)
            }
        }
        actions += closeIfDrained(interface)
        if retiring.contains(interface) {
            let count = hosts.count(on: interface)
            actions.append(
                .log(
                    .notice,
                    "\(interface): serving only the wake of its \(count) held host\(count == 1 ? "" : "s") until each is back or its wake is over"
                ))
        }
        return actions
    }

    /// Serves a retiring interface again (the administrator put it back before its wakes were over). The wakes
    /// under way go on; registrations are taken again. Whether it was retiring.
    mutating func serveAgain(_ interface: InterfaceName) -> Bool {
        retiring.remove(interface) != nil
    }

    /// A retiring interface whose last host has gone is closed: nothing of it is kept, and the shell is told.
    mutating func closeIfDrained(_ interface: InterfaceName) -> [Action] {
        guard retiring.contains(interface), hosts.count(on: interface) == 0 else { return [] }
        retiring.remove(interface)
        links[interface] = nil
        seen.remove(on: interface)
        listener.remove(interface)
        hosts.forgetWatchedPrefixes(on: interface)
        schedule.updatePending({ _ in }, dropping: { $0.interface == interface })
        refreshAllHostDeadlines()
        return [
            .log(.notice, "\(interface): no host left to wake there; it is no longer served"),
            .stopServing(interface),
        ]
    }

    /// What a clean stop that keeps the leases must undo: our own host's neighbour entries pointing at sleeping
    /// hosts. (Multicast memberships end with their sockets.)
    public func actionsOnStop() -> [Action] {
        hosts.keys.sorted().flatMap { key in
            (hosts[key]?.neighbourEntries ?? []).sorted().map { Action.removeNeighbour(key.interface, $0) }
        }
    }
}

/// Where one held address is, as the administrator sees it.
public struct AddressState: Hashable, Sendable {
    public enum Phase: String, Hashable, Sendable {
        /// Checking that the host is really gone before claiming.
        case probing
        /// The host answered after the claim; probing again after a pause.
        case backingOff = "backing-off"
        /// Claimed: the proxy answers ARP or Neighbour Solicitations for it.
        case claimed
        /// Handed back to the host while it is being woken.
        case released
    }

    public var address: IPAddress
    public var phase: Phase
    /// Times probing restarted because the host showed itself.
    public var restarts: Int
}

extension SleepProxyCore {
    /// The take-over state of each of a host's addresses, for status output.
    public func addressStates(of key: OwnerKey, now: UnixTime) -> [AddressState] {
        guard let host = hosts[key] else { return [] }
        return host.takeovers.map { entry in
            let (address, takeover) = (entry.address, entry.takeover)
            let phase: AddressState.Phase
            if host.isWakingWhole {
                phase = .released
            } else if let until = takeover.backoffUntil, until > now {
                phase = .backingOff
            } else {
                phase = takeover.isClaimed ? .claimed : .probing
            }
            return AddressState(address: address, phase: phase, restarts: takeover.restarts)
        }
    }
}
