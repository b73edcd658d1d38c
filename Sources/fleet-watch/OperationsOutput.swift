import FleetHistory
import FleetOperations
import Foundation
import GNSS
import JSONEscaping

/// How `fleet-watch trips`, `zone-events` and `report` write: an aligned table, JSON lines
/// (one object a line, snake_case keys with their unit: `distance_m`, `duration_s`,
/// `max_speed_mps`), or CSV with a header (RFC 4180 quoting).
package enum OperationsFormat: String, CaseIterable, Sendable {
    case text, json, csv
}

/// The lines those commands write, without a trailing newline. Text from outside (zone names)
/// is escaped for the terminal, JSON and CSV; times are ISO 8601 UTC with milliseconds.
package enum OperationsOutput {
    /// A trip or stop a line. A JSON trip: `kind` ("trip"), `vehicle`, `start`, `end`,
    /// `start_lat`, `start_lon`, `end_lat`, `end_lon`, `distance_m`, `duration_s`,
    /// `max_speed_mps`, `avg_speed_mps`, and `open` (true for one still in progress). A stop:
    /// `kind` ("stop"), `vehicle`, `start`, `end`, `lat`, `lon`, `duration_s`, `open`.
    package static func trips(vehicle: String, _ segments: [ListedSegment], format: OperationsFormat) -> [String] {
        switch format {
        case .json:
            return segments.map { listed in
                switch listed.segment {
                case .trip(let trip):
                    return object([
                        ("kind", quoted("trip")), ("vehicle", quoted(vehicle)), ("start", quoted(trip.start.time.iso8601)),
                        ("end", quoted(trip.end.time.iso8601)), ("start_lat", degrees(trip.start.latitude)),
                        ("start_lon", degrees(trip.start.longitude)), ("end_lat", degrees(trip.end.latitude)),
                        ("end_lon", degrees(trip.end.longitude)), ("distance_m", fixed(trip.distanceMetres, 1)),
                        ("duration_s", fixed(trip.durationSeconds, 3)), ("max_speed_mps", fixed(trip.maximumSpeed, 2)),
                        ("avg_speed_mps", fixed(trip.averageSpeed, 2)), ("open", "\(listed.open)"),
                    ])
                case .stop(let stop):
                    return object([
                        ("kind", quoted("stop")), ("vehicle", quoted(vehicle)), ("start", quoted(stop.start.iso8601)),
                        ("end", quoted(stop.end.time.iso8601)), ("lat", degrees(stop.position.latitude)),
                        ("lon", degrees(stop.position.longitude)), ("duration_s", fixed(stop.durationSeconds, 3)),
                        ("open", "\(listed.open)"),
                    ])
                }
            }
        case .csv:
            let header = "kind,vehicle,start,end,start_lat,start_lon,end_lat,end_lon,distance_m,duration_s,max_speed_mps,avg_speed_mps,open"
            return [header]
                + segments.map { listed in
                    switch listed.segment {
                    case .trip(let trip):
                        return [
                            "trip", csv(vehicle), trip.start.time.iso8601, trip.end.time.iso8601, degrees(trip.start.latitude),
                            degrees(trip.start.longitude), degrees(trip.end.latitude), degrees(trip.end.longitude),
                            fixed(trip.distanceMetres, 1), fixed(trip.durationSeconds, 3), fixed(trip.maximumSpeed, 2),
                            fixed(trip.averageSpeed, 2), "\(listed.open)",
                        ].joined(separator: ",")
                    case .stop(let stop):
                        return [
                            "stop", csv(vehicle), stop.start.iso8601, stop.end.time.iso8601, degrees(stop.position.latitude),
                            degrees(stop.position.longitude), degrees(stop.position.latitude), degrees(stop.position.longitude), "0",
                            fixed(stop.durationSeconds, 3), "", "", "\(listed.open)",
                        ].joined(separator: ",")
                    }
                }
        case .text:
            var lines = [row("KIND", "START", "END", "DURATION", "DISTANCE", "MAX SPEED", "WHERE")]
            for listed in segments {
                let open = listed.open ? " (open)" : ""
                switch listed.segment {
                case .trip(let trip):
                    lines.append(
                        row(
                            "trip" + open, trip.start.time.iso8601, trip.end.time.iso8601, duration(trip.durationSeconds),
                            fixed(trip.distanceMetres / 1000, 2) + " km", fixed(trip.maximumSpeed * 3.6, 0) + " km/h",
                            degrees(trip.start.latitude) + "," + degrees(trip.start.longitude) + " -> " + degrees(trip.end.latitude) + ","
                                + degrees(trip.end.longitude)))
                case .stop(let stop):
                    lines.append(
                        row(
                            "stop" + open, stop.start.iso8601, stop.end.time.iso8601, duration(stop.durationSeconds), "", "",
                            degrees(stop.position.latitude) + "," + degrees(stop.position.longitude)))
                }
            }
            return lines
        }
    }

    /// A zone event a line: `vehicle`, `zone`, `event` ("enter" or "exit"), `time`, `lat`, `lon`.
    package static func zoneEvents(_ events: [StoredZoneEvent], format: OperationsFormat) -> [String] {
        switch format {
        case .json:
            return events.map { zoneEventJSON($0) }
        case .csv:
            return ["vehicle,zone,event,time,lat,lon"]
                + events.map {
                    [csv($0.vehicle), csv($0.zone), $0.kind.rawValue, $0.time.iso8601, degrees($0.latitude), degrees($0.longitude)]
                        .joined(separator: ",")
                }
        case .text:
            return [row("TIME", "VEHICLE", "EVENT", "ZONE", "WHERE")]
                + events.map {
                    row(
                        $0.time.iso8601, JSONString.escaped($0.vehicle), $0.kind.rawValue, JSONString.escaped($0.zone),
                        degrees($0.latitude) + "," + degrees($0.longitude))
                }
        }
    }

    /// A zone event as one JSON object: also the payload published on `fleetcast/zones/{vehicle}`
    /// (with `v`: 1).
    package static func zoneEventJSON(_ event: StoredZoneEvent, version: Bool = false) -> String {
        object(
            (version ? [("v", "1")] : []) + [
                ("vehicle", quoted(event.vehicle)), ("zone", quoted(event.zone)), ("event", quoted(event.kind.rawValue)),
                ("time", quoted(event.time.iso8601)), ("lat", degrees(event.latitude)), ("lon", degrees(event.longitude)),
            ])
    }

    /// A vehicle's day a line: `vehicle`, `day`, `trips`, `distance_m`, `driving_s`,
    /// `stopped_s`, `max_speed_mps`, `zones` (the zones entered, in order).
    package static func report(day: String, _ reports: [(vehicle: String, report: DailyReport)], format: OperationsFormat) -> [String] {
        switch format {
        case .json:
            return reports.map { vehicle, report in
                object([
                    ("vehicle", quoted(vehicle)), ("day", quoted(day)), ("trips", "\(report.trips)"),
                    ("distance_m", fixed(report.distanceMetres, 1)), ("driving_s", fixed(report.drivingSeconds, 0)),
                    ("stopped_s", fixed(report.stoppedSeconds, 0)), ("max_speed_mps", fixed(report.maximumSpeed, 2)),
                    ("zones", "[" + report.zonesVisited.map(quoted).joined(separator: ",") + "]"),
                ])
            }
        case .csv:
            return ["vehicle,day,trips,distance_m,driving_s,stopped_s,max_speed_mps,zones"]
                + reports.map { vehicle, report in
                    [
                        csv(vehicle), day, "\(report.trips)", fixed(report.distanceMetres, 1), fixed(report.drivingSeconds, 0),
                        fixed(report.stoppedSeconds, 0), fixed(report.maximumSpeed, 2), csv(report.zonesVisited.joined(separator: ";")),
                    ].joined(separator: ",")
                }
        case .text:
            return [row("VEHICLE", "TRIPS", "DISTANCE", "DRIVING", "STOPPED", "MAX SPEED", "ZONES")]
                + reports.map { vehicle, report in
                    row(
                        JSONString.escaped(vehicle), "\(report.trips)", fixed(report.distanceMetres / 1000, 2) + " km",
                        duration(report.drivingSeconds), duration(report.stoppedSeconds), fixed(report.maximumSpeed * 3.6, 0) + " km/h",
                        report.zonesVisited.map(JSONString.escaped).joined(separator: ", "))
                }
        }
    }

    private static func object(_ fields: [(String, String)]) -> String {
        "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    private static func quoted(_ text: String) -> String { JSONString.quoted(text) }

    private static func fixed(_ value: Double, _ decimals: Int) -> String {
        String(format: "%.\(decimals)f", value.isFinite ? value : 0)
    }

    private static func degrees(_ value: Double) -> String { fixed(value, 7) }

    /// A CSV field: quoted when it holds a comma, quote or line break (RFC 4180); control
    /// characters escaped as for JSON, and a leading `=`, `+`, `-` or `@` prefixed with `'` so a
    /// spreadsheet does not take a zone's name for a formula.
    private static func csv(_ text: String) -> String {
        var field = JSONString.escaped(text).replacingOccurrences(of: "\\\"", with: "\"")
        if let first = field.first, "=+-@".contains(first) { field = "'" + field }
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// `h:mm:ss`.
    private static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60)
    }

    private static func row(_ columns: String...) -> String {
        let widths = [25, 24, 24, 9, 9, 10]
        return columns.enumerated().map { index, text in
            index < widths.count ? text.padding(toLength: max(widths[index], text.count), withPad: " ", startingAt: 0) : text
        }.joined(separator: " ")
    }
}
