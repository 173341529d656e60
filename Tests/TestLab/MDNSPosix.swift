import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A service Apple's stand-alone responder publishes: one entry of its service file.
public struct MDNSPosixService: Sendable, Hashable {
    /// The instance name, such as `Sleeper's Mac`; published as `<name>.<type>.local`.
    public var name: String
    /// The service type, such as `_ssh._tcp`.
    public var type: String
    public var port: UInt16
    /// TXT strings in wire order, such as `u=test`.
    public var txt: [String]

    public init(name: String, type: String, port: UInt16, txt: [String] = []) {
        self.name = name
        self.type = type
        self.port = port
        self.txt = txt
    }

    /// The lines of the service file (`mDNSResponderPosix -f`): the name, the type, the port, one TXT string a
    /// line, and a blank line that ends the entry. A name starting with `#` is escaped, or it reads as a comment.
    var serviceFileEntry: String {
        let name = name.hasPrefix("#") ? "\\" + name : name
        return ([name, type, String(port)] + txt).map { $0 + "\n" }.joined() + "\n"
    }
}

/// Which program of `scripts/build-mdnsposix.sh` runs Apple's mDNS core.
public enum MDNSPosixProgram: String, Sendable, Hashable {
    /// Apple's stand-alone responder, `mDNSResponderPosix` (mDNSPosix/Responder.c): any number of services.
    case responder = "mDNSResponderPosix"
    /// `mDNSSleeperPosix` (scripts/mdnsposix-sleeper.c): one service, and the core told to sleep and wake on
    /// signals, as a Mac's platform layer tells it (``MDNSPosixResponder/sleep()``).
    case sleeper = "mDNSSleeperPosix"
}

/// Apple's mDNS core on Linux, running in one lab host as one of the programs of
/// `scripts/build-mdnsposix.sh` (see ``MDNSPosixProgram``); started by
/// ``Lab/startMDNSPosix(on:hostName:services:program:)``.
///
/// Its records go out from Apple's own mDNSCore: probing, announcing, answering, conflict handling and goodbyes
/// as a Mac's mDNSResponder does them. It publishes its host name (`<hostName>.local`, A and AAAA records for
/// every address of the host, and their reverse mappings) and the given services. Its log is its standard
/// error: the build writes Apple's debug messages there, such as `Callback: <service> Name Registered` when
/// a service has been probed, and `Name Conflict`, `renamed from` or `already in use` when a name had to
/// change.
public final class MDNSPosixResponder: Sendable {
    public let lab: Lab
    public let role: Lab.Role
    public let program: MDNSPosixProgram
    /// The host name given to it, without `.local`.
    public let hostName: String
    public let services: [MDNSPosixService]
    /// Holds its service file.
    public let directory: String
    /// The responder process.
    public let process: LabProcess

    init(
        lab: Lab, role: Lab.Role, program: MDNSPosixProgram, hostName: String, services: [MDNSPosixService],
        directory: String, process: LabProcess
    ) {
        self.lab = lab
        self.role = role
        self.program = program
        self.hostName = hostName
        self.services = services
        self.directory = directory
        self.process = process
    }

    /// Everything the responder has logged so far.
    public var log: String { process.stderr + process.stdout }

    /// Whether the responder is still running.
    public var isRunning: Bool { !process.hasExited }

    /// The lines of its log that tell of a name conflict or a rename: of a service (`Name Conflict`,
    /// `name conflict`, `renamed from`) or of its host name (`already in use`).
    public var renames: [String] {
        lines.filter { line in
            ["Name Conflict", "name conflict", "renamed from", "already in use"].contains { line.contains($0) }
        }
    }

    /// How many times its log says a service was registered (probed without a conflict): the program's own
    /// callback, not the core's lines about each record.
    public var registrations: Int {
        switch program {
        case .responder: lines.count { $0.hasPrefix("Callback: ") && $0.hasSuffix(" Name Registered") }
        case .sleeper: lines.count { $0 == "mDNSSleeperPosix: registered" }
        }
    }

    private var lines: [String] { log.split(separator: "\n").map(String.init) }

    /// Stops the responder where it is, as the kernel's freezer stops every process for a suspend: it sends
    /// nothing (no goodbyes) and reads nothing until ``thaw()``.
    public func freeze() { process.signal(SIGSTOP) }

    /// Lets a frozen responder run again, as at a resume.
    public func thaw() { process.signal(SIGCONT) }

    /// Tells Apple's core the machine is about to sleep (SIGUSR1 to `mDNSSleeperPosix`), as a Mac's platform
    /// layer does, and waits until it has: with no sleep proxy to register with, the core's
    /// `BeginSleepProcessing` sends the goodbyes of `SendSleepGoodbyes` at once. That marks its shared records
    /// (the PTRs) for goodbye, yet every record in those packets goes out with TTL 0: the SRV, TXT and address
    /// records that ride along with the PTRs as additional records (unless sent a moment before) too. It keeps
    /// running, asleep: ``freeze()`` it for the suspend.
    public func sleep() async throws { try await signal(SIGUSR1, until: "mDNSSleeperPosix: sleeping") }

    /// Tells Apple's core the machine has woken (SIGUSR2 to `mDNSSleeperPosix`), and waits until it has.
    public func wake() async throws { try await signal(SIGUSR2, until: "mDNSSleeperPosix: awake") }

    private func signal(_ number: Int32, until line: String) async throws {
        guard program == .sleeper else { throw LabError("only mDNSSleeperPosix sleeps and wakes on signals") }
        let before = lines.count { $0 == line }
        process.signal(number)
        _ = try await eventually("\(line) in \(role.rawValue)", within: .seconds(5)) {
            lines.count { $0 == line } > before ? true : nil
        }
    }

