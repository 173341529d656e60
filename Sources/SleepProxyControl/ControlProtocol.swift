#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// The control protocol between `sleepproxyd` and `sleepproxyctl`: newline-delimited JSON over a Unix stream
/// socket. The client writes one `ControlRequest` line; the daemon answers with one `ControlResponse` line, or for
/// `events` with `follow`, with one line per event until the client closes the connection.
///
/// Every message carries `version`. The daemon answers a request of another version with the error
/// `unsupported-version`, naming the version it speaks. Fields are only ever added within a version; a client
/// ignores fields it does not know.
public enum ControlProtocol {
    /// The protocol version both sides speak.
    public static let version = 1
    /// Where the daemon listens unless configured otherwise.
    public static let defaultSocketPath = "/run/sleepproxy/control.sock"
    /// The longest request line the daemon reads; a longer one gets `request-too-large` and the connection closes.
    public static let maximumRequestBytes = 16 * 1024

    /// The encoder both sides use: sorted keys (stable output), RFC 3339 times.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    /// One message as a line: its JSON and a newline.
    public static func line(_ value: some Encodable) throws -> Data {
        var data = try encoder().encode(value)
        data.append(0x0A)
        return data
    }
}

/// What the client asks. `command` is one of `status`, `hosts`, `show`, `wake`, `forget`, `events`, `seen`.
public struct ControlRequest: Codable, Hashable, Sendable {
    public struct Command: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The daemon, its interfaces and counts.
        public static let status = Command(rawValue: "status")
        /// One summary per held host.
        public static let hosts = Command(rawValue: "hosts")
        /// Everything held for `host`.
        public static let show = Command(rawValue: "show")
        /// Wake `host` now.
        public static let wake = Command(rawValue: "wake")
        /// Send goodbyes for `host`'s records, release its addresses and forget it.
        public static let forget = Command(rawValue: "forget")
        /// The event history, newest last: at most `limit`, only `host`'s if given; `follow` keeps the
        /// connection open and sends each new event as it happens.
        public static let events = Command(rawValue: "events")

        /// Every machine heard on the served links, registered, declared or neither.
        public static let seen = Command(rawValue: "seen")

        public static let all: [Command] = [.status, .hosts, .show, .wake, .forget, .events, .seen]
        public var description: String { rawValue }
    }

    public var version: Int
    public var command: Command
    /// A host name (`imac` or `imac.local`), one of its addresses, or its MAC: for `show`, `wake`, `forget`, and
    /// to filter `events`.
    public var host: String?
    /// For `events`: how many of the newest events (default 50).
    public var limit: Int?
    /// For `events`: keep the connection open and send new events as they happen.
    public var follow: Bool?

    public init(
        command: Command, host: String? = nil, limit: Int? = nil, follow: Bool? = nil,
        version: Int = ControlProtocol.version
    ) {
        self.version = version
        self.command = command
        self.host = host
        self.limit = limit
        self.follow = follow
    }
}

/// What the daemon answers. Exactly one of the payload fields is set when `ok` is true; `error` when it is false.
public struct ControlResponse: Codable, Hashable, Sendable {
    public var version: Int
    public var ok: Bool
    public var error: ControlError?
    public var status: StatusReport?
    public var hosts: [HostSummary]?
    public var host: HostDetail?
    public var events: [EventReport]?
    /// One new event, on a `follow` stream.
    public var event: EventReport?
    /// What `wake` or `forget` did, in a sentence.
    public var message: String?
    /// The machines heard on the served links (`seen`).
    public var seen: [SeenReport]?

    public init(
        ok: Bool = true, error: ControlError? = nil, status: StatusReport? = nil, hosts: [HostSummary]? = nil,
        host: HostDetail? = nil, events: [EventReport]? = nil, event: EventReport? = nil, message: String? = nil,
        seen: [SeenReport]? = nil, version: Int = ControlProtocol.version
    ) {
        self.version = version
        self.ok = ok
        self.error = error
        self.status = status
        self.hosts = hosts
        self.host = host
        self.events = events
        self.event = event
        self.message = message
        self.seen = seen
    }

    public static func failure(_ error: ControlError) -> ControlResponse {
        ControlResponse(ok: false, error: error)
    }
}

