import DNSWire
import Frames
import NetworkAddresses

/// A wake in progress for one owner (PROTOCOL.md section 3.6).
struct WakeSequence: Hashable, Sendable {
    /// Magic-packet rounds sent so far.
    var rounds = 0
    /// Goodbyes sent after the last round went unanswered.
    var goodbyes = 0
    var next: UnixTime
    var reason: String
    var scope: WakeScope
}

/// What a wake withdraws while it runs: the whole host (a connection, an address conflict, the lease's end, the
/// administrator), or only records another host keeps claiming (a name conflict: mDNS.c deregisters just that
/// record down the wake path, and the host's other records stay answered).
enum WakeScope: Hashable, Sendable {
    case host
    case records(Set<RecordIdentity>)

    func merged(with other: WakeScope) -> WakeScope {
        switch (self, other) {
        case (.records(let a), .records(let b)): .records(a.union(b))
        default: .host
        }
    }
}

enum WakeTiming {
    static let interval: Duration = .seconds(2)
    /// Apple's proxy sends up to 15 rounds (`WakeupCount` 18 less 3 goodbyes), about 30 s.
    static let rounds = 15
    /// The first rounds are unicast only: Wi-Fi stations may miss broadcasts after a group-key rotation.
    static let unicastOnlyRounds = 2
    static let goodbyes = 3
}

extension SleepProxyCore {
    // MARK: Triggers

    /// TCP or UDP to a held address that should wake its owner: a SYN (without RST) to a port of one of its `_tcp`
    /// services, anything but RST or a lone FIN to ssh when it offers ssh, UDP to a port of one of its `_udp`
    /// services, and the IPsec and Apple Remote Desktop special cases. Never ICMP, never a port it did not
    /// register (PROTOCOL.md section 3.5). The packet is only observed.
    mutating func checkWakeTrigger(_ frame: EthernetFrame, link: Link, now: UnixTime) -> [Action] {
        let destination: IPAddress
        let source: IPAddress
        let transport: IPPayload
        if let ipv4 = frame.ipv4 {
            // Whole packets and first fragments (offset 0, more to come), which carry the transport header.
            if ipv4.header.isFirstFragment, let first = ipv4.firstFragmentTransport {
                transport = first
            } else if !ipv4.header.isFragment {
                transport = ipv4.payload
            } else {
                return []
            }
            destination = .v4(ipv4.header.destination)
            source = .v4(ipv4.header.source)
        } else if let ipv6 = frame.ipv6 {
            guard !ipv6.header.hasExtensionHeader else { return [] }
            transport = ipv6.payload
            destination = .v6(ipv6.header.destination)
            source = .v6(ipv6.header.source)
        } else {
            return []
        }
        guard let key = holder(of: destination, on: link.name), let host = hosts[key], !host.isWakingWhole else {
            return []
        }
        let owner = host.owner
        switch transport {
        case .tcp(let tcp):
            let from = Endpoint(address: source, port: tcp.sourcePort)
            let flags = tcp.flags
            guard !flags.contains(.rst) else { return [] }
            let service = serviceName(of: owner, port: tcp.destinationPort, transport: "_tcp")
            if flags.contains(.syn), let service {
                return startWake(
                    key, now: now,
                    reason: "TCP SYN from \(from) to \(destination) port \(tcp.destinationPort) (\(service))",
                    source: from)
            }
            // ssh: any segment that is not a lone FIN (a reconnecting client's data or ACK).
            if tcp.destinationPort == 22, !(flags.contains(.fin) && !flags.contains(.syn)), let service {
                return startWake(
                    key, now: now, reason: "TCP to ssh from \(from) to \(destination) port 22 (\(service))",
                    source: from)
            }
            if flags.contains(.syn) {
                return [
                    .log(.debug, "\(key): SYN from \(from) to port \(tcp.destinationPort): no service there, no wake")
                ]
            }
            return []
        case .udp(let udp):
            let from = Endpoint(address: source, port: udp.sourcePort)
            let service = serviceName(of: owner, port: udp.destinationPort, transport: "_udp")
            // Apple Remote Desktop: consoles poll UDP 3283 all the time; only ARD's own wake datagram wakes, and
            // only a host that offers ARD (mDNS.c `mDNSCoreReceiveRawTransportPacket`).
            if udp.destinationPort == Self.remoteDesktopPort {
                guard Self.isRemoteDesktopWake(udp.payload), let service else {
                    return [.log(.debug, "\(key): UDP from \(from) to port 3283 is not a Remote Desktop wake; no wake")]
                }
                return startWake(
                    key, now: now, reason: "Apple Remote Desktop wake from \(from) (\(service))", source: from)
            }
            if let service {
                return startWake(
                    key, now: now,
                    reason: "UDP from \(from) to \(destination) port \(udp.destinationPort) (\(service))",
                    source: from)
            }
            if udp.destinationPort == 4500, Self.isIPsecWake(udp.payload) {
                return startWake(key, now: now, reason: "IPsec (UDP 4500) from \(from)", source: from)
            }
            return []
        default:
            return []
        }
    }

