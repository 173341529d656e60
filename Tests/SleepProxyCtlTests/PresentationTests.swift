import Foundation
import SleepProxyControl
import Testing

@testable import sleepproxyctl

#if canImport(Glibc)
    import Glibc
#endif

/// How answers look to people: relative times, aligned tables, colour only when asked for, and the tables of each
/// command built from sample reports at a fixed moment in UTC.
@Suite struct PresentationTests {
    /// 2025-06-15 15:06:40 UTC.
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let presentation = Presentation(now: now, colour: false, clockZone: .utc)

    static func at(_ offset: TimeInterval) -> Date { now.addingTimeInterval(offset) }

    // MARK: Times

    @Test(
        arguments: [
            (0.0, "now"),
            (0.4, "now"),
            (-0.4, "now"),
            (1, "in 1 s"),
            (45, "in 45 s"),
            (44.6, "in 45 s"),
            (-45, "45 s ago"),
            (60, "in 1 min"),
            (90, "in 1 min 30 s"),
            (-180, "3 min ago"),
            (-185, "3 min 5 s ago"),
            (3_600, "in 1 h"),
            (4_320, "in 1 h 12 min"),
            (4_335, "in 1 h 12 min"),
            (-7_199, "1 h 59 min ago"),
            (86_400, "in 1 d"),
            (-(2 * 86_400 + 4 * 3_600), "2 d 4 h ago"),
            (-(2 * 86_400 + 4 * 3_600 + 59 * 60), "2 d 4 h ago"),
            (400 * 86_400, "in 400 d"),
        ] as [(TimeInterval, String)])
    func relativeTimes(_ offset: TimeInterval, _ expected: String) {
        #expect(Presentation.relative(Self.at(offset), to: Self.now) == expected)
        #expect(Self.presentation.relative(Self.at(offset)) == expected)
    }

    @Test(
        arguments: [
            (0.0, "0 s"), (0.49, "0 s"), (59, "59 s"), (61, "1 min 1 s"), (3_601, "1 h"), (90_061, "1 d 1 h"),
            (-5, "0 s"), (.infinity, "-"),
        ] as [(Double, String)])
    func durations(_ seconds: Double, _ expected: String) {
        #expect(Presentation.duration(seconds) == expected)
    }

    @Test func clockTimesShowTheDateOnlyBeforeToday() {
        #expect(Self.presentation.clockTime(Self.at(-60)) == "15:05:40")
        #expect(Self.presentation.clockTime(Self.at(-15 * 3_600)) == "00:06:40")
        #expect(Self.presentation.clockTime(Self.at(-16 * 3_600)) == "2025-06-14 23:06:40")
        var berlin = Self.presentation
        berlin.clockZone = .fixed(secondsFromUTC: 7_200)
        #expect(berlin.clockTime(Self.at(-60)) == "17:05:40")
        // Late in the evening in UTC is the next day at UTC+2: the date shows.
        #expect(berlin.clockTime(Self.at(8 * 3_600 + 60)) == "2025-06-16 01:07:40")
    }

    // MARK: Tables

    /// Where each header starts: every row's cell in that column must start there too.
    static func columnStarts(_ header: String, _ headers: [String]) -> [Int] {
        var starts: [Int] = []
        var searchFrom = header.startIndex
        for name in headers {
            guard let range = header.range(of: name, range: searchFrom..<header.endIndex) else { return [] }
            starts.append(header.distance(from: header.startIndex, to: range.lowerBound))
            searchFrom = range.upperBound
        }
        return starts
    }

    @Test func columnsLineUpTwoSpacesApart() {
        var table = TextTable(headers: ["A", "LONG HEADER", "C"])
        table.append(["wide cell here", "x", "last"])
        table.append(["y", "a rather wide cell", ""])
        let lines = table.render(colour: false).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(
            lines == [
                "A               LONG HEADER         C",
                "wide cell here  x                   last",
                "y               a rather wide cell",
                "",
            ])
        #expect(!lines.contains { $0.hasSuffix(" ") })
    }

