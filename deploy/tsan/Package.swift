// swift-tools-version: 6.1
//
// The ThreadSanitizer build of deploy/test.sh: the concurrency tests (TelemetryHub, the agent's
// modules, MQTT) and what they link, nothing of the fleet side (fleet-watch and its libraries,
// the map's web server, the PostgreSQL client, the benchmarks), so the instrumented build holds
// what it checks and not minutes of BoringSSL and HTTP.
//
// This is the documented alternative to package traits that issue 19 asked for: traits gate
// dependencies and code, not targets, and `swift test` builds every target of a package. The
// folders here are symbolic links to the repository's own Sources/ and Tests/, and each target
// below repeats its declaration in ../../Package.swift; a declaration that drifts fails this
// build in the test command, so it cannot drift unseen.
import PackageDescription

let package = Package(
    name: "fleetcast-tsan",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.8.0"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.0.0", traits: []),
        .package(url: "https://github.com/vapor/sqlite-nio", from: "1.12.0"),
    ],
    targets: [
        .target(name: "GNSS"),
        .target(name: "JSONEscaping"),
        .target(name: "FleetcastCore", dependencies: ["JSONEscaping"]),
        .target(
            name: "FleetcastCommandLine", dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .target(name: "NMEA", dependencies: ["GNSS"]),
        .target(
            name: "TelemetryHub",
            dependencies: ["FleetcastCore", .product(name: "DequeModule", package: "swift-collections")]
        ),
        .target(
            name: "GNSSSources",
            dependencies: [
                "GNSS", "NMEA", "FleetcastCore", "JSONEscaping",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(name: "FleetProtocol", dependencies: ["GNSS", "JSONEscaping"]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CTimex"),
        .target(name: "CLoadedCode"),
        .target(name: "CTCPTraffic"),
        .target(name: "MQTTCore", dependencies: ["FleetcastCore", "JSONEscaping"]),
        .target(
            name: "MQTT",
            dependencies: [
                "MQTTCore", "CMosquitto", "CTCPTraffic", "FleetcastCore", "JSONEscaping",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "EdgeCore",
            dependencies: [
                "GNSS", "FleetProtocol", "MQTTCore", "FleetcastCore",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "EdgeOutbox",
            dependencies: [
                "EdgeCore", "FleetcastCore", "GNSS", "FleetProtocol",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
            ]
        ),
        .target(
            name: "EdgePublisher",
            dependencies: [
                "EdgeCore", "EdgeOutbox", "GNSS", "FleetProtocol", "MQTT", "FleetcastCore", "CTimex",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "EdgeConfiguration",
            dependencies: [
                "EdgeCore", "FleetProtocol", "MQTTCore", "FleetcastCore", "CYAML",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        .target(
            name: "EdgeAgent",
            dependencies: [
                "EdgeConfiguration", "EdgePublisher", "EdgeOutbox",
                "GNSS", "GNSSSources", "TelemetryHub", "FleetProtocol", "MQTT", "FleetcastCore", "CLoadedCode",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The agent's end-to-end tests run the real binary.
        .executableTarget(
            name: "fleetcast-agent",
            dependencies: [
                "GNSS", "NMEA", "FleetProtocol", "EdgeAgent", "EdgeConfiguration", "FleetcastCore", "FleetcastCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(name: "FleetcastTestSupport", dependencies: ["FleetcastCore", "GNSS", "MQTTCore"]),
        .testTarget(
            name: "TelemetryHubTests",
            dependencies: ["TelemetryHub", "FleetcastTestSupport", .product(name: "DequeModule", package: "swift-collections")]
        ),
        .testTarget(
            name: "MQTTTests",
            dependencies: [
                "MQTT", "FleetcastTestSupport", "FleetcastCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        // Senders that hold or record what the publisher sends, and a test's quick timings: for
        // the publisher's tests and the agent's.
        .target(
            name: "EdgeTestSupport",
            dependencies: ["EdgePublisher", "FleetcastTestSupport", "FleetcastCore", "FleetProtocol", "MQTT"]
        ),
        // The publisher in process, against held and recording senders and real SQLite stores.
        .testTarget(
            name: "EdgePublisherTests",
            dependencies: [
                "EdgePublisher", "EdgeOutbox", "EdgeCore", "EdgeConfiguration", "GNSS", "FleetProtocol", "MQTT",
                "FleetcastTestSupport", "EdgeTestSupport", "FleetcastCore",
                .product(name: "Logging", package: "swift-log"), .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "EdgeAgentTests",
            dependencies: [
                "NMEA", "EdgeAgent", "EdgeConfiguration", "EdgePublisher", "EdgeOutbox", "EdgeCore", "GNSS", "FleetProtocol", "MQTT",
                "FleetcastTestSupport", "EdgeTestSupport", "FleetcastCore",
                .product(name: "Logging", package: "swift-log"), .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
