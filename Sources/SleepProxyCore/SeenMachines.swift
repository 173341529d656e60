public import DNSWire
public import NetworkAddresses

/// A machine heard on a served link: what `sleepproxyctl seen` lists, so that the administrator can find the MAC of
/// a machine that does not register and declare it.
public struct SeenMachine: Hashable, Sendable {
    /// A service the machine announces for itself: an SRV record it sent that points at its own host name.
    public struct Service: Hashable, Sendable {
        /// The instance label, as sent (`Anna's iMac`).
        public var name: String
        /// The service type without `.local` (`_smb._tcp`).
        public var type: String
        public var port: UInt16
    }

    /// Whether the machine registers with the proxy, is declared in the configuration, or neither.
    public enum Role: Hashable, Sendable {
        case registers
        /// The name of its `[hosts.NAME]` table.
        case declared(String)
        case neither
    }

    public var interface: InterfaceName
    public var mac: MACAddress
    /// Addresses on the link it was heard using (an ARP sender, an IP source), most recently used last, at most
    /// `SeenMachines.addressLimit`.
    public var addresses: [IPAddress] = []
    /// The mDNS host name it announces: the name of an address record it sent for the address it sent it from.
    public var hostName: DNSName?
    /// Its services, most recently announced last, at most `SeenMachines.serviceLimit`.
    public var services: [Service] = []
    public var firstHeard: UnixTime
    public var lastHeard: UnixTime
    /// When a registration of it (its MAC as the OWNER's primary MAC) was last accepted.
    public var lastRegistered: UnixTime?
    /// Filled in when the machines are reported (`SleepProxyCore.seenMachines`).
    public var role: Role = .neither

    init(interface: InterfaceName, mac: MACAddress, now: UnixTime) {
        self.interface = interface
        self.mac = mac
        firstHeard = now
        lastHeard = now
    }
}

/// Every machine heard on the served links, by interface and MAC: from its mDNS (queries and responses), ARP and
/// Neighbour Discovery, and whatever else the capture lets through from it. Never the proxy's own MAC.
///
/// Bounded, whatever the link sends (a flood of invented MACs included): at most `limit` machines, those heard
/// least recently dropped first (an eighth of the table at once, so that a flood costs a sort every `limit / 8` new
/// MACs, not a scan per frame); each with at most `addressLimit` addresses and `serviceLimit` services. Kept in
/// memory only: after a restart the table fills again as the machines talk.
///
/// The table is sized for `limit` machines from the start (about 130 KB), so that a link's machines, or a flood,
/// filling it over the first minutes grow no table storage: the daemon's memory is what it will be at the limit,
/// not a step every time the table outgrows its storage and is copied to one twice the size.
struct SeenMachines: Sendable {
    static let limit = 512
    static let addressLimit = 8
    static let serviceLimit = 16

    struct Key: Hashable, Sendable {
        var interface: InterfaceName
        var mac: MACAddress
    }

    private(set) var machines: [Key: SeenMachine] = Self.emptyTable()

    private static func emptyTable() -> [Key: SeenMachine] {
        var table: [Key: SeenMachine] = [:]
        table.reserveCapacity(limit)
        return table
    }

    var count: Int { machines.count }

    /// `mac` was heard on `interface` at `now`, using `address` if given (the caller checked it is on the link).
    mutating func hear(_ mac: MACAddress, on interface: InterfaceName, using address: IPAddress?, now: UnixTime) {
        update(Key(interface: interface, mac: mac), now: now) { machine in
            if let address { Self.note(address, in: &machine) }
        }
    }

    /// An mDNS response `mac` sent from `source`: its host name is the name of an address record for `source`
    /// (a proxy answering for a sleeping machine sends that machine's records from its own address, so they are not
    /// taken for its own), and its services the SRV records that point at that name; a goodbye to one removes it.
    mutating func hearResponse(
        _ records: [DNSRecord], from mac: MACAddress, on interface: InterfaceName, source: IPAddress, now: UnixTime
    ) {
        update(Key(interface: interface, mac: mac), now: now) { machine in
            Self.note(source, in: &machine)
            for record in records where record.ttl > 0 {
                switch record.rdata {
                // Kept for as long as the machine is remembered: a copy of its own, not the packet's names.
                case .a(let v4) where IPAddress.v4(v4) == source && machine.hostName != record.name:
                    machine.hostName = record.name.compacted()
                case .aaaa(let v6) where IPAddress.v6(v6) == source && machine.hostName != record.name:
                    machine.hostName = record.name.compacted()
                default: continue
                }
            }
            guard let hostName = machine.hostName else { return }
            for record in records {
                guard case .srv(let srv) = record.rdata, srv.target.caseInsensitiveEquals(hostName),
                    record.name.labelCount == 4, let label = record.name.label(at: 0)
                else { continue }
                let type = record.name.droppingFirstLabels(1).labels.prefix(2)
                    .map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
                let service = SeenMachine.Service(
                    name: String(decoding: label, as: UTF8.self), type: type, port: srv.port)
                machine.services.removeAll { $0.name == service.name && $0.type == service.type }
                guard record.ttl > 0 else { continue }
                if machine.services.count >= Self.serviceLimit { machine.services.removeFirst() }
                machine.services.append(service)
            }
        }
    }

