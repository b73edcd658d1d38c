import FleetProtocol
import FleetcastCore
import Foundation
import GNSS

/// The formats `fleet-watch history` writes a track in, for the tools people open tracks with.
public enum TrackFormat: String, Sendable, CaseIterable {
    /// RFC 7946 GeoJSON (QGIS, geojson.io, Leaflet): a FeatureCollection with the track as
    /// one `LineString` (`[lon, lat]` or `[lon, lat, alt]`, degrees and metres) and one
    /// `Point` per fix carrying `seq`, `time`, `speed` (m/s), `track` (degrees), `mode`,
    /// `sats`, `eph` (m), `heading` (degrees true, where known) and `backlog`.
    case geojson
    /// GPX 1.1 (GPX viewers, Garmin BaseCamp, GPSBabel): one `trk` with one `trkseg`; each
    /// `trkpt` has `ele` (m above mean sea level), `time`, `fix` and `sat`. GPX 1.1 has no
    /// speed or course outside extensions, so they are left out.
    case gpx
    /// RFC 4180 CSV with a header row (spreadsheets): `vehicle,seq,time,lat,lon,alt_msl,
    /// speed,track,mode,sats,eph,backlog,heading` (`heading` last, so that the columns before it
    /// stand where they stood).
    case csv
}

/// Writes a track point by point in a ``TrackFormat``, handing the text to `output` in pieces
/// (so a long track is never one string in memory; GeoJSON keeps the line's coordinates,
/// about 32 bytes a fix — 2.8 MB for a day at 1 Hz — to write them after the points).
///
/// ```swift
/// var writer = TrackWriter(format: .gpx, vehicle: van) { FileHandle.standardOutput.write(Data($0.utf8)) }
/// try await store.track(vehicle: van, since: t1, until: t2) { writer.add($0) }
/// writer.finish()
/// ```
public struct TrackWriter {
    /// The format written.
    public let format: TrackFormat
    /// The vehicle of the track.
    public let vehicle: VehicleID
    /// Points added so far.
    public private(set) var count = 0
    private let output: (String) -> Void
    private var coordinates: [(longitude: Double, latitude: Double, altitude: Double?)] = []

