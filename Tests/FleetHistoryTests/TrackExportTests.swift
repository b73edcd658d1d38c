import FleetCore
import FleetHistory
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

/// `fleet-watch history`'s formats, read back by what users open them with: GPX validated
/// against the GPX 1.1 schema by `xmllint` (libxml2), GeoJSON parsed by Foundation's JSON
/// parser and checked against RFC 7946's structure, CSV split as a spreadsheet does.
@Suite struct TrackExportTests {
    static let van = VehicleID("van-7")!

    /// A short track: a point with everything, one without altitude or satellites, one on
    /// the antimeridian (180° east, which GPX writes as −180°), one a hair off the equator
    /// (which `%g` or Swift's `description` would write in exponent form, refused by GPX).
    static let points: [TrackPoint] = [
        TrackPoint(
            seq: 41, time: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000), latitude: 48.1173, longitude: 11.5167,
            altitudeMSL: 545.4, speed: 12.5, track: 84.4, mode: 3, satellites: 8, eph: 4.2, heading: 87.3),
        TrackPoint(
            seq: 42, time: UTCTimestamp(millisecondsSince1970: 1_795_000_001_250), latitude: -33.8568, longitude: 151.2153, mode: 2,
            backlog: true),
        TrackPoint(seq: 43, time: UTCTimestamp(millisecondsSince1970: 1_795_000_002_000), latitude: -16.5, longitude: 180, mode: 3),
        TrackPoint(seq: 44, time: UTCTimestamp(millisecondsSince1970: 1_795_000_003_000), latitude: 0.00001, longitude: -0.00002, mode: 1),
    ]

    static func write(_ format: TrackFormat, _ points: [TrackPoint] = points) -> String {
        var text = ""
        var writer = TrackWriter(format: format, vehicle: van) { text += $0 }
        for point in points { writer.add(point) }
        writer.finish()
        return text
    }

    @Test func gpxValidatesAgainstTheGPX11Schema() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-gpx")
        defer { directory.remove() }
        let schema = try #require(Bundle.module.path(forResource: "gpx-1.1", ofType: "xsd", inDirectory: "Fixtures"))
        for (name, points) in [("track", Self.points), ("empty", [])] {
            let file = try directory.createFile("\(name).gpx", Self.write(.gpx, points))
            let xmllint = try TestProcess("/usr/bin/xmllint", ["--noout", "--schema", schema, file], directory: directory.path, name: name)
            let status = try await xmllint.waitForExit(timeout: .seconds(30))
            #expect(status == 0, "\(name).gpx does not validate: \(xmllint.standardError)")
            #expect(xmllint.standardError.contains("validates"), "\(xmllint.standardError)")
        }
        let text = Self.write(.gpx)
        #expect(text.contains(#"<trkpt lat="-16.5" lon="-180">"#))
        #expect(text.contains(#"<trkpt lat="0.00001" lon="-0.00002">"#))
        #expect(text.contains("<ele>545.4</ele><time>2026-11-18T11:06:40.000Z</time><fix>3d</fix><sat>8</sat>"))
        #expect(text.components(separatedBy: "<trkpt ").count == Self.points.count + 1)
    }

    @Test func gpxRefusedByTheSchemaWhenBroken() async throws {
        // The validation above can fail: the same schema refuses a longitude of 180.
        let directory = try TemporaryDirectory(prefix: "fleetcast-gpx")
        defer { directory.remove() }
        let schema = try #require(Bundle.module.path(forResource: "gpx-1.1", ofType: "xsd", inDirectory: "Fixtures"))
        let broken = Self.write(.gpx).replacingOccurrences(of: #"lon="-180""#, with: #"lon="180""#)
        let file = try directory.createFile("broken.gpx", broken)
        let xmllint = try TestProcess("/usr/bin/xmllint", ["--noout", "--schema", schema, file], directory: directory.path, name: "broken")
        #expect(try await xmllint.waitForExit(timeout: .seconds(30)) != 0)
    }

    @Test func geoJSONIsAFeatureCollectionOfPointsAndTheLine() throws {
        let text = Self.write(.geojson)
        let root = try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(root["type"] as? String == "FeatureCollection")
        let features = try #require(root["features"] as? [[String: Any]])
        #expect(features.count == Self.points.count + 1)
        let first = try #require(features.first)
        #expect(first["type"] as? String == "Feature")
        let geometry = try #require(first["geometry"] as? [String: Any])
        #expect(geometry["type"] as? String == "Point")
        // RFC 7946: longitude first, then latitude, then altitude.
        #expect(geometry["coordinates"] as? [Double] == [11.5167, 48.1173, 545.4])
        let properties = try #require(first["properties"] as? [String: Any])
        #expect(properties["vehicle"] as? String == "van-7")
        #expect(properties["seq"] as? Int == 41)
        #expect(properties["time"] as? String == "2026-11-18T11:06:40.000Z")
        #expect(properties["speed"] as? Double == 12.5)
        #expect(properties["sats"] as? Int == 8)
        #expect(properties["heading"] as? Double == 87.3, "the heading of the fix's instant")
        let line = try #require(features.last?["geometry"] as? [String: Any])
        #expect(line["type"] as? String == "LineString")
        let coordinates = try #require(line["coordinates"] as? [[Double]])
        #expect(coordinates.count == Self.points.count)
        #expect(coordinates[1] == [151.2153, -33.8568])

        let empty = try #require(JSONSerialization.jsonObject(with: Data(Self.write(.geojson, []).utf8)) as? [String: Any])
        #expect((empty["features"] as? [Any])?.isEmpty == true)
    }

    @Test func csvHasAHeaderAndOneRowPerFix() {
        let rows = Self.write(.csv).components(separatedBy: "\r\n").filter { !$0.isEmpty }.map { $0.components(separatedBy: ",") }
        #expect(rows.count == Self.points.count + 1)
        #expect(
            rows[0] == ["vehicle", "seq", "time", "lat", "lon", "alt_msl", "speed", "track", "mode", "sats", "eph", "backlog", "heading"])
        #expect(
            rows[1] == [
                "van-7", "41", "2026-11-18T11:06:40.000Z", "48.1173", "11.5167", "545.4", "12.5", "84.4", "3", "8", "4.2", "false", "87.3",
            ])
        #expect(rows[2] == ["van-7", "42", "2026-11-18T11:06:41.250Z", "-33.8568", "151.2153", "", "", "", "2", "", "", "true", ""])
        #expect(rows[4][3] == "0.00001")
    }
}
