import ArgumentParser
import FleetHistory
import FleetWatch
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
            are keyed by (vehicle, seq): a message delivered twice is stored once. With \
            --share-group, several recorders split the fleet; SIGTERM or SIGINT disconnects \
            from the broker first, writes what was received, then exits. The PostgreSQL \
            password goes in the URL or, better, in the environment variable PGPASSWORD.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The database: postgres://[user@]host[:port]/database[?sslmode=disable|prefer|require|verify-full].")
    var postgres: String

    @Option(help: "The most rows written in one batch.")
    var batchSize: Int = 1_000

    @Option(help: "Events kept in memory while PostgreSQL cannot be written to; past it the oldest are dropped, with a warning.")
    var buffer: Int = 500_000

    func validate() throws {
        do { _ = try PostgresLocation(parsing: postgres) } catch { throw ValidationError(error.description) }
        guard batchSize > 0, buffer > 0 else { throw ValidationError("--batch-size and --buffer must be positive") }
    }

    func run() async throws {
        let logger = connection.makeLogger()
        let location = try PostgresLocation(parsing: postgres, environment: ProcessInfo.processInfo.environment)
        // The recorder subscribes once its schema is migrated: then it is ready.
        let readiness = Readiness(["subscribed"])
        let subscriber = try connection.makeSubscriber(
            logger: logger, bufferLimit: buffer, dropLogLevel: .warning, onSubscribed: { readiness.report("subscribed") })
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        let recorder = FleetRecorder(
            subscriber: subscriber, store: TrackStore(client: client, logger: logger),
            options: FleetRecorder.Options(batchSize: batchSize), logger: logger)
        logger.info("PostgreSQL", metadata: ["postgres": "\(location)"])
        do {
            try await FleetWatchServices.run(
                [
                    // Shut down last: the recorder writes what it holds through it first.
                    .init(service: client),
                    .init(service: recorder, successTerminationBehavior: .gracefullyShutdownGroup),
                ],
                readiness: readiness, status: "recording \(subscriber.filters.joined(separator: " ")) into \(location)",
                gracePeriod: .seconds(25), logger: logger)
        } catch {
            logger.error("record failed", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
    }
}
