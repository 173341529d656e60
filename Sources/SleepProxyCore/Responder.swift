import DNSWire
import NetworkAddresses

/// A multicast response or announcement waiting for its time.
struct PendingResponse: Sendable {
    var due: UnixTime
    var interface: InterfaceName
    var group: Endpoint
    var answers: [DNSRecord]
    /// The querier whose truncated query (TC) may still be followed by more known answers.
    var querier: Endpoint?
    /// Announcements go out even if the records were multicast a moment ago (the second one is ~1 s later).
    var isAnnouncement: Bool
}

/// A record as the once-a-second multicast limit sees it: interface, family, name in lower case, type, RDATA.
struct MulticastKey: Hashable, Sendable {
    var interface: InterfaceName
    var ipv6: Bool
    var name: DNSName
    var type: DNSType
    var rdata: RData
}

extension SleepProxyCore {
    // MARK: Input

    /// Handles one mDNS packet seen on an interface: releases hosts that show themselves awake, then answers
    /// queries for held records as RFC 6762 asks.
    public mutating func handleMDNS(_ packet: MDNSPacket, now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        guard let link = links[packet.interface] else { return actions }
        let message: DNSMessage
        do {
            message = try DNSMessage(decoding: packet.bytes)
        } catch {
            actions.append(.log(.debug, "mDNS from \(packet.source) on \(packet.interface) ignored: \(error)"))
            return actions
        }
        // OWNER first: a waking Mac's announcement must not look like a conflict (PROTOCOL.md section 3.1).
        actions += releaseOnOwner(message, packet, now: now)
        actions += releaseOnOwnAnnouncement(message, packet, now: now)
        actions += checkAdvertisementConflict(message, packet, now: now)
        actions += checkHeldConflicts(message, packet, now: now)
        if !message.flags.isResponse, message.flags.opcode == .query {
            actions += answer(message, packet, link: link, now: now)
        }
        return actions
    }

    // MARK: Release

    /// Any mDNS packet carrying a held host's OWNER with another sequence number, or arriving when its records
    /// are more than 60 s old, means the host is awake: its records go, silently (mDNS.c `ClearProxyRecords`).
    mutating func releaseOnOwner(_ message: DNSMessage, _ packet: MDNSPacket, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for opt in message.optRecords {
            guard let option = opt.optData?.owner, option.version == 0, !option.primaryMAC.isZero else { continue }
            let key = OwnerKey(interface: packet.interface, primaryMAC: option.primaryMAC)
            guard let owner = owners[key] else { continue }
            let oldest = owner.records.map(\.registeredAt).min() ?? now
            let age = now - oldest
            guard option.sequence != owner.sequence || age > MulticastDNS.ownerReleaseAge else { continue }
            let kind = message.flags.isResponse ? "response" : "query"
            let why =
                option.sequence != owner.sequence
                ? "OWNER seq \(option.sequence) (held \(owner.sequence))"
                : "OWNER seq \(option.sequence), records \(age.components.seconds) s old"
            actions += release(owner, now: now, detail: "\(why) in an mDNS \(kind) from \(packet.source)")
        }
        return actions
    }

    /// Hosts whose mDNS never carries OWNER (Linux with avahi) show they are back by probing or announcing one
    /// of their held unique names from their own wake MAC (PROTOCOL.md section 6 item 18).
    mutating func releaseOnOwnAnnouncement(_ message: DNSMessage, _ packet: MDNSPacket, now: UnixTime) -> [Action] {
        guard let mac = packet.sourceMAC else { return [] }
        let claimed = message.flags.isResponse ? message.answers : message.authorities
        var actions: [Action] = []
        for record in claimed where HeldRecord.claimsUniqueName(record) {
            let name = UniqueName(interface: packet.interface, name: record.name.lowercased())
            for key in heldNames[name] ?? [] {
                guard let owner = owners[key], owner.wakeMAC == mac else { continue }
                let what = message.flags.isResponse ? "announced" : "probed"
                actions += release(owner, now: now, detail: "\(what) its name \(record.name) from its own MAC \(mac)")
            }
        }
        return actions
    }