    /// A writer; the header is written at once.
    public init(format: TrackFormat, vehicle: VehicleID, output: @escaping (String) -> Void) {
        self.format = format
        self.vehicle = vehicle
        self.output = output
        switch format {
        case .geojson:
            output(#"{"type":"FeatureCollection","features":["# + "\n")
        case .gpx:
            let name = Self.xmlEscaped(vehicle.rawValue)
            output(
                """
                <?xml version="1.0" encoding="UTF-8"?>
                <gpx version="1.1" creator="Fleetcast fleet-watch" xmlns="http://www.topografix.com/GPX/1/1" \
                xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" \
                xsi:schemaLocation="http://www.topografix.com/GPX/1/1 http://www.topografix.com/GPX/1/1/gpx.xsd">
                <metadata><name>\(name)</name></metadata>
                <trk><name>\(name)</name><trkseg>

                """)
        case .csv:
            output("vehicle,seq,time,lat,lon,alt_msl,speed,track,mode,sats,eph,backlog,heading\r\n")
        }
    }

    /// Writes one point.
    public mutating func add(_ point: TrackPoint) {
        switch format {
        case .geojson:
            var w = JSONWriter(capacity: 256)
            w.string("type", "Feature")
            w.object("geometry") { g in
                g.string("type", "Point")
                g.raw("coordinates", json: Self.coordinates(point))
            }
            w.object("properties") { p in
                p.string("vehicle", vehicle.rawValue)
                p.int("seq", point.seq)
                p.time("time", point.time)
                p.number("speed", point.speed, decimals: 2)
                p.number("track", point.track, decimals: 1)
                p.int("mode", point.mode)
                p.int("sats", point.satellites)
                p.number("eph", point.eph, decimals: 1)
                p.number("heading", point.heading, decimals: 1)
                p.bool("backlog", point.backlog)
            }
            output((count > 0 ? ",\n" : "") + String(decoding: w.finish(), as: UTF8.self))
            coordinates.append((point.longitude, point.latitude, point.altitudeMSL))
        case .gpx:
            var line = #"<trkpt lat="\#(Self.decimal(point.latitude, 7))" lon="\#(Self.decimal(Self.gpxLongitude(point.longitude), 7))">"#
            if let altitude = point.altitudeMSL, altitude.isFinite { line += "<ele>\(Self.decimal(altitude, 2))</ele>" }
            line += "<time>\(point.time.iso8601)</time>"
            line += "<fix>\(point.mode >= 3 ? "3d" : point.mode == 2 ? "2d" : "none")</fix>"
            if let satellites = point.satellites, satellites >= 0 { line += "<sat>\(satellites)</sat>" }
            output(line + "</trkpt>\n")
        case .csv:
            let fields: [String] = [
                vehicle.rawValue, "\(point.seq)", point.time.iso8601, Self.decimal(point.latitude, 7), Self.decimal(point.longitude, 7),
                point.altitudeMSL.map { Self.decimal($0, 2) } ?? "", point.speed.map { Self.decimal($0, 2) } ?? "",
                point.track.map { Self.decimal($0, 1) } ?? "", "\(point.mode)", point.satellites.map { "\($0)" } ?? "",
                point.eph.map { Self.decimal($0, 1) } ?? "", point.backlog ? "true" : "false",
                point.heading.map { Self.decimal($0, 1) } ?? "",
            ]
            output(fields.joined(separator: ",") + "\r\n")
        }
        count += 1
    }

    /// Writes the end: the GeoJSON line and closing brackets, GPX's closing tags.
    public mutating func finish() {
        switch format {
        case .geojson:
            if coordinates.count >= 2 {
                var w = JSONWriter(capacity: 64 + coordinates.count * 40)
                w.string("type", "Feature")
                w.object("geometry") { g in
                    g.string("type", "LineString")
                    g.raw(
                        "coordinates",
                        json: "[" + coordinates.map { Self.coordinates($0.longitude, $0.latitude, $0.altitude) }.joined(separator: ",")
                            + "]")
                }
                w.object("properties") { p in
                    p.string("vehicle", vehicle.rawValue)
                    p.int("points", coordinates.count)
                }
                output((count > 0 ? ",\n" : "") + String(decoding: w.finish(), as: UTF8.self))
            }
            output("\n]}\n")
            coordinates = []
        case .gpx:
            output("</trkseg></trk>\n</gpx>\n")
        case .csv:
            break
        }
    }

    private static func coordinates(_ point: TrackPoint) -> String {
        coordinates(point.longitude, point.latitude, point.altitudeMSL)
    }

    /// `[lon,lat]` or `[lon,lat,alt]`, as RFC 7946 orders them.
    private static func coordinates(_ longitude: Double, _ latitude: Double, _ altitude: Double?) -> String {
        var text = "[\(decimal(longitude, 7)),\(decimal(latitude, 7))"
        if let altitude, altitude.isFinite { text += ",\(decimal(altitude, 2))" }
        return text + "]"
    }

    /// GPX's longitude is in [-180, 180): 180° is written as -180°, the same meridian.
    package static func gpxLongitude(_ longitude: Double) -> Double { longitude >= 180 ? longitude - 360 : longitude }

    /// `value` with at most `decimals` decimals, trailing zeros dropped, never in exponent
    /// form (which GPX's `xsd:decimal` refuses). Not the contract's `JSONWriter.appendNumber`:
    /// that one, tuned for the agent's hot path, writes small values as `Double.description`
    /// does (`1e-07`), valid JSON but not a GPX decimal.
    package static func decimal(_ value: Double, _ decimals: Int) -> String {
        guard value.isFinite else { return "0" }
        var text = String(format: "%.\(decimals)f", value)
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        if text == "-0" { text = "0" }
        return text
    }

    /// `text` as XML character data or an attribute value.
    package static func xmlEscaped(_ text: String) -> String {
        text.escaping(["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&apos;"])
    }
}
