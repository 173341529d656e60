import DNSWire
import NetworkAddresses

/// Answers for held records (RFC 6762 sections 5 to 7, RFC 6763 section 12): multicast after the usual delays,
/// unicast for QU questions (unless the record has not been multicast for a quarter of its TTL) and for direct
/// and legacy queries, known-answer suppression, additional records, and NSEC for what a unique name lacks.
extension SleepProxyCore {
    // MARK: Input

    /// Handles one mDNS packet seen on an interface: releases hosts that show themselves awake, learns what declared
    /// hosts announce, checks conflicts, then answers queries for held records.
    mutating func receiveMDNS(_ packet: MDNSPacket, now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        guard let link = links[packet.interface] else { return actions }
        let message: DNSMessage
        do {
            message = try DNSMessage(decoding: packet.bytes)
        } catch {
            actions.append(.log(.debug, "mDNS from \(packet.source) on \(packet.interface) ignored: \(error)"))
            return actions
        }
        if let mac = foreignMAC(of: packet) {
            let source = packet.source.address
            if message.flags.isResponse, link.isOnLink(source), !source.isUnspecifiedOrMulticast {
                seen.hearResponse(
                    message.answers + message.additionals, from: mac, on: link.name, source: source, now: now)
            } else {
                hearSender(mac, using: source, on: link, now: now)
            }
        }
        if !declared.isEmpty, let mac = packet.sourceMAC {
            actions += hearDeclared(
                mac, on: packet.interface, using: [packet.source.address],
                what: "mDNS \(message.flags.isResponse ? "response" : "query") from \(packet.source.address)", now: now)
            actions += learnDeclared(message, from: mac, on: packet.interface, now: now)
        }
        // OWNER first: a waking Mac's announcement must not look like a conflict (PROTOCOL.md section 3.1).
        actions += releaseOnOwner(message, packet, now: now)
        actions += releaseOnOwnTraffic(message, packet, now: now)
        actions += checkAdvertisementConflict(message, packet, now: now)
        actions += checkHeldConflicts(message, packet, now: now)
        if !message.flags.isResponse, message.flags.opcode == .query, !message.questions.isEmpty {
            statistics.queriesReceived += 1
            let mac = foreignMAC(of: packet)
            if admitQuery(from: packet.source.address, mac: mac, now: now) {
                actions += answer(message, packet, link: link, now: now)
            } else {
                statistics.queriesRateLimited += 1
                let rate = configuration.queryRate
                let perMAC = Int(configuration.queryRatePerMAC.perSecond)
                let sender = packet.sourceMAC.map { " (from \($0))" } ?? ""
                let text =
                    "\(packet.source.address)\(sender) asks more than \(Int(rate.perSecond)) queries a second (bursts of \(Int(rate.burst))) from one address, or \(perMAC) from all of its addresses; its queries go unanswered until it slows down"
                actions += noteLimit("queries_per_second", text, now: now)
            }
        } else if !message.flags.isResponse, message.flags.opcode == .query {
            actions += answer(message, packet, link: link, now: now)
        }
        return actions
    }

    /// Whether a query from `source`, sent by `mac`, is within its rate: each source address has
    /// `CoreConfiguration.queryRate`, and each sending MAC `queryRatePerMAC` for all its addresses together, so
    /// that a host inventing source addresses still has one allowance.
    mutating func admitQuery(from source: IPAddress, mac: MACAddress?, now: UnixTime) -> Bool {
        allowances.admitQuery(
            from: source, mac: mac, rate: configuration.queryRate, perMAC: configuration.queryRatePerMAC, now: now)
    }

    /// A warning that `limit` was hit, at most once a minute per limit.
    mutating func noteLimit(_ limit: String, _ text: @autoclosure () -> String, now: UnixTime) -> [Action] {
        guard allowances.noteLimit(limit, now: now) else { return [] }
        return [.log(.warning, "limit \(limit) reached: \(text()) (logged at most once a minute)")]
    }

    /// The MAC that sent `packet`, unless it is this host's own on that interface: programs here (an
    /// avahi-daemon, a browser) share it and are not outsiders.
    func foreignMAC(of packet: MDNSPacket) -> MACAddress? {
        guard let mac = packet.sourceMAC, mac != links[packet.interface]?.macAddress else { return nil }
        return mac
    }

    // MARK: Answers