    /// Drops an owner that is awake again: no goodbyes (the host answers for itself now), no wake.
    mutating func release(_ owner: Owner, now: UnixTime, detail: String) -> [Action] {
        guard owners[owner.key] != nil else { return [] }
        let stopped = stopTakeovers(of: owner.key)
        remove(owner.key)
        let event = Event(
            time: now, kind: .released, interface: owner.key.interface, owner: owner.key.primaryMAC, detail: detail)
        return stopped + [
            .store(.removeOwner(owner.key)), .store(.appendEvent(event)),
            .log(.info, "released \(owner.key): \(detail)"),
        ]
    }

    // MARK: Conflicts

    /// How soon a second conflict must follow the first to count as persistent: about the length of the silent
    /// re-probe (three ticks of 250 ms) that Apple's proxy puts a conflicted record through, with some slack.
    static let conflictWindow: Duration = .seconds(2)

    /// RFC 6762 section 9 for held records: another host answering a held unique name and type with other data
    /// is a conflict. The first is defended (our record multicast at once); a second within the window means the
    /// other host means it, and the owner is woken to sort it out (PROTOCOL.md section 3.1). A probe from another
    /// host for a held unique name is defended by answering it, as any responder does.
    mutating func checkHeldConflicts(_ message: DNSMessage, _ packet: MDNSPacket, now: UnixTime) -> [Action] {
        if let mac = packet.sourceMAC, mac == links[packet.interface]?.macAddress { return [] }
        let theirs = message.flags.isResponse ? message.answers : message.authorities
        var actions: [Action] = []
        var defended: [DNSRecord] = []
        for record in theirs where record.ttl > 0 {
            let name = UniqueName(interface: packet.interface, name: record.name.lowercased())
            for key in heldNames[name] ?? [] {
                guard let owner = owners[key], packet.sourceMAC != owner.wakeMAC else { continue }
                let ours = owner.records.map(\.record).filter {
                    $0.cacheFlush && $0.type == record.type && $0.name.caseInsensitiveEquals(record.name)
                }
                guard !ours.isEmpty, !ours.contains(where: { HeldRecord.identical($0, record) }) else { continue }
                if message.flags.isResponse {
                    if let first = conflicts[key], now - first <= Self.conflictWindow {
                        conflicts[key] = nil
                        let reason = "\(packet.source) keeps answering \(record.name) \(record.type) with other data"
                        let event = Event(
                            time: now, kind: .conflict, interface: key.interface, owner: key.primaryMAC,
                            source: packet.source, detail: "persistent conflict: \(reason); waking the owner")
                        actions += [.store(.appendEvent(event)), .log(.warning, "\(key): \(event.detail)")]
                        actions += startWake(key, now: now, reason: "name conflict: \(reason)", source: packet.source)
                        continue
                    }
                    conflicts[key] = now
                    actions.append(
                        .log(
                            .notice,
                            "\(key): \(packet.source) answered \(record.name) \(record.type) with other data; defending"
                        ))
                }
                defended += ours.filter { !defended.contains($0) }
            }
        }
        guard !defended.isEmpty else { return actions }
        let reply = DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: defended)
        let group = MulticastDNS.group(for: packet.source.address)
        for bytes in Self.encode(reply, truncateIfTooLarge: false) {
            actions.append(.sendMDNS(MDNSTransmission(interface: packet.interface, bytes: bytes, destination: group)))
        }
        return actions
    }

    /// Forgets an owner at the administrator's request (or after a wake that went unanswered): goodbyes (TTL 0)
    /// for its records, so that caches drop them at once, then the records go.
    public mutating func forget(_ key: OwnerKey, now: UnixTime, reason: String) -> [Action] {
        guard let owner = owners[key] else { return [.log(.warning, "forget \(key): not held")] }
        let goodbyes = owner.records.map { held in
            var record = held.record
            record.ttl = 0
            return record
        }
        let stopped = stopTakeovers(of: key)
        remove(key)
        let event = Event(
            time: now, kind: .released, interface: key.interface, owner: key.primaryMAC, detail: "forgotten: \(reason)")
        return multicastNow(goodbyes, interface: key.interface) + stopped + [
            .store(.removeOwner(key)), .store(.appendEvent(event)), .log(.notice, "\(key): \(event.detail)"),
        ]
    }

    // MARK: Answers

    /// Answers one query (RFC 6762 sections 5 and 6): the held records that match each question, less the
    /// known answers the querier already has, with the additional records DNS-SD clients expect.
    mutating func answer(_ message: DNSMessage, _ packet: MDNSPacket, link: Link, now: UnixTime) -> [Action] {
        let knownAnswers = message.answers
        // More known answers for a truncated query asked a moment ago by the same querier.
        if message.questions.isEmpty {
            pruneKnownAnswers(knownAnswers, from: packet.source, interface: packet.interface)
            return []
        }
        var unicast: [DNSRecord] = []
        var multicast: [DNSRecord] = []
        let directUnicast = !isMulticast(packet.destination)
        for question in message.questions {
            guard question.questionClass == .internet || question.questionClass == .any else { continue }
            var records = lookup(question.name, type: question.type, interface: packet.interface)
            if records.isEmpty,
                let nsec = negativeAnswer(question.name, type: question.type, interface: packet.interface)
            {
                records = [nsec]
            }
            records.removeAll { record in knownAnswers.contains { Self.suppresses($0, record) } }
            if packet.isLegacyUnicast || question.unicastResponse || directUnicast {
                unicast += records.filter { record in !unicast.contains(record) }
            } else {
                multicast += records.filter { record in !multicast.contains(record) }
            }
        }
        var actions: [Action] = []
        if !unicast.isEmpty {
            let additionals = additionalRecords(for: unicast, interface: packet.interface).filter { record in
                !knownAnswers.contains { Self.suppresses($0, record) }
            }
            let reply: DNSMessage
            if packet.isLegacyUnicast {
                // A conventional DNS reply: the query's ID and question, TTLs of at most 10 s, no cache-flush bits.
                func legacy(_ record: DNSRecord) -> DNSRecord {
                    var copy = record
                    copy.ttl = min(copy.ttl, MulticastDNS.legacyUnicastTTL)
                    copy.cacheFlush = false
                    return copy
                }
                reply = DNSMessage(
                    id: message.id, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
                    questions: message.questions, answers: unicast.map(legacy), additionals: additionals.map(legacy))
            } else {
                reply = DNSMessage(
                    id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: unicast,
                    additionals: additionals)
            }
            for bytes in Self.encode(reply, truncateIfTooLarge: packet.isLegacyUnicast) {
                actions.append(
                    .sendMDNS(
                        MDNSTransmission(
                            interface: packet.interface, bytes: bytes, destination: packet.source,
                            destinationScopeID: packet.sourceScopeID,
                            source: directUnicast ? packet.destination : nil)))
            }
        }
        if !multicast.isEmpty {
            // Shared records may be answered by several responders: wait 20-120 ms (RFC 6762 section 6). A truncated
            // query is followed by more known answers: wait 400-500 ms for them (section 7.2).
            let delay: Duration
            if message.flags.truncated {
                delay = .milliseconds(Int64.random(in: 400...500, using: &random))
            } else if multicast.contains(where: { !$0.cacheFlush }) {
                delay = .milliseconds(Int64.random(in: 20...120, using: &random))
            } else {
                delay = .zero
            }
            pendingResponses.append(
                PendingResponse(
                    due: now + delay, interface: packet.interface,
                    group: MulticastDNS.group(for: packet.source.address),
                    answers: multicast, querier: message.flags.truncated ? packet.source : nil, isAnnouncement: false))
            if delay == .zero { actions += sendDueResponses(now: now) }
        }
        return actions
    }

    /// Held records on `interface` whose name matches (ignoring case) and whose type matches (or ANY).
    func lookup(_ name: DNSName, type: DNSType, interface: InterfaceName) -> [DNSRecord] {
        var found = advertisementLookup(name, type: type, interface: interface)
        guard let keys = heldNames[UniqueName(interface: interface, name: name.lowercased())] else { return found }
        for key in keys where wakes[key] == nil {
            guard let owner = owners[key] else { continue }
            for held in owner.records
            where (type == .any || held.record.type == type) && held.record.name.caseInsensitiveEquals(name) {
                found.append(held.record)
            }
        }
        return found
    }

    /// The types held for a unique name, if every record of that name is unique (cache-flush); nil for shared or
    /// unknown names.
    func uniqueTypes(of name: DNSName, interface: InterfaceName) -> (types: [DNSType], ttl: UInt32)? {
        let records = lookup(name, type: .any, interface: interface)
        guard !records.isEmpty, records.allSatisfy(\.cacheFlush) else { return nil }
        return (Array(Set(records.map(\.type))).sorted(), records.map(\.ttl).max() ?? 120)
    }

    /// RFC 6762 section 6.1: asked for a type a unique name does not have, say so with an NSEC.
    func negativeAnswer(_ name: DNSName, type: DNSType, interface: InterfaceName) -> DNSRecord? {
        guard type != .any, let held = uniqueTypes(of: name, interface: interface) else { return nil }
        let owner = lookup(name, type: .any, interface: interface).first?.name ?? name
        return DNSRecord(
            name: owner, ttl: held.ttl, cacheFlush: true, rdata: .nsec(NSECData(nextName: owner, types: held.types)))
    }

    /// RFC 6763 section 12: for a PTR answer the instance's SRV and TXT and the target's addresses; for an SRV
    /// answer the target's addresses; plus an NSEC for every unique name so that a querier knows what is not there.
    func additionalRecords(for answers: [DNSRecord], interface: InterfaceName) -> [DNSRecord] {
        var additional: [DNSRecord] = []
        func add(_ records: [DNSRecord]) {
            for record in records where !answers.contains(record) && !additional.contains(record) {
                additional.append(record)
            }
        }
        var targets: [DNSName] = []
        for answer in answers {
            switch answer.rdata {
            case .ptr(let instance) where ReverseMapping.address(of: answer.name) == nil:
                let srv = lookup(instance, type: .srv, interface: interface)
                add(srv)
                add(lookup(instance, type: .txt, interface: interface))
                for case .srv(let data) in srv.map(\.rdata) { targets.append(data.target) }
            case .srv(let data):
                targets.append(data.target)
            default:
                break
            }
        }
        for target in targets {
            add(lookup(target, type: .a, interface: interface))
            add(lookup(target, type: .aaaa, interface: interface))
        }
        var nsecNames: [DNSName] = []
        for record in answers + additional where record.cacheFlush && record.type != .nsec {
            if !nsecNames.contains(where: { $0.caseInsensitiveEquals(record.name) }) { nsecNames.append(record.name) }
        }
        for name in nsecNames {
            guard let held = uniqueTypes(of: name, interface: interface) else { continue }
            let nsec = DNSRecord(
                name: name, ttl: held.ttl, cacheFlush: true, rdata: .nsec(NSECData(nextName: name, types: held.types)))
            if !answers.contains(where: { $0.type == .nsec && $0.name.caseInsensitiveEquals(name) }) { add([nsec]) }
        }
        return additional
    }

    /// RFC 6762 section 7.1: a known answer suppresses ours when it is the same record with at least half our TTL.
    static func suppresses(_ known: DNSRecord, _ ours: DNSRecord) -> Bool {
        known.type == ours.type && known.recordClass == ours.recordClass && known.ttl >= ours.ttl / 2
            && known.name.caseInsensitiveEquals(ours.name) && HeldRecord.sameRData(known.rdata, ours.rdata)
    }

    mutating func pruneKnownAnswers(_ known: [DNSRecord], from querier: Endpoint, interface: InterfaceName) {
        for index in pendingResponses.indices
        where pendingResponses[index].querier == querier && pendingResponses[index].interface == interface {
            pendingResponses[index].answers.removeAll { record in known.contains { Self.suppresses($0, record) } }
        }
    }

    func isMulticast(_ address: IPAddress) -> Bool {
        switch address {
        case .v4(let v4): v4.isMulticast
        case .v6(let v6): v6.isMulticast
        }
    }

    // MARK: Announcements and sending

    /// Announces records of a host just taken over, twice, the second about a second after the first, on both
    /// families of the link. Reverse-mapping PTRs are not announced: they are answered when asked.
    mutating func scheduleAnnouncement(of records: [DNSRecord], on link: Link, now: UnixTime) {
        let announced = records.filter { ReverseMapping.address(of: $0) == nil }
        guard !announced.isEmpty else { return }
        let groups = Self.groups(of: link)
        // Unique records of a host are announced after three silent probe ticks of 250 ms, as Apple's proxy does.
        for offset in [Duration.milliseconds(750), .milliseconds(1750)] {
            for group in groups {
                pendingResponses.append(
                    PendingResponse(
                        due: now + offset, interface: link.name, group: group, answers: announced, querier: nil,
                        isAnnouncement: true))
            }
        }
    }

    /// Sends the multicast responses that are due, keeping only records still held and not multicast on that
    /// interface and family within the last second.
    mutating func sendDueResponses(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        let due = pendingResponses.filter { $0.due <= now }.sorted { $0.due < $1.due }
        pendingResponses.removeAll { $0.due <= now }
        for response in due {
            let ipv6 = if case .v6 = response.group.address { true } else { false }
            var answers: [DNSRecord] = []
            for record in response.answers {
                guard isHeld(record, interface: response.interface) else { continue }
                let key = MulticastKey(
                    interface: response.interface, ipv6: ipv6, name: record.name.lowercased(), type: record.type,
                    rdata: record.rdata)
                if !response.isAnnouncement, let last = lastMulticast[key], now - last < MulticastDNS.multicastInterval
                {
                    continue
                }
                lastMulticast[key] = now
                answers.append(record)
            }
            guard !answers.isEmpty else { continue }
            let additionals =
                response.isAnnouncement ? [] : additionalRecords(for: answers, interface: response.interface)
            let message = DNSMessage(
                id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: answers,
                additionals: additionals)
            for bytes in Self.encode(message, truncateIfTooLarge: false) {
                actions.append(
                    .sendMDNS(
                        MDNSTransmission(interface: response.interface, bytes: bytes, destination: response.group)))
            }
        }
        if lastMulticast.count > 4 * recordCount + 1024 {
            lastMulticast = lastMulticast.filter { now - $0.value < MulticastDNS.multicastInterval }
        }
        return actions
    }

    /// Whether some live owner on `interface` still holds `record` (it may have been released or expired since
    /// a response was scheduled).
    func isHeld(_ record: DNSRecord, interface: InterfaceName) -> Bool {
        if record.type == .nsec, uniqueTypes(of: record.name, interface: interface) != nil { return true }
        let name = record.name.lowercased()
        if heldRecords[Self.recordKey(record, lowercasedName: name, interface: interface)] != nil {
            // Held; but not answered while its owner is being woken.
            guard !wakes.isEmpty else { return true }
            return heldNames[UniqueName(interface: interface, name: name)]?.contains { key in
                wakes[key] == nil && owners[key]?.records.contains { $0.record == record } == true
            } == true
        }
        return !advertisementLookup(record.name, type: record.type, interface: interface).filter { $0 == record }
            .isEmpty
    }

    static func recordKey(_ record: DNSRecord, lowercasedName: DNSName, interface: InterfaceName) -> MulticastKey {
        MulticastKey(interface: interface, ipv6: false, name: lowercasedName, type: record.type, rdata: record.rdata)
    }

    /// Encodes a response, splitting the answers over several messages when one would exceed the mDNS limit
    /// (multicast), or truncating with TC (legacy unicast, which can retry over TCP).
    static func encode(_ message: DNSMessage, truncateIfTooLarge: Bool) -> [[UInt8]] {
        guard let bytes = try? message.encoded(), bytes.count > MulticastDNS.maximumMessage else {
            return (try? message.encoded()).map { [$0] } ?? []
        }
        var lean = message
        lean.additionals = []
        if let bytes = try? lean.encoded(), bytes.count <= MulticastDNS.maximumMessage { return [bytes] }
        if truncateIfTooLarge || message.answers.count < 2 {
            var truncated = lean
            truncated.flags.truncated = true
            while truncated.answers.count > 1,
                (try? truncated.encoded()).map({ $0.count > MulticastDNS.maximumMessage }) ?? true
            {
                truncated.answers.removeLast()
            }
            return (try? truncated.encoded()).map { [$0] } ?? []
        }
        let half = message.answers.count / 2
        var first = lean
        first.answers = Array(message.answers[..<half])
        var second = lean
        second.answers = Array(message.answers[half...])
        return encode(first, truncateIfTooLarge: false) + encode(second, truncateIfTooLarge: false)
    }
}
