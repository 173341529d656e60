import DNSWire
import NetworkAddresses

/// Other hosts' records against held ones (RFC 6762 sections 7.4, 8.2 and 9, as mDNS.c `mDNSCoreReceiveResponse`
/// applies them to a sleep proxy's records; PROTOCOL.md section 3.1).
///
/// - An identical record with less than half our TTL (a goodbye, typically the host's own as it goes down) would
///   make caches drop what we answer for: we re-announce ours at once.
/// - An identical record with at least half our TTL is someone else answering for us: a multicast answer of ours
///   still waiting for its time is cancelled (duplicate-answer suppression).
/// - A unique held record answered by another host with the same name and type but other data is a conflict. The
///   host itself (its wake MAC) never conflicts with its own records. A verified record goes back to silent
///   probing and is re-announced four times. Conflicts before the probe's first tick are ignored; one during the
///   probe is forgiven with a pause of a second. A further conflict, during the probe or before the record has
///   settled again, wakes the owner for that record only: it is withdrawn, the magic packets go out, its other
///   records stay answered.
/// - A probe from another host for a held unique name is defended by answering it at once.
extension SleepProxyCore {
    mutating func checkHeldConflicts(_ message: DNSMessage, _ packet: MDNSPacket, now: UnixTime) -> [Action] {
        let isResponse = message.flags.isResponse
        let theirs = isResponse ? message.answers + message.additionals : message.authorities
        var actions: [Action] = []
        var defended: [DNSRecord] = []
        var reannounced: [DNSRecord] = []
        var duplicates: [DNSRecord] = []
        // Each of their records is weighed against the held records as those before it left them (a conflict
        // puts a record back into probing, or wakes its owner for it).
        for record in theirs where record.type != .opt {
            let finding = weigh(record, from: packet, isResponse: isResponse, now: now)
            switch finding.echo {
            case .goodbye(let ours): if !reannounced.contains(ours) { reannounced.append(ours) }
            case .duplicate(let ours): duplicates.append(ours)
            case nil: break
            }
            for (ours, key) in finding.conflicts {
                actions += conflict(on: ours, of: key, packet: packet, now: now)
            }
            for ours in finding.defended where !defended.contains(ours) { defended.append(ours) }
        }
        let group = MulticastDNS.group(for: packet.source.address)
        if !duplicates.isEmpty {
            suppressDuplicateAnswers(duplicates, interface: packet.interface, group: group)
        }
        // A record is announced again at most once a second (RFC 6762 section 6: no multicast of a record within
        // a second of the last), and a source saying goodbye over and over costs one log line a minute.
        if !reannounced.isEmpty {
            reannounced = schedule.reannounce(reannounced, recordCount: hosts.recordCount, now: now)
        }
        if !reannounced.isEmpty {
            if allowances.noteGoodbyes(from: packet.source.address, now: now) {
                actions.append(
                    .log(
                        .info,
                        "\(packet.source) said goodbye to \(reannounced.count) held records (\(reannounced[0].name) \(reannounced[0].type)...); announcing them again (logged once a minute per source)"
                    ))
            }
            scheduleMulticast(reannounced, interface: packet.interface, groups: [group], at: now, announcement: true)
            actions += sendDueResponses(now: now)
        }
        if !defended.isEmpty {
            let reply = DNSMessage(
                id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: defended)
            for bytes in Self.encode(reply, truncateIfTooLarge: false) {
                actions.append(
                    .sendMDNS(MDNSTransmission(interface: packet.interface, bytes: bytes, destination: group)))
            }
        }
        return actions
    }

    /// What one record of another host's packet means for the held records, changing nothing: in a response, our
    /// own copy of it (a goodbye, or a duplicate answer) and the unique held records it conflicts with; in a
    /// probe's authority section, the unique held records it asks for that we answer, to defend.
    func weigh(_ record: DNSRecord, from packet: MDNSPacket, isResponse: Bool, now: UnixTime) -> HeldRecordFinding {
        var finding = HeldRecordFinding()
        // Our own copy of their record in a response: looked up by the record, so that a shared record every held
        // host has (`_services._dns-sd._udp.local. PTR _ssh._tcp.local.`) costs one lookup, not one per host. The
        // first holder that answers it speaks for all: the copies are one record on the wire.
        if isResponse {
            for key in hosts.holders(of: record, on: packet.interface) {
                guard let host = hosts[key],
                    let ours = host.owner.records.position(of: record).map(host.owner.records.record(at:)),
                    host.answers(ours, at: now)
                else { continue }
                finding.echo = record.ttl < ours.ttl / 2 ? .goodbye(ours) : .duplicate(ours)
                break
            }
        }
        // A conflict needs a unique record of ours with the name and type and other data: only the owners with a
        // unique record of the name are looked at, never every host holding a shared name.
        for key in hosts.uniqueCandidates(of: record.name, on: packet.interface) {
            guard let host = hosts[key] else { continue }
            let held = host.owner.records
            let sameType = held.indices.filter {
                held.type(at: $0) == record.type && held.nameEquals(at: $0, ignoringCase: record.name)
            }.map(held.record(at:))
            // A holder with its own copy of the record has no conflict with it (answered or not).
            guard !sameType.contains(where: { HeldRecord.identical($0, record) }) else { continue }
            let unique = sameType.filter(\.cacheFlush)
            guard !unique.isEmpty, record.ttl > 0, packet.sourceMAC != host.owner.wakeMAC else { continue }
            if isResponse {
                finding.conflicts += unique.map { ($0, key) }
            } else {
                finding.defended += unique.filter { host.answers($0, at: now) }
            }
        }
        return finding
    }