    @Test func colourIsOnlyThereWhenAskedFor() {
        var table = TextTable(headers: ["STATE", "NOTE"])
        table.append([TextTable.Cell("held", .green), "ok"])
        table.append([TextTable.Cell("taking-over", .yellow), "ok"])
        let plain = table.render(colour: false)
        #expect(!plain.contains("\u{1B}"))
        let coloured = table.render(colour: true)
        #expect(coloured.contains("\u{1B}[1mSTATE\u{1B}[0m"))
        #expect(coloured.contains("\u{1B}[32mheld\u{1B}[0m" + String(repeating: " ", count: 9) + "ok"))
        #expect(coloured.contains("\u{1B}[33mtaking-over\u{1B}[0m  ok"))
        // Without its escapes, the coloured table is the plain one: padding never counts them.
        let stripped = coloured.replacing(/\x{1B}\[[0-9]+m/, with: "")
        #expect(stripped == plain)
    }

    @Test func aStreamedTableKeepsItsColumnsAndWidensForLongerCells() {
        var table = Self.presentation.eventTable([], streaming: true)
        let header = table.headerLine(colour: false)
        #expect(header == "TIME      KIND            INTERFACE  HOST               SOURCE                DETAIL")
        let row = Self.presentation.eventRow(Self.events[1])
        table.fit(row)
        let starts = Self.columnStarts(header, table.headers)
        let line = table.line(row, colour: false)
        #expect(Self.columnStarts(line, row.map(\.text)) == starts, "\(line)")
    }

    // MARK: Sample reports

    static let wake = WakeReport(
        time: at(-180), reason: "TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh)", sourceAddress: "192.0.2.7",
        sourcePort: 51_234)

    static let hosts = [
        HostSummary(
            name: "Sleeper.local", ownerMAC: "00:11:22:33:44:55", wakeMAC: "00:11:22:33:44:55", interface: "eth0",
            addresses: ["192.0.2.20", "2001:db8::20"], services: ["Sleeper SSH._ssh._tcp", "Sleeper._smb._tcp"],
            state: "held", wakeReason: nil, recordCount: 6, registeredAt: at(-600), leaseExpiresAt: at(4_320),
            lastWake: wake),
        HostSummary(
            name: nil, ownerMAC: "66:77:88:99:aa:bb", wakeMAC: "66:77:88:99:aa:bb", interface: "eth1",
            addresses: ["198.51.100.9"],
            services: ["A._ssh._tcp", "B._smb._tcp", "C._afpovertcp._tcp", "D._rfb._tcp", "E._http._tcp"],
            state: "taking-over", wakeReason: nil, recordCount: 12, registeredAt: at(-5), leaseExpiresAt: at(-1),
            lastWake: nil),
        HostSummary(
            name: "Studio.local", ownerMAC: "de:ad:be:ef:00:01", wakeMAC: "de:ad:be:ef:00:02", interface: "eth0",
            addresses: [], services: [], state: "waking", wakeReason: "the administrator asked (sleepproxyctl wake)",
            recordCount: 0, registeredAt: at(-2 * 86_400), leaseExpiresAt: nil, lastWake: nil),
    ]

    /// A wake under way shows its reason once, in LAST WAKE.
    @Test func aWakeUnderWayShowsItsReasonOnce() {
        var waking = Self.hosts[0]
        waking.state = "waking"
        waking.wakeReason = Self.wake.reason
        let text = Self.presentation.hosts([waking])
        #expect(text.components(separatedBy: Self.wake.reason).count == 2, "\(text)")
        #expect(text.contains("  waking  "), "\(text)")
    }

    @Test func theHostsTable() {
        let text = Self.presentation.hosts(Self.hosts)
        #expect(
            text == """
                NAME           MAC                INTERFACE  ADDRESSES                 SERVICES                                              STATE                                                 LEASE          LAST WAKE
                Sleeper.local  00:11:22:33:44:55  eth0       192.0.2.20, 2001:db8::20  Sleeper SSH._ssh._tcp, Sleeper._smb._tcp              held                                                  in 1 h 12 min  3 min ago: TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh)
                -              66:77:88:99:aa:bb  eth1       198.51.100.9              A._ssh._tcp, B._smb._tcp, C._afpovertcp._tcp +2 more  taking-over                                           expired        -
                Studio.local   de:ad:be:ef:00:01  eth0       -                         -                                                     waking: the administrator asked (sleepproxyctl wake)  -              -

                """)
        let lines = text.split(separator: "\n").map(String.init)
        let headers = ["NAME", "MAC", "INTERFACE", "ADDRESSES", "SERVICES", "STATE", "LEASE", "LAST WAKE"]
        let starts = Self.columnStarts(lines[0], headers)
        #expect(starts.count == headers.count)
        #expect(
            Self.columnStarts(lines[1], ["Sleeper.local", "00:11", "eth0", "192.0.2.20", "Sleeper SSH", "held"])
                == Array(starts.prefix(6)))
    }

    @Test func theHostsTableInColour() {
        var presentation = Self.presentation
        presentation.colour = true
        let text = presentation.hosts(Self.hosts)
        #expect(text.contains("\u{1B}[1mNAME\u{1B}[0m"))
        #expect(text.contains("\u{1B}[32mheld\u{1B}[0m"))
        #expect(text.contains("\u{1B}[33mtaking-over\u{1B}[0m"))
        #expect(text.contains("\u{1B}[31mexpired\u{1B}[0m"))
        #expect(text.replacing(/\x{1B}\[[0-9]+m/, with: "") == Self.presentation.hosts(Self.hosts))
    }

    @Test func noHostsHeld() {
        #expect(Self.presentation.hosts([]) == "no hosts held\n")
    }

    static let events = [
        EventReport(
            id: 7, time: at(-20 * 3_600), kind: "registered", interface: "eth0", ownerMAC: "00:11:22:33:44:55",
            host: "Sleeper.local", sourceAddress: "192.0.2.20", sourcePort: 5_353, reason: nil,
            detail: "6 records, lease 7200 s"),
        EventReport(
            id: 8, time: at(-180), kind: "wake", interface: "eth0", ownerMAC: "00:11:22:33:44:55",
            host: "Sleeper.local", sourceAddress: "192.0.2.7", sourcePort: 51_234, reason: nil,
            detail: "TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh)"),
        EventReport(
            id: 9, time: at(-5), kind: "refused", interface: "eth1", ownerMAC: "66:77:88:99:aa:bb", host: nil,
            sourceAddress: "198.51.100.9", sourcePort: nil, reason: "name-hijack",
            detail: "Studio.local is held for another owner"),
        EventReport(
            id: 10, time: at(-1), kind: "expired", interface: "eth1", ownerMAC: nil, host: nil, sourceAddress: nil,
            sourcePort: nil, reason: nil, detail: "lease ended"),
    ]

    @Test func theEventsTable() {
        #expect(
            Self.presentation.events(Self.events) == """
                TIME                 KIND        INTERFACE  HOST               SOURCE                DETAIL
                2025-06-14 19:06:40  registered  eth0       Sleeper.local      192.0.2.20 port 5353  6 records, lease 7200 s
                15:03:40             wake        eth0       Sleeper.local      192.0.2.7 port 51234  TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh)
                15:06:35             refused     eth1       66:77:88:99:aa:bb  198.51.100.9          Studio.local is held for another owner (name-hijack)
                15:06:39             expired     eth1       -                  -                     lease ended

                """)
        #expect(Self.presentation.events([]) == "no events recorded\n")
    }

    static let detail = HostDetail(
        summary: hosts[0], sequence: 5, lastSource: "192.0.2.20 port 5353",
        records: [
            RecordReport(
                name: "Sleeper.local.", type: "A", ttl: 120, data: "192.0.2.20", unique: true, expiresAt: at(4_320)),
            RecordReport(
                name: "_ssh._tcp.local.", type: "PTR", ttl: 4_500, data: "Sleeper SSH._ssh._tcp.local.", unique: false,
                expiresAt: at(4_320)),
            RecordReport(
                name: "Sleeper SSH._ssh._tcp.local.", type: "TXT", ttl: 4_500, data: "\"\"", unique: true,
                expiresAt: at(-10)),
        ],
        addresses: [
            AddressReport(address: "192.0.2.20", state: "claimed"),
            AddressReport(address: "2001:db8::20", state: "probing"),
        ])

    @Test func theShowOutput() {
        #expect(
            Self.presentation.host(Self.detail) == """
                name:         Sleeper.local
                owner MAC:    00:11:22:33:44:55
                wake MAC:     00:11:22:33:44:55
                interface:    eth0
                state:        held
                registered:   14:56:40 (10 min ago)
                lease:        until 16:18:40 (in 1 h 12 min)
                sequence:     5
                last source:  192.0.2.20 port 5353
                last wake:    15:03:40 (3 min ago): TCP SYN from 192.0.2.7 to 192.0.2.20 port 22 (ssh), from 192.0.2.7 port 51234
                services:     Sleeper SSH._ssh._tcp, Sleeper._smb._tcp

                ADDRESSES (2)
                  ADDRESS       STATE
                  192.0.2.20    claimed
                  2001:db8::20  probing

                RECORDS (3)
                  NAME                          TYPE  TTL   UNIQUE  EXPIRES        DATA
                  Sleeper.local.                A     120   yes     in 1 h 12 min  192.0.2.20
                  _ssh._tcp.local.              PTR   4500  no      in 1 h 12 min  Sleeper SSH._ssh._tcp.local.
                  Sleeper SSH._ssh._tcp.local.  TXT   4500  yes     expired        ""

                """)
    }

    /// Kept-alive connections get their own table; a silent peer is marked.
    @Test func keptConnectionsInTheShowOutput() {
        var detail = Self.detail
        detail.connections = [
            ConnectionReport(
                local: "192.0.2.20:50000", remote: "17.57.144.10:5223", intervalSeconds: 20, keepalivesSent: 3,
                lastKeepaliveSent: Self.at(-12), probesAnswered: 2, lastProbeAnswered: Self.at(-30),
                lastHeard: Self.at(-12),
                silent: false),
            ConnectionReport(
                local: "192.0.2.20:50001", remote: "198.51.100.4:443", intervalSeconds: 60, keepalivesSent: 0,
                lastKeepaliveSent: nil, probesAnswered: 0, lastProbeAnswered: nil, lastHeard: Self.at(-600),
                silent: true),
        ]
        let text = Self.presentation.host(detail)
        #expect(text.contains("KEPT ALIVE (2)\n"), "\(text)")
        #expect(
            text.contains(
                "  LOCAL             PEER               EVERY  KEEPALIVES SENT   PROBES ANSWERED   PEER LAST HEARD\n"),
            "\(text)")
        #expect(text.contains("192.0.2.20:50000  17.57.144.10:5223  20 s   3, last 12 s ago"), "\(text)")
        #expect(text.contains("2, last 30 s ago"), "\(text)")
        #expect(text.contains("silent (10 min ago)"), "\(text)")
        #expect(!Self.presentation.host(Self.detail).contains("KEPT ALIVE"), "no table without connections")
    }

    @Test func aHostWithNothingHeld() {
        let bare = HostDetail(summary: Self.hosts[2], sequence: 1, lastSource: nil, records: [], addresses: [])
        let text = Self.presentation.host(bare)
        #expect(text.contains("state:        waking: the administrator asked (sleepproxyctl wake)\n"))
        #expect(text.contains("lease:        none\n") && text.contains("last wake:    never\n"))
        #expect(text.contains("ADDRESSES (0)\n  none\n") && text.contains("RECORDS (0)\n  none\n"))
    }

    static let status = StatusReport(
        daemonVersion: "0.4.0", startedAt: at(-(2 * 86_400 + 4 * 3_600)), uptimeSeconds: 2 * 86_400 + 4 * 3_600,
        interfaces: [
            InterfaceReport(
                name: "eth0", mac: "52:54:00:12:34:56", addresses: ["192.0.2.1/24", "fe80::1/64"],
                advertisedName: "70-35-60.1 Home Proxy", registrationPort: 5_354, hostCount: 2, recordCount: 18,
                captureReceived: 1_234, captureDropped: 0),
            InterfaceReport(
                name: "eth1", mac: "52:54:00:ab:cd:ef", addresses: [], advertisedName: nil, registrationPort: 5_354,
                hostCount: 0, recordCount: 0, captureReceived: nil, captureDropped: nil),
        ],
        hostCount: 2, recordCount: 18, storePath: "/var/lib/sleepproxy/leases.sqlite",
        controlSocket: "/run/sleepproxy/control.sock", dryRun: false)

    @Test func theStatusOutput() {
        #expect(
            Self.presentation.status(Self.status) == """
                sleepproxyd 0.4.0
                up:              2 d 4 h (since 2025-06-13 11:06:40)
                hosts:           2 holding 18 records
                store:           /var/lib/sleepproxy/leases.sqlite
                control socket:  /run/sleepproxy/control.sock
                dry run:         no

                INTERFACE  MAC                ADDRESSES                 ADVERTISED AS          PORT  HOSTS  RECORDS  RECEIVED  DROPPED
                eth0       52:54:00:12:34:56  192.0.2.1/24, fe80::1/64  70-35-60.1 Home Proxy  5354  2      18       1234      0
                eth1       52:54:00:ab:cd:ef  -                         -                      5354  0      0        -         -

                """)
    }

    // MARK: JSON

    @Test func jsonOutputDecodesAsThePayloadTypes() throws {
        let encoder = ControlProtocol.prettyEncoder()
        let decoder = ControlProtocol.decoder()
        #expect(try decoder.decode([HostSummary].self, from: encoder.encode(Self.hosts)) == Self.hosts)
        #expect(try ControlProtocol.prettyText([HostSummary]()) == "[]\n")
        #expect(try ControlProtocol.prettyText([EventReport]()) == "[]\n")
        #expect(
            try decoder.decode([HostSummary].self, from: Data(ControlProtocol.prettyText([HostSummary]()).utf8)).isEmpty
        )
        #expect(try decoder.decode(HostDetail.self, from: encoder.encode(Self.detail)) == Self.detail)
        #expect(try decoder.decode(StatusReport.self, from: encoder.encode(Self.status)) == Self.status)
        #expect(try decoder.decode([EventReport].self, from: encoder.encode(Self.events)) == Self.events)
        let message = MessageReport(message: "waking Sleeper.local (00:11:22:33:44:55 on eth0)")
        let text = String(decoding: try encoder.encode(message), as: UTF8.self)
        #expect(text == "{\n  \"message\" : \"waking Sleeper.local (00:11:22:33:44:55 on eth0)\"\n}")
        let error = ControlClientError.unreachable(socketPath: "/tmp/x.sock", errno: ENOENT).controlError
        let errorText = String(decoding: try ControlProtocol.encoder().encode(error), as: UTF8.self)
        #expect(errorText.hasPrefix("{\"code\":\"unreachable\",\"message\":\"cannot reach sleepproxyd at /tmp/x.sock"))
    }
}
