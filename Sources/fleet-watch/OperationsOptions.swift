import ArgumentParser
import FleetOperations
import Foundation

/// The trip and stop rules of `record`, `trips` and `report`, each a flag with its default
/// (docs/operations.md says what each means and why it is what it is). `trips` and `report`
/// use them for the trip still open; give them the recorder's values.
struct TripRuleOptions: ParsableArguments {
    @Option(help: "Seconds a vehicle stays within --stop-radius before it is stopped.")
    var stopSeconds: Double = TripRules().minimumStopSeconds

    @Option(help: "Metres a parked vehicle's position may wander (GNSS jitter) and still be one stop.")
    var stopRadius: Double = TripRules().stopRadius

    @Option(help: "m/s at or below which a fix may begin a stop (walking pace).")
    var stopSpeed: Double = TripRules().stopSpeed

    @Option(help: "Metres of movement between two stops that make a trip (less: the stops merge).")
    var tripMinimum: Double = TripRules().minimumTripMetres

    @Option(help: "Seconds without a fix that end a trip.")
    var tripGap: Double = TripRules().maximumGapSeconds

    func validate() throws {
        let values = [stopSeconds, stopRadius, stopSpeed, tripMinimum, tripGap]
        guard values.allSatisfy({ $0.isFinite && $0 >= 0 }), stopSeconds > 0, stopRadius > 0, tripGap > 0 else {
            throw ValidationError(
                "--stop-seconds, --stop-radius and --trip-gap must be positive; --stop-speed and --trip-minimum not negative")
        }
    }

    var rules: TripRules {
        var rules = TripRules()
        rules.minimumStopSeconds = stopSeconds
        rules.stopRadius = stopRadius
        rules.stopSpeed = stopSpeed
        rules.minimumTripMetres = tripMinimum
        rules.maximumGapSeconds = tripGap
        return rules
    }
}

/// `--zones FILE` of `record` and `bridge`: the zones whose enter and exit events they derive.
struct ZoneOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A GeoJSON file of zones: Polygons, and Points with a \"radius\" in metres, each named by a \"name\" property.",
            valueName: "file"))
    var zones: String?

    @Option(help: "Metres a vehicle must be inside a zone to enter it, and outside to leave it (no flapping at the boundary).")
    var zoneHysteresis: Double = 15

    func validate() throws {
        guard zoneHysteresis.isFinite, (0...1_000).contains(zoneHysteresis) else {
            throw ValidationError("--zone-hysteresis must be 0 to 1000 metres")
        }
    }

    /// The zones file read and checked, or nil without --zones; a usage error naming the file
    /// and what is wrong in it.
    func load() throws -> ZoneSet? {
        guard let zones else { return nil }
        let limit = ZoneSet.Limits().bytes
        guard let handle = FileHandle(forReadingAtPath: zones) else { throw ValidationError("--zones \(zones): cannot be read") }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: limit + 1)) ?? Data()
        do {
            return try ZoneSet.parse([UInt8](data))
        } catch {
            throw ValidationError("--zones \(zones): \(error)")
        }
    }
}
