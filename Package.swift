// swift-tools-version: 6.1
//
// Fleetcast: vehicles on a map through MQTT. See README.md and docs/design.md.
//
// One manifest for the builds of the test command (deploy/test.sh); each target is declared once,
// in the part it belongs to, and FLEETCAST_TIER picks the parts a build declares:
//
// - unset: everything (the programs, the benchmarks, every test target): `swift build`, `swift test`,
//   and the release builds of the Debian packages (deploy/package.sh).
// - `pure`: the first tier, the pure modules (decisions and formats: no I/O, no C, no clock) and
//   their tests, without swift-nio, PostgreSQL, HTTP or libmosquitto, so a broken pure function is
//   known in a couple of minutes from a clean clone and in seconds after an edit:
//   `FLEETCAST_TIER=pure swift test --scratch-path .build-fast`.
// - `edge`: the ThreadSanitizer build, the agent's modules and their concurrency tests (the hub,
//   MQTT, the publisher, the agent), over the pure modules, without the fleet side (fleet-watch,
//   the map's web server, the PostgreSQL client, the benchmarks), so the instrumented build holds
//   what it checks and not minutes of BoringSSL and HTTP:
//   `FLEETCAST_TIER=edge swift test --sanitize=thread --scratch-path .build-tsan`. The agent's
//   tests run here only: each test of the command runs once.
// - `fleet`: the fleet side and its tests over the shared shells, with the agent's program (not
//   its tests) and without the benchmarks: the end-to-end tests run this build's agent, and the
//   test command links both packages' programs from its objects (deploy/package.sh,
//   FLEETCAST_DEB_LINK_FROM), so nothing is compiled twice.
//
// (Package traits gate dependencies and code, not targets, and `swift test` builds every target
// of a package: the tier is the documented alternative. Use one scratch folder per tier.)
import PackageDescription

let tier = Context.environment["FLEETCAST_TIER"] ?? ""
precondition(["", "pure", "edge", "fleet"].contains(tier), "FLEETCAST_TIER is unset, pure, edge or fleet, not '\(tier)'")
/// Whether this build declares the shells both sides share (every build but the first tier's).
let declaresShared = tier != "pure"
/// Whether this build declares the agent's tests (and their support).
let declaresAgent = tier == "" || tier == "edge"
/// Whether this build declares the agent's program and modules: the fleet side's build too, whose
/// end-to-end tests run the agent, and whose agent the test command's vehicle package is linked from.
let declaresAgentProgram = declaresAgent || tier == "fleet"
/// Whether this build declares the fleet side and its tests.
let declaresFleet = tier == "" || tier == "fleet"
/// Whether this build declares everything: the programs' products and the benchmarks.
let declaresAll = tier == ""

/// The products of the mirrored packages that several targets use, named once.
let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
let inMemoryLogging = Target.Dependency.product(name: "InMemoryLogging", package: "swift-log")
let dequeModule = Target.Dependency.product(name: "DequeModule", package: "swift-collections")
let orderedCollections = Target.Dependency.product(name: "OrderedCollections", package: "swift-collections")
let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
let nioCore = Target.Dependency.product(name: "NIOCore", package: "swift-nio")
let serviceLifecycle = Target.Dependency.product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
let asyncAlgorithms = Target.Dependency.product(name: "AsyncAlgorithms", package: "swift-async-algorithms")
let postgresNIO = Target.Dependency.product(name: "PostgresNIO", package: "postgres-nio")
let hummingbirdTLS = Target.Dependency.product(name: "HummingbirdTLS", package: "hummingbird")

// MARK: The pure modules and their tests

