import FleetOperations
import FleetcastTestSupport

extension GeneratedDrive {
    /// The drive as the trip detector reads it.
    var points: [TripPoint] {
        samples.map { TripPoint(time: $0.time, latitude: $0.latitude, longitude: $0.longitude, speed: $0.speed) }
    }

    /// The position `north` and `east` metres from the start.
    static func coordinate(north: Double, east: Double) -> Zone.Coordinate {
        let (latitude, longitude) = position(north: north, east: east)
        return Zone.Coordinate(latitude: latitude, longitude: longitude)
    }
}