    /// Answers one query (RFC 6762 sections 5 and 6): the held records that match each question, less the
    /// known answers the querier already has, with the additional records DNS-SD clients expect.
    mutating func answer(_ message: DNSMessage, _ packet: MDNSPacket, link: Link, now: UnixTime) -> [Action] {
        // More known answers for a truncated query asked a moment ago by the same querier.
        if message.questions.isEmpty {
            pruneKnownAnswers(KnownAnswers(message.answers), from: packet.source, interface: packet.interface)
            return []
        }
        validateAnswerCache(now: now)
        let limit = configuration.maximumQuestionsPerQuery
        var actions: [Action] = []
        if message.questions.count > limit {
            actions += noteLimit(
                "maximum_questions_per_query",
                "a query from \(packet.source) asked \(message.questions.count) questions; answering the first \(limit)",
                now: now)
        }
        var found: [FoundAnswer] = []
        for question in message.questions.prefix(limit) {
            guard question.questionClass == .internet || question.questionClass == .any else { continue }
            let key = AnswerCacheKey(
                interface: packet.interface, name: question.name.lowercased(), type: question.type)
            found.append(
                FoundAnswer(question: question, key: key, records: cachedAnswer(key, question.name, now: now).records))
        }
        let decision = decideAnswer(to: message, packet, found: found, now: now)
        actions += send(decision.unicast, answering: message, packet, now: now)
        actions += send(decision.multicast, answering: message, packet, now: now)
        return actions
    }

    /// How a query is answered, worked out without changing anything from the records its questions found
    /// (`found`, in the order asked) and what was multicast and is waiting on the link:
    /// - a known answer with at least half our TTL suppresses our record;
    /// - a legacy query (source port not 5353) or one sent straight to us is answered by unicast;
    /// - a QU question is answered by unicast unless the record has not been multicast on this link for a quarter
    ///   of its TTL (RFC 6762 section 5.4: other caches stay fresh); other questions by multicast;
    /// - a legacy reply to the one question asked again, all of its records by unicast and no known answers, is the
    ///   one made last time with this query's ID;
    /// - a multicast answer waits 400-500 ms after a truncated query (more known answers follow, section 7.2),
    ///   20-120 ms when a record is shared (section 6), not at all otherwise; it is dropped while too many
    ///   responses are waiting.
    func decideAnswer(to message: DNSMessage, _ packet: MDNSPacket, found: [FoundAnswer], now: UnixTime)
        -> AnswerDecision
    {
        let knownAnswers = KnownAnswers(message.answers)
        let directUnicast = !isMulticast(packet.destination)
        let group = MulticastDNS.group(for: packet.source.address)
        var unicast: [DNSRecord] = []
        var multicast: [DNSRecord] = []
        // The records of one question are distinct: only those of several can repeat.
        let distinct = found.count == 1
        for answer in found {
            var records = answer.records
            if !knownAnswers.isEmpty {
                records.removeAll { knownAnswers.suppress($0) }
            }
            for record in records {
                let viaUnicast: Bool
                if packet.isLegacyUnicast || directUnicast {
                    viaUnicast = true
                } else if answer.question.unicastResponse {
                    let last = lastMulticastTime(of: record, interface: packet.interface, group: group)
                    viaUnicast = last.map { now - $0 < .seconds(Int64(record.ttl / 4)) } ?? false
                } else {
                    viaUnicast = false
                }
                if viaUnicast {
                    if distinct || !unicast.contains(record) { unicast.append(record) }
                } else if distinct || !multicast.contains(record) {
                    multicast.append(record)
                }
            }
        }
        // With one question, its cached answer also knows its additional records (when none is left out).
        let single = message.questions.count == 1 ? found.first?.key : nil
        return AnswerDecision(
            unicast: unicastDecision(unicast, single: single, message, packet),
            multicast: multicastDecision(multicast, single: single, message))
    }

    /// `single` if `records` are all of its cached answer's records.
    private func wholeAnswer(_ records: [DNSRecord], of single: AnswerCacheKey?) -> AnswerCacheKey? {
        single.flatMap { schedule.answerCache[$0]?.records.count == records.count ? $0 : nil }
    }

