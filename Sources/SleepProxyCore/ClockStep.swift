/// Leases are wall-clock times (they outlive the process), but timers must not follow steps of the wall clock:
/// NTP setting the time after boot on a board without a real-time clock would otherwise expire every lease at
/// once, or stretch them. The shell keeps time from a monotonic clock anchored to the wall clock, and when it
/// sees the wall clock step it moves everything the core holds by the same amount: what is left of each lease,
/// each probe and each wake stays as it was, and the store gets the true wall-clock times.
extension SleepProxyCore {
    mutating func moveTimes(by step: Duration) -> [Action] {
        guard step != .zero else { return [] }
        func moved(_ time: UnixTime) -> UnixTime { time + step }
        var actions: [Action] = []
        for key in hosts.keys.sorted() {
            guard var host = hosts[key] else { continue }
            host.owner.registeredAt = moved(host.owner.registeredAt)
            host.owner.updatedAt = moved(host.owner.updatedAt)
            host.owner.records.updateEach { held in
                held.registeredAt = moved(held.registeredAt)
                held.expiresAt = moved(held.expiresAt)
            }
            host.takeovers = host.takeovers.mapTakeovers { takeover in
                var copy = takeover
                copy.next = copy.next.map(moved)
                copy.backoffUntil = copy.backoffUntil.map(moved)
                return copy
            }
            host.probes.update { $0.started = moved($0.started) }
            if var wake = host.wake {
                wake.next = moved(wake.next)
                host.state = .waking(wake)
            }
            // Re-inserted so that the expiry index follows.
            hosts.remove(key)
            hosts.insert(host)
            actions += storedOwnerChange(of: key)
            if host.wake != nil { actions += storedWakeChange(of: key) }
        }
        hosts.moveProbeEnds(by: step)
        for key in declared.keys {
            guard var watch = declared[key] else { continue }
            watch.liveness.moveTimes(by: step)
            watch.records.moveTimes(by: step)
            watch.checkAt = watch.checkAt.map(moved)
            declared[key] = watch
        }
        schedule.clockStepped(by: step)
        for interface in advertisements.interfaces {
            guard var copy = advertisements[interface] else { continue }
            switch copy.state {
            case .probing(let sent, let next): copy.state = .probing(sent: sent, next: moved(next))
            case .announcing(let sent, let next): copy.state = .announcing(sent: sent, next: moved(next))
            case .announced: continue
            }
            advertisements.set(copy, on: interface)
        }
        allowances.clockStepped(by: step)
        seen.moveTimes(by: step)
        listener.moveTimes(by: step)
        refreshAllHostDeadlines()
        let seconds = step.components.seconds
        actions.append(
            .log(
                .notice,
                "the system clock stepped by \(seconds >= 0 ? "+" : "")\(seconds) s; held leases keep the time they had left"
            ))
        return actions
    }
}