/// Decisions and formats: no I/O, no C, no clock. Their tests run with plain values, no
/// processes, no sockets, no sleeping (the first tier; in the ThreadSanitizer build only the
/// modules, not their tests).
let pureModules: [Target] = [
    // Value types: Fix, Heading, FixMode, GNSSEvent. No dependencies.
    .target(name: "GNSS"),
    // Shared building blocks, no package dependencies: the TSan-visible Mutex, retry backoff,
    // the time limit, the JSON string escaper and the few-character one, systemd's
    // notification protocol, and the agent's release of its startup pages (over CLoadedCode).
    .target(name: "FleetcastCore", dependencies: ["JSONEscaping"]),
    // JSON string literals and the escaping of text from the wire: no dependencies, shared by
    // the contract (FleetProtocol) and everything that logs or prints what it received.
    .target(name: "JSONEscaping"),
    // NMEA 0183: framing, checksum, sentence parsers, epoch assembly. Pure, no I/O.
    .target(name: "NMEA", dependencies: ["GNSS"]),
    // The public contract: topic layout and payload JSON.
    .target(name: "FleetProtocol", dependencies: ["GNSS", "JSONEscaping"]),
    // MQTT's decisions, pure: the client's state machine and its actions, the delivery ledger,
    // topic filters, QoS, will, broker URLs, the reconnect policy, errors and traffic figures.
    // No C, no I/O, no clock: its tests drive it with plain values.
    .target(name: "MQTTCore", dependencies: ["FleetcastCore", "JSONEscaping"]),
    // The outbox's decisions, pure: numbering, what waits to be written, what goes live, what
    // the backlog drain reads, each in a state machine of plain values (its phases and parts
    // on their own), and the storage's interface that EdgeOutbox implements.
    .target(name: "OutboxCore", dependencies: ["FleetProtocol", "MQTTCore", dequeModule]),
    // The agent's decisions, pure: the edge's and the publisher's states around the outbox's,
    // the reporting policy, the fix-time policy, the token bucket, source health, the
    // publisher's settings. No C, no I/O, no clock: time comes in as values, and its tests run
    // without tasks.
    .target(
        name: "EdgeCore",
        dependencies: [
            "GNSS", "FleetProtocol", "MQTTCore", "FleetcastCore", "OutboxCore",
            dequeModule,
            logging,
        ]
    ),
    // Test support shared by the MQTT, agent and fleet-watch tests: a real mosquitto
    // broker on a free loopback port, CLI clients, free ports, bounded waits.
    .target(
        name: "FleetcastTestSupport", dependencies: ["FleetcastCore", "GNSS", "FleetProtocol", "MQTTCore"],
        path: "Sources/FleetcastTestSupport"),
]
/// The pure modules only the fleet side uses (left out of the ThreadSanitizer build).
let pureFleetModules: [Target] = [
    // The recorder's decisions, pure: which days a vehicle's messages may lie on, and which
    // daily partitions a batch may make (its bounds per vehicle).
    .target(name: "FleetHistoryCore", dependencies: ["GNSS", "FleetProtocol"]),
    // The fleet side's decisions and formats, pure: fleet state, sequence tracking, the
    // plausibility check, the browser queues, the bridges' translators, the export writers.
    .target(
        name: "FleetCore",
        dependencies: [
            "GNSS", "FleetProtocol", "MQTTCore", "FleetcastCore", "JSONEscaping", "FleetOperations",
            orderedCollections,
        ]
    ),
    // What a fleet's vehicles did, pure: trips and stops cut from their fixes.
    .target(name: "FleetOperations", dependencies: ["GNSS"]),
]
let pureTests: [Target] = [
    .testTarget(name: "FleetHistoryCoreTests", dependencies: ["FleetHistoryCore", "FleetProtocol", "GNSS"]),
    .testTarget(name: "GNSSTests", dependencies: ["GNSS"]),
    .testTarget(name: "FleetcastCoreTests", dependencies: ["FleetcastCore", "JSONEscaping", "FleetcastTestSupport"]),
    .testTarget(
        name: "NMEATests",
        dependencies: ["NMEA", "GNSS", "FleetProtocol", "FleetcastTestSupport"],
        resources: [.copy("Fixtures")]
    ),
    .testTarget(name: "FleetProtocolTests", dependencies: ["FleetProtocol", "GNSS", "FleetcastTestSupport"]),
    // The pure tiers' tests: plain values, no processes, no sockets, no sleeping.
    .testTarget(name: "MQTTCoreTests", dependencies: ["MQTTCore", "FleetcastTestSupport"]),
    .testTarget(
        name: "EdgeCoreTests",
        dependencies: [
            "EdgeCore", "OutboxCore", "FleetProtocol", "GNSS", "FleetcastTestSupport", logging,
        ]
    ),
    .testTarget(name: "OutboxCoreTests", dependencies: ["OutboxCore"]),
    .testTarget(name: "FleetOperationsTests", dependencies: ["FleetOperations", "GNSS", "FleetcastTestSupport", "NMEA"]),
    .testTarget(
        name: "FleetCoreTests",
        dependencies: ["FleetCore", "FleetProtocol", "GNSS", "MQTTCore", "FleetcastTestSupport", "FleetOperations"]
    ),
]

