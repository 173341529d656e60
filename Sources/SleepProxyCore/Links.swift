public import NetworkAddresses

extension SleepProxyCore {
    /// Stops serving `interface` (the administrator removed it from the configuration). Its hosts are woken with
    /// one round of magic packets now, so that they find another proxy, and dropped with goodbyes for their
    /// records; the advertisement there is withdrawn. What remains for the shell is to close that interface.
    mutating func unserve(_ interface: InterfaceName, now: UnixTime, reason: String) -> [Action] {
        var actions: [Action] = stopAdvertising(on: interface, now: now)
        guard let link = links[interface] else { return actions }
        for key in hosts.keys.sorted() where key.interface == interface {
            guard let host = hosts[key] else { continue }
            // A declared host has no other proxy to find: it is let go without a wake.
            guard !host.declared else {
                actions += drop(
                    key, reason: .unserved("\(interface) is no longer served: \(reason)"), now: now)
                continue
            }
            let event = Event(
                time: now, kind: .wake, interface: interface, owner: key.primaryMAC, detail: reason)
            actions += [.store(.appendEvent(event)), .log(.notice, "waking \(key): \(reason)")]
            statistics.wakes[.unserved, default: 0] += 1
            actions += wakeRound(0, owner: host.owner, link: link)
            actions += drop(key, reason: .unserved("\(interface) is no longer served: \(reason)"), now: now)
        }
        links[interface] = nil
        hosts.forgetWatchedPrefixes(on: interface)
        schedule.updatePending({ _ in }, dropping: { $0.interface == interface })
        refreshAllHostDeadlines()
        return actions
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
                phase = takeover.answers ? .claimed : .probing
            }
            return AddressState(address: address, phase: phase, restarts: takeover.restarts)
        }
    }
}
