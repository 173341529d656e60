import DNSWire
import Frames
public import NetworkAddresses

/// A frame the capture saw on an interface.
public struct CapturedFrameInput: Hashable, Sendable {
    public var interface: InterfaceName
    public var bytes: [UInt8]

    public init(interface: InterfaceName, bytes: [UInt8]) {
        self.interface = interface
        self.bytes = bytes
    }
}

/// Where one proxied address is in its take-over (PROTOCOL.md sections 3.2 and 3.3).
struct AddressTakeover: Hashable, Sendable {
    enum Phase: Hashable, Sendable {
        /// Asking whether the host is still there: probe `sent` of 3 went out.
        case probing(sent: Int)
        /// Claiming the address: announcement `sent` of 4 went out. Requests are answered from the first on.
        case announcing(sent: Int)
        /// Claimed; requests are answered.
        case defending
    }

    var phase: Phase
    var next: UnixTime?
    var restarts = 0

    var answers: Bool {
        if case .probing = phase { return false }
        return true
    }
}

/// Timers of the take-over (mDNS.c `InitializeLastAPTime`, `SendResponses`, `RestartARPProbing`).
enum TakeoverTiming {
    /// The first probe comes a second after the registration, so that the client can fall asleep.
    static let firstProbe: Duration = .seconds(1)
    static let probeInterval: Duration = .seconds(1)
    static let probes = 3
    /// Announcements at about +4, +5, +7 and +11 s: the gaps double.
    static let announcementGaps: [Duration] = [.seconds(1), .seconds(2), .seconds(4)]
    static let announcements = 4
    static let maximumRestarts = 20
    /// A restart while announcing waits this long before probing again.
    static let restartDelayWhileAnnouncing: Duration = .seconds(10)
}

extension SleepProxyCore {
    // MARK: Starting and stopping take-overs

    /// Starts taking over the addresses of `owner` that are not taken over yet, and stops those it no longer has.
    mutating func updateTakeovers(for owner: Owner, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        var current = takeovers[owner.key] ?? [:]
        let wanted = Set(owner.proxiedAddresses)
        for address in current.keys where !wanted.contains(address) {
            current[address] = nil
            actions += stopTakeover(of: address, interface: owner.key.interface)
        }
        for address in owner.proxiedAddresses where current[address] == nil {
            let held = NeighbourKey(interface: owner.key.interface, address: address)
            // An address another owner already holds stays with it (a name hijack was refused already).
            if let other = heldAddresses[held], other != owner.key { continue }
            heldAddresses[held] = owner.key
            current[address] = AddressTakeover(phase: .probing(sent: 0), next: now + TakeoverTiming.firstProbe)
            if case .v6(let v6) = address {
                actions.append(.joinMulticastGroup(owner.key.interface, v6.solicitedNodeGroup))
            }
        }
        takeovers[owner.key] = current.isEmpty ? nil : current
        refreshTakeoverDeadline()
        if !wanted.isEmpty || !actions.isEmpty { actions.append(.proxiedAddressesChanged(owner.key.interface)) }
        return actions
    }

    /// Stops every take-over of an owner that is going.
    mutating func stopTakeovers(of key: OwnerKey) -> [Action] {
        guard let current = takeovers.removeValue(forKey: key) else { return [] }
        var actions: [Action] = []
        for address in current.keys.sorted() {
            actions += stopTakeover(of: address, interface: key.interface)
        }
        refreshTakeoverDeadline()
        actions.append(.proxiedAddressesChanged(key.interface))
        return actions
    }

    private mutating func stopTakeover(of address: IPAddress, interface: InterfaceName) -> [Action] {
        var actions: [Action] = []
        heldAddresses[NeighbourKey(interface: interface, address: address)] = nil
        if case .v6(let v6) = address { actions.append(.leaveMulticastGroup(interface, v6.solicitedNodeGroup)) }
        let key = NeighbourKey(interface: interface, address: address)
        if neighbourEntries.remove(key) != nil { actions.append(.removeNeighbour(interface, address)) }
        return actions
    }

    /// The addresses the proxy holds on `interface`: what the capture must watch.
    public func proxiedAddresses(on interface: InterfaceName) -> [IPAddress] {
        heldAddresses.keys.filter { $0.interface == interface }.map(\.address).sorted()
    }

    /// The owner holding `address` on `interface`, if any: one lookup, for every captured packet.
    func holder(of address: IPAddress, on interface: InterfaceName) -> OwnerKey? {
        heldAddresses[NeighbourKey(interface: interface, address: address)]
    }

    /// The next probe or announcement, kept up to date where take-overs change, not computed per packet.
    var takeoverDeadline: UnixTime? { takeoverNext }

    mutating func refreshTakeoverDeadline() {
        takeoverNext = takeovers.values.lazy.flatMap { $0.values.compactMap(\.next) }.min()
    }

    // MARK: Probes and announcements

