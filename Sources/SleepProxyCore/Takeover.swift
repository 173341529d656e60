import DNSWire
import Frames
import NetworkAddresses

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
        /// Claiming the address: announcement `sent` of 4 went out. Requests are answered once the first has
        /// (Apple's proxy answers only after its first announcement, PROTOCOL.md section 3.2).
        case announcing(sent: Int)
        /// Claimed; requests are answered.
        case defending
    }

    var phase: Phase
    var next: UnixTime?
    var restarts = 0
    /// Set while a restart waits 10 s (the host showed itself after the claim): further restarts wait as long.
    var backoffUntil: UnixTime?

    /// Whether the first announcement went out (or, under a lazy claim, the proxy answers from now on): the link
    /// sends the address's traffic to us from now on, and ARP requests and Neighbour Solicitations for it are
    /// answered. Between the last probe and the first announcement nothing is answered yet (as Apple's proxy,
    /// PROTOCOL.md section 3.2), and the host is not reported held before its addresses are the proxy's.
    var isClaimed: Bool {
        switch phase {
        case .probing: false
        case .announcing(let sent): sent > 0
        case .defending: true
        }
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

    /// Starts taking over the addresses of a host that are not taken over yet, and stops those it no longer has.
    mutating func updateTakeovers(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard let host = hosts[key] else { return [] }
        var actions: [Action] = []
        var current = host.takeovers
        let wanted = host.owner.proxiedAddresses
        let wantedSet = Set(wanted)
        for address in current.addresses where !wantedSet.contains(address) {
            current[address] = nil
            actions += stopTakeover(of: address, key: key, now: now)
        }
        for address in wanted where current[address] == nil {
            // An address another owner already holds stays with it (a name hijack was refused already).
            guard hosts.claim(address, for: key) else { continue }
            current[address] = AddressTakeover(phase: .probing(sent: 0), next: now + TakeoverTiming.firstProbe)
            if case .v6(let v6) = address, hosts.joinGroup(v6.solicitedNodeGroup, on: key.interface) {
                actions.append(.joinMulticastGroup(key.interface, v6.solicitedNodeGroup))
                listener.change(v6.solicitedNodeGroup, listening: true, on: key.interface, now: now)
            }
        }
        let changed = !current.holdsTheSameAddresses(as: host.takeovers)
        hosts.updateService(key) { $0.takeovers = current }
        refreshHostDeadline()
        // The list of all held addresses on the interface, only when this host's share of it changed: with
        // thousands held, a renewal must not cost a list of all of them.
        if changed { actions += addressListChanged(on: key.interface) }
        // The connections kept alive follow the records too.
        actions += updateKeepalives(of: key, now: now)
        return actions
    }

    /// Takes every address of a host over from the start: it is going to sleep (again) now.
    mutating func restartTakeovers(of key: OwnerKey, now: UnixTime) {
        guard let takeovers = hosts[key]?.takeovers else { return }
        hosts.updateService(key) { host in
            host.takeovers = takeovers.mapTakeovers { _ in
                AddressTakeover(phase: .probing(sent: 0), next: now + TakeoverTiming.firstProbe)
            }
        }
        refreshHostDeadline()
    }

    /// Stops every take-over of a host that is going.
    mutating func stopTakeovers(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard let current = hosts[key]?.takeovers, !current.isEmpty else { return [] }
        var actions: [Action] = []
        for address in current.addresses {
            actions += stopTakeover(of: address, key: key, now: now)
        }
        hosts.updateService(key) { $0.takeovers = [:] }
        refreshHostDeadline()
        actions += addressListChanged(on: key.interface)
        return actions
    }

    /// The held addresses on `interface` changed: the prefixes the capture is to watch, if they changed too, or,
    /// while a restore or a batch of registrations is under way, a note to work them out once at the end.
    mutating func addressListChanged(on interface: InterfaceName) -> [Action] {
        guard hosts.noteListChange(on: interface) else { return [] }
        return watchedPrefixesChanged(on: interface)
    }

    /// The deferred changes of held addresses, one per interface that changed, and the end of deferring.
    mutating func endDeferredAddressChanges() -> [Action] {
        hosts.endDeferringListChanges().sorted().flatMap { watchedPrefixesChanged(on: $0) }
    }

    /// A capture opened anew on `interface` (an interface served from a reload on): it is handed the prefixes to
    /// watch, whatever was handed before (to no shell, or to one that is gone).
    public mutating func captureOpened(on interface: InterfaceName) -> [Action] {
        hosts.forgetWatchedPrefixes(on: interface)
        return watchedPrefixesChanged(on: interface)
    }

    private mutating func watchedPrefixesChanged(on interface: InterfaceName) -> [Action] {
        guard let prefixes = hosts.newWatchedPrefixes(on: interface, limit: Self.watchedPrefixLimit) else { return [] }
        return [.watchDestinations(interface, prefixes)]
    }

    /// The most prefixes the capture watches on one interface, half of them for each family: few enough that the
    /// shell's filter program stays far below the kernel's bound (4,096 classic BPF instructions), while traffic
    /// to other addresses stays in the kernel.
    static let watchedPrefixLimit = 64

    private mutating func stopTakeover(of address: IPAddress, key: OwnerKey, now: UnixTime) -> [Action] {
        var actions: [Action] = []
        hosts.release(address, of: key)
        if case .v6(let v6) = address, hosts.leaveGroup(v6.solicitedNodeGroup, on: key.interface) {
            actions.append(.leaveMulticastGroup(key.interface, v6.solicitedNodeGroup))
            listener.change(v6.solicitedNodeGroup, listening: false, on: key.interface, now: now)
        }
        if hosts.updateService(key, { $0.neighbourEntries.remove(address) }) != nil {
            actions.append(.removeNeighbour(key.interface, address))
        }
        return actions
    }

    // MARK: Probes and announcements

    /// Sends a host's probes and announcements that are due. Nothing goes out while the whole host is woken.
    mutating func advanceTakeovers(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard let link = links[key.interface] else { return [] }
        let lazy = configuration.addressClaim == .lazy
        var actions: [Action] = []
        // Changed where it is held: a step runs for every held host several times after it registers, and a copy
        // of the host would retain and release everything it holds each time.
        hosts.updateService(key) { host in
            guard !host.takeovers.isEmpty, !host.isWakingWhole else { return }
            Self.takeDueSteps(
                &host.takeovers, of: key, probesTo: host.takeoverProbeTarget, lazy: lazy, link: link,
                now: now, actions: &actions)
        }
        return actions
    }

    /// Takes the steps of `current` due at `now`, adding the frames, events and logs they send to `actions`.
    private static func takeDueSteps(
        _ current: inout AddressTakeovers, of key: OwnerKey, probesTo wakeMAC: MACAddress?, lazy: Bool, link: Link,
        now: UnixTime, actions: inout [Action]
    ) {
        for position in current.indices {
            let address = current[position].address
            var takeover = current[position].takeover
            guard let next = takeover.next, next <= now else { continue }
            switch takeover.phase {
            case .probing(let sent):
                actions.append(.injectFrame(key.interface, probe(address, to: wakeMAC, link: link)))
                if sent + 1 < TakeoverTiming.probes {
                    takeover.phase = .probing(sent: sent + 1)
                    takeover.next = now + TakeoverTiming.probeInterval
                } else {
                    // The host stayed silent: it sleeps. Claim the address from the next tick on.
                    takeover.phase = .announcing(sent: 0)
                    takeover.next = now + TakeoverTiming.probeInterval
                }
            case .announcing(let sent):
                if !lazy {
                    actions.append(.injectFrame(key.interface, announcement(address, link: link)))
                }
                if sent == 0 {
                    let detail = lazy ? "took over \(address) (answering requests only)" : "took over \(address)"
                    let event = Event(
                        time: now, kind: .takeover, interface: key.interface, owner: key.primaryMAC, detail: detail)
                    actions += [.store(.appendEvent(event)), .log(.info, "\(key): \(detail)")]
                }
                if lazy {
                    // Claimed without a word: requests are answered from now on (`AddressTakeover.isClaimed`).
                    takeover.phase = .defending
                    takeover.next = nil
                } else if sent + 1 < TakeoverTiming.announcements {
                    takeover.phase = .announcing(sent: sent + 1)
                    takeover.next = now + TakeoverTiming.announcementGaps[sent]
                } else {
                    takeover.phase = .defending
                    takeover.next = nil
                }
            case .defending:
                takeover.next = nil
            }
            current.update(at: position) { $0 = takeover }
        }
    }

    /// "Is the host still there?": an ARP probe or an NS from `::` for `address`, unicast to `mac` (the host's
    /// wake MAC); with no MAC, "is anyone using this address?", to the whole link (ARP broadcast, or the
    /// solicited-node group's MAC).
    static func probe(_ address: IPAddress, to mac: MACAddress?, link: Link) -> [UInt8] {
        switch address {
        case .v4(let v4):
            return EthernetFrame.arpProbe(for: v4, source: link.macAddress, destination: mac ?? .broadcast)
                .serialized()
        case .v6(let v6):
            return EthernetFrame.neighborSolicitation(
                for: v6, sourceAddress: .unspecified, destinationAddress: v6.solicitedNodeGroup,
                source: link.macAddress, destination: mac ?? MACAddress(ipv6Multicast: v6.solicitedNodeGroup),
                includeSourceLinkLayerAddress: false
            ).serialized()
        }
    }

    /// The claim: a gratuitous ARP, or an unsolicited NA with Override and our MAC, to everyone.
    static func announcement(_ address: IPAddress, link: Link) -> [UInt8] {
        EthernetFrame.addressAnnouncement(of: address, source: link.macAddress).serialized()
    }

    /// Hands addresses the proxy claimed back to `mac` while their host still sleeps: one gratuitous ARP or
    /// unsolicited Neighbour Advertisement (Override) each, carrying that MAC, so that the neighbours the claim sent
    /// to the proxy go back to the host at once. One rule for both families, whenever the proxy stops claiming an
    /// address without the host having announced it: with the first round of a wake of the whole host, when a
    /// declared host is back (a PC or a NAS waking often announces nothing) or let go, and when the address
    /// turns out to be another machine's (to that machine's MAC). Apple's proxy does this for IPv6 only, with the
    /// first wake round (mDNS.c `SendResponses`), and leaves IPv4 to the Mac, which announces its address as it
    /// wakes; other hosts do not, and their IPv4 neighbours would keep the proxy's MAC until their entries went
    /// stale. One frame per address, as Apple sends: repeats make some IPv6 stacks see a duplicate address. A host
    /// seen back (its OWNER, its probes) is let go silently: it announces itself.
    func handBack(_ addresses: [IPAddress], to mac: MACAddress, on interface: InterfaceName) -> [Action] {
        guard let link = links[interface] else { return [] }
        return addresses.map { address in
            .injectFrame(
                interface,
                EthernetFrame.addressAnnouncement(of: address, source: link.macAddress, owner: mac).serialized())
        }
    }

    /// Probing again because the host (or someone) still uses the address (mDNS.c `RestartARPProbing`): after a
    /// second while nothing was announced yet and no restart is already waiting; otherwise after ten, because a
    /// waking host's interface may lose our probes and we must not claim its address under it.
    mutating func restartProbing(_ key: OwnerKey, _ address: IPAddress, now: UnixTime) {
        guard var takeover = hosts[key]?.takeovers[address], takeover.restarts < TakeoverTiming.maximumRestarts else {
            return
        }
        let backingOff = takeover.backoffUntil.map { now < $0 } ?? false
        let claimed = takeover.isClaimed
        takeover.restarts += 1
        takeover.phase = .probing(sent: 0)
        if claimed || backingOff {
            takeover.next = now + TakeoverTiming.restartDelayWhileAnnouncing
            takeover.backoffUntil = takeover.next
        } else {
            takeover.next = now + TakeoverTiming.firstProbe
        }
        hosts.updateService(key) { $0.takeovers[address] = takeover }
        refreshHostDeadline()
    }

    // MARK: Captured frames

    /// Handles a captured frame: ARP and Neighbour Discovery for held addresses, and the connections that should
    /// wake a host (PROTOCOL.md sections 3.2 to 3.5). Frames our own host sends count like anyone else's (an
    /// administrator's ssh to a sleeping host wakes it); the shell leaves out only the frames the daemon built.
    mutating func receiveFrame(_ frame: EthernetFrame, on interface: InterfaceName, now: UnixTime) -> [Action] {
        var actions = expire(now: now)
        guard let link = links[interface] else { return actions }
        hearSender(frame.header.source, using: Self.sourceAddresses(of: frame).first, on: link, now: now)
        // A declared host heard from first: if it is back, nothing of it is held when the frame is looked at.
        if !declared.isEmpty {
            actions += hearDeclared(
                frame.header.source, on: interface, using: Self.sourceAddresses(of: frame),
                what: Self.summary(of: frame), now: now)
        }
        if let arp = frame.arp {
            actions += handleARP(arp, from: frame.header.source, link: link, now: now)
        } else if let ipv6 = frame.ipv6, let icmp = frame.icmpv6, ipv6.header.hopLimit == 255 {
            actions += handleND(icmp, ipv6: ipv6.header, from: frame.header.source, link: link, now: now)
        } else if frame.ipv6?.header.nextHeader.rawValue == 0, let query = MLDQuery(frame) {
            listener.hear(query, on: interface, now: now, random: &random)
        } else {
            actions += checkWakeTrigger(frame, link: link, now: now)
        }
        refreshHostDeadline()
        return actions
    }

    /// The addresses a frame's sender uses as its own: an ARP sender address, an IP source.
    static func sourceAddresses(of frame: EthernetFrame) -> [IPAddress] {
        if let arp = frame.arp {
            return arp.senderProtocolAddress.isUnspecified ? [] : [.v4(arp.senderProtocolAddress)]
        }
        if let ipv4 = frame.ipv4 { return [.v4(ipv4.header.source)] }
        if let ipv6 = frame.ipv6 { return [.v6(ipv6.header.source)] }
        return []
    }

    /// A frame in a few words, for the event that says a declared host is back.
    static func summary(of frame: EthernetFrame) -> String {
        if let arp = frame.arp {
            return arp.operation == .reply
                ? "ARP reply for \(arp.senderProtocolAddress)" : "ARP request for \(arp.targetProtocolAddress)"
        }
        if let ipv6 = frame.ipv6 {
            if let icmp = frame.icmpv6, icmp.neighborSolicitation != nil || icmp.neighborAdvertisement != nil {
                return
                    "\(icmp.neighborSolicitation != nil ? "Neighbour Solicitation" : "Neighbour Advertisement") from \(ipv6.header.source)"
            }
            return "IPv6 from \(ipv6.header.source) to \(ipv6.header.destination)"
        }
        if let ipv4 = frame.ipv4 { return "IPv4 from \(ipv4.header.source) to \(ipv4.header.destination)" }
        return "a frame of EtherType 0x\(String(frame.header.etherType.rawValue, radix: 16))"
    }

    /// ARP for held addresses (mDNS.c `mDNSCoreReceiveRawARP`). Requests for a held address: from the host
    /// itself, probe again; during probing, ignore; from our own host, point its neighbour entry at the sleeping
    /// host; from anyone else, answer with our MAC. Any ARP using a held address as its sender: from the host,
    /// probe again; from another MAC, a conflict: probe again and wake the host so it can defend its address.
    mutating func handleARP(_ arp: ARPPacket, from source: MACAddress, link: Link, now: UnixTime) -> [Action] {
        let interface = link.name
        let sender = IPAddress.v4(arp.senderProtocolAddress)
        let target = IPAddress.v4(arp.targetProtocolAddress)
        var actions: [Action] = []
        if arp.operation == .request, sender != target, let key = hosts.holder(of: target, on: interface),
            let host = hosts[key], let takeover = host.takeovers[target], !host.isWakingWhole
        {
            if arp.senderHardwareAddress == host.owner.wakeMAC {
                // The host asks for its own address: awake, or a stray packet from before it slept.
                actions += ownerUsesAddress(target, of: key, now: now, what: "ARP request")
            } else if !takeover.isClaimed {
                // Still probing: the host may yet answer for itself.
            } else if source == link.macAddress {
                // Our own probes come back through the capture with sender 0.0.0.0; our host's kernel asking
                // wants to talk to the sleeper: point it at the real NIC.
                if !arp.senderProtocolAddress.isUnspecified {
                    actions += setNeighbour(target, of: key, to: host.owner.wakeMAC, on: interface)
                }
            } else {
                actions.append(
                    .injectFrame(
                        interface,
                        EthernetFrame.arpReply(
                            for: arp.targetProtocolAddress, source: link.macAddress,
                            requesterMAC: arp.senderHardwareAddress, requesterAddress: arp.senderProtocolAddress
                        ).serialized()))
            }
        }
        // Our own announcements carry a held address as their sender; they are no conflict.
        if !arp.senderProtocolAddress.isUnspecified, arp.senderHardwareAddress != link.macAddress,
            source != link.macAddress, let key = hosts.holder(of: sender, on: interface)
        {
            actions += sawAddressInUse(sender, by: arp.senderHardwareAddress, of: key, now: now, what: "ARP")
        }
        return actions
    }

    /// Neighbour Discovery for held addresses (mDNS.c `mDNSCoreReceiveRawND`), with RFC 4861's answers.
    mutating func handleND(
        _ icmp: ICMPv6Message, ipv6: IPv6Header, from source: MACAddress, link: Link, now: UnixTime
    ) -> [Action] {
        let interface = link.name
        var actions: [Action] = []
        if let solicitation = icmp.neighborSolicitation {
            let target = IPAddress.v6(solicitation.target)
            if let key = hosts.holder(of: target, on: interface), let host = hosts[key],
                let takeover = host.takeovers[target], !host.isWakingWhole
            {
                if source == host.owner.wakeMAC {
                    actions += ownerUsesAddress(target, of: key, now: now, what: "Neighbour Solicitation")
                } else if !takeover.isClaimed {
                    // Still probing.
                } else if source == link.macAddress {
                    if !ipv6.source.isUnspecified {
                        actions += setNeighbour(target, of: key, to: host.owner.wakeMAC, on: interface)
                    }
                } else {
                    actions.append(.injectFrame(interface, answer(solicitation, ipv6: ipv6, from: source, link: link)))
                }
            }
        }
        // Someone using a held address: the target of an advertisement (a host asserts its routable address from
        // its link-local one), or the source of a solicitation.
        let used: IPv6Address? =
            icmp.neighborAdvertisement?.target ?? (icmp.neighborSolicitation != nil ? ipv6.source : nil)
        if let used, !used.isUnspecified, source != link.macAddress,
            let key = hosts.holder(of: .v6(used), on: interface)
        {
            actions += sawAddressInUse(
                .v6(used), by: source, of: key, now: now, what: icmp.neighborAdvertisement != nil ? "NA" : "NS")
        }
        return actions
    }

    /// RFC 4861 section 7.2.4: a unicast NA with Solicited and Override to a unicast source; to all nodes,
    /// Override only, for a duplicate-address probe from `::` (defending the address).
    func answer(_ solicitation: NeighborSolicitation, ipv6: IPv6Header, from source: MACAddress, link: Link) -> [UInt8]
    {
        if ipv6.source.isUnspecified {
            return EthernetFrame.neighborAdvertisement(
                for: solicitation.target, flags: .override, targetLinkLayerAddress: link.macAddress,
                sourceAddress: solicitation.target, source: link.macAddress
            ).serialized()
        }
        return EthernetFrame.neighborAdvertisement(
            for: solicitation.target, flags: [.solicited, .override], targetLinkLayerAddress: link.macAddress,
            sourceAddress: solicitation.target, destinationAddress: ipv6.source, source: link.macAddress,
            destination: solicitation.sourceLinkLayerAddress ?? source
        ).serialized()
    }

    /// Someone used a held address as its own. The host itself: probe again (never a release by itself; see
    /// `ownerUsesAddress`). Another MAC: a conflict: probe again and wake the host so it can defend its address.
    /// Apple stops reacting after the maximum number of restarts; so do we, for others. A declared host's address
    /// used by another MAC is that machine's now (`declaredAddressInUse`): never claimed, nobody woken.
    mutating func sawAddressInUse(
        _ address: IPAddress, by mac: MACAddress, of key: OwnerKey, now: UnixTime, what: String
    ) -> [Action] {
        guard let host = hosts[key], let takeover = host.takeovers[address] else { return [] }
        if mac == host.owner.wakeMAC {
            return ownerUsesAddress(address, of: key, now: now, what: what)
        }
        if host.isDeclared {
            return declaredAddressInUse(address, by: mac, of: key, now: now, what: what)
        }
        guard takeover.restarts < TakeoverTiming.maximumRestarts else { return [] }
        restartProbing(key, address, now: now)
        return startWake(
            key, now: now, reason: "address conflict: \(what) from \(mac) uses \(address)", trigger: .addressConflict)
    }

    mutating func setNeighbour(
        _ address: IPAddress, of key: OwnerKey, to mac: MACAddress, on interface: InterfaceName
    ) -> [Action] {
        guard hosts.updateService(key, { $0.neighbourEntries.insert(address).inserted }) == true else { return [] }
        return [
            .setNeighbour(interface, address, mac),
            .log(.info, "our host asked for \(address): pointed it at the sleeping host's \(mac)"),
        ]
    }
}

