import Foundation
import TestLab
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The metrics endpoint as a user runs it: Debian's Prometheus in the waker's namespace scrapes the daemon every
/// second, and its own HTTP API answers the PromQL a dashboard would ask.
@Suite(.requiresLab(tools: ["prometheus", "nc", "python3", "ss"]))
struct MetricsLabTests {
    static let metricsPort = 9187

    func startDaemon(_ lab: Lab, metrics: Bool = true) throws -> LabProcess {
        try RegistrationDaemonLabTests().startDaemon(
            lab, state: lab.workDirectory + "/state",
            extraArguments: metrics ? ["--metrics-listen", "\(lab.host(.proxy).ipv4):\(Self.metricsPort)"] : [])
    }

    /// Prometheus in the waker's namespace, scraping the proxy every second; its API on the waker's loopback.
    func startPrometheus(_ lab: Lab) throws -> LabProcess {
        let directory = lab.workDirectory + "/prometheus"
        try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
        let config = """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
              evaluation_interval: 1s
            scrape_configs:
              - job_name: sleepproxy
                static_configs:
                  - targets: ['\(lab.host(.proxy).ipv4):\(Self.metricsPort)']
            """
        try config.write(toFile: directory + "/prometheus.yml", atomically: true, encoding: .utf8)
        return try lab.spawn(
            .waker,
            [
                "prometheus", "--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/data",
                "--web.listen-address=127.0.0.1:9090", "--log.level=warn",
            ])
    }