    /// The unicast part of an answer: `records`, or the legacy reply made last time for the one question.
    private func unicastDecision(
        _ records: [DNSRecord], single: AnswerCacheKey?, _ message: DNSMessage, _ packet: MDNSPacket
    ) -> AnswerDecision.Unicast {
        guard !records.isEmpty else { return .nothing }
        // Every record of the one question goes by unicast: its additional records are cached with it.
        let whole = wholeAnswer(records, of: single)
        // A legacy-unicast reply asked for again (a resolver polling a name): the bytes made last time, with this
        // query's ID. They hold nothing but the question, the cached records and their additional records.
        let reusable = packet.isLegacyUnicast && message.answers.isEmpty ? whole : nil
        if let reusable, let cached = schedule.answerCache[reusable]?.legacyReply,
            cached.question == message.questions[0]
        {
            var bytes = cached.bytes
            bytes[0] = UInt8(message.id >> 8)
            bytes[1] = UInt8(truncatingIfNeeded: message.id)
            return .again(bytes)
        }
        return .reply(records, legacy: packet.isLegacyUnicast, additionalsOf: whole, keptAs: reusable)
    }

    /// The multicast part of an answer: `records` after their delay, or nothing while too many responses wait.
    private func multicastDecision(_ records: [DNSRecord], single: AnswerCacheKey?, _ message: DNSMessage)
        -> AnswerDecision.Multicast
    {
        guard !records.isEmpty else { return .nothing }
        guard schedule.pendingCount < configuration.maximumPendingResponses else {
            return .dropped(waiting: schedule.pendingCount)
        }
        let delay: AnswerDecision.Delay =
            if message.flags.truncated {
                .forKnownAnswers
            } else if records.contains(where: { !$0.cacheFlush }) {
                .shared
            } else {
                .immediate
            }
        return .after(delay, records, whole: wholeAnswer(records, of: single))
    }

    /// Sends the unicast part of an answer.
    private mutating func send(
        _ decision: AnswerDecision.Unicast, answering message: DNSMessage, _ packet: MDNSPacket, now: UnixTime
    ) -> [Action] {
        switch decision {
        case .nothing:
            return []
        case .again(let bytes):
            statistics.answersUnicast += 1
            return [.sendMDNS(unicastReply(bytes, to: packet))]
        case .reply(let records, let legacy, let whole, let reusable):
            let knownAnswers = KnownAnswers(message.answers)
            if !legacy, knownAnswers.isEmpty, let whole, let messages = wholeResponse(whole, records, now: now) {
                statistics.answersUnicast += messages.count
                return messages.map { .sendMDNS(unicastReply($0, to: packet)) }
            }
            // The additional records, worked out only if the answers fit in one message.
            func additionals() -> [DNSRecord] {
                if let whole, let cached = schedule.answerCache[whole] {
                    return cachedAdditionals(whole, for: cached, now: now).filter { !knownAnswers.suppress($0) }
                }
                return additionalRecords(for: records, interface: packet.interface, now: now).filter {
                    !knownAnswers.suppress($0)
                }
            }
            let messages: [[UInt8]]
            if legacy {
                // A conventional DNS reply: the query's ID and question, TTLs of at most 10 s, no cache-flush bits.
                func legacy(_ record: DNSRecord) -> DNSRecord {
                    var copy = record
                    copy.ttl = min(copy.ttl, MulticastDNS.legacyUnicastTTL)
                    copy.cacheFlush = false
                    return copy
                }
                let reply = DNSMessage(
                    id: message.id, flags: DNSFlags(response: true, opcode: .query, authoritative: true),
                    questions: message.questions, answers: records.map(legacy))
                messages = Self.encode(reply, additionals: { additionals().map(legacy) }, truncateIfTooLarge: true)
            } else {
                let reply = DNSMessage(
                    id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records)
                messages = Self.encode(reply, additionals: additionals, truncateIfTooLarge: false)
            }
            if let reusable, messages.count == 1 {
                schedule.answerCache[reusable]?.legacyReply = (message.questions[0], messages[0])
            }
            statistics.answersUnicast += messages.count
            return messages.map { .sendMDNS(unicastReply($0, to: packet)) }
        }
    }