/// Why a request failed: a stable `code` and a sentence for people.
public struct ControlError: Codable, Hashable, Sendable, Error, CustomStringConvertible {
    public struct Code: RawRepresentable, Codable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The request line is not valid JSON, or not a request.
        public static let badRequest = Code(rawValue: "bad-request")
        /// The request line is longer than `ControlProtocol.maximumRequestBytes`.
        public static let requestTooLarge = Code(rawValue: "request-too-large")
        /// The request's `version` is not the daemon's.
        public static let unsupportedVersion = Code(rawValue: "unsupported-version")
        /// The command is not one the daemon knows.
        public static let unknownCommand = Code(rawValue: "unknown-command")
        /// A field the command needs is missing or out of range.
        public static let badArgument = Code(rawValue: "bad-argument")
        /// No held host matches `host`.
        public static let unknownHost = Code(rawValue: "unknown-host")
        /// More than one held host matches `host` (the same name on two interfaces): give the MAC.
        public static let ambiguousHost = Code(rawValue: "ambiguous-host")
        /// The daemon could not carry the request out (the lease store failed, say).
        public static let failed = Code(rawValue: "failed")
        /// Too many control connections are open (`limits.control_connections`); try again.
        public static let busy = Code(rawValue: "busy")

        public var description: String { rawValue }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// `status`: the daemon as a whole.
public struct StatusReport: Codable, Hashable, Sendable {
    public var daemonVersion: String
    public var startedAt: Date
    public var uptimeSeconds: Double
    public var interfaces: [InterfaceReport]
    public var hostCount: Int
    public var recordCount: Int
    public var storePath: String
    public var controlSocket: String
    /// Wakes are only logged and recorded, never sent.
    public var dryRun: Bool

    public init(
        daemonVersion: String, startedAt: Date, uptimeSeconds: Double, interfaces: [InterfaceReport],
        hostCount: Int, recordCount: Int, storePath: String, controlSocket: String, dryRun: Bool
    ) {
        self.daemonVersion = daemonVersion
        self.startedAt = startedAt
        self.uptimeSeconds = uptimeSeconds
        self.interfaces = interfaces
        self.hostCount = hostCount
        self.recordCount = recordCount
        self.storePath = storePath
        self.controlSocket = controlSocket
        self.dryRun = dryRun
    }
}

/// One served interface.
public struct InterfaceReport: Codable, Hashable, Sendable {
    public var name: String
    /// `aa:bb:cc:dd:ee:ff`.
    public var mac: String
    /// Its addresses with their prefix lengths (`192.0.2.1/24`, `fe80::1/64`).
    public var addresses: [String]
    /// The `_sleep-proxy._udp` instance name, when advertising.
    public var advertisedName: String?
    public var registrationPort: Int
    public var hostCount: Int
    public var recordCount: Int
    /// Frames the capture received and dropped (by the kernel, the interface and the daemon), when capturing.
    public var captureReceived: Int?
    public var captureDropped: Int?

    public init(
        name: String, mac: String, addresses: [String], advertisedName: String?, registrationPort: Int,
        hostCount: Int, recordCount: Int, captureReceived: Int?, captureDropped: Int?
    ) {
        self.name = name
        self.mac = mac
        self.addresses = addresses
        self.advertisedName = advertisedName
        self.registrationPort = registrationPort
        self.hostCount = hostCount
        self.recordCount = recordCount
        self.captureReceived = captureReceived
        self.captureDropped = captureDropped
    }
}

/// `hosts`: one held host.
public struct HostSummary: Codable, Hashable, Sendable {
    /// The host's name (`imac.local`), from its address records or SRV targets; nil when it registered none.
    public var name: String?
    /// The OWNER primary MAC, `aa:bb:cc:dd:ee:ff`: with `interface`, what identifies the host.
    public var ownerMAC: String
    /// The MAC magic packets go to.
    public var wakeMAC: String
    public var interface: String
    /// The addresses the proxy holds for it.
    public var addresses: [String]
    /// Its services, as `Name._type._tcp`.
    public var services: [String]
    /// `taking-over`, `held` or `waking`; for a declared host `awake`, `probing`, `asleep: held`,
    /// `asleep: taking-over`, `asleep: not held (<why>)` or `waking`.
    public var state: String
    /// Why it is being woken, while `state` is `waking`.
    public var wakeReason: String?
    public var recordCount: Int
    public var registeredAt: Date
    public var leaseExpiresAt: Date?
    /// The last wake recorded for this host, if any.
    public var lastWake: WakeReport?
    /// For a host declared in the configuration (it never registers): the name of its table (`imac` for
    /// `[hosts.imac]`). `registeredAt` is then when it was taken over, or when it was last heard from.
    public var declared: String?
    /// For a declared host: when a frame from it was last seen.
    public var lastHeard: Date?
    /// For a declared host that learns what it announces: the records it announced while awake and the proxy
    /// keeps (at most `limits.maximum_records_per_host`), whether or not it is held.
    public var learnedRecords: Int?

