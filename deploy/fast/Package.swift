// swift-tools-version: 6.1
//
// The first tier of deploy/test.sh: the pure modules (decisions and formats, no I/O, no C, no
// clocks) and their tests, built without swift-nio, PostgreSQL, HTTP or libmosquitto, so that a
// broken pure function is known in a couple of minutes from a clean clone and in seconds after
// an edit: `swift test --package-path deploy/fast --scratch-path .build-fast`.
//
// As in deploy/tsan, the folders here are symbolic links to the repository's own Sources/ and
// Tests/, and each target repeats its declaration in ../../Package.swift; a declaration that
// drifts fails this build in the test command, so it cannot drift unseen.
import PackageDescription

let package = Package(
    name: "fleetcast-fast",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
    ],
    targets: [
        .target(name: "GNSS"),
        .target(name: "JSONEscaping"),
        .target(name: "FleetcastCore", dependencies: ["JSONEscaping"]),
        .target(name: "NMEA", dependencies: ["GNSS"]),
        .target(name: "FleetProtocol", dependencies: ["GNSS", "JSONEscaping"]),
        .target(name: "MQTTCore", dependencies: ["FleetcastCore", "JSONEscaping"]),
        .target(
            name: "EdgeCore",
            dependencies: [
                "GNSS", "FleetProtocol", "MQTTCore", "FleetcastCore",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What a fleet's vehicles did, pure: trips and stops cut from their fixes.
        .target(name: "FleetOperations", dependencies: ["GNSS"]),
        .target(
            name: "FleetCore",
            dependencies: [
                "GNSS", "FleetProtocol", "MQTTCore", "FleetcastCore", "JSONEscaping", "FleetOperations",
                .product(name: "OrderedCollections", package: "swift-collections"),
            ]
        ),
        .target(name: "FleetcastTestSupport", dependencies: ["FleetcastCore", "GNSS", "MQTTCore"]),

        .testTarget(name: "GNSSTests", dependencies: ["GNSS"]),
        .testTarget(name: "FleetcastCoreTests", dependencies: ["FleetcastCore", "JSONEscaping", "FleetcastTestSupport"]),
        .testTarget(
            name: "NMEATests",
            dependencies: ["NMEA", "GNSS", "FleetProtocol", "FleetcastTestSupport"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "FleetProtocolTests", dependencies: ["FleetProtocol", "GNSS", "FleetcastTestSupport"]),
        .testTarget(name: "MQTTCoreTests", dependencies: ["MQTTCore", "FleetcastTestSupport"]),
        .testTarget(
            name: "EdgeCoreTests",
            dependencies: [
                "EdgeCore", "FleetProtocol", "GNSS", "FleetcastTestSupport", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "FleetOperationsTests", dependencies: ["FleetOperations", "GNSS", "FleetcastTestSupport", "NMEA"]),
        .testTarget(
            name: "FleetCoreTests",
            dependencies: ["FleetCore", "FleetProtocol", "GNSS", "MQTTCore", "FleetcastTestSupport", "FleetOperations"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