    /// One PromQL instant query through Prometheus's HTTP API: the value of each series, by its labels.
    func query(_ lab: Lab, _ promQL: String) throws -> [String: Double] {
        let encoded = promQL.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? promQL
        let reply = try lab.withNamespace(.waker) {
            try httpGet(host: "127.0.0.1", port: 9090, "/api/v1/query?query=\(encoded)")
        }
        guard reply.status == 200,
            let object = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any],
            let data = object["data"] as? [String: Any], let results = data["result"] as? [[String: Any]]
        else { throw TestFailure("query \(promQL): \(reply)") }
        var values: [String: Double] = [:]
        for result in results {
            let metric = (result["metric"] as? [String: String]) ?? [:]
            let labels = metric.filter { $0.key != "__name__" && $0.key != "job" && $0.key != "instance" }
                .sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            if let value = result["value"] as? [Any], let text = value.last as? String, let number = Double(text) {
                values[labels] = number
            }
        }
        return values
    }

    /// Waits until `promQL` gives `expected` (for its only series, or the one labelled `series`); asks once when
    /// `within` is zero.
    func expectQuery(
        _ lab: Lab, _ promQL: String, _ expected: Double, series: String = "", within: Duration = .seconds(20)
    ) async throws {
        var last: [String: Double] = [:]
        let deadline = ContinuousClock.now + within
        while true {
            last = (try? query(lab, promQL)) ?? [:]
            if last[series] == expected {
                if ProcessInfo.processInfo.environment["SLEEPPROXY_SHOW_METRICS"] != nil {
                    print("PromQL: \(promQL) => \(last)")
                }
                return
            }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        Issue.record("PromQL \(promQL): expected \(expected) for {\(series)}, Prometheus says \(last)")
    }

    @Test func aRealPrometheusSeesAHostHeldRefusedAndWoken() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let prometheus = try startPrometheus(lab)
            defer { _ = prometheus.terminate() }
            try await expectQuery(lab, "up{job=\"sleepproxy\"}", 1, within: .seconds(30))
            try await expectQuery(lab, "sleepproxy_hosts_held", 0, series: "interface=eth0")

            try await MacSleeper.registerAndSleep(lab)
            try await expectQuery(lab, "sleepproxy_hosts_held", 1, series: "interface=eth0")
            try await expectQuery(
                lab, "sleepproxy_registrations_total{outcome=\"accepted\"}", 1, series: "outcome=accepted")
            try await expectQuery(lab, "sleepproxy_addresses_taken_over", 1, series: "interface=eth0")

            // A malformed registration from the waker: refused under its reason.
            _ = try await lab.run(
                .waker, ["sh", "-c", "printf 'not a DNS message' | nc -u -w 1 \(lab.host(.proxy).ipv4) 5354"])
            try await expectQuery(
                lab, "sleepproxy_registrations_total{outcome=\"malformed\"}", 1, series: "outcome=malformed")

            // A SYN to its ssh port wakes it: counted under its trigger, and timed once.
            _ = try lab.spawn(.waker, ["nc", "-z", "-w", "10", lab.host(.sleeper).ipv4, "22"])
            try await expectQuery(lab, "sleepproxy_wakes_total{trigger=\"tcp-syn\"}", 1, series: "trigger=tcp-syn")
            try await expectQuery(lab, "sum(sleepproxy_wakes_total)", 1)
            try await expectQuery(lab, "sleepproxy_wake_latency_seconds_count", 1)
            try await expectQuery(lab, "sleepproxy_wake_latency_seconds_bucket{le=\"0.01\"}", 1, series: "le=0.01")
            try await expectQuery(lab, "sleepproxy_magic_packets_sent_total > bool 0", 1)
            try await expectQuery(lab, "sum(sleepproxy_capture_frames_received_total) > bool 0", 1)

            // A reload keeps every counter (and the endpoint): no reset in Prometheus's eyes.
            daemon.signal(SIGHUP)
            _ = try await eventually("the reload", within: .seconds(5)) {
                daemon.stderr.contains("reloaded the configuration") ? true : nil
            }
            // What Prometheus says from here on comes from a scrape after the reload: its last scrape is later.
            let reloaded = Date().timeIntervalSince1970
            _ = try await eventually("a scrape after the reload", within: .seconds(10), every: .milliseconds(250)) {
                let last = (try? query(lab, "timestamp(up{job=\"sleepproxy\"})"))?[""] ?? 0
                return last > reloaded ? true : nil
            }
            try await expectQuery(lab, "up{job=\"sleepproxy\"}", 1, within: .zero)
            try await expectQuery(
                lab, "sleepproxy_wakes_total{trigger=\"tcp-syn\"}", 1, series: "trigger=tcp-syn", within: .zero)
            try await expectQuery(
                lab, "sum(resets(sleepproxy_registrations_total[1m])) + sum(resets(sleepproxy_wakes_total[1m]))", 0)

            // The exposition itself, as Prometheus read it.
            let exposition = try lab.withNamespace(.waker) {
                try httpGet(host: lab.host(.proxy).ipv4, port: Self.metricsPort, "/metrics")
            }
            #expect(exposition.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
            if ProcessInfo.processInfo.environment["SLEEPPROXY_SHOW_METRICS"] != nil {
                print("GET /metrics: \(exposition.status)\n\(exposition.headers)\n\(exposition.text)")
            }
            let hosts = try lab.withNamespace(.waker) {
                try httpGet(host: lab.host(.proxy).ipv4, port: Self.metricsPort, "/hosts.json")
            }
            #expect(hosts.headers["content-type"] == "application/json")
            #expect(hosts.text.contains("\"ownerMAC\" : \"\(lab.host(.sleeper).macString)\""), "\(hosts)")
        }
    }

    /// Off by default: nothing listens on TCP.
    @Test func theEndpointIsOffByDefault() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab, metrics: false)
            defer { daemon.signal(SIGTERM) }
            let listening = try await lab.run(.proxy, ["ss", "-Hltn"])
            #expect(listening.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(listening)")
            #expect(throws: (any Error).self) {
                try lab.withNamespace(.waker) {
                    try httpGet(host: lab.host(.proxy).ipv4, port: Self.metricsPort, "/metrics")
                }
            }
        }
    }

    /// A 1 MB request and a slowloris client at the endpoint while a host registers and is woken: both go as
    /// usual, the big request is refused, the slow client cut off.
    @Test func hostileClientsDoNotDisturbRegistrationsAndWakes() async throws {
        try await Lab.withLab { lab in
            let daemon = try startDaemon(lab)
            defer { daemon.signal(SIGTERM) }
            let proxy = lab.host(.proxy).ipv4
            // Three slow connections, each sending a byte a second; the big request is the fourth one address may hold.
            let slowloris = try lab.spawn(
                .waker,
                [
                    "python3", "-c",
                    """
                    import socket, time
                    conns = [socket.create_connection(("\(proxy)", \(Self.metricsPort))) for _ in range(3)]
                    start = time.time()
                    for c in conns: c.sendall(b"GET /metrics HTTP/1.1\\r\\nX-Slow: ")
                    alive = len(conns)
                    while alive and time.time() - start < 30:
                        alive = 0
                        for c in conns:
                            try:
                                c.sendall(b"a"); alive += 1
                            except OSError:
                                pass
                        time.sleep(1)
                    print("cut after %.1f s" % (time.time() - start), flush=True)
                    """,
                ])
            defer { _ = slowloris.terminate() }
            let big = try lab.spawn(
                .waker,
                [
                    "python3", "-c",
                    """
                    import socket
                    c = socket.create_connection(("\(proxy)", \(Self.metricsPort)))
                    try:
                        c.sendall(b"GET /metrics HTTP/1.1\\r\\nX-Big: " + b"a" * 1048576 + b"\\r\\n\\r\\n")
                    except OSError:
                        pass
                    print(c.recv(100).decode(errors="replace").splitlines()[0], flush=True)
                    """,
                ])
            defer { _ = big.terminate() }

            let started = ContinuousClock.now
            try await MacSleeper.registerAndSleep(lab)
            _ = try await eventually("the take-over", within: .seconds(20)) {
                daemon.stderr.contains("took over \(lab.host(.sleeper).ipv4)") ? true : nil
            }
            _ = try lab.spawn(.waker, ["nc", "-z", "-w", "10", lab.host(.sleeper).ipv4, "22"])
            _ = try await eventually("the wake", within: .seconds(5)) {
                daemon.stderr.contains("TCP SYN from \(lab.host(.waker).ipv4):") ? true : nil
            }
            // A registration is held and woken as fast as ever: the take-over takes about 12 s after it.
            #expect(ContinuousClock.now - started < .seconds(20))
            _ = try await eventually("the big request's answer", within: .seconds(10)) {
                big.stdout.isEmpty ? nil : true
            }
            #expect(big.stdout.hasPrefix("HTTP/1.1 413"), "\(big.stdout) \(big.stderr)")
            _ = try await eventually("the slow clients cut off", within: .seconds(20)) {
                slowloris.stdout.contains("cut after") ? true : nil
            }
            let seconds = Double(slowloris.stdout.split(separator: " ")[2]) ?? 99
            #expect(seconds < 15, "\(slowloris.stdout)")
            // The endpoint still answers.
            let reply = try lab.withNamespace(.waker) { try httpGet(host: proxy, port: Self.metricsPort, "/metrics") }
            #expect(reply.status == 200)
        }
    }
}
