public import DNSWire
import Frames
public import NetworkAddresses

/// A TCP connection the proxy keeps alive for a sleeping host, and what happened on it (PROTOCOL.md section 3.8;
/// mDNS.c `mDNS_SendKeepalives`, `mDNS_SendKeepaliveACK`, the TCP branch of `mDNSCoreReceiveRawTransportPacket`).
public struct KeptConnection: Hashable, Sendable {
    public var connection: KeepaliveConnection
    /// The record that asked for it.
    public var recordName: DNSName
    /// When the next keepalive segment is due; nil while the host's address is not claimed (nothing to send from).
    public var nextSend: UnixTime?
    public var keepalivesSent = 0
    public var lastKeepaliveSent: UnixTime?
    /// The peer's own keepalive probes answered on the host's behalf.
    public var probesAnswered = 0
    public var lastProbeAnswered: UnixTime?
    /// The last segment from the peer on this connection, of any kind.
    public var lastHeard: UnixTime?
    /// Keepalives sent since the peer last sent anything.
    public var unanswered = 0
    /// The peer stayed silent through `KeepaliveTiming.silentAfter` keepalives; reported once until it speaks.
    public var reportedSilent = false

    init(connection: KeepaliveConnection, recordName: DNSName) {
        self.connection = connection
        self.recordName = recordName
    }
}

/// The rules of keepalive offload.
public enum KeepaliveTiming {
    /// Keepalives answered by nothing from the peer, after which the connection is reported silent (once). The
    /// peer's kernel acknowledges each keepalive (it is an old sequence number), so silence means the peer or the
    /// path is gone; the host is not woken for that, as Apple's proxy does not.
    public static let silentAfter = 3
    /// Apple's proxy sends IPv4 keepalives with TTL 63 and IP ID 9864 (helper.c `SendKeepalive`); IPv6 ones go
    /// through the kernel with its default hop limit.
    static let ipv4TimeToLive: UInt8 = 63
    static let ipv4Identification: UInt16 = 9864
    static let ipv6HopLimit: UInt8 = 64
}

extension SleepProxyCore {
    /// The connections kept alive for a host, in a stable order.
    public func keptConnections(of key: OwnerKey) -> [KeptConnection] {
        guard let kept = hosts[key]?.keepalives else { return [] }
        return kept.keys.sorted().compactMap { kept[$0] }
    }

    // MARK: Records

    /// Reads a host's keepalive records again after a registration: new connections are kept from the next
    /// claim on, changed ones send a keepalive at once (Apple sends one right after every update), dropped ones are
    /// forgotten. A keepalive record that cannot be used is held as an ordinary record, and an event names the
    /// field at fault.
    mutating func updateKeepalives(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard let host = hosts[key], configuration.keepaliveOffload else { return [] }
        var actions: [Action] = []
        var kept: [KeepaliveConnection.Key: KeptConnection] = [:]
        // Only NULL records can be keepalive records: the others are passed over without a copy.
        let records = host.owner.records
        for index in records.indices where records.type(at: index) == .null {
            let held = records[index]
            guard let parsed = KeepaliveRecord.parse(held.record) else { continue }
            switch parsed {
            case .success(let connection):
                let connectionKey = connection.key
                if var previous = host.keepalives[connectionKey], previous.connection == connection {
                    previous.recordName = held.record.name
                    kept[connectionKey] = previous
                } else {
                    var fresh = KeptConnection(connection: connection, recordName: held.record.name)
                    // Carry what was seen on the connection; the numbers are new, so a keepalive goes out now.
                    if let previous = host.keepalives[connectionKey] {
                        fresh.keepalivesSent = previous.keepalivesSent
                        fresh.lastKeepaliveSent = previous.lastKeepaliveSent
                        fresh.probesAnswered = previous.probesAnswered
                        fresh.lastProbeAnswered = previous.lastProbeAnswered
                        fresh.lastHeard = previous.lastHeard
                    } else {
                        let event = Event(
                            time: now, kind: .keepalive, interface: key.interface, owner: key.primaryMAC,
                            detail:
                                "keeping \(connection.local) to \(connection.remote) alive every \(connection.interval) s"
                        )
                        actions += [.store(.appendEvent(event)), .log(.info, "\(key): \(event.detail)")]
                    }
                    kept[connectionKey] = fresh
                }
            case .failure(let problem):
                guard held.registeredAt == now else { continue }
                let event = Event(
                    time: now, kind: .keepalive, interface: key.interface, owner: key.primaryMAC,
                    detail: "\(held.record.name) is held as an ordinary record, not kept alive: \(problem)")
                actions += [.store(.appendEvent(event)), .log(.warning, "\(key): \(event.detail)")]
            }
        }
        hosts.updateService(key) { $0.keepalives = kept }
        refreshHostDeadline()
        return actions
    }

    // MARK: Sending

