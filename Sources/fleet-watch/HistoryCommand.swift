import ArgumentParser
import FleetCore
import FleetHistory
import FleetProtocol
import Foundation
import GNSS
import Logging

/// `fleet-watch history --postgres … --vehicle V`: writes a vehicle's recorded track as
/// GeoJSON, GPX 1.1 or CSV, for QGIS, GPX viewers and spreadsheets.
struct HistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Writes a vehicle's recorded track from PostgreSQL as GeoJSON, GPX or CSV.",
        discussion: """
            Reads what `fleet-watch record` wrote. Times are UTC, ISO 8601 \
            (2026-11-24T08:00:00Z); the range includes --since and excludes --until. --until \
            defaults to now, --since to 24 hours before --until. The \
            PostgreSQL password comes from --postgres-password-file, PGPASSWORD or a libpq \
            password file (PGPASSFILE), never the URL.
            """
    )

    @OptionGroup var database: PostgresOptions

    @OptionGroup var vehicle: VehicleOption

    @OptionGroup var range: TimeRangeOptions

    @Option(help: "geojson, gpx or csv.")
    var format: TrackFormat = .geojson

    @Option(name: .shortAndLong, help: "Write to this file instead of standard output.")
    var output: String?

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        let (from, to) = try track()
        guard from < to else {
            throw ValidationError(range.until == nil ? "--since must be before now (--until's default)" : "--since must be before --until")
        }
    }

    /// The range to write: `--until` or now, `--since` or 24 hours before that.
    private func track() throws -> (UTCTimestamp, UTCTimestamp) {
        let (since, until) = try range.bounds()
        let to = until ?? UTCTimestamp.wallClockNow
        return (since ?? UTCTimestamp(millisecondsSince1970: to.millisecondsSince1970 - 86_400_000), to)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let location = try database.location(logger: logger)
        let vehicle = try self.vehicle.id
        let (from, to) = try track()

        let handle: FileHandle
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw ValidationError("cannot create --output \(output)")
            }
            handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        } else {
            handle = FileHandle.standardOutput
        }
        let count = try await PostgresOptions.withTrackStore(at: location, logger: logger) { store in
            var pending = ""
            var writer = TrackWriter(format: format, vehicle: vehicle) { text in
                pending += text
                if pending.utf8.count >= 64 * 1024 {
                    handle.write(Data(pending.utf8))
                    pending = ""
                }
            }
            do {
                try await store.track(vehicle: vehicle, since: from, until: to) { writer.add($0) }
            } catch {
                logger.error("cannot read the track", metadata: ["postgres": "\(location)", "error": "\(describePostgresError(error))"])
                throw ExitCode.failure
            }
            writer.finish()
            handle.write(Data(pending.utf8))
            return writer.count
        }
        try? handle.synchronize()
        logger.info("Track written", metadata: ["vehicle": "\(vehicle)", "points": "\(count)"])
    }
}

extension TrackFormat: ExpressibleByArgument {}