    static let remoteDesktopPort: UInt16 = 3283

    /// ARD's manual wake datagram: at least 110 bytes, starting 13 88.
    static func isRemoteDesktopWake(_ payload: [UInt8]) -> Bool {
        payload.count >= 110 && payload.starts(with: [0x13, 0x88])
    }

    /// The instance name of an SRV record of `owner` on `port` whose third label is `transport`, if any.
    func serviceName(of owner: Owner, port: UInt16, transport: String) -> DNSName? {
        for held in owner.records {
            guard case .srv(let srv) = held.record.rdata, srv.port == port,
                let label = held.record.name.label(at: 2),
                String(decoding: label, as: UTF8.self).lowercased() == transport
            else { continue }
            return held.record.name
        }
        return nil
    }

    /// UDP 4500 wakes, except NAT keep-alives (one 0xFF byte) and IKE SA_INIT or INFORMATIONAL exchanges.
    static func isIPsecWake(_ payload: [UInt8]) -> Bool {
        if payload == [0xFF] { return false }
        // IKE over UDP 4500 starts with the four-byte non-ESP marker; the exchange type is byte 18 of IKE.
        if payload.count >= 4 + 28, payload.prefix(4).allSatisfy({ $0 == 0 }) {
            let exchange = payload[4 + 18]
            return exchange != 34 && exchange != 37
        }
        return true
    }

    // MARK: The wake sequence

    /// Asks to wake an owner (an administrator's request goes through here too). One sequence per owner at a
    /// time, however many triggers arrive.
    public mutating func requestWake(_ key: OwnerKey, now: UnixTime, reason: String) -> [Action] {
        guard hosts[key] != nil else { return [.log(.warning, "wake \(key): not held")] }
        return startWake(key, now: now, reason: reason)
    }

    /// Starts a wake, or widens one in progress: a wake for some records becomes one for the whole host when a
    /// connection or the lease's end asks for it.
    mutating func startWake(
        _ key: OwnerKey, now: UnixTime, reason: String, source: Endpoint? = nil, scope: WakeScope = .host
    ) -> [Action] {
        guard let host = hosts[key] else { return [] }
        var actions: [Action] = []
        if let wake = host.wake {
            let widened = wake.scope.merged(with: scope)
            guard widened != wake.scope else { return [.log(.debug, "\(key): already waking; \(reason)")] }
            var updated = wake
            updated.scope = widened
            updated.reason = reason
            hosts[key]?.state = .waking(updated)
            if widened == .host {
                // From now on the host's addresses are no longer claimed; IPv6 peers are sent back to it.
                actions += releaseNeighbourAdvertisements(of: host.owner)
            }
        } else {
            hosts[key]?.state = .waking(WakeSequence(next: now, reason: reason, scope: scope))
        }
        let event = Event(
            time: now, kind: .wake, interface: key.interface, owner: key.primaryMAC, source: source, detail: reason)
        actions = [.store(.appendEvent(event)), .log(.notice, "waking \(key): \(reason)")] + actions
        actions += advanceWake(of: key, now: now)
        refreshHostDeadline()
        return actions
    }

    /// When the proxy stops for good and is set to wake every held host (as Apple's proxy does when its service is
    /// switched off), one round of magic packets for each, now: the shell exits right after.
    public mutating func wakeEveryone(now: UnixTime, reason: String) -> [Action] {
        var actions: [Action] = []
        for key in hosts.keys.sorted() {
            guard let host = hosts[key], let link = links[key.interface] else { continue }
            let event = Event(
                time: now, kind: .wake, interface: key.interface, owner: key.primaryMAC, detail: reason)
            actions += [.store(.appendEvent(event))] + wakeRound(0, owner: host.owner, link: link)
        }
        if !actions.isEmpty { actions.append(.log(.notice, "woke \(hosts.count) held hosts: \(reason)")) }
        return actions
    }

