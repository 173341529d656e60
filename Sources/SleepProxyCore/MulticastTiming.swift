import DNSWire
import NetworkAddresses

/// When multicast goes out (RFC 6762 sections 6, 7.4, 8.3 and 10.1): announcements of what was taken over,
/// answers after their random delay, at most once a second per record, never for a record no longer held, in
/// messages of at most 1,440 bytes, and goodbyes only for records nobody else still holds.
extension SleepProxyCore {
    /// The DNS payload of a message we send: 1,440 bytes, unless a single record needs more (RFC 6762
    /// section 17; mDNSResponder's `NormalMaxDNSMessageData`).
    static let maximumMessage = 1_440

    /// Announces records of a host just taken over, twice, the second about a second after the first, on both
    /// families of the link. Unique records are announced once their silent probe (three ticks of 250 ms) is
    /// over, as Apple's proxy does; reverse-mapping PTRs are not announced: they are answered when asked.
    mutating func scheduleAnnouncement(of records: [DNSRecord], on link: Link, now: UnixTime) {
        let announced = records.filter { ReverseMapping.address(of: $0) == nil }
        guard !announced.isEmpty else { return }
        let verified = now + RecordProbe.tick * RecordProbe.ticks
        for offset in [Duration.zero, .seconds(1)] {
            scheduleMulticast(
                announced, interface: link.name, groups: Self.groups(of: link), at: verified + offset,
                announcement: true)
        }
    }

    /// Announces records at the end of a probe: as many times as the probe says, the gaps doubling from 1 s.
    mutating func scheduleAnnouncements(of records: [DNSRecord], on link: Link, probe: RecordProbe) {
        var due = probe.verifiedAt
        for index in 0..<Int(probe.announcements) {
            scheduleMulticast(records, interface: link.name, groups: Self.groups(of: link), at: due, announcement: true)
            let gaps = RecordProbe.conflictAnnouncementGaps
            due = due + gaps[min(index, gaps.count - 1)]
        }
    }

    mutating func scheduleMulticast(
        _ records: [DNSRecord], interface: InterfaceName, groups: [Endpoint], at due: UnixTime, announcement: Bool
    ) {
        for group in groups {
            schedule.schedule(
                PendingResponse(
                    due: due, interface: interface, group: group, answers: records, querier: nil,
                    isAnnouncement: announcement))
        }
    }

    /// Duplicate-answer suppression (RFC 6762 section 7.4): another responder multicast these records with at
    /// least half our TTL, so our own multicast answers of them (not announcements) need not go out.
    mutating func suppressDuplicateAnswers(_ records: [DNSRecord], interface: InterfaceName, group: Endpoint) {
        schedule.updatePending(
            { response in
                guard !response.isAnnouncement, response.interface == interface, response.group == group else { return }
                response.answers.removeAll { records.contains($0) }
            }, dropping: { $0.answers.isEmpty })
    }

