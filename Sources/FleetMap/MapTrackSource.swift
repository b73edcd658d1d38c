import FleetCore
import FleetProtocol
import FleetcastCore
import GNSS

/// One recorded position of a vehicle, as the map draws a past track: degrees (WGS 84) and
/// the fix's UTC time.
public struct MapTrackPoint: Sendable, Equatable {
    /// Latitude, degrees, north positive.
    public var latitude: Double
    /// Longitude, degrees, east positive.
    public var longitude: Double
    /// When the fix was taken.
    public var time: UTCTimestamp

    /// A point.
    public init(latitude: Double, longitude: Double, time: UTCTimestamp) {
        self.latitude = latitude
        self.longitude = longitude
        self.time = time
    }
}

/// Where the map reads a vehicle's recorded track (`fleet-watch serve --postgres`: the track
/// history `fleet-watch record` keeps). FleetMap knows no database: the executable hands it
/// one of these.
public protocol MapTrackSource: Sendable {
    /// At most `limit` fixes of `vehicle` with `since ≤ time < until`, oldest first.
    func track(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, limit: Int) async throws -> [MapTrackPoint]

    /// `vehicle`'s trips and stops that began in `[since, until)`, oldest first, as a JSON
    /// array of the objects `fleet-watch trips --format json` writes (`kind`, `start`, `end`,
    /// positions in degrees, `distance_m`, `duration_s`, `open`).
    func trips(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp) async throws -> [UInt8]
}

extension MapTrackSource {
    /// No trips: a source that keeps only tracks.
    public func trips(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp) async throws -> [UInt8] { Array("[]".utf8) }
}

/// A request for a past track, from `/api/track`'s query, checked: the browser is untrusted.
package struct MapTrackRequest: Equatable {
    /// The vehicle.
    package var vehicle: VehicleID
    /// From (included).
    package var since: UTCTimestamp
    /// Until (excluded).
    package var until: UTCTimestamp

    /// The longest range one request may ask for: 31 days.
    package static let maximumRangeMilliseconds: Int64 = 31 * 86_400_000
    /// The most points one answer carries; a longer track is cut there and says so.
    package static let maximumPoints = 20_000

    /// Why a query was refused, for a 400 answer.
    package struct Invalid: Error, Equatable {
        var reason: String
    }

    /// Parses `vehicle`, `since` and `until` (ISO 8601 UTC).
    package init(vehicle: String?, since: String?, until: String?) throws(Invalid) {
        guard let vehicle, vehicle.utf8.count <= 64, let id = VehicleID(vehicle) else {
            throw Invalid(reason: "vehicle: a vehicle id (1 to 64 of A-Z a-z 0-9 . _ -)")
        }
        guard let sinceText = since, sinceText.utf8.count <= 40, let from = UTCTimestamp(iso8601: sinceText) else {
            throw Invalid(reason: "since: an ISO 8601 UTC time such as 2026-11-24T08:00:00Z")
        }
        guard let untilText = until, untilText.utf8.count <= 40, let to = UTCTimestamp(iso8601: untilText) else {
            throw Invalid(reason: "until: an ISO 8601 UTC time such as 2026-11-24T18:00:00Z")
        }
        guard from < to, to.millisecondsSince1970 - from.millisecondsSince1970 <= Self.maximumRangeMilliseconds else {
            throw Invalid(reason: "since must be before until, at most 31 days apart")
        }
        self.vehicle = id
        self.since = from
        self.until = to
    }

    /// `{"vehicle":…,"points":[lat,lon,t,…],"truncated":…}`: the points flat, latitude and
    /// longitude to 6 decimals (0.1 m), `t` in milliseconds since 1970; `truncated` when the
    /// source had more than ``maximumPoints`` (it was asked for one more).
    package static func json(vehicle: VehicleID, points: [MapTrackPoint]) -> [UInt8] {
        let kept = points.prefix(maximumPoints)
        var flat: [UInt8] = [UInt8(ascii: "[")]
        flat.reserveCapacity(kept.count * 40)
        for (index, point) in kept.enumerated() {
            if index > 0 { flat.append(UInt8(ascii: ",")) }
            MapJSON.appendTriplet(point.latitude, point.longitude, point.time.millisecondsSince1970, decimals: 6, to: &flat)
        }
        flat.append(UInt8(ascii: "]"))
        var w = JSONWriter(capacity: flat.count + 80)
        w.string("vehicle", vehicle.rawValue)
        w.raw("points", json: String(decoding: flat, as: UTF8.self))
        w.bool("truncated", points.count > maximumPoints)
        return w.finish()
    }
}