/// The take-over of each of a host's held addresses, in address order. A host has one address or a few: a short
/// sorted array is one allocation of about a hundred bytes per host, where a hash table took a few hundred (for
/// each of thousands of hosts), and the steps walk it in order without sorting its keys each time.
struct AddressTakeovers: Sendable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    struct Entry: Sendable {
        let address: IPAddress
        var takeover: AddressTakeover
    }

    private var entries: [Entry] = []

    init() {}

    init(dictionaryLiteral elements: (IPAddress, AddressTakeover)...) {
        for (address, takeover) in elements { self[address] = takeover }
    }

    var startIndex: Int { entries.startIndex }
    var endIndex: Int { entries.endIndex }
    subscript(position: Int) -> Entry { entries[position] }

    /// The held addresses, in order.
    var addresses: [IPAddress] { entries.map(\.address) }

    /// Where `address` is, or where it would go.
    private func slot(of address: IPAddress) -> (position: Int, found: Bool) {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].address < address { low = middle + 1 } else { high = middle }
        }
        return (low, low < entries.count && entries[low].address == address)
    }

    /// The take-over of `address`; setting nil stops holding it.
    subscript(address: IPAddress) -> AddressTakeover? {
        get {
            let (position, found) = slot(of: address)
            return found ? entries[position].takeover : nil
        }
        set {
            let (position, found) = slot(of: address)
            switch (found, newValue) {
            case (true, let takeover?): entries[position].takeover = takeover
            case (true, nil): entries.remove(at: position)
            case (false, let takeover?): entries.insert(Entry(address: address, takeover: takeover), at: position)
            case (false, nil): break
            }
        }
    }

    /// Changes the take-over at `position` in place.
    mutating func update(at position: Int, _ change: (inout AddressTakeover) -> Void) {
        change(&entries[position].takeover)
    }

    /// The same addresses, each take-over changed by `transform`.
    func mapTakeovers(_ transform: (AddressTakeover) -> AddressTakeover) -> AddressTakeovers {
        var mapped = self
        for position in mapped.entries.indices {
            mapped.entries[position].takeover = transform(mapped.entries[position].takeover)
        }
        return mapped
    }

    /// Whether both hold the same addresses (whatever their phases).
    func holdsTheSameAddresses(as other: AddressTakeovers) -> Bool {
        entries.count == other.entries.count
            && zip(entries, other.entries).allSatisfy { $0.address == $1.address }
    }
}
