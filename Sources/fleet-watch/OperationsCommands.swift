import ArgumentParser
import FleetCore
import FleetHistory
import FleetOperations
import FleetProtocol
import Foundation
import GNSS
import Logging

extension OperationsFormat: ExpressibleByArgument {}

/// Lines to standard output, in writes of up to 64 KiB.
private func writeLines(_ lines: [String]) {
    var pending = ""
    for line in lines {
        pending += line
        pending += "\n"
        if pending.utf8.count >= 64 * 1024 {
            FileHandle.standardOutput.write(Data(pending.utf8))
            pending = ""
        }
    }
    FileHandle.standardOutput.write(Data(pending.utf8))
}

/// The range of `trips` and `zone-events`: `--until` or now, `--since` or 24 hours before.
private func operationsRange(_ options: TimeRangeOptions) throws -> (UTCTimestamp, UTCTimestamp) {
    let (since, until) = try options.bounds()
    let to = until ?? UTCTimestamp.wallClockNow
    let from = since ?? UTCTimestamp(millisecondsSince1970: to.millisecondsSince1970 - 86_400_000)
    guard from < to else {
        throw ValidationError(options.until == nil ? "--since must be before now (--until's default)" : "--since must be before --until")
    }
    return (from, to)
}

/// Runs `body` on the store, naming PostgreSQL's error and failing the command when it cannot.
private func reading<T>(
    _ database: PostgresOptions, _ logger: Logger, what: String, _ body: (TrackStore) async throws -> T
) async throws -> T {
    let location = try database.location(logger: logger)
    return try await PostgresOptions.withTrackStore(at: location, logger: logger) { store in
        do {
            return try await body(store)
        } catch {
            logger.error("cannot read \(what)", metadata: ["postgres": "\(location)", "error": "\(describePostgresError(error))"])
            throw ExitCode.failure
        }
    }
}

/// `fleet-watch trips --postgres … --vehicle V`: a vehicle's trips and stops.
struct TripsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trips",
        abstract: "Lists a vehicle's trips and stops from PostgreSQL, as text, JSON lines or CSV.",
        discussion: """
            Reads what `fleet-watch record` derived from the fixes it stored, and, after the \
            vehicle's last stored trip, derives the rest from its fixes with the rules given \
            here (give the recorder's): the last trip or stop is marked open while it goes on. \
            A trip or stop is listed when it began in the range; --until defaults to now, \
            --since to 24 hours before --until. JSON lines: "kind" ("trip" or "stop"), \
            "distance_m", "duration_s" and the rest as docs/operations.md says.
            """
    )

    @OptionGroup var database: PostgresOptions

    @OptionGroup var vehicle: VehicleOption

    @OptionGroup var range: TimeRangeOptions

    @Option(help: "text, json or csv.")
    var format: OperationsFormat = .text

    @OptionGroup var tripRules: TripRuleOptions

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        _ = try operationsRange(range)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let vehicle = try self.vehicle.id
        let (from, to) = try operationsRange(range)
        let rules = tripRules.rules
        let listed = try await reading(database, logger, what: "the trips") { store in
            try await store.listSegments(vehicle: vehicle, since: from, until: to, rules: rules)
        }
        writeLines(OperationsOutput.trips(vehicle: vehicle.rawValue, listed, format: format))
    }
}

/// `fleet-watch zone-events --postgres … [--vehicle V]`: the zone events `record --zones` stored.
struct ZoneEventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zone-events",
        abstract: "Lists the zone enter and exit events `record --zones` stored, as text, JSON lines or CSV.",
        discussion: """
            Every vehicle's, or --vehicle's, in time order. --until defaults to now, --since to \
            24 hours before --until. JSON lines: "vehicle", "zone", "event" ("enter" or \
            "exit"), "time", "lat", "lon".
            """
    )

    @OptionGroup var database: PostgresOptions

    @OptionGroup var only: VehicleFilterOption

    @OptionGroup var range: TimeRangeOptions

    @Option(help: "text, json or csv.")
    var format: OperationsFormat = .text

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        _ = try operationsRange(range)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let (from, to) = try operationsRange(range)
        let events = try await reading(database, logger, what: "the zone events") { store in
            try await store.zoneEvents(vehicle: only.vehicle, since: from, until: to)
        }
        writeLines(OperationsOutput.zoneEvents(events, format: format))
    }
}

/// `fleet-watch report --postgres … --day YYYY-MM-DD`: each vehicle's day.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "A day's summary per vehicle: distance, driving and stopped time, trips, maximum speed, zones visited.",
        discussion: """
            The day is UTC. A vehicle is reported when it has a fix stored that day; a trip or \
            stop counts, whole, on the day it began. JSON lines: "vehicle", "day", "trips", \
            "distance_m", "driving_s", "stopped_s", "max_speed_mps", "zones".
            """
    )

    @OptionGroup var database: PostgresOptions

    @Option(help: "The day, YYYY-MM-DD (UTC).")
    var day: String

    @OptionGroup var only: VehicleFilterOption

    @Option(help: "text, json or csv.")
    var format: OperationsFormat = .text

    @OptionGroup var tripRules: TripRuleOptions

    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        _ = try bounds()
    }

    private func bounds() throws -> (UTCTimestamp, UTCTimestamp) {
        guard day.utf8.count == 10, let start = UTCTimestamp(iso8601: day + "T00:00:00Z"), start.iso8601.hasPrefix(day) else {
            throw ValidationError("--day \(day.prefix(20)): expected YYYY-MM-DD")
        }
        return (start, UTCTimestamp(millisecondsSince1970: start.millisecondsSince1970 + 86_400_000))
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let (start, end) = try bounds()
        let rules = tripRules.rules
        let reports = try await reading(database, logger, what: "the day") { store in
            var vehicles = only.vehicle.map { [$0] } ?? []
            if only.vehicle == nil { vehicles = try await store.vehicles(since: start, until: end) }
            var reports: [(vehicle: String, report: DailyReport)] = []
            for name in vehicles {
                // An id this build would not accept (stored by another) is left out, not fatal.
                guard let id = try? VehicleID(validating: name) else { continue }
                let listed = try await store.listSegments(vehicle: id, since: start, until: end, rules: rules)
                var trips: [Trip] = []
                var stops: [Stop] = []
                for item in listed {
                    switch item.segment {
                    case .trip(let trip): trips.append(trip)
                    case .stop(let stop): stops.append(stop)
                    }
                }
                let events = try await store.zoneEvents(vehicle: name, since: start, until: end).map {
                    ZoneEvent(zone: $0.zone, kind: $0.kind, point: TripPoint(time: $0.time, latitude: $0.latitude, longitude: $0.longitude))
                }
                reports.append((name, DailyReport(trips: trips, stops: stops, zoneEvents: events, from: start, to: end)))
            }
            return reports
        }
        writeLines(OperationsOutput.report(day: day, reports, format: format))
    }
}