    public init(
        name: String?, ownerMAC: String, wakeMAC: String, interface: String, addresses: [String],
        services: [String], state: String, wakeReason: String?, recordCount: Int, registeredAt: Date,
        leaseExpiresAt: Date?, lastWake: WakeReport?, declared: String? = nil, lastHeard: Date? = nil,
        learnedRecords: Int? = nil
    ) {
        self.declared = declared
        self.lastHeard = lastHeard
        self.learnedRecords = learnedRecords
        self.name = name
        self.ownerMAC = ownerMAC
        self.wakeMAC = wakeMAC
        self.interface = interface
        self.addresses = addresses
        self.services = services
        self.state = state
        self.wakeReason = wakeReason
        self.recordCount = recordCount
        self.registeredAt = registeredAt
        self.leaseExpiresAt = leaseExpiresAt
        self.lastWake = lastWake
    }
}

/// A wake (or a decision not to wake), as recorded.
public struct WakeReport: Codable, Hashable, Sendable {
    public var time: Date
    /// What happened and why, in a sentence ("TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh)").
    public var reason: String
    /// The client that set it off, when a packet did.
    public var sourceAddress: String?
    public var sourcePort: Int?

    public init(time: Date, reason: String, sourceAddress: String?, sourcePort: Int?) {
        self.time = time
        self.reason = reason
        self.sourceAddress = sourceAddress
        self.sourcePort = sourcePort
    }
}

/// `show`: everything held for one host.
public struct HostDetail: Codable, Hashable, Sendable {
    public var summary: HostSummary
    public var sequence: Int
    /// Where its last registration came from (the host, or a proxy handing it over).
    public var lastSource: String?
    public var records: [RecordReport]
    public var addresses: [AddressReport]
    /// The TCP connections kept alive for it (keepalive offload); absent from daemons without it.
    public var connections: [ConnectionReport]?

    public init(
        summary: HostSummary, sequence: Int, lastSource: String?, records: [RecordReport],
        addresses: [AddressReport], connections: [ConnectionReport]? = nil
    ) {
        self.summary = summary
        self.sequence = sequence
        self.lastSource = lastSource
        self.records = records
        self.addresses = addresses
        self.connections = connections
    }
}

/// One TCP connection the proxy keeps alive for a sleeping host.
public struct ConnectionReport: Codable, Hashable, Sendable {
    /// The host's end, `address:port` (`[address]:port` for IPv6).
    public var local: String
    /// The peer's end.
    public var remote: String
    /// Seconds between the keepalives the proxy sends.
    public var intervalSeconds: Int
    public var keepalivesSent: Int
    public var lastKeepaliveSent: Date?
    /// The peer's own keepalive probes answered on the host's behalf.
    public var probesAnswered: Int
    public var lastProbeAnswered: Date?
    /// The last segment from the peer, of any kind.
    public var lastHeard: Date?
    /// The peer has not answered the last few keepalives.
    public var silent: Bool

    public init(
        local: String, remote: String, intervalSeconds: Int, keepalivesSent: Int, lastKeepaliveSent: Date?,
        probesAnswered: Int, lastProbeAnswered: Date?, lastHeard: Date?, silent: Bool
    ) {
        self.local = local
        self.remote = remote
        self.intervalSeconds = intervalSeconds
        self.keepalivesSent = keepalivesSent
        self.lastKeepaliveSent = lastKeepaliveSent
        self.probesAnswered = probesAnswered
        self.lastProbeAnswered = lastProbeAnswered
        self.lastHeard = lastHeard
        self.silent = silent
    }
}

/// One held record, as registered.
public struct RecordReport: Codable, Hashable, Sendable {
    public var name: String
    /// `A`, `AAAA`, `PTR`, `SRV`, `TXT`, `NSEC`, or `TYPE65` for others.
    public var type: String
    public var ttl: Int
    /// The data in presentation form.
    public var data: String
    /// Registered with the cache-flush bit: a record the host defends as its own.
    public var unique: Bool
    public var expiresAt: Date

