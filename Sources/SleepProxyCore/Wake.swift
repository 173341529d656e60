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
}

enum WakeTiming {
    static let interval: Duration = .seconds(2)
    /// Apple's proxy sends up to 15 rounds (`WakeupCount` 18 less 3 goodbyes), about 30 s.
    static let rounds = 15
    /// The first rounds are unicast only: Wi-Fi stations may miss broadcasts after a group-key rotation.
    static let unicastOnlyRounds = 2
    static let goodbyes = 3
}

/// How a packet relates to a held host's services, for the wake decision.
public struct WakeTrigger: Hashable, Sendable {
    public var reason: String
    public var source: Endpoint?
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
        if let ipv4 = frame.ipv4 {
            guard !ipv4.header.isFragment else { return [] }
            destination = .v4(ipv4.header.destination)
            source = .v4(ipv4.header.source)
        } else if let ipv6 = frame.ipv6 {
            guard !ipv6.header.hasExtensionHeader else { return [] }
            destination = .v6(ipv6.header.destination)
            source = .v6(ipv6.header.source)
        } else {
            return []
        }
        guard let key = holder(of: destination, on: link.name), let owner = owners[key] else { return [] }
        if let tcp = frame.tcp {
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
        }
        if let udp = frame.udp {
            let from = Endpoint(address: source, port: udp.sourcePort)
            if let service = serviceName(of: owner, port: udp.destinationPort, transport: "_udp") {
                return startWake(
                    key, now: now,
                    reason: "UDP from \(from) to \(destination) port \(udp.destinationPort) (\(service))", source: from)
            }
            if udp.destinationPort == 4500, Self.isIPsecWake(udp.payload) {
                return startWake(key, now: now, reason: "IPsec (UDP 4500) from \(from)", source: from)
            }
            if udp.destinationPort == 3283, udp.payload.count >= 110, udp.payload.starts(with: [0x13, 0x88]) {
                return startWake(key, now: now, reason: "Apple Remote Desktop wake from \(from)", source: from)
            }
        }
        return []
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
        guard owners[key] != nil else { return [.log(.warning, "wake \(key): not held")] }
        return startWake(key, now: now, reason: reason)
    }

    mutating func startWake(_ key: OwnerKey, now: UnixTime, reason: String, source: Endpoint? = nil) -> [Action] {
        guard owners[key] != nil else { return [] }
        guard wakes[key] == nil else {
            return [.log(.debug, "\(key): already waking; \(reason)")]
        }
        wakes[key] = WakeSequence(next: now, reason: reason)
        let event = Event(
            time: now, kind: .wake, interface: key.interface, owner: key.primaryMAC, source: source, detail: reason)
        return [.store(.appendEvent(event)), .log(.notice, "waking \(key): \(reason)")] + advanceWakes(now: now)
    }

    var wakeDeadline: UnixTime? { wakes.values.map(\.next).min() }

    /// When the proxy stops for good and is set to wake every held host (as Apple's proxy does when its service is
    /// switched off), one round of magic packets for each, now: the shell exits right after.
    public mutating func wakeEveryone(now: UnixTime, reason: String) -> [Action] {
        var actions: [Action] = []
        for key in owners.keys.sorted() {
            guard let owner = owners[key], let link = links[key.interface] else { continue }
            let event = Event(
                time: now, kind: .wake, interface: key.interface, owner: key.primaryMAC, detail: reason)
            actions += [.store(.appendEvent(event))] + wakeRound(0, owner: owner, link: link)
        }
        if !actions.isEmpty { actions.append(.log(.notice, "woke \(owners.count) held hosts: \(reason)")) }
        return actions
    }

    /// Sends the rounds that are due; after the last one, the goodbyes; after those, the owner goes.
    mutating func advanceWakes(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for key in wakes.keys.sorted() {
            guard var wake = wakes[key], wake.next <= now else { continue }
            guard let owner = owners[key], let link = links[key.interface] else {
                wakes[key] = nil
                continue
            }
            if wake.rounds < WakeTiming.rounds {
                actions += wakeRound(wake.rounds, owner: owner, link: link)
                wake.rounds += 1
                wake.next = now + WakeTiming.interval
                wakes[key] = wake
            } else if wake.goodbyes < WakeTiming.goodbyes {
                let goodbyes = owner.records.map { held in
                    var record = held.record
                    record.ttl = 0
                    return record
                }
                actions += multicastNow(goodbyes, interface: key.interface)
                wake.goodbyes += 1
                wake.next = now + WakeTiming.interval
                wakes[key] = wake
            } else {
                actions += stopTakeovers(of: key)
                remove(key)
                let event = Event(
                    time: now, kind: .expired, interface: key.interface, owner: key.primaryMAC,
                    detail: "no sign after \(WakeTiming.rounds) wake rounds (\(wake.reason)); records dropped")
                actions += [
                    .store(.removeOwner(key)), .store(.appendEvent(event)), .log(.warning, "\(key): \(event.detail)"),
                ]
            }
        }
        return actions
    }

    /// One round: the 0x0842 magic frame and a UDP port 9 copy, unicast to the wake MAC; from the third round
    /// also broadcast. The first round also hands IPv6 addresses back with one NA each (more make some stacks
    /// see a duplicate address; PROTOCOL.md section 3.3).
    func wakeRound(_ round: Int, owner: Owner, link: Link) -> [Action] {
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
        if round == 0 {
            for case .v6(let v6) in owner.proxiedAddresses {
                frames.append(
                    EthernetFrame.neighborAdvertisement(
                        for: v6, flags: .override, targetLinkLayerAddress: owner.wakeMAC, sourceAddress: v6,
                        source: link.macAddress
                    ).serialized())
            }
        }
        return frames.map { .injectFrame(owner.key.interface, $0) }
    }
}