    /// The host names the machines on `interface` other than `mac` announce, lower case, each with the MAC of one
    /// that announces it (the lowest, if several do).
    func hostNames(on interface: InterfaceName, other mac: MACAddress) -> [DNSName: MACAddress] {
        var names: [DNSName: MACAddress] = [:]
        for (key, machine) in machines where key.interface == interface && key.mac != mac {
            guard let name = machine.hostName?.lowercased() else { continue }
            if names[name].map({ key.mac < $0 }) ?? true { names[name] = key.mac }
        }
        return names
    }

    /// A registration of the host of `key` was accepted at `now`, from `source`.
    mutating func registered(_ key: OwnerKey, from source: IPAddress, onLink: Bool, now: UnixTime) {
        update(Key(interface: key.interface, mac: key.primaryMAC), now: now) { machine in
            machine.lastRegistered = now
            if onLink { Self.note(source, in: &machine) }
        }
    }

    /// The clock stepped by `step`: the times move with it.
    mutating func moveTimes(by step: Duration) {
        machines = machines.mapValues { machine in
            var moved = machine
            moved.firstHeard = machine.firstHeard + step
            moved.lastHeard = machine.lastHeard + step
            moved.lastRegistered = machine.lastRegistered.map { $0 + step }
            return moved
        }
    }

    /// Forgets the machines of `interface` (no longer served).
    mutating func remove(on interface: InterfaceName) {
        for key in machines.keys.filter({ $0.interface == interface }) { machines[key] = nil }
    }

    private mutating func update(_ key: Key, now: UnixTime, _ change: (inout SeenMachine) -> Void) {
        if machines[key] == nil {
            if machines.count >= Self.limit { dropLeastRecentlyHeard() }
            machines[key] = SeenMachine(interface: key.interface, mac: key.mac, now: now)
        }
        // Modified in place: the dictionary's storage is not copied.
        change(&machines[key]!)
        if machines[key]!.lastHeard < now { machines[key]!.lastHeard = now }
    }

    private mutating func dropLeastRecentlyHeard() {
        let oldest = machines.sorted { $0.value.lastHeard < $1.value.lastHeard }.prefix(max(1, Self.limit / 8))
        for (key, _) in oldest { machines[key] = nil }
    }

    private static func note(_ address: IPAddress, in machine: inout SeenMachine) {
        if let index = machine.addresses.firstIndex(of: address) {
            guard index != machine.addresses.count - 1 else { return }
            machine.addresses.remove(at: index)
        } else if machine.addresses.count >= addressLimit {
            machine.addresses.removeFirst()
        }
        machine.addresses.append(address)
    }
}

extension SleepProxyCore {
    /// Every machine heard on the served links with its role, by interface, the most recently heard first.
    public var seenMachines: [SeenMachine] {
        seen.machines.values.map { machine in
            var report = machine
            let key = OwnerKey(interface: machine.interface, primaryMAC: machine.mac)
            if let watch = declared[key] {
                report.role = .declared(watch.host.name)
            } else if machine.lastRegistered != nil || hosts[key].map({ !$0.isDeclared }) ?? false {
                report.role = .registers
            }
            return report
        }.sorted { ($0.interface, $1.lastHeard, $0.mac) < ($1.interface, $0.lastHeard, $1.mac) }
    }

    /// How many machines the table of those heard holds (at most `SeenMachines.limit`).
    public var seenMachineCount: Int { seen.count }

    /// A frame's sender heard on `link`: its MAC, with the address it used if that is on the link.
    mutating func hearSender(_ mac: MACAddress, using address: IPAddress?, on link: Link, now: UnixTime) {
        guard mac != link.macAddress, !mac.isMulticast else { return }
        let onLink = address.flatMap { link.isOnLink($0) && !$0.isUnspecifiedOrMulticast ? $0 : nil }
        seen.hear(mac, on: link.name, using: onLink, now: now)
    }
}
