import ArgumentParser
import FleetHistory
import FleetcastCore
import Foundation
import Logging
import PostgresNIO

/// `--postgres` and `--postgres-password-file`, shared by `record`, `history` and `gaps`: the
/// track history's database. A password in the URL is refused; see
/// ``PostgresPasswordOptions`` for where it comes from instead (`serve --postgres` follows the
/// same rules).
struct PostgresOptions: ParsableArguments {
    @Option(
        help:
            "The database: postgres://[user@]host[:port]/database[?sslmode=disable|prefer|require|verify-full] (no password: see --postgres-password-file)."
    )
    var postgres: String

    @OptionGroup var password: PostgresPasswordOptions

    func validate() throws {
        try PostgresPasswordOptions.check(url: postgres)
    }

    /// The database, with its password from `--postgres-password-file`, `PGPASSWORD` or the
    /// libpq password file; warnings about that file go to `logger`.
    func location(logger: Logger) throws -> PostgresLocation {
        try password.location(url: postgres, environment: ProcessInfo.processInfo.environment, logger: logger)
    }

    /// PostgreSQL did not accept a connection and answer `SELECT 1` within the time given.
    struct ConnectTimeout: Error, CustomStringConvertible {
        /// The database (its description has no password).
        let location: PostgresLocation
        /// How long it was given.
        let limit: Duration

        var description: String {
            let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
            let shown = seconds == seconds.rounded() ? String(Int64(seconds)) : String(seconds)
            return "no answer from \(location) within \(shown) s (--connect-timeout); the log says why"
        }
    }

    /// Runs `body` with a ``TrackStore`` on a client to `location`; the client runs beside it
    /// and stops when it returns. With `connectTimeout`, the server must first answer a
    /// `SELECT 1` within that long, or ``ConnectTimeout`` is thrown: the client otherwise retries
    /// an unreachable server for a minute before its circuit breaker gives up.
    static func withTrackStore<Result>(
        at location: PostgresLocation, logger: Logger, connectTimeout: Duration? = nil, _ body: (TrackStore) async throws -> Result
    ) async throws -> Result {
        let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            let store = TrackStore(client: client, logger: logger)
            if let connectTimeout {
                guard try await withTimeLimit(connectTimeout, { try await store.ping() }) != nil else {
                    throw ConnectTimeout(location: location, limit: connectTimeout)
                }
            }
            return try await body(store)
        }
    }
}