    /// Sends the multicast responses that are due, keeping only records still held and answered, and not
    /// multicast on that interface and family within the last second (announcements excepted).
    mutating func sendDueResponses(now: UnixTime) -> [Action] {
        guard let earliest = schedule.earliestDue, earliest <= now else { return [] }
        var actions: [Action] = []
        let due = schedule.removeDue(by: now)
        // An announcement goes to each family's group as a response of its own, with the same records: which of
        // them are still answered, and the message, are worked out once for both.
        var lastChecked: (interface: InterfaceName, records: [DNSRecord], answered: [(DNSRecord, RecordDigest)])?
        var lastEncoded: (interface: InterfaceName, announcement: Bool, answers: [DNSRecord], messages: [[UInt8]])?
        for response in due {
            let ipv6 = if case .v6 = response.group.address { true } else { false }
            let answered: [(DNSRecord, RecordDigest)]
            if let lastChecked, lastChecked.interface == response.interface, lastChecked.records == response.answers {
                answered = lastChecked.answered
            } else {
                answered = response.answers.compactMap { record in
                    let name = NameDigest(record.name, interface: response.interface)
                    let digest = RecordDigest(record, name: name)
                    return isAnswered(record, name: name, digest: digest, interface: response.interface, now: now)
                        ? (record, digest) : nil
                }
                lastChecked = (response.interface, response.answers, answered)
            }
            var answers: [DNSRecord] = []
            answers.reserveCapacity(answered.count)
            for (record, digest) in answered {
                let key = MulticastKey(digest: digest, ipv6: ipv6)
                if !response.isAnnouncement, let last = schedule.lastMulticast(key),
                    now - last < MulticastDNS.multicastInterval
                {
                    continue
                }
                schedule.noteMulticast(key, at: now)
                answers.append(record)
            }
            guard !answers.isEmpty else { continue }
            let messages: [[UInt8]]
            if !response.isAnnouncement, answers.count == response.answers.count, let whole = response.whole,
                let cached = validatedWholeResponse(whole, answers, now: now)
            {
                messages = cached
            } else if let lastEncoded, lastEncoded.interface == response.interface,
                lastEncoded.announcement == response.isAnnouncement, lastEncoded.answers == answers
            {
                messages = lastEncoded.messages
            } else {
                let message = DNSMessage(
                    id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: answers)
                let interface = response.interface
                messages = Self.encode(
                    message,
                    additionals: {
                        response.isAnnouncement ? [] : additionalRecords(for: answers, interface: interface, now: now)
                    }, truncateIfTooLarge: false)
                lastEncoded = (response.interface, response.isAnnouncement, answers, messages)
            }
            for bytes in messages {
                actions.append(
                    .sendMDNS(
                        MDNSTransmission(interface: response.interface, bytes: bytes, destination: response.group)))
            }
            if !response.isAnnouncement { statistics.answersMulticast += messages.count }
        }
        schedule.pruneMulticastTimes(recordCount: hosts.recordCount, now: now)
        return actions
    }

    /// `wholeResponse` once the answer cache is checked against what its answers were worked out from: held
    /// state may have changed since the question was asked.
    private mutating func validatedWholeResponse(_ key: AnswerCacheKey, _ records: [DNSRecord], now: UnixTime)
        -> [[UInt8]]?
    {
        validateAnswerCache(now: now)
        return wholeResponse(key, records, now: now)
    }

    /// When `record` was last multicast on `interface` to the family of `group`.
    func lastMulticastTime(of record: DNSRecord, interface: InterfaceName, group: Endpoint) -> UnixTime? {
        let ipv6 = if case .v6 = group.address { true } else { false }
        return schedule.lastMulticast(MulticastKey(digest: RecordDigest(record, interface: interface), ipv6: ipv6))
    }

    /// Whether `record` (of digests `name` and `digest`) is answered now on `interface`: a held record of a host that answers
    /// it (verified, not being woken for), a negative answer for such a name, or a record of our own advertisement.
    func isAnswered(
        _ record: DNSRecord, name: NameDigest, digest: RecordDigest, interface: InterfaceName, now: UnixTime
    ) -> Bool {
        if record.type == .nsec, uniqueTypes(of: record.name, interface: interface, now: now) != nil { return true }
        for key in hosts.holders(of: record, name: name, digest: digest, on: interface)
        where hosts.holds(record, key: key, answeringAt: now) {
            return true
        }
        return advertisementLookup(record.name, type: record.type, interface: interface).contains(record)
    }

    /// Whether more than `count` copies of `record` (name in any case, same type and RDATA) are held on
    /// `interface`, counting each holder's copies; stops counting once there are.
    func isHeld(_ record: DNSRecord, moreThan count: Int, interface: InterfaceName) -> Bool {
        var copies = 0
        var counted = Set<OwnerKey>()
        for key in hosts.holders(of: record, on: interface)
        where counted.insert(key).inserted {
            let held = hosts[key]?.owner.records ?? []
            for position in held.indices
            where held.type(at: position) == record.type && RecordDigest.sameRecord(held.record(at: position), record) {
                copies += 1
                if copies > count { return true }
            }
        }
        return false
    }