    /// Sends a host's round if it is due; after the last round, the goodbyes for what the wake withdrew; after
    /// those, what it withdrew goes (the whole host, or the conflicting records).
    mutating func advanceWake(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard let host = hosts[key], var wake = host.wake, wake.next <= now, let link = links[key.interface] else {
            return []
        }
        var actions: [Action] = []
        let withdrawn: [DNSRecord]
        switch wake.scope {
        case .host: withdrawn = host.owner.records.map(\.record)
        case .records(let identities):
            withdrawn = host.owner.records.map(\.record).filter { identities.contains(RecordIdentity($0)) }
        }
        if wake.rounds < WakeTiming.rounds {
            actions += wakeRound(wake.rounds, owner: host.owner, link: link, releasingAddresses: wake.scope == .host)
            wake.rounds += 1
        } else if wake.goodbyes < WakeTiming.goodbyes {
            // The host still holds these records itself; a goodbye leaves out what another host also holds.
            actions += goodbyes(for: withdrawn, interface: key.interface, holderCount: 1)
            wake.goodbyes += 1
        } else {
            let detail = "no sign after \(WakeTiming.rounds) wake rounds (\(wake.reason)); records dropped"
            switch wake.scope {
            case .host:
                return drop(key, reason: .unanswered(detail), now: now)
            case .records(let identities):
                hosts[key]?.state = .proxying
                return dropRecords(identities, of: key, reason: .unanswered(detail), now: now)
            }
        }
        wake.next = now + WakeTiming.interval
        hosts[key]?.state = .waking(wake)
        return actions
    }

    /// One round: the 0x0842 magic frame and a UDP port 9 copy, unicast to the wake MAC; from the third round
    /// also broadcast. The first round also hands IPv6 addresses back with one NA each (more make some stacks
    /// see a duplicate address; PROTOCOL.md section 3.3).
    func wakeRound(_ round: Int, owner: Owner, link: Link, releasingAddresses: Bool = true) -> [Action] {
        let magic = MagicPacket(target: owner.wakeMAC, password: owner.password.flatMap { SecureOnPassword($0) })
        var destinations = [owner.wakeMAC]
        if round >= WakeTiming.unicastOnlyRounds { destinations.append(.broadcast) }
        var frames: [[UInt8]] = []
        let ipv4 = link.prefixes.compactMap { prefix -> (IPv4Address, Int)? in
            if case .v4(let v4) = prefix.address { (v4, prefix.length) } else { nil }
        }.first
        for destination in destinations {
            if let frame = try? EthernetFrame.wakeOnLAN(magic, source: link.macAddress, destination: destination) {
                frames.append(frame.serialized())
            }
            if let (address, length) = ipv4 {
                let broadcast = IPv4Address(value: address.value | (length >= 32 ? 0 : UInt32.max >> UInt32(length)))
                if let frame = try? EthernetFrame.wakeOnLANDatagram(
                    magic, sourceAddress: address, destinationAddress: broadcast, source: link.macAddress,
                    destination: destination)
                {
                    frames.append(frame.serialized())
                }
            }
        }
        var actions = frames.map { Action.injectFrame(owner.key.interface, $0) }
        if round == 0, releasingAddresses {
            actions += releaseNeighbourAdvertisements(of: owner)
        }
        return actions
    }

    /// One unsolicited NA per held IPv6 address, carrying the host's own MAC, so that IPv6 peers go back to it.
    func releaseNeighbourAdvertisements(of owner: Owner) -> [Action] {
        guard let link = links[owner.key.interface] else { return [] }
        return owner.proxiedAddresses.compactMap { address -> Action? in
            guard case .v6(let v6) = address else { return nil }
            return .injectFrame(
                owner.key.interface,
                EthernetFrame.neighborAdvertisement(
                    for: v6, flags: .override, targetLinkLayerAddress: owner.wakeMAC, sourceAddress: v6,
                    source: link.macAddress
                ).serialized())
        }
    }
}
