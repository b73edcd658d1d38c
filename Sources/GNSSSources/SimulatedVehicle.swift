import GNSS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A vehicle driving laps of a closed route: it accelerates on straights up to its
/// cruising speed, brakes before corners to take them slowly, and its position is
/// integrated from speed along the heading of the leg it is on. Pure and deterministic.
public struct SimulatedVehicle: Sendable {
    /// Route corners east/north of the start, metres: a 1.2 km × 0.8 km loop with a dog-leg
    /// (about 4.2 km a lap).
    public static let route: [(east: Double, north: Double)] = [
        (0, 0), (1200, 0), (1200, 500), (900, 800), (0, 800),
    ]
    /// Acceleration on straights, m/s².
    public static let acceleration = 1.5
    /// Braking deceleration before corners, m/s².
    public static let braking = 2.5
    /// Speed through corners, m/s.
    public static let cornerSpeed = 5.0

    /// Cruising speed, m/s.
    public let cruiseSpeed: Double
    /// Latitude and longitude of the route's start, degrees.
    public let originLatitude: Double, originLongitude: Double
    /// Current speed, m/s.
    public private(set) var speed = 0.0
    /// Which leg the vehicle is on (index of its start corner).
    public private(set) var leg = 0
    /// Metres driven along the current leg.
    public private(set) var along = 0.0
    /// Metres driven in total.
    public private(set) var odometer = 0.0

    /// A vehicle standing at the start of the route.
    public init(cruiseSpeed: Double, originLatitude: Double, originLongitude: Double) {
        self.cruiseSpeed = max(0, cruiseSpeed)
        self.originLatitude = originLatitude
        self.originLongitude = originLongitude
    }

    /// Length of leg `i`, metres.
    static func legLength(_ i: Int) -> Double {
        let a = route[i], b = route[(i + 1) % route.count]
        return ((b.east - a.east) * (b.east - a.east) + (b.north - a.north) * (b.north - a.north)).squareRoot()
    }

    /// Heading of the current leg, degrees true.
    public var heading: Double {
        let a = Self.route[leg], b = Self.route[(leg + 1) % Self.route.count]
        let deg = atan2(b.east - a.east, b.north - a.north) * 180 / .pi
        return deg < 0 ? deg + 360 : deg
    }

    /// Current position, degrees (a local flat-earth projection around the origin).
    public var position: (latitude: Double, longitude: Double) {
        let a = Self.route[leg], h = heading * .pi / 180
        let east = a.east + along * sin(h), north = a.north + along * cos(h)
        let lat = originLatitude + north / earthMeanRadiusMetres * 180 / .pi
        let lon = originLongitude + east / (earthMeanRadiusMetres * cos(originLatitude * .pi / 180)) * 180 / .pi
        return (lat, lon)
    }

    /// Advances the vehicle by `dt` seconds.
    public mutating func step(seconds dt: Double) {
        guard dt > 0 else { return }
        let remaining = Self.legLength(leg) - along
        let cornerSpeed = min(Self.cornerSpeed, cruiseSpeed)
        let brakingDistance = max(0, speed * speed - cornerSpeed * cornerSpeed) / (2 * Self.braking)
        if remaining <= brakingDistance + speed * dt {
            speed = max(cornerSpeed, speed - Self.braking * dt)
        } else {
            speed = min(cruiseSpeed, speed + Self.acceleration * dt)
        }
        var distance = speed * dt
        odometer += distance
        while distance > 0 {
            let left = Self.legLength(leg) - along
            if distance < left {
                along += distance
                distance = 0
            } else {
                distance -= left
                leg = (leg + 1) % Self.route.count
                along = 0
            }
        }
    }
}
