import GNSS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A drive at 1 Hz for the trip, stop and zone tests: each leg a bearing (degrees), a length
/// (m) and a speed (m/s), each stop a duration (s) with about `jitter` metres of position noise
/// and a few tenths of a m/s of reported speed, as a parked receiver gives. The same seed gives
/// the same drive. ``nmea()`` writes it as a receiver would (RMC and GGA each second), for the
/// agent to replay.
public struct GeneratedDrive: Sendable {
    public enum Part: Sendable {
        case leg(bearing: Double, metres: Double, speed: Double)
        case stop(seconds: Int)
    }

    /// One second of the drive: when, where (degrees) and how fast (m/s).
    public struct Sample: Sendable {
        public var time: UTCTimestamp
        public var latitude: Double
        public var longitude: Double
        public var speed: Double
    }

    public private(set) var samples: [Sample] = []
    private var north = 0.0
    private var east = 0.0
    private var second = 0
    private var random = SplitMix64(seed: 34)
    public let jitter: Double
    public let start: UTCTimestamp
    /// Where the drive starts, degrees.
    public static let origin = (latitude: 53.55, longitude: 9.99)

    /// The drive of `parts`, its first fix a second after `start` (by default `Fixes.time(0)`).
    public init(_ parts: [Part], jitter: Double = 3, start: UTCTimestamp = Fixes.time(0)) {
        self.jitter = jitter
        self.start = start
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
        let position = Self.position(north: north + radius * cos(angle), east: east + radius * sin(angle))
        samples.append(
            Sample(
                time: UTCTimestamp(millisecondsSince1970: start.millisecondsSince1970 + Int64(second) * 1000),
                latitude: position.latitude, longitude: position.longitude, speed: speed))
    }

    /// Only the seconds in `range` (indices into ``samples``): a part of the drive.
    public func part(_ range: Range<Int>) -> GeneratedDrive {
        var copy = self
        copy.samples = Array(samples[range])
        return copy
    }

    /// The position `north` and `east` metres from the start, degrees.
    public static func position(north: Double, east: Double) -> (latitude: Double, longitude: Double) {
        let metresPerDegree = earthMeanRadiusMetres * Double.pi / 180
        let latitude = origin.latitude + north / metresPerDegree
        return (latitude, origin.longitude + east / (metresPerDegree * cos(latitude * Double.pi / 180)))
    }

    /// The drive as NMEA 0183 from a receiver: an RMC and a GGA a second, with checksums,
    /// CRLF line ends.
    public func nmea() -> String {
        var text = ""
        text.reserveCapacity(samples.count * 150)
        for sample in samples {
            let iso = sample.time.iso8601  // 2024-05-14T08:00:01.000Z
            let chars = Array(iso)
            let hms = String(chars[11..<13]) + String(chars[14..<16]) + String(chars[17..<19]) + ".00"
            let dmy = String(chars[8..<10]) + String(chars[5..<7]) + String(chars[2..<4])
            let (lat, ns) = Self.degreesMinutes(sample.latitude, degreeDigits: 2, positive: "N", negative: "S")
            let (lon, ew) = Self.degreesMinutes(sample.longitude, degreeDigits: 3, positive: "E", negative: "W")
            let knots = Self.fixed(sample.speed / 0.514444, 2)
            text += Self.sentence("GPRMC,\(hms),A,\(lat),\(ns),\(lon),\(ew),\(knots),,\(dmy),,,A")
            text += Self.sentence("GPGGA,\(hms),\(lat),\(ns),\(lon),\(ew),1,10,0.9,12.0,M,40.0,M,,")
        }
        return text
    }

    private static func sentence(_ body: String) -> String {
        let sum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
        let hex = String(sum, radix: 16, uppercase: true)
        return "$\(body)*\(hex.count == 1 ? "0" + hex : hex)\r\n"
    }

    private static func degreesMinutes(_ value: Double, degreeDigits: Int, positive: String, negative: String) -> (String, String) {
        let magnitude = abs(value)
        var degrees = Int(magnitude)
        var minutes = ((magnitude - Double(degrees)) * 60 * 100_000).rounded() / 100_000
        if minutes >= 60 {
            degrees += 1
            minutes -= 60
        }
        var d = String(degrees)
        while d.count < degreeDigits { d = "0" + d }
        var m = fixed(minutes, 5)
        if minutes < 10 { m = "0" + m }
        return (d + m, value < 0 ? negative : positive)
    }

    private static func fixed(_ value: Double, _ decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = Int((value * scale).rounded())
        var fraction = String(scaled % Int(scale))
        while fraction.count < decimals { fraction = "0" + fraction }
        return "\(scaled / Int(scale)).\(fraction)"
    }
}

extension GeneratedDrive {
    /// The fleet operations drive (issue 34): 29 minutes, 4.5 km north at 15 m/s, 7 minutes
    /// stopped, 3.6 km east at 12 m/s, 10 minutes stopped, 1.2 km on at 10 m/s; about 3 m of
    /// jitter while stopped.
    public static func threeLegs(start: UTCTimestamp = Fixes.time(0)) -> GeneratedDrive {
        GeneratedDrive(
            [
                .leg(bearing: 0, metres: 4_500, speed: 15), .stop(seconds: 420),
                .leg(bearing: 90, metres: 3_600, speed: 12), .stop(seconds: 600),
                .leg(bearing: 200, metres: 1_200, speed: 10),
            ], start: start)
    }

    /// Zones for ``threeLegs(start:)``, GeoJSON: "Depot", a 200 m square around the first
    /// stop, and "Customer", a 150 m circle around the second.
    public static var depotAndCustomerZones: String {
        func position(_ north: Double, _ east: Double) -> String {
            let (latitude, longitude) = Self.position(north: north, east: east)
            return "[\(longitude), \(latitude)]"
        }
        return """
            {"type": "FeatureCollection", "features": [
              {"type": "Feature", "properties": {"name": "Depot"},
               "geometry": {"type": "Polygon", "coordinates": [[
                 \(position(4_400, -100)), \(position(4_400, 100)), \(position(4_600, 100)), \(position(4_600, -100)), \(position(4_400, -100))
               ]]}},
              {"type": "Feature", "properties": {"name": "Customer", "radius": 150},
               "geometry": {"type": "Point", "coordinates": \(position(4_500, 3_600))}}
            ]}
            """
    }
}