// MARK: The shells both sides share, and the agent's part

/// The shells over the pure modules that the agent and fleet-watch both use: the shared
/// command-line options, the receivers (the fleet side's tests and benchmarks drive them), the
/// MQTT client over libmosquitto and the kernel's TCP counters of its socket.
let sharedModules: [Target] = [
    // The command-line options fleetcast-agent and fleet-watch share (broker credentials).
    .target(
        name: "FleetcastCommandLine", dependencies: [argumentParser]
    ),
    // Serial, gpsd, replay and simulated receivers as restartable async sequences.
    .target(
        name: "GNSSSources",
        dependencies: [
            "GNSS", "NMEA", "FleetcastCore", "JSONEscaping",
            logging,
            nioCore,
            .product(name: "NIOPosix", package: "swift-nio"),
        ]
    ),
    // libmosquitto, the Eclipse Mosquitto C client, as a system library.
    .systemLibrary(
        name: "CMosquitto",
        pkgConfig: "libmosquitto",
        providers: [.apt(["libmosquitto-dev"])]
    ),
    // The kernel's TCP counters of a socket (Linux TCP_INFO): what the broker link costs.
    .target(name: "CTCPTraffic"),
    // An async MQTT 5 / 3.1.1 client over libmosquitto: the shell around MQTTCore.
    .target(
        name: "MQTT",
        dependencies: [
            "MQTTCore", "CMosquitto", "CTCPTraffic", "FleetcastCore", "JSONEscaping",
            logging,
        ]
    ),
]
/// The vehicle's side: the hub, the outbox in SQLite, the publisher, the configuration, the
/// agent. With the shared shells, their tests are the concurrency tests the test command runs
/// under ThreadSanitizer (FLEETCAST_TIER=edge).
let agentModules: [Target] = [
    // The multi-subscriber broadcaster between sources and consumers.
    .target(
        name: "TelemetryHub",
        dependencies: ["FleetcastCore", dequeModule]
    ),
    // libyaml, Debian's YAML 1.1 parser, as a system library: the agent's configuration file.
    .systemLibrary(
        name: "CYAML",
        pkgConfig: "yaml-0.1",
        providers: [.apt(["libyaml-dev"])]
    ),
    // adjtimex(2) from <sys/timex.h> (Glibc's Swift module lacks it): whether the system
    // clock is synchronized, for the agent's check of fix times. Header only, in libc.
    .systemLibrary(name: "CTimex"),
    // The loader's list of loaded segments (dl_iterate_phdr, which needs _GNU_SOURCE and so
    // a C file of its own): StartupPages gives back the pages of the read-only ones.
    .target(name: "CLoadedCode"),
    // The agent's durable outbox: everything unacknowledged, in SQLite (or memory), with its
    // limits, the order it drains in and what it drops first (decided in OutboxCore).
    .target(
        name: "EdgeOutbox",
        dependencies: [
            "EdgeCore", "OutboxCore", "FleetcastCore", "GNSS", "FleetProtocol",
            nioCore,
            logging,
            dequeModule,
            .product(name: "SQLiteNIO", package: "sqlite-nio"),
        ]
    ),
    // The agent's publisher: the reporting policy, the hub's fixes and headings into the
    // outbox and out to the broker, retries, and the vehicle's status.
    .target(
        name: "EdgePublisher",
        dependencies: [
            "EdgeCore", "OutboxCore", "EdgeOutbox", "GNSS", "FleetProtocol", "MQTT", "FleetcastCore", "CTimex",
            logging,
        ]
    ),
    // The agent's configuration: YAML file (libyaml), environment and flags, validated.
    .target(
        name: "EdgeConfiguration",
        dependencies: [
            "EdgeCore", "FleetProtocol", "MQTTCore", "FleetcastCore", "CYAML",
            logging,
            .product(name: "Configuration", package: "swift-configuration"),
        ]
    ),
    // The agent as a service: source, hub, outbox and publisher started together, the
    // systemd notifications, the instance lock and `check`.
    .target(
        name: "EdgeAgent",
        dependencies: [
            "EdgeConfiguration", "EdgePublisher", "EdgeOutbox",
            "GNSS", "GNSSSources", "TelemetryHub", "FleetProtocol", "MQTT", "FleetcastCore", "CLoadedCode",
            logging,
            serviceLifecycle,
        ]
    ),
    .executableTarget(
        name: "fleetcast-agent",
        dependencies: [
            "GNSS", "NMEA", "FleetProtocol", "EdgeAgent", "EdgeConfiguration", "FleetcastCore", "FleetcastCommandLine",
            argumentParser,
            logging,
            nioCore,
            serviceLifecycle,
        ]
    ),
    // Senders that hold or record what the publisher sends, and a test's quick timings: for
    // the publisher's tests and the agent's.
]
let edgeTests: [Target] = [
    .target(
        name: "EdgeTestSupport",
        dependencies: ["EdgePublisher", "FleetcastTestSupport", "FleetcastCore", "FleetProtocol", "MQTT"],
        path: "Sources/EdgeTestSupport"
    ),
    .testTarget(
        name: "TelemetryHubTests",
        dependencies: ["TelemetryHub", "FleetcastTestSupport", dequeModule]
    ),
    .testTarget(
        name: "MQTTTests",
        dependencies: [
            "MQTT", "FleetcastTestSupport", "FleetcastCore",
            logging,
            inMemoryLogging,
        ]
    ),
    // The publisher in process, against held and recording senders and real SQLite stores.
    .testTarget(
        name: "EdgePublisherTests",
        dependencies: [
            "EdgePublisher", "EdgeOutbox", "EdgeCore", "OutboxCore", "EdgeConfiguration", "GNSS", "FleetProtocol", "MQTT",
            "FleetcastTestSupport", "EdgeTestSupport", "FleetcastCore",
            logging, inMemoryLogging,
        ]
    ),
    .testTarget(
        name: "EdgeAgentTests",
        dependencies: [
            "NMEA", "EdgeAgent", "EdgeConfiguration", "EdgePublisher", "EdgeOutbox", "EdgeCore", "OutboxCore", "GNSS",
            "FleetProtocol", "MQTT",
            "FleetcastTestSupport", "EdgeTestSupport", "FleetcastCore",
            logging, inMemoryLogging,
        ]
    ),
]

