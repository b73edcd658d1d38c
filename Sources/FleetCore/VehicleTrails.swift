import FleetProtocol
import GNSS

/// The recent track of each vehicle, drawn as a trail behind its marker: at most
/// ``maximumPoints`` positions per vehicle over the last ``window``, spaced at least
/// `window / maximumPoints` apart by fix time, so a vehicle at 10 Hz keeps as few points as
/// one at 0.2 Hz and a snapshot of thousands of vehicles stays small.
package struct VehicleTrails: Sendable {
    /// One kept position: fix time (ms since 1970, UTC) and degrees.
    package struct Point: Sendable, Equatable {
        package var millisecondsSince1970: Int64
        package var latitude: Double
        package var longitude: Double
    }

    /// The most points kept per vehicle.
    package static let maximumPoints = 60

    /// How far back a trail reaches, by fix time.
    package let window: Duration
    private let windowMilliseconds: Int64
    private let spacingMilliseconds: Int64
    private var trails: [VehicleID: [Point]] = [:]

    package init(window: Duration) {
        self.window = window
        let ms = max(Int64(1000), window.components.seconds * 1000 + window.components.attoseconds / 1_000_000_000_000_000)
        windowMilliseconds = ms
        spacingMilliseconds = ms / Int64(Self.maximumPoints)
    }

    /// The vehicles with a trail.
    package var count: Int { trails.count }

    /// The trail of `vehicle`, oldest first.
    package subscript(vehicle: VehicleID) -> [Point] { trails[vehicle] ?? [] }

    /// Records a live fix: appended when it is newer than the last point by the spacing, and
    /// points older than the window (counted back from this fix) are forgotten.
    package mutating func record(_ fix: Fix, of vehicle: VehicleID) {
        let ms = fix.time.millisecondsSince1970
        var points = trails.removeValue(forKey: vehicle) ?? []
        if let last = points.last, ms < last.millisecondsSince1970 + spacingMilliseconds {
            // Too close to the last point (or older): the marker shows it, the trail does not.
            trails[vehicle] = points
            return
        }
        let horizon = ms - windowMilliseconds
        if let keep = points.firstIndex(where: { $0.millisecondsSince1970 >= horizon }) {
            points.removeFirst(keep)
        } else {
            points.removeAll(keepingCapacity: true)
        }
        points.append(Point(millisecondsSince1970: ms, latitude: fix.latitude, longitude: fix.longitude))
        if points.count > Self.maximumPoints { points.removeFirst(points.count - Self.maximumPoints) }
        trails[vehicle] = points
    }

    /// Forgets the trails of vehicles for which `keep` is false (those the fleet state evicted).
    package mutating func prune(keeping keep: (VehicleID) -> Bool) {
        trails = trails.filter { keep($0.key) }
    }
}
