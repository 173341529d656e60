import Foundation
import NetworkIO
import SleepProxyDaemon
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The lab itself: addresses, reachability, sleep and wake, namespace switching, teardown.
@Suite(.requiresLab(tools: ["arping", "ping"]))
struct LabTests {
    @Test func hostsAreAddressedAndReachEachOther() async throws {
        try await Lab.withLab { lab in
            #expect(Set(lab.hosts.map(\.namespace)).count == 3)
            for host in lab.hosts {
                #expect(host.namespace.hasPrefix(lab.prefix))
                let addresses = try await lab.run(host.role, ["ip", "-o", "address", "show", "dev", "eth0"])
                for address in ["\(host.ipv4)/24", "\(host.ipv6LinkLocal)/64", "\(host.ula)/64"] {
                    #expect(addresses.stdout.contains(" \(address) "), "\(host.name) lacks \(address): \(addresses)")
                }
                let ipv6 = try await lab.run(host.role, ["ip", "-6", "-o", "address", "show", "dev", "eth0"])
                let ipv6Lines = ipv6.stdout.split(separator: "\n")
                #expect(ipv6Lines.count == 2, "only the lab's two IPv6 addresses: \(ipv6)")
                #expect(!ipv6.stdout.contains("tentative"), "\(ipv6)")
                let routes = try await lab.run(host.role, ["ip", "route", "show"])
                #expect(routes.stdout.contains("224.0.0.0/4 dev eth0"), "\(routes)")
                for key in ["accept_ra", "accept_dad"] {
                    let value = try await lab.run(host.role, ["cat", "/proc/sys/net/ipv6/conf/eth0/\(key)"])
                    #expect(value.stdout == "0\n", "\(host.name) \(key): \(value)")
                }
            }
            #expect(lab.host(.proxy).macString == "02:77:00:00:00:01")
            #expect(lab.host(.sleeper).ipv6LinkLocal == "fe80::77:ff:fe00:2")
            #expect(lab.host(.waker).ula == "fd77::3")

            let ping4 = try await lab.run(.waker, ["ping", "-c", "1", "-W", "3", lab.host(.sleeper).ipv4])
            #expect(ping4.succeeded, "\(ping4)")
            let ping6 = try await lab.run(.waker, ["ping", "-6", "-c", "1", "-W", "3", lab.host(.proxy).ula])
            #expect(ping6.succeeded, "\(ping6)")
            let linkLocal = try await lab.run(
                .waker,
                ["ping", "-6", "-c", "1", "-W", "3", "\(lab.host(.sleeper).ipv6LinkLocal)%eth0"]
            )
            #expect(linkLocal.succeeded, "\(linkLocal)")
        }
    }

    @Test func sleepingHostAnswersNothingUntilWoken() async throws {
        try await Lab.withLab { lab in
            let sleeper = lab.host(.sleeper)
            let arping = ["arping", "-c", "1", "-w", "1", "-I", "eth0", sleeper.ipv4]

            try lab.sleep(.sleeper)
            let addresses = try await lab.run(.sleeper, ["ip", "-o", "address", "show", "dev", "eth0"])
            #expect(addresses.succeeded && addresses.stdout.isEmpty, "addresses left while asleep: \(addresses)")
            let link = try await lab.run(.sleeper, ["ip", "-o", "link", "show", "dev", "eth0"])
            #expect(link.stdout.contains(",UP"), "the link must stay up: \(link)")
            let unanswered = try await lab.run(.waker, arping)
            #expect(!unanswered.succeeded, "a sleeping host answered ARP: \(unanswered)")

            try lab.wake(.sleeper)
            let answered = try await lab.run(.waker, arping)
            #expect(answered.succeeded, "the woken host did not answer ARP: \(answered)")
            let routes = try await lab.run(.sleeper, ["ip", "route", "show"])
            #expect(routes.stdout.contains("224.0.0.0/4 dev eth0"), "\(routes)")
            let ping6 = try await lab.run(.waker, ["ping", "-6", "-c", "1", "-W", "3", sleeper.ula])
            #expect(ping6.succeeded, "\(ping6)")
        }
    }

    @Test func withNamespaceSwitchesOnlyTheClosure() async throws {
        try await Lab.withLab { lab in
            let (outside, inside, after, interface) = try {
                let outside = try currentNamespace()
                let (inside, interface) = try lab.withNamespace(.proxy) {
                    (try currentNamespace(), try NetworkInterface.named("eth0"))
                }
                return (outside, inside, try currentNamespace(), interface)
            }()
            #expect(inside != outside)
            #expect(after == outside)
            #expect(interface.macAddress == lab.host(.proxy).mac)
        }
    }

    @Test func teardownKillsProcessesAndRemovesEverything() async throws {
        let lab = try Lab.create()
        let process = try lab.spawn(.waker, ["sh", "-c", "echo started; exec sleep 60"])
        let started = try await withTimeout(.seconds(5), "the spawned process to write") {
            while !process.stdout.contains("started") { try await Task.sleep(for: .milliseconds(10)) }
            return true
        }
        #expect(started)
        #expect(!process.hasExited)

        lab.teardown()
        lab.teardown()
        #expect(process.hasExited)
        #expect(labNamespaces().filter { $0.hasPrefix(lab.prefix) } == [])
        #expect(!FileManager.default.fileExists(atPath: lab.workDirectory))
        #expect(throws: LabError.self) { try lab.spawn(.waker, ["true"]) }
    }

    @Test func staleLabsOfDeadProcessesAreRemoved() async throws {
        // A pid that surely is not running: a reaped child's.
        let child = try await Lab.withLab { lab in try lab.spawn(.proxy, ["true"]) }
        #expect(child.wait(timeout: .seconds(5)) != nil)
        let stale = "\(Lab.namePrefix)\(child.pid)-dead-proxy"
        let added = try Lab.runInTestNamespace(["ip", "netns", "add", stale])
        #expect(added.succeeded, "\(added)")

        let lab = try Lab.create()
        lab.teardown()
        #expect(!labNamespaces().contains(stale))
        _ = try? Lab.runInTestNamespace(["ip", "netns", "delete", stale])
    }
}

/// The network namespace the calling thread is in, as `net:[inode]`.
private func currentNamespace() throws -> String {
    try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self/ns/net")
}

private func labNamespaces() -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/run/netns")) ?? []).filter {
        $0.hasPrefix(Lab.namePrefix)
    }
}