// MARK: The fleet side

/// fleet-watch and its libraries (the subscriber, the recorder, the map, the bridges), the
/// benchmarks, and their tests.
let fleetModules: [Target] = [
    // glibc's mallopt(3) for `fleet-watch serve`'s large, short-lived snapshot buffers.
    .systemLibrary(name: "CMalloc"),
    // The subscriber library: MQTT messages back into an AsyncStream of fleet events.
    .target(
        name: "FleetWatch",
        dependencies: [
            "FleetCore", "GNSS", "FleetProtocol", "MQTT", "FleetcastCore", "JSONEscaping",
            logging,
            serviceLifecycle,
        ]
    ),
    // Track history: the fleet's fixes and headings into PostgreSQL (`fleet-watch record`)
    // and back out as GeoJSON, GPX or CSV (`fleet-watch history`).
    .target(
        name: "FleetHistory",
        dependencies: [
            "FleetCore", "FleetHistoryCore", "GNSS", "FleetProtocol", "FleetWatch", "FleetcastCore", "FleetOperations", "JSONEscaping",
            logging,
            asyncAlgorithms,
            serviceLifecycle,
            postgresNIO,
        ]
    ),
    // The bridges: the fleet's messages republished in Home Assistant's MQTT discovery and
    // OwnTracks' JSON, for `fleet-watch bridge`.
    .target(
        name: "FleetBridges",
        dependencies: [
            "FleetCore", "FleetWatch", "FleetProtocol", "GNSS", "MQTT", "FleetcastCore",
            logging,
            serviceLifecycle,
        ]
    ),
    // The live map: an HTTP server pushing the fleet to browsers (Leaflet page, SSE).
    .target(
        name: "FleetMap",
        dependencies: [
            "FleetCore", "FleetWatch", "FleetProtocol", "FleetcastCore", "JSONEscaping", "GNSS",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            hummingbirdTLS,
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
            .product(name: "HummingbirdBasicAuth", package: "hummingbird-auth"),
            logging,
            nioCore,
            orderedCollections,
            serviceLifecycle,
        ],
        // The page: HTML, script and style, embedded in the binary (MapPage).
        resources: [.embedInCode("Page/map.html"), .embedInCode("Page/map.js"), .embedInCode("Page/map.css")]
    ),
    .executableTarget(
        name: "fleet-watch",
        dependencies: [
            "FleetCore", "FleetWatch", "FleetHistory", "FleetHistoryCore", "FleetMap", "FleetBridges", "FleetProtocol", "MQTT", "GNSS",
            "FleetcastCore",
            "FleetOperations",
            "JSONEscaping",
            "CMalloc",
            "FleetcastCommandLine",
            postgresNIO,
            hummingbirdTLS,
            argumentParser,
            logging,
            serviceLifecycle,
        ]
    ),
]
/// The benchmarks, declared only when everything is (they drive every part).
let benchModules: [Target] = [
    // The benchmarks: a development tool, not a product, never packaged (`swift build -c
    // release` builds it). It starts real brokers, PostgreSQL servers and agents through the
    // tests' support library, which therefore stays out of every product.
    .executableTarget(
        name: "fleetcast-bench",
        dependencies: [
            "GNSS", "NMEA", "TelemetryHub", "FleetProtocol", "MQTT", "FleetCore", "FleetWatch", "EdgeCore", "EdgeOutbox",
            "EdgePublisher", "FleetHistory", "FleetHistoryCore", "FleetOperations",
            // e2e / latency: the NMEA generator, and a real mosquitto and agent process.
            "GNSSSources", "FleetcastTestSupport", "FleetcastCore",
            asyncAlgorithms,
            logging,
            postgresNIO,
        ],
        // openpty(3) for the pseudo-terminal: in libc since glibc 2.34, in libutil before.
        linkerSettings: [.linkedLibrary("util", .when(platforms: [.linux]))]
    )
]
let fleetTests: [Target] = [
    .testTarget(
        name: "GNSSSourcesTests",
        dependencies: [
            "GNSSSources", "GNSS", "FleetProtocol", "NMEA", "FleetcastCore", "FleetcastTestSupport",
            logging, inMemoryLogging,
        ],
        resources: [.copy("Fixtures")]
    ),
    .testTarget(
        name: "FleetWatchTests",
        dependencies: [
            "FleetCore",
            "FleetWatch", "FleetProtocol", "GNSS", "MQTT", "FleetcastTestSupport", logging,
            inMemoryLogging,
        ]
    ),
    .testTarget(
        name: "FleetBridgesTests",
        dependencies: ["FleetCore", "FleetBridges", "FleetWatch", "FleetProtocol", "GNSS", "MQTT", "FleetcastTestSupport"]
    ),
    .testTarget(
        name: "FleetHistoryTests",
        dependencies: [
            "FleetCore",
            "FleetHistory", "FleetHistoryCore", "FleetWatch", "FleetProtocol", "GNSS", "FleetcastTestSupport",
            logging,
            postgresNIO,
        ],
        resources: [.copy("Fixtures")]
    ),
    .testTarget(
        name: "FleetMapTests",
        dependencies: [
            "FleetCore",
            "FleetMap", "FleetWatch", "FleetProtocol", "GNSS", "MQTT", "FleetcastTestSupport", "FleetHistory", "FleetHistoryCore",
            postgresNIO,
            nioCore, .product(name: "NIOEmbedded", package: "swift-nio"),
            logging, inMemoryLogging,
        ]
    ),
]

