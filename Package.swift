// swift-tools-version:6.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "sleepproxy",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "sleepproxyd", targets: ["sleepproxyd"]),
        .library(name: "DNSWire", targets: ["DNSWire"]),
        .library(name: "Frames", targets: ["Frames"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0")
    ],
    targets: [
        // Wire formats: pure, no dependencies beyond the shared address types.
        .target(name: "NetworkAddresses", swiftSettings: swiftSettings),
        .target(name: "DNSWire", dependencies: ["NetworkAddresses"], swiftSettings: swiftSettings),
        .target(name: "Frames", dependencies: ["NetworkAddresses"], swiftSettings: swiftSettings),

        // libpcap, found through pkg-config (Debian: libpcap-dev).
        .systemLibrary(
            name: "CPcap",
            pkgConfig: "libpcap",
            providers: [.apt(["libpcap-dev"])]
        ),

        // The I/O shells.
        .target(
            name: "SleepProxyDaemon",
            dependencies: ["DNSWire", "Frames", "CPcap"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "sleepproxyd",
            dependencies: [
                "SleepProxyDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // Benchmarks print `figure: value` lines; run them with `make bench`.
        .executableTarget(
            name: "SleepProxyBenchmarks",
            dependencies: ["DNSWire", "Frames"],
            path: "Benchmarks/SleepProxyBenchmarks",
            swiftSettings: swiftSettings
        ),

        // Test support: fixture readers (pcap files, hex dumps) and the three-host network namespace lab.
        .target(
            name: "FixtureSupport",
            path: "Tests/FixtureSupport",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TestLab",
            path: "Tests/TestLab",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DNSWireTests",
            dependencies: ["DNSWire", "FixtureSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FramesTests",
            dependencies: ["Frames", "FixtureSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SleepProxyDaemonTests",
            dependencies: ["SleepProxyDaemon", "Frames", "NetworkAddresses", "TestLab"],
            swiftSettings: swiftSettings
        ),
    ]
)