    /// Stops the responder and waits (at most 10 seconds) until it has exited; returns its exit status.
    ///
    /// `orderly` is SIGINT: the program's own shutdown, which deregisters its services and closes the core
    /// (`mDNS_Close`, that is `mDNS_StartExit` then `mDNS_FinalExit` at once). The core schedules goodbyes for
    /// its shared records only (`mDNS_Deregister_internal` withdraws unique records, such as SRV, TXT and the
    /// host's addresses, silently), but closes its sockets before its event loop would send them: Apple's POSIX
    /// programs exit without a goodbye on the wire. Not orderly is SIGKILL. (Responder.c does not handle
    /// SIGTERM: its default action ends it at once.)
    @discardableResult
    public func stop(orderly: Bool) async throws -> Int32? {
        try await runOffCooperativePool { [process] in
            process.signal(orderly ? SIGINT : SIGKILL)
            return process.wait(timeout: .seconds(10))
        }
    }
}

extension Lab {
    /// The directory the lab looks in for `mDNSResponderPosix`: `SLEEPPROXY_MDNSPOSIX_DIR` if set, otherwise
    /// `.build/lab-tools` in the package, where `scripts/build-mdnsposix.sh SOURCE .build/lab-tools` puts it.
    public static var mdnsPosixDirectory: String {
        if let directory = ProcessInfo.processInfo.environment["SLEEPPROXY_MDNSPOSIX_DIR"], !directory.isEmpty {
            return directory
        }
        // This file is <package>/Tests/TestLab/MDNSPosix.swift.
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return package.appendingPathComponent(".build/lab-tools").path
    }

    /// The path of `program`.
    public static func mdnsPosixPath(_ program: MDNSPosixProgram) -> String {
        mdnsPosixDirectory + "/" + program.rawValue
    }

    /// Why the programs running Apple's mDNS core cannot run here, or `nil` if they are built.
    public static var mdnsPosixMissingReason: String? {
        let missing = [MDNSPosixProgram.responder, .sleeper].filter { access(mdnsPosixPath($0), X_OK) != 0 }
        guard !missing.isEmpty else { return nil }
        return
            "needs Apple's mDNSResponderPosix (and mDNSSleeperPosix) in \(mdnsPosixDirectory): run "
            + "scripts/build-mdnsposix.sh SOURCE .build/lab-tools with SOURCE an apple-oss-distributions/mDNSResponder "
            + "checkout (or set SLEEPPROXY_MDNSPOSIX_DIR to where they are built)"
    }

    /// Starts `program` (Apple's `mDNSResponderPosix` by default) in `role`'s namespace as host `hostName`
    /// (without `.local`), publishing `services`, and waits (at most 10 seconds) until it has registered every
    /// service.
    ///
    /// It runs in a UTS namespace of its own whose host name is `hostName`, since Apple's core takes its host
    /// name from `gethostname()`. `mDNSResponderPosix` reads its services from a file in a directory of
    /// ``workDirectory``; `mDNSSleeperPosix` publishes exactly one, given on its command line. The lab tears it
    /// down; ``MDNSPosixResponder/stop(orderly:)`` stops it earlier.
    public func startMDNSPosix(
        on role: Role, hostName: String, services: [MDNSPosixService], program: MDNSPosixProgram = .responder
    ) async throws -> MDNSPosixResponder {
        if let reason = Self.mdnsPosixMissingReason { throw LabError(reason) }
        guard !services.isEmpty else { throw LabError("\(program.rawValue) needs a service to publish") }
        guard program == .responder || services.count == 1 else {
            throw LabError("mDNSSleeperPosix publishes one service, not \(services.count)")
        }
        // It waits for the responder's output, blocking: off the cooperative thread pool.
        return try await runOffCooperativePool { [self] in
            let namespace = try run(role, ["ip", "netns", "identify"], timeout: .seconds(5))
            guard namespace.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == host(role).namespace else {
                throw LabError(
                    "refusing to start \(program.rawValue): not inside \(host(role).namespace): \(namespace)")
            }
            var template = Array("\(workDirectory)/mdnsposix-\(role.rawValue)-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else {
                throw LabError("cannot create a directory in \(workDirectory): \(String(cString: strerror(errno)))")
            }
            let directory = String(cString: made)
            let file = directory + "/services.txt"
            try services.map(\.serviceFileEntry).joined().write(toFile: file, atomically: false, encoding: .utf8)

            let arguments: [String]
            switch program {
            case .responder:
                // `-v 1`: it also says when it starts, deregisters its services and finishes.
                arguments = ["-v", "1", "-f", file]
            case .sleeper:
                let service = services[0]
                arguments = ["-n", service.name, "-t", service.type, "-p", String(service.port)] + service.txt
            }
            let script = #"hostname "$1" && shift && exec "$@""#
            let process = try spawn(
                role,
                ["unshare", "--uts", "sh", "-c", script, program.rawValue, hostName, Self.mdnsPosixPath(program)]
                    + arguments)
            let responder = MDNSPosixResponder(
                lab: self, role: role, program: program, hostName: hostName, services: services,
                directory: directory, process: process)
            let deadline = ContinuousClock.now + .seconds(10)
            while responder.registrations < services.count {
                if process.hasExited {
                    throw LabError("\(program.rawValue) in \(role.rawValue) exited: \(responder.log)")
                }
                if ContinuousClock.now >= deadline {
                    process.terminate(grace: .zero)
                    throw TimeoutError("\(program.rawValue) in \(role.rawValue) did not register: \(responder.log)")
                }
                usleep(20_000)
            }
            return responder
        }
    }
}
