import ArgumentParser
import SleepProxyControl

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension SleepProxyCtl {
    struct Seen: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List every machine heard on the served links, and print a declaration for one of them.",
            discussion: """
                A machine is heard by its mDNS, ARP and Neighbour Discovery; the daemon keeps the \
                512 heard most recently, in memory (after a restart the list fills again as machines talk). \
                VENDOR comes from the IEEE list of MAC prefixes where Debian's ieee-data package is installed \
                (\(Vendors.defaultList)); "locally administered" is a MAC the machine made up. HOST NAME and \
                SERVICES are what it announces over mDNS for itself. ROLE is registers (it registers with this \
                proxy), declared (a [hosts.NAME] table names it) or neither.

                --toml NAME-OR-MAC prints a [hosts.NAME] table for the machine with that MAC, host name \
                (with or without .local), address or service name, ready to paste into the config file: the \
                proxy then learns its records and addresses while it is awake and serves it while it sleeps. \
                Then run sleepproxyd --check-config and reload the daemon.

                --json prints an array of SeenReport objects: interface, mac, vendor, addresses, hostName, \
                services (name, type, port), firstHeard, lastHeard, role and declared (the table's name).
                """)

        @Option(
            help: ArgumentHelp(
                "Print a [hosts.NAME] table for this machine (its MAC, host name, address or service name).",
                valueName: "name-or-mac"))
        var toml: String?

        @OptionGroup var options: GlobalOptions

        func validate() throws {
            if toml != nil, options.json { throw ValidationError("--toml and --json cannot be used together") }
        }

        func run() throws {
            let console = Console(options)
            var machines = try console.require(try console.ask(ControlRequest(command: .seen)).seen, "seen")
            let vendors = Vendors.names(of: machines.map(\.mac))
            for index in machines.indices { machines[index].vendor = vendors[machines[index].mac] }
            guard let toml else {
                if options.json {
                    console.writeJSON(machines)
                } else {
                    console.write(console.presentation.seen(machines))
                }
                return
            }
            switch SeenDeclaration.find(toml, in: machines) {
            case .success(let machine):
                console.write(SeenDeclaration(machine).text)
            case .failure(let error):
                Console.writeError("sleepproxyctl: \(error.message)")
                throw ExitCode(1)
            }
        }
    }
}

extension Presentation {
    /// `seen`: one line per machine heard, or `no machine heard yet`.
    func seen(_ machines: [SeenReport]) -> String {
        guard !machines.isEmpty else { return "no machine heard yet\n" }
        var table = TextTable(headers: [
            "INTERFACE", "MAC", "VENDOR", "ADDRESSES", "HOST NAME", "SERVICES", "LAST HEARD", "ROLE",
        ])
        for machine in machines {
            let role: TextTable.Cell =
                switch machine.role {
                case "registers": TextTable.Cell("registers", .green)
                case "declared": TextTable.Cell("declared as \(machine.declared ?? "?")", .green)
                default: TextTable.Cell(machine.role)
                }
            table.append([
                TextTable.Cell(machine.interface),
                TextTable.Cell(machine.mac),
                TextTable.Cell(machine.vendor ?? "-"),
                TextTable.Cell(Self.list(machine.addresses)),
                TextTable.Cell(machine.hostName ?? "-"),
                TextTable.Cell(services(machine.services.map { "\($0.name).\($0.type)" })),
                TextTable.Cell(relative(machine.lastHeard)),
                role,
            ])
        }
        return table.render(colour: colour)
    }
}