    /// Sends the probes and announcements that are due.
    mutating func advanceTakeovers(now: UnixTime) -> [Action] {
        var actions: [Action] = []
        for key in takeovers.keys.sorted() {
            guard var current = takeovers[key], let owner = owners[key], wakes[key] == nil,
                let link = links[key.interface]
            else { continue }
            for address in current.keys.sorted() {
                guard var takeover = current[address], let next = takeover.next, next <= now else { continue }
                switch takeover.phase {
                case .probing(let sent):
                    actions.append(.injectFrame(key.interface, probe(address, owner: owner, link: link)))
                    if sent + 1 < TakeoverTiming.probes {
                        takeover.phase = .probing(sent: sent + 1)
                        takeover.next = now + TakeoverTiming.probeInterval
                    } else {
                        // The host stayed silent: it sleeps. Claim the address from the next tick on.
                        takeover.phase = .announcing(sent: 0)
                        takeover.next = now + TakeoverTiming.probeInterval
                    }
                case .announcing(let sent):
                    actions.append(.injectFrame(key.interface, announcement(address, link: link)))
                    if sent == 0 {
                        let event = Event(
                            time: now, kind: .takeover, interface: key.interface, owner: key.primaryMAC,
                            detail: "took over \(address)")
                        actions += [.store(.appendEvent(event)), .log(.info, "\(key): took over \(address)")]
                    }
                    if sent + 1 < TakeoverTiming.announcements {
                        takeover.phase = .announcing(sent: sent + 1)
                        takeover.next = now + TakeoverTiming.announcementGaps[sent]
                    } else {
                        takeover.phase = .defending
                        takeover.next = nil
                    }
                case .defending:
                    takeover.next = nil
                }
                current[address] = takeover
            }
            takeovers[key] = current
        }
        refreshTakeoverDeadline()
        return actions
    }

    /// "Is the host still there?": an ARP probe or an NS from `::`, unicast to its wake MAC.
    func probe(_ address: IPAddress, owner: Owner, link: Link) -> [UInt8] {
        switch address {
        case .v4(let v4):
            return EthernetFrame.arpProbe(for: v4, source: link.macAddress, destination: owner.wakeMAC).serialized()
        case .v6(let v6):
            return EthernetFrame.neighborSolicitation(
                for: v6, sourceAddress: .unspecified, destinationAddress: v6.solicitedNodeGroup,
                source: link.macAddress, destination: owner.wakeMAC, includeSourceLinkLayerAddress: false
            ).serialized()
        }
    }

    /// The claim: a gratuitous ARP, or an unsolicited NA with Override and our MAC, to everyone.
    func announcement(_ address: IPAddress, link: Link) -> [UInt8] {
        switch address {
        case .v4(let v4):
            return EthernetFrame.arpAnnouncement(of: v4, source: link.macAddress).serialized()
        case .v6(let v6):
            return EthernetFrame.neighborAdvertisement(
                for: v6, flags: .override, targetLinkLayerAddress: link.macAddress, sourceAddress: v6,
                source: link.macAddress
            ).serialized()
        }
    }

    /// Probing again because the host (or someone) still uses the address; Apple gives up restarting after 20.
    mutating func restartProbing(_ key: OwnerKey, _ address: IPAddress, now: UnixTime) {
        guard var takeover = takeovers[key]?[address], takeover.restarts < TakeoverTiming.maximumRestarts else {
            return
        }
        let wasAnnouncing = takeover.answers
        takeover.restarts += 1
        takeover.phase = .probing(sent: 0)
        takeover.next = now + (wasAnnouncing ? TakeoverTiming.restartDelayWhileAnnouncing : TakeoverTiming.firstProbe)
        takeovers[key]?[address] = takeover
        refreshTakeoverDeadline()
    }

    // MARK: Captured frames

    /// Handles a captured frame: ARP and Neighbour Discovery for held addresses, and the connections that should
    /// wake a host (PROTOCOL.md sections 3.2 to 3.5).
    public mutating func handleFrame(_ input: CapturedFrameInput, now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        guard let link = links[input.interface], let frame = try? EthernetFrame(parsing: input.bytes) else {
            return actions
        }
        // Our own frames (the kernel's and ours) only matter when our host asks for a held address.
        if let arp = frame.arp {
            actions += handleARP(arp, from: frame.header.source, link: link, now: now)
        } else if let ipv6 = frame.ipv6, let icmp = frame.icmpv6, ipv6.header.hopLimit == 255 {
            actions += handleND(icmp, ipv6: ipv6.header, from: frame.header.source, link: link, now: now)
        } else if frame.header.source != link.macAddress {
            actions += checkWakeTrigger(frame, link: link, now: now)
        }
        return actions
    }