// MARK: The package

/// The packages each part depends on (the mirrored, well-kept ones: see README.md).
let pureDependencies: [Package.Dependency] = [
    .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
]
let sharedDependencies: [Package.Dependency] = [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.8.0"),
]
let agentDependencies: [Package.Dependency] = [
    // No traits: the agent's YAML file is read by our own snapshot over libyaml (CYAML), not
    // Yams, whose full Foundation (ICU) the agent would otherwise carry.
    .package(url: "https://github.com/apple/swift-configuration", from: "1.0.0", traits: []),
    // The outbox's SQLite (vendored, built in): no Foundation, which a vehicle's memory cannot spare.
    .package(url: "https://github.com/vapor/sqlite-nio", from: "1.12.0"),
]
let fleetDependencies: [Package.Dependency] = [
    .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.0"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.21.0"),
    // fleet-watch serve: the live map's HTTP server (static files, JSON, Server-Sent Events).
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
    // fleet-watch serve: basic authentication (bcrypt, htpasswd's format) and bearer tokens.
    .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.0.0"),
    .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
]

let package = Package(
    name: "fleetcast",
    platforms: [.macOS(.v15)],
    products: declaresAll
        ? [
            .executable(name: "fleetcast-agent", targets: ["fleetcast-agent"]),
            .executable(name: "fleet-watch", targets: ["fleet-watch"]),
            .library(name: "GNSS", targets: ["GNSS"]),
            .library(name: "NMEA", targets: ["NMEA"]),
            .library(name: "GNSSSources", targets: ["GNSSSources"]),
            .library(name: "TelemetryHub", targets: ["TelemetryHub"]),
            .library(name: "FleetProtocol", targets: ["FleetProtocol"]),
            .library(name: "MQTT", targets: ["MQTT"]),
            .library(name: "FleetWatch", targets: ["FleetWatch"]),
            .library(name: "FleetHistory", targets: ["FleetHistory"]),
            .library(name: "FleetMap", targets: ["FleetMap"]),
            .library(name: "FleetBridges", targets: ["FleetBridges"]),
        ] : [],
    dependencies: pureDependencies + (declaresShared ? sharedDependencies : []) + (declaresAgentProgram ? agentDependencies : [])
        + (declaresFleet ? fleetDependencies : []),
    targets: pureModules
        + (tier == "pure" || tier == "" ? pureFleetModules + pureTests : tier == "fleet" ? pureFleetModules : [])
        + (declaresShared ? sharedModules : [])
        + (declaresAgentProgram ? agentModules : [])
        + (declaresAgent ? edgeTests : [])
        + (declaresFleet ? fleetModules + fleetTests : [])
        + (declaresAll ? benchModules : []),
    swiftLanguageModes: [.v6]
)
