import ArgumentParser
import FleetHistory
import FleetHistoryCore
import FleetOperations
import FleetWatch
import FleetcastCore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// `fleet-watch record --postgres postgres://…`: writes every fix and heading of the fleet,
/// live and backlog, into PostgreSQL. All the logic is in the FleetHistory library
/// (``FleetRecorder``, ``TrackStore``).
struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Writes the fleet's fixes and headings, live and backlog, into PostgreSQL.",
        discussion: """
            Creates or migrates its tables (fleetcast_fixes, fleetcast_headings) at start. Rows \
            are keyed by (vehicle, run, seq): a message delivered twice is stored once, a new \
            fix after a vehicle's numbering began again (its store lost) is always stored. It \
            keeps a persistent MQTT session under a client id that stays the same (several \
            recorders on one machine take distinct ones, kept in --state-dir) and acknowledges \
            a message to the broker only once its row is committed: killed, it misses nothing \
            the broker kept for it (within --session-expiry and the broker's \
            max_queued_messages). While PostgreSQL is away, at most --buffer messages wait in \
            memory and the broker holds the rest. With --share-group, several recorders split \
            the fleet; SIGTERM or SIGINT unsubscribes from the group first, takes for up to \
            15 s what the broker had already queued for it, writes what was received, then \
            exits (what is still queued waits in its session for the next start under the \
            same client id). The tables are partitioned by day (UTC); with --retention, \
            the days past it are dropped whole, at start and then daily. The PostgreSQL \
            password comes from --postgres-password-file, \
            PGPASSWORD or a libpq password file (PGPASSFILE), never the URL. `fleet-watch gaps` \
            checks what was recorded.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var database: PostgresOptions

    @Option(help: "The most messages written in one batch.")
    var batchSize: Int = 1_000

    @Option(
        help:
            "Messages received and not yet written (1 to 65535): the broker sends no more until they are, and keeps the rest in the session."
    )
    var buffer: Int = 10_000

    @Option(help: "Seconds the broker keeps the session (and the messages that arrive) while the recorder is away.")
    var sessionExpiry: Int = 86_400

    @Option(
        help: ArgumentHelp(
            "How long history is kept: days (30d), weeks (8w) or forever (also an empty value). Whole days past it are dropped, at start and then daily; older messages are not stored.",
            valueName: "duration"),
        transform: { text in
            do { return try HistoryRetention(parsing: text) } catch { throw ValidationError("--retention: \(error)") }
        })
    var retention: HistoryRetention = .forever

    @Option(
        help: ArgumentHelp(
            "Where each running recorder keeps the lock of its default client id (fleet-watch-record-<host>[-<group>], then -2, -3… for the next ones at the same time): $STATE_DIRECTORY (systemd), $XDG_STATE_HOME/fleetcast or ~/.local/state/fleetcast by default.",
            valueName: "directory"))
    var stateDir: String?

    @OptionGroup var tripRules: TripRuleOptions

    @OptionGroup var zoneOptions: ZoneOptions

    @Option(help: "Where zone events are published (QoS 1, not retained): this prefix, then /{vehicle}. Empty: not published.")
    var zoneEventsTopic: String = "fleetcast/zones"

    func validate() throws {
        guard !zoneEventsTopic.contains(where: { $0 == "+" || $0 == "#" }), !zoneEventsTopic.hasSuffix("/") else {
            throw ValidationError("--zone-events-topic must have no wildcard and no trailing /")
        }
        if connection.shareGroup != nil && zoneOptions.zones != nil {
            throw ValidationError(
                "--zones cannot be combined with --share-group: a share group splits each vehicle's fixes between recorders, and zone events need them all in one"
            )
        }
        guard batchSize > 0, (1...65_535).contains(buffer) else {
            throw ValidationError("--batch-size must be positive and --buffer 1 to 65535")
        }
        guard sessionExpiry > 0 else { throw ValidationError("--session-expiry must be positive") }
    }

    func run() async throws {
        let logger = connection.makeLogger()
        let location = try database.location(logger: logger)
        // The recorder subscribes once its schema is migrated: then it is ready.
        let readiness = Readiness(["subscribed"])
        let shareSuffix = connection.shareGroup.map { "-\($0.prefix(32))" } ?? ""
        // Distinct per running instance on this host, and the same again after a restart.
        let base = "fleet-watch-record-\(ConnectionOptions.hostName)\(shareSuffix)"
        let instance: (clientID: String, lock: ExclusiveFileLock?) =
            connection.clientID == nil
            ? RecorderInstance.claim(base: base, directory: RecorderInstance.directory(stateDir), logger: logger) : (base, nil)
        defer { withExtendedLifetime(instance.lock) {} }
        let subscriber = try connection.makeSubscriber(
            logger: logger, dropLogLevel: .warning,
            durability: .init(
                defaultClientID: instance.clientID, sessionExpiry: .seconds(sessionExpiry),
                inFlight: buffer,
                // Of the 25 s a stop may take (the unit's TimeoutStopSec is 30 s): 15 s to take
                // what the broker had queued for this member, and room for the rest of a clean
                // close: the UNSUBACK (1 s at most), the last quiet check (0.5 s) and the last
                // batch written before the DISCONNECT (5 s at most).
                handOverLimit: .seconds(15)),
            onSubscribed: { readiness.report("subscribed") })
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        let zones = try zoneOptions.load()
        let announcer =
            zones != nil && !zoneEventsTopic.isEmpty
            ? ZoneAnnouncer(subscribing: subscriber.configuration, topic: zoneEventsTopic, logger: logger) : nil
        let recorder = FleetRecorder(
            subscriber: subscriber, store: TrackStore(client: client, logger: logger),
            options: {
                var options = FleetRecorder.Options(batchSize: batchSize)
                options.retention = retention
                // Trips and stops need every fix of a vehicle in one recorder: not in a share group.
                options.operations =
                    connection.shareGroup != nil
                    ? nil
                    : OperationsSettings(
                        rules: tripRules.rules, zones: zones, hysteresisMetres: zoneOptions.zoneHysteresis,
                        announce: announcer.map { announcer in { @Sendable events in announcer.announce(events) } })
                return options
            }(), logger: logger)
        if let zones {
            logger.info("Zones read", metadata: ["zones.file": "\(zoneOptions.zones ?? "")", "zones": "\(zones.zones.count)"])
        }
        logger.info("PostgreSQL", metadata: ["postgres": "\(location)"])
        do {
            try await FleetWatchServices.run(
                [
                    // Shut down last: the recorder writes what it holds through it first.
                    .init(service: client)
                ]
                    // Never the recorder's end: a broker that refuses the -pub user is logged,
                    // and the events stay in PostgreSQL.
                    + (announcer.map { [.init(service: $0, successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore)] }
                        ?? [])
                    + [
                        // The announcer stops after the recorder: it publishes what the last batch found.
                        .init(service: recorder, successTerminationBehavior: .gracefullyShutdownGroup)
                    ],
                readiness: readiness, status: "recording \(subscriber.filters.joined(separator: " ")) into \(location)",
                gracePeriod: .seconds(25), logger: logger)
        } catch is CancellationError {
            // Past the grace period (a step that awaits a PostgreSQL that stopped answering).
            logger.error(
                "record did not stop within 25 s and was cut short; what it had not acknowledged, the broker sends again at the next start")
            throw ExitCode.failure
        } catch {
            logger.error("record failed", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
    }
}