    mutating func handleARP(_ arp: ARPPacket, from source: MACAddress, link: Link, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        let interface = link.name
        // Anyone using a held address as its own: the host itself (awake again) or a conflict.
        if !arp.senderProtocolAddress.isUnspecified, source != link.macAddress,
            let key = holder(of: .v4(arp.senderProtocolAddress), on: interface), let owner = owners[key]
        {
            actions += sawAddressInUse(
                .v4(arp.senderProtocolAddress), by: arp.senderHardwareAddress, owner: owner, now: now, what: "ARP")
            return actions
        }
        guard arp.operation == .request, arp.senderProtocolAddress != arp.targetProtocolAddress,
            let key = holder(of: .v4(arp.targetProtocolAddress), on: interface), let owner = owners[key],
            let takeover = takeovers[key]?[.v4(arp.targetProtocolAddress)]
        else { return actions }
        let target = IPAddress.v4(arp.targetProtocolAddress)
        if arp.senderHardwareAddress == owner.wakeMAC {
            // The host asks for its own address: it is awake or waking.
            restartProbing(key, target, now: now)
            return actions
        }
        if source == link.macAddress {
            // Our own probes and announcements come back through the capture; our host's kernel asking (with
            // one of its addresses as the sender) wants to talk to the sleeper: point it at the real NIC.
            guard !arp.senderProtocolAddress.isUnspecified, takeover.answers else { return actions }
            return setNeighbour(target, to: owner.wakeMAC, on: interface)
        }
        guard takeover.answers, wakes[key] == nil else { return actions }
        actions.append(
            .injectFrame(
                interface,
                EthernetFrame.arpReply(
                    for: arp.targetProtocolAddress, source: link.macAddress, requesterMAC: arp.senderHardwareAddress,
                    requesterAddress: arp.senderProtocolAddress
                ).serialized()))
        return actions
    }

    mutating func handleND(
        _ icmp: ICMPv6Message, ipv6: IPv6Header, from source: MACAddress, link: Link, now: UnixTime
    ) -> [Action] {
        let interface = link.name
        if let advertisement = icmp.neighborAdvertisement, source != link.macAddress,
            let key = holder(of: .v6(advertisement.target), on: interface), let owner = owners[key]
        {
            return sawAddressInUse(.v6(advertisement.target), by: source, owner: owner, now: now, what: "NA")
        }
        guard let solicitation = icmp.neighborSolicitation else { return [] }
        if !ipv6.source.isUnspecified, source != link.macAddress,
            let key = holder(of: .v6(ipv6.source), on: interface), let owner = owners[key]
        {
            return sawAddressInUse(.v6(ipv6.source), by: source, owner: owner, now: now, what: "NS")
        }
        let target = IPAddress.v6(solicitation.target)
        guard let key = holder(of: target, on: interface), let owner = owners[key],
            let takeover = takeovers[key]?[target]
        else { return [] }
        if source == owner.wakeMAC {
            restartProbing(key, target, now: now)
            return []
        }
        if source == link.macAddress {
            guard !ipv6.source.isUnspecified, takeover.answers else { return [] }
            return setNeighbour(target, to: owner.wakeMAC, on: interface)
        }
        guard takeover.answers, wakes[key] == nil else { return [] }
        // RFC 4861 section 7.2.4: a unicast NA with Solicited and Override to a unicast source; to all nodes,
        // Override only, for a duplicate-address probe from `::` (defending the address).
        let frame: EthernetFrame
        if ipv6.source.isUnspecified {
            frame = EthernetFrame.neighborAdvertisement(
                for: solicitation.target, flags: .override, targetLinkLayerAddress: link.macAddress,
                sourceAddress: solicitation.target, source: link.macAddress)
        } else {
            frame = EthernetFrame.neighborAdvertisement(
                for: solicitation.target, flags: [.solicited, .override], targetLinkLayerAddress: link.macAddress,
                sourceAddress: solicitation.target, destinationAddress: ipv6.source, source: link.macAddress,
                destination: solicitation.sourceLinkLayerAddress ?? source)
        }
        return [.injectFrame(interface, frame.serialized())]
    }

    /// Someone used a held address as its own. From the host's wake MAC after the take-over, it is back: let go
    /// (clients that never send OWNER show themselves this way; PROTOCOL.md section 6 item 18). During probing
    /// the host is just not asleep yet: probe again. From any other MAC it is a conflict: probe again and wake
    /// the host so it can defend its address.
    mutating func sawAddressInUse(
        _ address: IPAddress, by mac: MACAddress, owner: Owner, now: UnixTime, what: String
    ) -> [Action] {
        let key = owner.key
        guard let takeover = takeovers[key]?[address], takeover.restarts < TakeoverTiming.maximumRestarts else {
            return []
        }
        if mac == owner.wakeMAC {
            if takeover.answers || wakes[key] != nil {
                return release(owner, now: now, detail: "\(what) from its own MAC \(mac) for \(address)")
            }
            restartProbing(key, address, now: now)
            return []
        }
        restartProbing(key, address, now: now)
        return startWake(key, now: now, reason: "address conflict: \(what) from \(mac) uses \(address)")
    }

    mutating func setNeighbour(_ address: IPAddress, to mac: MACAddress, on interface: InterfaceName) -> [Action] {
        guard neighbourEntries.insert(NeighbourKey(interface: interface, address: address)).inserted else { return [] }
        return [
            .setNeighbour(interface, address, mac),
            .log(.info, "our host asked for \(address): pointed it at the sleeping host's \(mac)"),
        ]
    }
}

struct NeighbourKey: Hashable, Sendable {
    var interface: InterfaceName
    var address: IPAddress
}
