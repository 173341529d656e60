import Foundation
import Testing

@testable import SleepProxyControl
@testable import sleepproxyctl

/// `sleepproxyctl seen`: the machines heard, their makers, and the declaration printed for one of them.
@Suite struct SeenTests {
    static let now = PresentationTests.now

    static let imac = SeenReport(
        interface: "eth0", mac: "f0:18:98:10:20:30", vendor: "Apple, Inc.", addresses: ["192.168.1.20", "fe80::1"],
        hostName: "Annas-iMac.local",
        services: [
            SeenReport.Service(name: "Anna's iMac", type: "_rfb._tcp", port: 5900),
            SeenReport.Service(name: "Anna's iMac", type: "_smb._tcp", port: 445),
        ], firstHeard: now.addingTimeInterval(-3_600), lastHeard: now.addingTimeInterval(-12), role: "neither",
        declared: nil)
    static let phone = SeenReport(
        interface: "eth0", mac: "5a:11:22:33:44:55", addresses: ["192.168.1.31"], hostName: nil, services: [],
        firstHeard: now.addingTimeInterval(-60), lastHeard: now.addingTimeInterval(-60), role: "neither",
        declared: nil)
    static let nas = SeenReport(
        interface: "eth1", mac: "00:11:32:aa:bb:cc", addresses: ["10.0.0.5"], hostName: "nas.local", services: [],
        firstHeard: now, lastHeard: now, role: "declared", declared: "nas")

    // MARK: Vendors

    /// Lines as `ieee-data` has them: CRLF endings, the `(hex)` line before the `(base 16)` one.
    static let list = Data(
        """
        OUI/MA-L\t\t\tOrganization\r
        \r
        F0-18-98   (hex)\t\tApple, Inc.\r
        F01898     (base 16)\t\tApple, Inc.\r
        \t\t\t\t1 Infinite Loop\r
        \r
        00-11-32   (hex)\t\tSynology Incorporated\r
        001132     (base 16)\t\tSynology Incorporated\r
        \t\t\t\tTaipei\r

        """.utf8)