    /// Sends the keepalives that are due for one host: the first as soon as the connection's local address is
    /// claimed, then one every interval. Nothing goes out while the host is woken as a whole or its address is
    /// not (or no longer) claimed.
    mutating func advanceKeepalives(of key: OwnerKey, now: UnixTime) -> [Action] {
        guard let host = hosts[key], !host.keepalives.isEmpty, let link = links[key.interface] else { return [] }
        var actions: [Action] = []
        var kept = host.keepalives
        for connectionKey in kept.keys.sorted() {
            guard var state = kept[connectionKey] else { continue }
            let claimed = !host.isWakingWhole && host.takeovers[state.connection.local.address]?.isClaimed == true
            guard claimed else {
                state.nextSend = nil
                kept[connectionKey] = state
                continue
            }
            let due = state.nextSend ?? now
            guard due <= now else { continue }
            let connection = state.connection
            actions.append(
                .injectFrame(
                    key.interface,
                    Self.keepaliveSegment(
                        connection, sequence: connection.sequence, link: link)))
            state.keepalivesSent += 1
            state.lastKeepaliveSent = now
            state.nextSend = now + .seconds(Int64(max(connection.interval, 1)))
            // Reported when the keepalives of `silentAfter` whole intervals got nothing back.
            let silent = state.unanswered >= KeepaliveTiming.silentAfter
            state.unanswered += 1
            if silent, !state.reportedSilent {
                state.reportedSilent = true
                let event = Event(
                    time: now, kind: .keepalive, interface: key.interface, owner: key.primaryMAC,
                    source: connection.remote,
                    detail:
                        "the peer \(connection.remote) of \(connection.local) has not answered \(KeepaliveTiming.silentAfter) keepalives; the host is not woken for it"
                )
                actions += [.store(.appendEvent(event)), .log(.notice, "\(key): \(event.detail)")]
            }
            kept[connectionKey] = state
        }
        hosts.updateService(key) { $0.keepalives = kept }
        return actions
    }

    /// The segment Apple's proxy sends, spoofed from the sleeping host to its peer: ACK only, no payload, the
    /// host's sequence (`s`, one below its next: a keepalive probe; `s + 1` to answer the peer's probe), its
    /// acknowledgment and window. It leaves from our MAC (the peer reaches the host's address through us now) to
    /// the MAC the host gave.
    static func keepaliveSegment(_ connection: KeepaliveConnection, sequence: UInt32, link: Link) -> [UInt8] {
        let segment = TCPSegment(
            sourcePort: connection.local.port, destinationPort: connection.remote.port, sequenceNumber: sequence,
            acknowledgmentNumber: connection.acknowledgment, flags: .ack, window: connection.window)
        switch (connection.local.address, connection.remote.address) {
        case (.v4(let local), .v4(let remote)):
            let header = IPv4Header(
                identification: KeepaliveTiming.ipv4Identification, timeToLive: KeepaliveTiming.ipv4TimeToLive,
                transportProtocol: .tcp, source: local, destination: remote)
            return EthernetFrame.ipv4(
                header: header, payload: .tcp(segment), source: link.macAddress, destination: connection.remoteMAC
            ).serialized()
        case (.v6(let local), .v6(let remote)):
            let header = IPv6Header(
                nextHeader: .tcp, hopLimit: KeepaliveTiming.ipv6HopLimit, source: local, destination: remote)
            return EthernetFrame.ipv6(
                header: header, payload: .tcp(segment), source: link.macAddress, destination: connection.remoteMAC
            ).serialized()
        default:
            return []
        }
    }

    // MARK: Receiving

    /// A TCP segment to a held address: when it belongs to a kept connection, the keepalive rules decide it
    /// (mDNS.c `mDNSCoreReceiveRawTransportPacket`), and no other rule applies; nil when it does not belong to one.
    /// RST or FIN wakes the host; new data that acknowledges what the host sent wakes it; the peer's own keepalive
    /// probe (an empty ACK one below the host's acknowledgment) is answered on the host's behalf.
    mutating func keepaliveSegment(
        _ tcp: TCPSegment, from source: IPAddress, to destination: IPAddress, of key: OwnerKey, now: UnixTime
    ) -> [Action]? {
        let connectionKey = KeepaliveConnection.Key(
            local: Endpoint(address: destination, port: tcp.destinationPort),
            remote: Endpoint(address: source, port: tcp.sourcePort))
        guard var state = hosts[key]?.keepalives[connectionKey], let link = links[key.interface] else { return nil }
        let connection = state.connection
        state.lastHeard = now
        state.unanswered = 0
        state.reportedSilent = false
        defer { hosts.updateService(key) { $0.keepalives[connectionKey] = state } }
        let peer = connection.remote
        let flags = tcp.flags
        if flags.contains(.rst) || flags.contains(.fin) {
            let what = flags.contains(.rst) ? "RST" : "FIN"
            return trafficWake(
                key, reason: "TCP \(what) from \(peer) on the kept-alive connection to \(connection.local)",
                trigger: flags.contains(.rst) ? .keepaliveRST : .keepaliveFIN, source: peer, now: now)
        }
        let hasData = !tcp.payload.isEmpty
        // Compared as Apple does: host-order differences read as signed 32-bit numbers.
        let acknowledgesOurs = Int32(bitPattern: tcp.acknowledgmentNumber &- connection.sequence) > 0
        let atOrPastExpected = Int32(bitPattern: tcp.sequenceNumber &- connection.acknowledgment) >= 0
        if hasData, acknowledgesOurs, atOrPastExpected {
            return trafficWake(
                key,
                reason:
                    "TCP data (\(tcp.payload.count) bytes) from \(peer) on the kept-alive connection to \(connection.local)",
                trigger: .keepaliveData, source: peer, now: now)
        }
        if flags.contains(.ack), !hasData, connection.acknowledgment &- tcp.sequenceNumber == 1 {
            state.probesAnswered += 1
            state.lastProbeAnswered = now
            return [
                .injectFrame(
                    key.interface,
                    Self.keepaliveSegment(connection, sequence: connection.sequence &+ 1, link: link)),
                .log(.debug, "\(key): answered the keepalive probe of \(peer) for \(connection.local)"),
            ]
        }
        return []
    }
}

extension KeepaliveConnection {
    /// The connection's two ends: what tells kept connections apart.
    public struct Key: Hashable, Sendable, Comparable {
        public var local: Endpoint
        public var remote: Endpoint

        public static func < (lhs: Key, rhs: Key) -> Bool {
            (lhs.local.description, lhs.remote.description) < (rhs.local.description, rhs.remote.description)
        }
    }

    public var key: Key { Key(local: local, remote: remote) }
}