    public init(name: String, type: String, ttl: Int, data: String, unique: Bool, expiresAt: Date) {
        self.name = name
        self.type = type
        self.ttl = ttl
        self.data = data
        self.unique = unique
        self.expiresAt = expiresAt
    }
}

/// One address the proxy takes over for a host.
public struct AddressReport: Codable, Hashable, Sendable {
    public var address: String
    /// `probing` (checking the host is really gone), `claimed` (answered by the proxy), `backing-off` (the host
    /// answered; probing again later), or `released` (handed back while waking).
    public var state: String

    public init(address: String, state: String) {
        self.address = address
        self.state = state
    }
}

/// One event of the history.
public struct EventReport: Codable, Hashable, Sendable {
    /// Increasing; a `follow` stream continues from the last one shown.
    public var id: Int64
    public var time: Date
    /// `registered`, `renewed`, `replaced`, `refused`, `expired`, `released`, `conflict`, `takeover`, `wake`,
    /// `wake-cancelled`, and the wake policy's `wake-ignored` and `would-wake`.
    public var kind: String
    public var interface: String
    public var ownerMAC: String?
    /// The host's name, when it is still held or was named in the event.
    public var host: String?
    /// The peer the event came from: a registration's sender, a wake's client.
    public var sourceAddress: String?
    public var sourcePort: Int?
    /// For `refused`: the stable reason (`no-owner`, `name-hijack`, ...).
    public var reason: String?
    public var detail: String

    public init(
        id: Int64, time: Date, kind: String, interface: String, ownerMAC: String?, host: String?,
        sourceAddress: String?, sourcePort: Int?, reason: String?, detail: String
    ) {
        self.id = id
        self.time = time
        self.kind = kind
        self.interface = interface
        self.ownerMAC = ownerMAC
        self.host = host
        self.sourceAddress = sourceAddress
        self.sourcePort = sourcePort
        self.reason = reason
        self.detail = detail
    }
}

/// `seen`: one machine heard on a served link.
public struct SeenReport: Codable, Hashable, Sendable {
    /// A service the machine announces for itself.
    public struct Service: Codable, Hashable, Sendable {
        /// The instance name, as announced (`Anna's iMac`).
        public var name: String
        /// `_smb._tcp`.
        public var type: String
        public var port: Int

        public init(name: String, type: String, port: Int) {
            self.name = name
            self.type = type
            self.port = port
        }
    }

    public var interface: String
    /// `aa:bb:cc:dd:ee:ff`.
    public var mac: String
    /// The organisation its MAC's first three bytes are assigned to, from the IEEE list (Debian's `ieee-data`), where
    /// the list is installed; "locally administered" for a MAC the machine made up (a phone's private address).
    /// Filled in by `sleepproxyctl`, not by the daemon.
    public var vendor: String?
    /// The addresses on the link it was heard using, most recently used first.
    public var addresses: [String]
    /// The mDNS host name it announces (`Annas-iMac.local`).
    public var hostName: String?
    public var services: [Service]
    public var firstHeard: Date
    public var lastHeard: Date
    /// `registers` (it registered with this proxy since the daemon started, or is held through a registration),
    /// `declared` (a `[hosts.NAME]` table names it) or `neither`.
    public var role: String
    /// For a declared machine: its table's name.
    public var declared: String?

    public init(
        interface: String, mac: String, vendor: String? = nil, addresses: [String], hostName: String?,
        services: [Service], firstHeard: Date, lastHeard: Date, role: String, declared: String?
    ) {
        self.interface = interface
        self.mac = mac
        self.vendor = vendor
        self.addresses = addresses
        self.hostName = hostName
        self.services = services
        self.firstHeard = firstHeard
        self.lastHeard = lastHeard
        self.role = role
        self.declared = declared
    }
}