    /// Schedules (or drops) the multicast part of an answer, and sends it at once when it need not wait.
    private mutating func send(
        _ decision: AnswerDecision.Multicast, answering message: DNSMessage, _ packet: MDNSPacket, now: UnixTime
    ) -> [Action] {
        switch decision {
        case .nothing:
            return []
        case .dropped(let waiting):
            return noteLimit(
                "maximum_pending_responses",
                "\(waiting) multicast responses are waiting; dropping the answer to \(packet.source)", now: now)
        case .after(let delay, let records, let whole):
            let wait: Duration =
                switch delay {
                case .forKnownAnswers: .milliseconds(Int64.random(in: 400...500, using: &random))
                case .shared: .milliseconds(Int64.random(in: 20...120, using: &random))
                case .immediate: .zero
                }
            schedule.schedule(
                PendingResponse(
                    due: now + wait, interface: packet.interface, group: MulticastDNS.group(for: packet.source.address),
                    answers: records, querier: delay == .forKnownAnswers ? packet.source : nil, isAnnouncement: false,
                    whole: whole))
            return delay == .immediate ? sendDueResponses(now: now) : []
        }
    }

    /// A unicast reply to the sender of `packet`, from the address it was sent to when that is one of ours (not a
    /// held address: those are answered from the interface's own).
    func unicastReply(_ bytes: [UInt8], to packet: MDNSPacket) -> MDNSTransmission {
        MDNSTransmission(
            interface: packet.interface, bytes: bytes, destination: packet.source,
            destinationScopeID: packet.sourceScopeID,
            source: !isMulticast(packet.destination) && !isHeldAddress(packet.destination, on: packet.interface)
                ? packet.destination : nil)
    }

    /// The answer to a question (held records, or the NSEC saying a unique name lacks the type), from the cache
    /// when nothing it depends on has changed since it was computed (`AnswerSources`: the held hosts and the
    /// proxy's advertisements). A cached answer is never one that the proxy should no longer give; a tick, or a
    /// captured frame, that changes neither leaves it.
    mutating func cachedAnswer(_ key: AnswerCacheKey, _ name: DNSName, now: UnixTime) -> CachedAnswer {
        if let cached = schedule.answerCache[key] {
            statistics.answerCacheHits += 1
            return cached
        }
        statistics.answerCacheMisses += 1
        var records = lookup(name, type: key.type, interface: key.interface, now: now)
        if records.isEmpty, let nsec = negativeAnswer(name, type: key.type, interface: key.interface, now: now) {
            records = [nsec]
        }
        let entry = CachedAnswer(records: records)
        schedule.cache(entry, for: key)
        return entry
    }

    /// Empties the answer cache if anything it depends on changed by `now`.
    mutating func validateAnswerCache(now: UnixTime) {
        hosts.noteProbeEnds(by: now)
        schedule.keepAnswers(
            workedOutFrom: AnswerSources(held: hosts.generation, advertised: advertisements.generation))
    }

    /// The additional records for all of a cached answer's records, computed once.
    mutating func cachedAdditionals(_ key: AnswerCacheKey, for cached: CachedAnswer, now: UnixTime) -> [DNSRecord] {
        if let additionals = cached.additionals { return additionals }
        let additionals = additionalRecords(for: cached.records, interface: key.interface, now: now)
        schedule.answerCache[key]?.additionals = additionals
        return additionals
    }

    /// The encoded response (ID 0, no question) holding `records`, all of the cached answer of `key`, and their
    /// additional records, made once per cached answer; nil when the cache no longer holds `records` for `key`.
    mutating func wholeResponse(_ key: AnswerCacheKey, _ records: [DNSRecord], now: UnixTime) -> [[UInt8]]? {
        guard let cached = schedule.answerCache[key], cached.records == records else { return nil }
        if let response = cached.response { return response }
        let message = DNSMessage(
            id: 0, flags: DNSFlags(response: true, opcode: .query, authoritative: true), answers: records)
        let response = Self.encode(
            message, additionals: { cachedAdditionals(key, for: cached, now: now) }, truncateIfTooLarge: false)
        schedule.answerCache[key]?.response = response
        return response
    }

    /// Held records on `interface` whose name matches (ignoring case) and whose type matches (or ANY).
    func lookup(_ name: DNSName, type: DNSType, interface: InterfaceName, now: UnixTime) -> [DNSRecord] {
        var found = advertisementLookup(name, type: type, interface: interface)
        for key in hosts.holders(of: name, on: interface) {
            hosts.forEachRecord(of: key, named: name, type: type == .any ? nil : type, at: now) { record, answered, _ in
                if answered { found.append(record) }
                return true
            }
        }
        return found
    }

