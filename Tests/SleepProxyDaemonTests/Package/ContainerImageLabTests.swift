import CaptureStream
import Foundation
import Frames
import NetworkAddresses
import SleepProxyControl
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The container image as a home server runs it: built with Podman by `make image`'s script from this checkout's
/// package, over a Debian 12 base (the boot test's root, imported as an image: the test machines reach no
/// registry); run in the lab's proxy host with host networking there (`--network ns:`), nothing but `NET_RAW` and
/// `NET_ADMIN`, and a volume for the lease store. A Mac-style sleeper registers, is answered for, is listed by
/// `podman exec ... sleepproxyctl`, is kept across a restart and by a new container, and is woken on its port;
/// `podman stop` ends the daemon within its grace period; the image on a Podman bridge network refuses to start,
/// saying why.
///
/// The flags a test machine needs and users' machines do not: `--runtime runc --cgroup-manager cgroupfs` (crun
/// refuses the hybrid cgroup layout here), and explicit `--ulimit`s within this process's own limits (runc cannot
/// raise them to Podman's defaults).
@Suite(
    .requiresLab(tools: ["arping", "nc", "podman", "runc", "iptables", "debootstrap"]),
    .enabled(if: BootTestPackage.path != nil, Comment(rawValue: BootTestPackage.missing)))
struct ContainerImageLabTests {
    static func say(_ text: String) { print("container image: \(text)") }

