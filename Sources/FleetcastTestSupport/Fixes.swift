import GNSS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Realistic fixes for policy and publisher tests: a van in Hamburg at 1 Hz.
public enum Fixes {
    /// 2024-05-14T08:00:00Z plus `seconds`.
    public static func time(_ seconds: Double) -> UTCTimestamp {
        UTCTimestamp(millisecondsSince1970: 1_715_673_600_000 + Int64((seconds * 1000).rounded()))
    }

    /// A 3D fix `north` metres north and `east` metres east of a start point, at `speed` m/s
    /// and `track` degrees.
    public static func fix(
        at seconds: Double, north: Double = 0, east: Double = 0, speed: Double? = 12.5, track: Double? = 90,
        mode: FixMode = .threeD
    ) -> Fix {
        let metresPerDegree = earthMeanRadiusMetres * Double.pi / 180
        let latitude = 53.551086 + north / metresPerDegree
        let longitude = 9.993682 + east / (metresPerDegree * cos(latitude * Double.pi / 180))
        return Fix(
            time: time(seconds), latitude: latitude, longitude: longitude, altitudeHAE: 48.3, altitudeMSL: 8.9,
            speed: speed, track: track, climb: 0, mode: mode, quality: .gps, satellitesUsed: 11,
            hdop: 0.9, eph: 2.1, epv: 3.4
        )
    }
}