    /// The types held for a unique name, if every record of that name is unique (cache-flush) and some are
    /// answered now; nil for shared or unknown names. The bitmap lists every type held for the name, also those
    /// silent for a moment (a record probed again after a conflict): an NSEC must never deny a type we hold.
    ///
    /// One pass over the name's records, without collecting them: this runs for every answer with a unique name.
    func uniqueTypes(of name: DNSName, interface: InterfaceName, now: UnixTime) -> (types: [DNSType], ttl: UInt32)? {
        var answered = false
        var types: [DNSType] = []
        var ttl: UInt32?
        func note(_ record: DNSRecord) -> Bool {
            guard record.cacheFlush else { return false }
            if !types.contains(record.type) { types.append(record.type) }
            ttl = max(ttl ?? 0, record.ttl)
            return true
        }
        for record in advertisementLookup(name, type: .any, interface: interface) {
            answered = true
            guard note(record) else { return nil }
        }
        for key in hosts.holders(of: name, on: interface) {
            var shared = false
            hosts.forEachRecord(of: key, named: name, type: nil, at: now) { record, answeredNow, wakingWhole in
                if answeredNow { answered = true }
                // A host woken whole answers nothing, and its records say nothing about the name's types.
                if !wakingWhole, !note(record) {
                    shared = true
                    return false
                }
                return true
            }
            if shared { return nil }
        }
        guard answered else { return nil }
        return (types.sorted(), ttl ?? 120)
    }

    /// RFC 6762 section 6.1: asked for a type a unique name does not have, say so with an NSEC.
    func negativeAnswer(_ name: DNSName, type: DNSType, interface: InterfaceName, now: UnixTime) -> DNSRecord? {
        guard type != .any, let held = uniqueTypes(of: name, interface: interface, now: now) else { return nil }
        let owner = lookup(name, type: .any, interface: interface, now: now).first?.name ?? name
        return DNSRecord(
            name: owner, ttl: held.ttl, cacheFlush: true, rdata: .nsec(NSECData(nextName: owner, types: held.types)))
    }

    /// RFC 6763 section 12: for a PTR answer the instance's SRV and TXT and the target's addresses; for an SRV
    /// answer the target's addresses; plus an NSEC for every unique name so that a querier knows what is not there.
    ///
    /// Linear in the records: an answer to a browse of a service type that many held hosts offer lists every
    /// instance, and each brings its SRV, TXT, addresses and NSECs.
    func additionalRecords(for answers: [DNSRecord], interface: InterfaceName, now: UnixTime) -> [DNSRecord] {
        var additional: [DNSRecord] = []
        var present = Set(answers)
        func add(_ records: [DNSRecord]) {
            for record in records where present.insert(record).inserted {
                additional.append(record)
            }
        }
        var targets: [DNSName] = []
        var targetSeen: Set<CaseFoldedName> = []
        func target(_ name: DNSName) {
            if targetSeen.insert(CaseFoldedName(name)).inserted { targets.append(name) }
        }
        for answer in answers {
            switch answer.rdata {
            case .ptr(let instance) where ReverseMapping.address(of: answer.name) == nil:
                let srv = lookup(instance, type: .srv, interface: interface, now: now)
                add(srv)
                add(lookup(instance, type: .txt, interface: interface, now: now))
                for case .srv(let data) in srv.map(\.rdata) { target(data.target) }
            case .srv(let data):
                target(data.target)
            default:
                break
            }
        }
        for target in targets {
            add(lookup(target, type: .a, interface: interface, now: now))
            add(lookup(target, type: .aaaa, interface: interface, now: now))
        }
        // One NSEC per unique name, unless the answers already hold one for it.
        var nsecNames: [DNSName] = []
        var nsecSeen: Set<CaseFoldedName> = []
        for record in answers where record.type == .nsec { nsecSeen.insert(CaseFoldedName(record.name)) }
        for record in answers + additional where record.cacheFlush && record.type != .nsec {
            if nsecSeen.insert(CaseFoldedName(record.name)).inserted { nsecNames.append(record.name) }
        }
        for name in nsecNames {
            guard let held = uniqueTypes(of: name, interface: interface, now: now) else { continue }
            add([
                DNSRecord(
                    name: name, ttl: held.ttl, cacheFlush: true,
                    rdata: .nsec(NSECData(nextName: name, types: held.types)))
            ])
        }
        return additional
    }

