// swift-tools-version:6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The Debian package's version (`0.3.0-1`), which the package build (debian/rules) passes in the environment so
/// that `--version` prints it. Empty for a build from source. Only the characters Debian allows in a version.
let packageVersion = Context.environment["SLEEPPROXY_PACKAGE_VERSION"] ?? ""
if !packageVersion.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || ".+~:-".contains($0)) }) {
    fatalError("SLEEPPROXY_PACKAGE_VERSION \"\(packageVersion)\" is not a Debian version")
}
let buildInfoSettings: [CSetting] =
    packageVersion.isEmpty ? [] : [.define("SLEEPPROXY_PACKAGE_VERSION", to: "\"\(packageVersion)\"")]

let package = Package(
    name: "sleepproxy",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "sleepproxyd", targets: ["sleepproxyd"]),
        .executable(name: "sleepproxyctl", targets: ["sleepproxyctl"]),
        .executable(name: "sleepproxy-client", targets: ["sleepproxy-client"]),
        .library(name: "DNSWire", targets: ["DNSWire"]),
        .library(name: "Frames", targets: ["Frames"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ],
    targets: [
        // The addresses every other target speaks of: MAC, IPv4, IPv6, an address and port (`Endpoint`), and where
        // mDNS is spoken (`MulticastDNS`: its port and groups). Shared by the codecs, the core, the sockets and the
        // sleep client, so that none of them needs another's module for these words alone.
        .target(name: "NetworkAddresses", swiftSettings: swiftSettings),

        // Wire formats: pure, no dependencies beyond the shared address types.
        .target(name: "DNSWire", dependencies: ["NetworkAddresses"], swiftSettings: swiftSettings),
        .target(name: "Frames", dependencies: ["NetworkAddresses"], swiftSettings: swiftSettings),

        // The protocol state machine: no sockets, no clock, no threads.
        .target(
            name: "SleepProxyCore",
            dependencies: ["DNSWire", "Frames", "NetworkAddresses"],
            swiftSettings: swiftSettings
        ),

        // The sleep client's pure side: which proxy to choose, and the registration messages it sends.
        .target(
            name: "SleepProxyClientCore",
            dependencies: ["DNSWire", "Frames", "NetworkAddresses"],
            swiftSettings: swiftSettings
        ),

        // The lease store: SQLite in WAL mode, mirroring the core's owners and events.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "LeaseStore",
            dependencies: ["SleepProxyCore", "DNSWire", "NetworkAddresses", "CSQLite"],
            swiftSettings: swiftSettings
        ),

        // recvmsg/sendmsg with packet info, which Swift cannot reach without the CMSG macros.
        .target(name: "CNetSupport"),

        // libpcap, found through pkg-config (Debian: libpcap-dev).
        .systemLibrary(
            name: "CPcap",
            pkgConfig: "libpcap",
            providers: [.apt(["libpcap-dev"])]
        ),

        // What the build was told about itself (the package's version), from a C definition.
        .target(name: "CBuildInfo", cSettings: buildInfoSettings),

        // The control protocol: Codable requests and responses shared by the daemon and `sleepproxyctl`, and the
        // version every program prints. The client side (connection, tables, JSON output) lives in `sleepproxyctl`.
        .target(name: "SleepProxyControl", dependencies: ["CBuildInfo"], swiftSettings: swiftSettings),

        // Sockets and interfaces, shared by the daemon and the sleep client: UDP with packet info, and what an
        // interface has (index, MAC, addresses). It does not see the proxy's core.
        .target(
            name: "NetworkIO",
            dependencies: ["NetworkAddresses", "CNetSupport"],
            swiftSettings: swiftSettings
        ),

        // Config files: TOML parsed safely into plain values, with the line of each key for messages. The only
        // target that sees the TOML parser.
        .target(
            name: "TOMLConfig",
            dependencies: [.product(name: "TOMLKit", package: "TOMLKit")],
            swiftSettings: swiftSettings
        ),

        // The I/O shells.
        .target(
            name: "SleepProxyDaemon",
            dependencies: [
                "SleepProxyCore", "LeaseStore", "DNSWire", "Frames", "NetworkAddresses", "CPcap", "CNetSupport",
                "NetworkIO", "TOMLConfig",
                "SleepProxyControl",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sleepproxyd",
            dependencies: [
                "SleepProxyDaemon", "SleepProxyControl", "TOMLConfig",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // The admin CLI: talks to the daemon over the control socket only; it does not link the daemon.
        .executableTarget(
            name: "sleepproxyctl",
            dependencies: [
                "SleepProxyControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // The sleep client: finds proxies and its own records on mDNS, registers, announces its return. It does not
        // link the proxy's core.
        .target(
            name: "SleepProxyClient",
            dependencies: [
                "SleepProxyClientCore", "DNSWire", "NetworkAddresses", "NetworkIO", "CNetSupport", "TOMLConfig",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sleepproxy-client",
            dependencies: [
                "SleepProxyClient", "SleepProxyClientCore", "SleepProxyControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // Benchmarks print `figure: value` lines; run them with `make bench`.
        .executableTarget(
            name: "SleepProxyBenchmarks",
            dependencies: [
                "DNSWire", "Frames", "NetworkAddresses", "SleepProxyCore", "LeaseStore", "SleepProxyDaemon", "TestLab",
                "CaptureStream", "FixtureSupport", "NetworkIO", "Soak", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/SleepProxyBenchmarks",
            swiftSettings: swiftSettings
        ),

        // Test support: fixture readers (pcap files, hex dumps), the one copy of the real packets the DNSWire and
        // core tests share (`Fixture`), and the three-host network namespace lab.
        .target(
            name: "FixtureSupport",
            dependencies: ["DNSWire", "NetworkAddresses", "SleepProxyCore"],
            path: "Tests/FixtureSupport",
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TestLab",
            path: "Tests/TestLab",
            swiftSettings: swiftSettings
        ),
        // A month of a home network in an hour: the daemon in the lab under churn, faults and restarts, with an
        // invariant checker and resource samples (`make soak`, and a short run in the suite).
        .target(
            name: "Soak",
            dependencies: [
                "CaptureStream", "DNSWire", "FixtureSupport", "Frames", "NetworkAddresses", "NetworkIO",
                "SleepProxyControl", "SleepProxyCore", "SleepProxyDaemon", "TestLab",
            ],
            path: "Tests/Soak",
            swiftSettings: swiftSettings
        ),
        // Captured frames as an AsyncStream, for tests and benchmarks that wait for what went over the wire.
        .target(
            name: "CaptureStream",
            dependencies: ["SleepProxyDaemon"],
            path: "Tests/CaptureStream",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DNSWireTests",
            dependencies: ["DNSWire", "FixtureSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FramesTests",
            dependencies: ["Frames", "FixtureSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SleepProxyCoreTests",
            dependencies: ["SleepProxyCore", "DNSWire", "Frames", "NetworkAddresses", "FixtureSupport"],
            swiftSettings: swiftSettings
        ),
        // A child process for the lease store's crash test: commits batches until it is killed.
        .executableTarget(
            name: "lease-store-crash-helper",
            dependencies: ["LeaseStore", "SleepProxyCore", "DNSWire", "NetworkAddresses"],
            path: "Tests/LeaseStoreCrashHelper",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SleepProxyClientCoreTests",
            dependencies: ["SleepProxyClientCore", "DNSWire", "Frames", "NetworkAddresses", "FixtureSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "LeaseStoreTests",
            dependencies: [
                "LeaseStore", "SleepProxyCore", "DNSWire", "NetworkAddresses", "CSQLite", "lease-store-crash-helper",
                "FixtureSupport",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SleepProxyControlTests",
            dependencies: ["SleepProxyControl"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SleepProxyCtlTests",
            dependencies: [
                "sleepproxyctl", "SleepProxyControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SleepProxyDaemonTests",
            dependencies: [
                "SleepProxyDaemon", "SleepProxyCore", "LeaseStore", "DNSWire", "Frames", "NetworkAddresses", "TestLab",
                "SleepProxyControl", "sleepproxyctl", "sleepproxy-client", "SleepProxyClient", "SleepProxyClientCore",
                "NetworkIO", "TOMLConfig", "CaptureStream", "FixtureSupport", "Soak",
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