    @Test func theMakerOfEachMACComesFromTheIEEEList() throws {
        let found = Vendors.organisations(in: Self.list, wanted: ["F01898", "001132", "ABCDEF"])
        #expect(found == ["F01898": "Apple, Inc.", "001132": "Synology Incorporated"])

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("oui-\(getpid()).txt").path
        try Self.list.write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let names = Vendors.names(
            of: ["f0:18:98:10:20:30", "5a:11:22:33:44:55", "00:11:32:aa:bb:cc", "00:00:5e:00:00:01", "nonsense"],
            list: path)
        #expect(
            names == [
                "f0:18:98:10:20:30": "Apple, Inc.", "5a:11:22:33:44:55": Vendors.locallyAdministered,
                "00:11:32:aa:bb:cc": "Synology Incorporated",
            ])
        // Without the list, only what the MAC itself says.
        #expect(
            Vendors.names(of: ["f0:18:98:10:20:30", "5a:11:22:33:44:55"], list: path + ".absent")
                == ["5a:11:22:33:44:55": Vendors.locallyAdministered])
    }

    @Test(
        .enabled(
            if: FileManager.default.fileExists(atPath: Vendors.defaultList),
            "needs Debian's ieee-data installed (\(Vendors.defaultList))"))
    func aMacSaysAppleWithTheInstalledList() {
        #expect(Vendors.names(of: ["f0:18:98:10:20:30"]) == ["f0:18:98:10:20:30": "Apple, Inc."])
    }

    // MARK: The table

    @Test func theTableShowsEachMachineWithItsMakerAndRole() {
        let text = PresentationTests.presentation.seen([Self.imac, Self.phone, Self.nas])
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("INTERFACE"))
        for column in ["MAC", "VENDOR", "ADDRESSES", "HOST NAME", "SERVICES", "LAST HEARD", "ROLE"] {
            #expect(lines[0].contains(column))
        }
        #expect(lines[1].contains("f0:18:98:10:20:30") && lines[1].contains("Apple, Inc."))
        #expect(lines[1].contains("Annas-iMac.local") && lines[1].contains("Anna's iMac._smb._tcp"))
        #expect(lines[1].contains("12 s ago") && lines[1].hasSuffix("neither"))
        #expect(lines[3].hasSuffix("declared as nas"))
        #expect(PresentationTests.presentation.seen([]) == "no machine heard yet\n")
    }

    // MARK: The declaration

    @Test(
        arguments: [
            ("F0:18:98:10:20:30", "f0:18:98:10:20:30"), ("f0-18-98-10-20-30", "f0:18:98:10:20:30"),
            ("annas-imac", "f0:18:98:10:20:30"), ("Annas-iMac.local", "f0:18:98:10:20:30"),
            ("192.168.1.20", "f0:18:98:10:20:30"), ("anna's imac", "f0:18:98:10:20:30"), ("nas", "00:11:32:aa:bb:cc"),
        ])
    func aMachineIsFoundByMACHostNameAddressOrServiceName(_ text: String, _ mac: String) throws {
        let found = try SeenDeclaration.find(text, in: [Self.imac, Self.phone, Self.nas]).get()
        #expect(found.mac == mac)
    }

    @Test func anUnknownOrAmbiguousNameIsRefused() {
        var twin = Self.imac
        twin.interface = "eth1"
        guard case .failure(let unknown) = SeenDeclaration.find("printer", in: [Self.imac]) else {
            Issue.record("found a machine for printer")
            return
        }
        #expect(unknown.code == .unknownHost)
        #expect(unknown.message.contains("sleepproxyctl seen"))
        guard case .failure(let ambiguous) = SeenDeclaration.find("annas-imac", in: [Self.imac, twin]) else {
            Issue.record("one of two machines chosen")
            return
        }
        #expect(ambiguous.code == .ambiguousHost)
        #expect(ambiguous.message.contains("on eth0") && ambiguous.message.contains("on eth1"))
    }

    @Test func theDeclarationIsItsMACAndInterfaceUnderAName() {
        let text = SeenDeclaration(Self.imac).text
        let lines = text.split(separator: "\n").map(String.init)
        let settings = lines.filter { !$0.hasPrefix("#") }
        #expect(settings == ["[hosts.annas-imac]", "mac = \"f0:18:98:10:20:30\"", "interface = \"eth0\""])
        #expect(lines[0] == "# Annas-iMac.local (Apple, Inc.) on eth0")
        #expect(lines.contains("#   Anna's iMac (_smb._tcp, port 445)"))
    }

    @Test(
        arguments: [
            (nil, [], "5a:11:22:33:44:55", "host-5a1122334455"),
            ("Wohnzimmer-PC.local", [], "00:00:00:00:00:01", "wohnzimmer-pc"),
            ("---.local", ["Büro Drucker"], "00:00:00:00:00:01", "b-ro-drucker"),
            (
                String(repeating: "a", count: 62) + "-b.local", [], "00:00:00:00:00:01",
                String(repeating: "a", count: 62)
            ),
        ] as [(String?, [String], String, String)])
    func theTableNameIsALabelOfTheHostName(_ hostName: String?, _ services: [String], _ mac: String, _ name: String) {
        let machine = SeenReport(
            interface: "eth0", mac: mac, addresses: [], hostName: hostName,
            services: services.map { SeenReport.Service(name: $0, type: "_ipp._tcp", port: 631) }, firstHeard: Self.now,
            lastHeard: Self.now, role: "neither", declared: nil)
        #expect(SeenDeclaration(machine).tableName == name)
    }

    /// A service name may hold any bytes, a newline included: it must not end the comment it is shown in.
    @Test func namesInCommentsCannotBreakTheTable() {
        var machine = Self.imac
        machine.services = [
            SeenReport.Service(name: "Evil\n[hosts.x]\nmac = \"00:00:00:00:00:00\"", type: "_smb._tcp", port: 445)
        ]
        let lines = SeenDeclaration(machine).text.split(separator: "\n")
        #expect(lines.filter { !$0.hasPrefix("#") }.count == 3)
    }
}