    /// Podman with the options this machine needs.
    static let podman = ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]

    /// `--ulimit`s no higher than this process's, nor than `ceiling`: runc sets them in the container and may not
    /// raise them (here it fails on a process limit of 65,536 or more; the daemon needs a few dozen threads).
    static var ulimits: [String] {
        func limit(_ resource: __rlimit_resource_t, _ name: String, ceiling: rlim_t) -> [String] {
            var value = rlimit()
            getrlimit(resource, &value)
            let hard = min(value.rlim_max, ceiling)
            return ["--ulimit", "\(name)=\(min(value.rlim_cur, hard)):\(hard)"]
        }
        return limit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), "nofile", ceiling: 65_536)
            + limit(__rlimit_resource_t(__RLIMIT_NPROC.rawValue), "nproc", ceiling: 4_096)
    }

    /// Runs a Podman command in the test's own namespaces (it sends nothing: the containers it starts live in a
    /// lab host's namespace).
    @discardableResult
    static func podman(_ arguments: [String], timeout: Duration = .seconds(120), check: Bool = true) throws
        -> CommandResult
    {
        let result = try Lab.runInTestNamespace(podman + arguments, timeout: timeout)
        if check && !result.succeeded {
            throw LabError("podman \(arguments.joined(separator: " ")): \(result)")
        }
        return result
    }

    /// The boot test's Debian 12 root as a local image, imported once per version of the root.
    static func baseImage() throws -> String {
        let stamp = try String(contentsOfFile: BootedSystem.rootDirectory + "/.boot-root-stamp", encoding: .utf8)
        // FNV-1a: a tag that names this root, the same in every run.
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in stamp.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        let name = "localhost/sleepproxy-test-base:\(String(hash, radix: 16))"
        if try podman(["image", "exists", name], check: false).succeeded { return name }
        // Bases of earlier roots are of no more use.
        let earlier = try podman([
            "images", "--filter", "reference=localhost/sleepproxy-test-base", "--format", "{{.Repository}}:{{.Tag}}",
        ]).stdout.split(separator: "\n").map(String.init)
        if !earlier.isEmpty { try podman(["rmi", "--force"] + earlier, check: false) }
        let imported = try Lab.runInTestNamespace(
            [
                "sh", "-c", "tar -C \"$0\" --exclude=./.boot-root-stamp -c . | \"$@\"", BootedSystem.rootDirectory,
            ] + podman + ["import", "-", name], timeout: .seconds(300))
        guard imported.succeeded else { throw LabError("importing \(BootedSystem.rootDirectory): \(imported)") }
        return name
    }

    /// The image built as `make image` builds it, from `package` over `base`; its name and size in bytes.
    static func buildImage(package: String, base: String) throws -> (name: String, bytes: Int) {
        let name = "localhost/sleepproxyd-test-\(getpid())-\(String(UInt32.random(in: 0..<0x10000), radix: 16))"
        let built = try Lab.runInTestNamespace(
            [
                "env", "ENGINE=\(podman.joined(separator: " "))", "DEB=\(package)", "BASE=\(base)", "IMAGE=\(name)",
                BootTestPackage.repository + "/scripts/build-image.sh", "--network", "none", "--pull=never",
            ], timeout: .seconds(600))
        guard built.succeeded else { throw LabError("scripts/build-image.sh: \(built)") }
        let figure = built.stdout.split(separator: "\n").first { $0.hasPrefix("figure: image_bytes: ") }
        let bytes = figure.flatMap { Int($0.dropFirst("figure: image_bytes: ".count)) } ?? 0
        return (name, bytes)
    }

    /// `podman run -d` in `role`'s namespace with the two capabilities and the volume, as the README's example
    /// (with `--network ns:` for the lab's host in place of `--network host`).
    static func start(
        _ name: String, image: String, volume: String, in lab: Lab, extra: [String] = [], command: [String] = []
    ) throws {
        try podman(
            ["run", "-d", "--name", name] + ulimits + [
                "--network", "ns:/run/netns/\(lab.host(.proxy).namespace)", "--cap-drop", "all",
                "--cap-add", "net_raw,net_admin", "--volume", "\(volume):/var/lib/sleepproxy",
                "--env", "SLEEPPROXY_INTERFACES=eth0",
            ] + extra + [image] + command)
    }

    /// Waits until the image's health check passes (`podman healthcheck run`: there is no systemd here to run
    /// it on its timer) and Podman records the container as healthy.
    static func healthy(_ name: String, within timeout: Duration = .seconds(30)) async throws {
        _ = try await eventually("\(name) healthy", within: timeout, every: .milliseconds(100)) { () -> Bool? in
            let state = try podman(["inspect", "--format", "{{.State.Status}}", name]).stdout
            if state.hasPrefix("exited") {
                throw LabError("\(name) exited: \(try podman(["logs", name], check: false))")
            }
            return try podman(["healthcheck", "run", name], check: false).succeeded ? true : nil
        }
        let health = try podman(["inspect", "--format", "{{.State.Health.Status}}", name]).stdout
        #expect(health.trimmingCharacters(in: .whitespacesAndNewlines) == "healthy", "\(health)")
    }

    /// The held hosts, as `podman exec NAME sleepproxyctl hosts --json` lists them.
    static func hosts(_ name: String) throws -> [HostSummary] {
        let listed = try podman(["exec", name, "sleepproxyctl", "hosts", "--json"])
        return try ControlProtocol.decoder().decode([HostSummary].self, from: Data(listed.stdout.utf8))
    }

    static func sleeper(in state: String, _ name: String, within timeout: Duration = .seconds(30)) async throws
        -> HostSummary
    {
        try await eventually("Sleeper.local \(state) in \(name)", within: timeout) {
            try hosts(name).first { $0.name == "Sleeper.local" && $0.state == state }
        }
    }

    /// What the container wrote to its standard output and error.
    static func logs(_ name: String) throws -> String {
        let logs = try podman(["logs", name])
        return logs.stdout + logs.stderr
    }

    /// Fields of `/proc/1/status` in the container: the daemon is its PID 1.
    static func daemonStatus(_ name: String) throws -> [String: String] {
        let status = try podman(["exec", name, "cat", "/proc/1/status"]).stdout
        return Dictionary(
            status.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (
                    String(line[..<colon]),
                    line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                )
            }, uniquingKeysWith: { first, _ in first })
    }

    @Test
    func theImageServesFromAVolumeStopsCleanlyAndRefusesABridge() async throws {
        let package = try #require(BootTestPackage.path)
        try await BootedSystem.prepareRoot(repository: BootTestPackage.repository)
        let base = try Self.baseImage()
        let building = ContinuousClock.now
        let (image, bytes) = try Self.buildImage(package: package, base: base)
        defer {
            // Both tags (the package's version and latest); the layers stay cached for the next build.
            let tags =
                (try? Self.podman(["images", "--filter", "reference=\(image)", "--format", "{{.Repository}}:{{.Tag}}"]))?
                .stdout.split(separator: "\n").map(String.init) ?? []
            _ = try? Self.podman(["rmi", "--force"] + tags, check: false)
        }
        Self.say(
            "built \(image) from \(package) over \(base) in \(ContinuousClock.now - building): \(bytes / 1_000_000) MB, base included"
        )

        // The image: its user, its health check, its volume; no compiler, no Swift, no package lists or caches.
        let config = try Self.podman([
            "image", "inspect", "--format", "{{.Config.User}} {{json .Config.Volumes}} {{json .HealthCheck.Test}}",
            image,
        ]).stdout
        #expect(config.hasPrefix("sleepproxy "), "\(config)")
        #expect(config.contains("/var/lib/sleepproxy"), "\(config)")
        #expect(config.contains("sleepproxyctl") && config.contains("status"), "\(config)")
        let contents = try Self.podman(
            ["run", "--rm", "--network", "none"] + Self.ulimits + [
                "--entrypoint", "sh", image, "-c",
                "found=''; for tool in cc gcc clang swift swiftc; do command -v $tool >/dev/null && found=\"$found $tool\"; done; echo \"tools:$found\"; echo \"lists:$(ls -A /var/lib/apt/lists)\"; echo \"cache:$(ls -A /var/cache/apt)\"",
            ]
        ).stdout
        #expect(contents == "tools:\nlists:\ncache:\n", "\(contents)")

        try await Lab.withLab { lab in
            let tag = "sp-image-\(getpid())-\(String(UInt32.random(in: 0..<0x10000), radix: 16))"
            let volume = tag + "-leases"
            let name = tag + "-proxy"
            try Self.podman(["volume", "create", volume])
            defer {
                for container in [name, name + "-2", name + "-bare"] {
                    _ = try? Self.podman(["rm", "--force", "--time", "0", container], check: false)
                }
                _ = try? Self.podman(["volume", "rm", "--force", volume], check: false)
            }

            // 1. Started with host networking (the lab proxy's), the two capabilities and the volume: healthy.
            let starting = ContinuousClock.now
            try Self.start(name, image: image, volume: volume, in: lab)
            try await Self.healthy(name)
            let startTime = ContinuousClock.now - starting
            let status = try Self.daemonStatus(name)
            #expect(status["Uid"]?.hasPrefix("5354") == true, "\(status)")
            #expect(status["CapEff"] == "0000000000003000", "\(status)")
            let log = try Self.logs(name)
            #expect(log.contains("in a container (podman)"), "\(log)")
            #expect(log.contains("configuration from the environment: SLEEPPROXY_INTERFACES=eth0"), "\(log)")
            Self.say(
                "started and healthy in \(startTime); uid \(status["Uid"] ?? "?"), CapEff \(status["CapEff"] ?? "?")")
            print("figure: image_start_to_healthy_ms: \(Int(startTime / .milliseconds(1)))")

            // 2. A Mac-style sleeper registers (answered), sleeps, and is answered for; sleepproxyctl lists it.
            try await MacSleeper.registerAndSleep(lab)
            let sleeper = lab.host(.sleeper)
            _ = try await Self.sleeper(in: "held", name)
            let answer = try await lab.dig(
                from: .waker, server: lab.host(.proxy).ipv4, name: "Sleeper.local", type: "A")
            #expect(answer.answers.contains { $0.type == "A" && $0.data == sleeper.ipv4 }, "\(answer)")
            let arping = try await lab.run(.waker, ["arping", "-c", "1", "-w", "3", "-I", "eth0", sleeper.ipv4])
            #expect(arping.stdout.lowercased().contains(lab.host(.proxy).macString.lowercased()), "\(arping)")
            let listed = try Self.podman(["exec", name, "sleepproxyctl", "hosts"]).stdout
            #expect(listed.contains("Sleeper.local"), "\(listed)")
            Self.say("registration answered; Sleeper.local held, A and ARP answered; sleepproxyctl hosts lists it")

            // 3. A restart keeps it.
            let restarting = ContinuousClock.now
            try Self.podman(["restart", "--time", "10", name])
            let restarted = ContinuousClock.now - restarting
            try await Self.healthy(name)
            let healthyAgain = ContinuousClock.now - restarting
            _ = try await Self.sleeper(in: "held", name)
            Self.say(
                "podman restart: returned in \(restarted), healthy in \(healthyAgain), Sleeper.local held again (its addresses claimed anew) after \(ContinuousClock.now - restarting)"
            )

            // 4. podman stop ends it cleanly within the grace period: SIGTERM, not the SIGKILL after 10 s.
            let stopping = ContinuousClock.now
            try Self.podman(["stop", "--time", "10", name])
            let stopTime = ContinuousClock.now - stopping
            #expect(stopTime < .seconds(10), "\(stopTime)")
            let exit = try Self.podman(["inspect", "--format", "{{.State.ExitCode}}", name]).stdout
            #expect(exit.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "exit code \(exit)")
            let stopped = try Self.logs(name)
            #expect(stopped.contains("received signal 15, stopping; leases are kept"), "\(stopped)")
            Self.say("podman stop: exited 0 in \(stopTime)")
            try Self.podman(["rm", name])

            // 5. A new container from the same volume, started as Docker starts an image's non-root user (no
            // ambient capabilities: the file capabilities of sleepproxyd are what gives it the two), holds the
            // sleeper and wakes it on its port.
            let second = name + "-2"
            try Self.start(
                second, image: image, volume: volume, in: lab,
                extra: ["--entrypoint", "setpriv"],
                command: ["--inh-caps=-all", "--ambient-caps=-all", "--", "/usr/sbin/sleepproxyd"])
            try await Self.healthy(second)
            let secondStatus = try Self.daemonStatus(second)
            #expect(secondStatus["CapAmb"] == "0000000000000000", "\(secondStatus)")
            #expect(secondStatus["CapEff"] == "0000000000003000", "\(secondStatus)")
            _ = try await Self.sleeper(in: "held", second)
            let nic = try lab.withNamespace(.sleeper) { try CaptureStream(interface: "eth0") }
            defer { nic.close() }
            try nic.setFilter("ether proto 0x0842")
            _ = try await lab.run(.waker, ["nc", "-z", "-w", "2", sleeper.ipv4, "22"])
            let magic = try await firstElement(of: nic.frames, within: .seconds(10), "a magic packet") { _ in true }
            #expect(try EthernetFrame(parsing: magic.bytes).magicPacket?.target == MACAddress(sleeper.macString))
            let waking = try await Self.sleeper(in: "waking", second)
            #expect(waking.wakeReason?.contains("TCP SYN from \(lab.host(.waker).ipv4)") == true, "\(waking)")
            Self.say(
                "a new container on the volume, without ambient capabilities (CapEff \(secondStatus["CapEff"] ?? "?") from the file's): Sleeper.local held; a SYN to port 22 woke it: \(waking.wakeReason ?? "")"
            )
            try Self.podman(["stop", "--time", "10", second])

            // 6. Without the capabilities it says which are missing and how to add them.
            let bare = name + "-bare"
            let unprivileged = try Self.podman(
                ["run", "--name", bare] + Self.ulimits + [
                    "--network", "ns:/run/netns/\(lab.host(.proxy).namespace)", "--cap-drop", "all",
                    "--volume", "\(volume):/var/lib/sleepproxy", image, "--interface", "eth0",
                ], check: false)
            #expect(unprivileged.status == 1, "\(unprivileged)")
            let refused = try Self.logs(bare)
            #expect(refused.contains("missing capabilities CAP_NET_RAW and CAP_NET_ADMIN"), "\(refused)")
            #expect(refused.contains("--cap-add NET_RAW --cap-add NET_ADMIN"), "\(refused)")

            // 7. On a Podman bridge network, it refuses to start, saying why and what to do. Podman runs in the
            // waker's network namespace, so that its bridge, its NAT and the container's veth are made there and
            // not in this machine's: `nsenter --net` and not `ip netns exec`, whose own /sys hides the cgroups.
            let bridged = try Lab.runInTestNamespace(
                ["nsenter", "--net=/run/netns/\(lab.host(.waker).namespace)"] + Self.podman + ["run", "--rm"]
                    + Self.ulimits + ["--network", "bridge", "--cap-add", "net_raw,net_admin", image],
                timeout: .seconds(60))
            #expect(bridged.status == 1, "\(bridged)")
            #expect(bridged.stderr.contains("is on a container network, not the LAN"), "\(bridged)")
            #expect(bridged.stderr.contains("--network host"), "\(bridged)")
            let refusal = bridged.stderr.split(separator: "\n").first { $0.contains("cannot start") } ?? ""
            Self.say("on a bridge network: exit \(bridged.status): \(refusal)")
        }
    }
}
