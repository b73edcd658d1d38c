import FleetcastTestSupport
import GNSS

@testable import FleetOperations

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A drive at 1 Hz: each leg a heading (degrees), a length (m) and a speed (m/s), each stop a
/// duration (s) with about `jitter` metres of position noise.
struct GeneratedDrive {
    enum Part {
        case leg(bearing: Double, metres: Double, speed: Double)
        case stop(seconds: Int)
    }

    var points: [TripPoint] = []
    private var north = 0.0
    private var east = 0.0
    private var second = 0
    private var random = SplitMix64(seed: 34)
    let jitter: Double
    /// Where the drive starts, degrees.
    static let origin = (latitude: 53.55, longitude: 9.99)

    init(_ parts: [Part], jitter: Double = 3) {
        self.jitter = jitter
        for part in parts {
            switch part {
            case .leg(let bearing, let metres, let speed):
                let steps = Int((metres / speed).rounded())
                let radians = bearing * Double.pi / 180
                for _ in 0..<steps {
                    north += cos(radians) * speed
                    east += sin(radians) * speed
                    add(noise: 1, speed: speed)
                }
            case .stop(let seconds):
                for _ in 0..<seconds { add(noise: jitter, speed: Double.random(in: 0...0.4, using: &random)) }
            }
        }
    }

    private mutating func add(noise: Double, speed: Double) {
        second += 1
        let angle = Double.random(in: 0..<(2 * Double.pi), using: &random)
        let radius = Double.random(in: 0...noise, using: &random)
        let position = Self.coordinate(north: north + radius * cos(angle), east: east + radius * sin(angle))
        points.append(
            TripPoint(time: Fixes.time(Double(second)), latitude: position.latitude, longitude: position.longitude, speed: speed))
    }

    /// The position `north` and `east` metres from the start.
    static func coordinate(north: Double, east: Double) -> Zone.Coordinate {
        let metresPerDegree = earthMeanRadiusMetres * Double.pi / 180
        let latitude = origin.latitude + north / metresPerDegree
        return Zone.Coordinate(
            latitude: latitude, longitude: origin.longitude + east / (metresPerDegree * cos(latitude * Double.pi / 180)))
    }
}
