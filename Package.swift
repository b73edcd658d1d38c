// swift-tools-version: 6.1
//
// Fleetcast: vehicles on a map through MQTT. See README.md and ARCHITECTURE notes in the README.
import PackageDescription

let package = Package(
    name: "fleetcast",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "fleetcast-agent", targets: ["fleetcast-agent"]),
        .executable(name: "fleetcast-bench", targets: ["fleetcast-bench"]),
        .library(name: "GNSS", targets: ["GNSS"]),
        .library(name: "NMEA", targets: ["NMEA"]),
        .library(name: "GNSSSources", targets: ["GNSSSources"]),
        .library(name: "TelemetryHub", targets: ["TelemetryHub"]),
        .library(name: "FleetProtocol", targets: ["FleetProtocol"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.0"),
    ],
    targets: [
        // Value types: Fix, Heading, FixMode, GNSSEvent. No dependencies.
        .target(name: "GNSS"),
        // NMEA 0183: framing, checksum, sentence parsers, epoch assembly. Pure, no I/O.
        .target(name: "NMEA", dependencies: ["GNSS"]),
        // The multi-subscriber broadcaster between sources and consumers.
        .target(name: "TelemetryHub"),
        // Serial, gpsd, replay and simulated receivers as restartable async sequences.
        .target(
            name: "GNSSSources",
            dependencies: [
                "GNSS", "NMEA",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The public contract: topic layout and payload JSON.
        .target(name: "FleetProtocol", dependencies: ["GNSS"]),

        .executableTarget(
            name: "fleetcast-agent",
            dependencies: [
                "GNSS", "NMEA", "GNSSSources", "TelemetryHub", "FleetProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "fleetcast-bench",
            dependencies: [
                "GNSS", "NMEA", "TelemetryHub", "FleetProtocol",
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
            ]
        ),

        .testTarget(name: "GNSSTests", dependencies: ["GNSS"]),
        .testTarget(
            name: "NMEATests",
            dependencies: ["NMEA", "GNSS", "FleetProtocol"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "TelemetryHubTests", dependencies: ["TelemetryHub"]),
        .testTarget(
            name: "GNSSSourcesTests",
            dependencies: [
                "GNSSSources", "GNSS", "NMEA",
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "FleetProtocolTests", dependencies: ["FleetProtocol", "GNSS"]),
    ],
    swiftLanguageModes: [.v6]
)