    /// RFC 6762 section 7.1: a known answer suppresses ours when it is the same record with at least half our TTL.
    static func suppresses(_ known: DNSRecord, _ ours: DNSRecord) -> Bool {
        known.type == ours.type && known.recordClass == ours.recordClass && known.ttl >= ours.ttl / 2
            && known.name.caseInsensitiveEquals(ours.name) && HeldRecord.sameRData(known.rdata, ours.rdata)
    }

    mutating func pruneKnownAnswers(_ known: KnownAnswers, from querier: Endpoint, interface: InterfaceName) {
        schedule.updatePending { response in
            guard response.querier == querier, response.interface == interface else { return }
            response.answers.removeAll { known.suppress($0) }
        }
    }

    /// Never send from a held address: it is the sleeping host's, not ours (a query sent straight to it is
    /// answered from our own address).
    func isHeldAddress(_ address: IPAddress, on interface: InterfaceName) -> Bool {
        hosts.holder(of: address, on: interface) != nil
    }

    func isMulticast(_ address: IPAddress) -> Bool {
        switch address {
        case .v4(let v4): v4.isMulticast
        case .v6(let v6): v6.isMulticast
        }
    }

}

/// The records one question of a query found, as the answer cache gave them.
struct FoundAnswer {
    var question: DNSQuestion
    var key: AnswerCacheKey
    var records: [DNSRecord]
}

/// How a query is answered (`SleepProxyCore.decideAnswer`): what goes by unicast and what by multicast.
struct AnswerDecision {
    enum Unicast {
        /// Nothing goes by unicast.
        case nothing
        /// The legacy reply made for the same question before, with this query's ID.
        case again([UInt8])
        /// A reply holding `records`, a conventional DNS one for a legacy query. `additionalsOf` is the one
        /// question when all of its records are in the reply: its additional records come from its cached answer.
        /// `keptAs` is that question too when the reply is a legacy one to be sent again next time.
        case reply([DNSRecord], legacy: Bool, additionalsOf: AnswerCacheKey?, keptAs: AnswerCacheKey?)
    }

    /// How long a multicast answer waits before it goes out.
    enum Delay: Hashable {
        /// Not at all: every record is unique and the query was whole.
        case immediate
        /// 20-120 ms: other responders may answer a shared record too (RFC 6762 section 6).
        case shared
        /// 400-500 ms: a truncated query's further known answers are coming (RFC 6762 section 7.2).
        case forKnownAnswers
    }

    enum Multicast {
        /// Nothing goes by multicast.
        case nothing
        /// Not sent: `waiting` multicast responses are already pending, the limit.
        case dropped(waiting: Int)
        /// Sent to the group after `Delay`; `whole` is the one question when these are all of its records.
        case after(Delay, [DNSRecord], whole: AnswerCacheKey?)
    }

    var unicast: Unicast
    var multicast: Multicast
}

/// A name that equals another in any case of its ASCII letters (RFC 4343), and hashes alike.
struct CaseFoldedName: Hashable {
    let name: DNSName

    init(_ name: DNSName) { self.name = name }

    static func == (lhs: CaseFoldedName, rhs: CaseFoldedName) -> Bool { lhs.name.caseInsensitiveEquals(rhs.name) }

    func hash(into hasher: inout Hasher) { name.hashIgnoringCase(into: &hasher) }
}

/// A query's known answers (RFC 6762 section 7.1), found by record rather than one by one: a querier that browses
/// a type many hosts offer lists every instance it has, and each of ours is checked against them.
struct KnownAnswers {
    /// The longest TTL known for each record (`HeldRecord.identical`).
    private let ttls: [RecordIdentity: UInt32]

    init(_ records: [DNSRecord]) {
        var ttls: [RecordIdentity: UInt32] = [:]
        for record in records {
            let identity = RecordIdentity(record)
            ttls[identity] = max(ttls[identity] ?? 0, record.ttl)
        }
        self.ttls = ttls
    }

    var isEmpty: Bool { ttls.isEmpty }

    /// Whether a known answer suppresses `record`: `SleepProxyCore.suppresses` for some known answer.
    func suppress(_ record: DNSRecord) -> Bool {
        guard !ttls.isEmpty, let known = ttls[RecordIdentity(record)] else { return false }
        return known >= record.ttl / 2
    }
}