    /// Goodbyes (TTL 0) for records that go, leaving out those another held host or our own advertisement still
    /// holds: a shared record such as `_ssh._tcp.local. PTR` must stay in caches while anyone answers it
    /// (mDNSResponder keeps such duplicates aside and says no goodbye while one remains).
    mutating func goodbyes(for records: [DNSRecord], interface: InterfaceName, holderCount: Int = 0) -> [Action] {
        let leaving = records.filter { record in
            !isHeld(record, moreThan: holderCount, interface: interface)
                && !advertisementLookup(record.name, type: record.type, interface: interface).contains {
                    HeldRecord.identical($0, record)
                }
        }
        guard !leaving.isEmpty else { return [] }
        return multicastNow(
            leaving.map { record in
                var copy = record
                copy.ttl = 0
                return copy
            }, interface: interface)
    }

    /// Sends records at once to every group of the interface's families.
    mutating func multicastNow(_ records: [DNSRecord], interface: InterfaceName) -> [Action] {
        multicastNow(
            message: DNSMessage(
                id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records),
            interface: interface)
    }

    mutating func multicastNow(message: DNSMessage, interface: InterfaceName) -> [Action] {
        guard let link = links[interface] else { return [] }
        var actions: [Action] = []
        for group in Self.groups(of: link) {
            for bytes in Self.encode(message, truncateIfTooLarge: false) {
                actions.append(.sendMDNS(MDNSTransmission(interface: interface, bytes: bytes, destination: group)))
            }
        }
        return actions
    }

    static func groups(of link: Link) -> [Endpoint] {
        var groups: [Endpoint] = []
        if link.prefixes.contains(where: { if case .v4 = $0.address { true } else { false } }) {
            groups.append(MulticastDNS.ipv4Group)
        }
        if link.prefixes.contains(where: { if case .v6 = $0.address { true } else { false } }) {
            groups.append(MulticastDNS.ipv6Group)
        }
        return groups
    }

    /// Encodes a response in messages of at most `maximumMessage` bytes: the answers are split over several
    /// messages (multicast), or cut with TC set (legacy unicast, which can retry over TCP); additional records
    /// go only where they fit. A single record larger than the limit goes alone.
    static func encode(_ message: DNSMessage, truncateIfTooLarge: Bool) -> [[UInt8]] {
        var lean = message
        lean.additionals = []
        return encode(lean, additionals: { message.additionals }, truncateIfTooLarge: truncateIfTooLarge)
    }

    /// `encode` of `lean` with `additionals()` as its additional records, asked for only when the answers fit in
    /// one message: only then does any go out (an answer to a browse of many hosts is split or cut, and the
    /// additional records of hundreds of instances would be worked out for nothing).
    static func encode(_ lean: DNSMessage, additionals: () -> [DNSRecord], truncateIfTooLarge: Bool) -> [[UInt8]] {
        // The additionals that fit after the answers, in one pass.
        if let bytes = try? lean.encoded(within: maximumMessage, addingAdditionals: additionals),
            bytes.count <= maximumMessage
        {
            return [bytes]
        }
        if truncateIfTooLarge || lean.answers.count + lean.authorities.count < 2 {
            // The most answers, in order, that fit (at least one), found by halving: a message only grows with
            // each answer added.
            func encoded(keeping count: Int) -> [UInt8]? {
                var truncated = lean
                if count < lean.answers.count {
                    truncated.answers.removeLast(lean.answers.count - count)
                    truncated.flags.truncated = true
                }
                return try? truncated.encoded()
            }
            var fits = 1
            var tooMany = lean.answers.count
            while tooMany - fits > 1 {
                let middle = (fits + tooMany) / 2
                if let bytes = encoded(keeping: middle), bytes.count <= maximumMessage {
                    fits = middle
                } else {
                    tooMany = middle
                }
            }
            return encoded(keeping: max(1, min(fits, lean.answers.count))).map { [$0] } ?? []
        }
        // Split answers (or, for a probe, authorities) in two and encode each half the same way.
        var first = lean
        var second = lean
        if lean.answers.count >= 2 {
            let half = lean.answers.count / 2
            first.answers = Array(lean.answers[..<half])
            second.answers = Array(lean.answers[half...])
        } else {
            let half = lean.authorities.count / 2
            first.authorities = Array(lean.authorities[..<half])
            second.authorities = Array(lean.authorities[half...])
        }
        return encode(first, truncateIfTooLarge: false) + encode(second, truncateIfTooLarge: false)
    }
}
