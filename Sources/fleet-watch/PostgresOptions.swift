import ArgumentParser
import FleetHistory
import Foundation
import Logging
import PostgresNIO

/// `--postgres`, shared by `record`, `history` and `gaps`: the track history's database.
struct PostgresOptions: ParsableArguments {
    @Option(help: "The database: postgres://[user@]host[:port]/database[?sslmode=disable|prefer|require|verify-full].")
    var postgres: String

    func validate() throws {
        do { _ = try PostgresLocation(parsing: postgres) } catch { throw ValidationError(error.description) }
    }

    /// The database, with the password from the environment (PGPASSWORD) when the URL has none.
    func location() throws -> PostgresLocation {
        try PostgresLocation(parsing: postgres, environment: ProcessInfo.processInfo.environment)
    }

    /// Runs `body` with a ``TrackStore`` on a client to `location`; the client runs beside it
    /// and stops when it returns.
    static func withTrackStore<Result>(
        at location: PostgresLocation, logger: Logger, _ body: (TrackStore) async throws -> Result
    ) async throws -> Result {
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await body(TrackStore(client: client, logger: logger))
        }
    }
}