    /// What one conflicting answer does to one held record, changing nothing (PROTOCOL.md section 3.1): nothing
    /// for a record a wake withdrew or a host woken whole; during a probe, nothing before its first tick, a pause
    /// the first time, then a wake of the owner for that record, as for a conflict before the record has settled
    /// after an earlier one; a settled record is probed again.
    func conflictOutcome(on ours: DNSRecord, of key: OwnerKey, now: UnixTime) -> ConflictOutcome {
        guard let host = hosts[key], links[key.interface] != nil,
            let position = host.owner.records.position(of: ours)
        else { return .notHeld }
        if case .records(let withdrawn) = host.wake?.scope, withdrawn.contains(RecordIdentity(ours)) {
            return .withdrawn
        }
        guard host.wake?.scope != .host else { return .withdrawn }
        guard var probe = host.probes[position], now < probe.settledAt else {
            // A settled record goes back to silent probing, then is announced four times.
            return .probeAgain(RecordProbe(started: now, announcements: 4, afterConflict: true), at: position)
        }
        if now < probe.firstTick { return .beforeFirstTick }
        guard probe.isProbing(at: now), probe.forgiven == 0 else { return .wake }
        probe.forgiven += 1
        probe.started = now + RecordProbe.conflictPause - RecordProbe.tick
        return .forgiven(probe, at: position)
    }

    /// One conflicting answer for one held record.
    private mutating func conflict(on ours: DNSRecord, of key: OwnerKey, packet: MDNSPacket, now: UnixTime) -> [Action]
    {
        let what = "\(packet.source) answered \(ours.name) \(ours.type) with other data"
        switch conflictOutcome(on: ours, of: key, now: now) {
        case .notHeld, .withdrawn:
            return []
        case .beforeFirstTick:
            return [.log(.debug, "\(key): \(what) before the first probe tick; ignored")]
        case .forgiven(let probe, let position):
            restartProbe(ours, of: key, at: position, probe: probe)
            return [.log(.notice, "\(key): \(what) while it was probed; pausing a second and probing again")]
        case .wake:
            let reason = "name conflict: \(packet.source) keeps answering \(ours.name) \(ours.type) with other data"
            let event = Event(
                time: now, kind: .conflict, interface: key.interface, owner: key.primaryMAC, source: packet.source,
                detail:
                    "persistent conflict: \(reason); \(configuration.wakePolicy.dryRun ? "would wake (wake.dry_run)" : "waking") the owner for that record"
            )
            return [.store(.appendEvent(event)), .log(.warning, "\(key): \(event.detail)")]
                + startWake(
                    key, now: now, reason: reason, trigger: .nameConflict, source: packet.source,
                    scope: .records([RecordIdentity(ours)]))
        case .probeAgain(let probe, let position):
            restartProbe(ours, of: key, at: position, probe: probe)
            return [.log(.notice, "\(key): \(what); probing it again before re-announcing it")]
        }
    }

    /// Puts a held record in `probe` and schedules its announcements at the probe's end.
    private mutating func restartProbe(_ ours: DNSRecord, of key: OwnerKey, at position: Int, probe: RecordProbe) {
        guard let host = hosts[key], let link = links[key.interface] else { return }
        let count = host.owner.records.count
        hosts.update(key) { $0.probes.set(probe, at: position, of: count) }
        scheduleAnnouncements(of: [ours], on: link, probe: probe)
        refreshHostDeadline()
    }

    /// Forgets probes whose records have settled.
    mutating func settleProbes(of key: OwnerKey, now: UnixTime) {
        guard var probes = hosts[key]?.probes, !probes.isEmpty else { return }
        let before = probes
        probes.removeAll { now >= $0.settledAt }
        if probes != before { hosts.update(key) { $0.probes = probes } }
    }
}

/// What one record of another host's mDNS packet means for the held records (`SleepProxyCore.weigh`).
struct HeldRecordFinding {
    /// Our own copy of their record in a response, held and answered.
    enum Echo: Hashable {
        /// Theirs has less than half our TTL (a goodbye): caches would drop ours, so it is announced again.
        case goodbye(DNSRecord)
        /// Theirs has at least half our TTL: another responder answered it, so our multicast answer need not go.
        case duplicate(DNSRecord)
    }

    var echo: Echo?
    /// The unique held records a response conflicts with (same name and type, other data), with their owners.
    var conflicts: [(record: DNSRecord, key: OwnerKey)] = []
    /// The unique held records a probe asks for that we answer: defended with an answer at once.
    var defended: [DNSRecord] = []
}

/// What a conflicting answer does to one held record (`SleepProxyCore.conflictOutcome`).
enum ConflictOutcome: Hashable {
    /// The record, its owner or its link is no longer held or served.
    case notHeld
    /// A wake withdrew the record, or its whole host is being woken: it is not ours to defend.
    case withdrawn
    /// Before the first tick of its probe: ignored.
    case beforeFirstTick
    /// The first conflict during its probe: it is forgiven, probed again after a pause of a second.
    case forgiven(RecordProbe, at: Int)
    /// A further conflict during the probe, or one before the record settled after an earlier one: its owner is
    /// woken for that record.
    case wake
    /// A settled record: probed again silently, then announced four times.
    case probeAgain(RecordProbe, at: Int)
}
