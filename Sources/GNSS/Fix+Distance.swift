#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Mean Earth radius in metres (IUGG), for great-circle distances.
public let earthMeanRadiusMetres = 6_371_008.8

extension Fix {
    /// Great-circle distance to another fix in metres (haversine on a sphere).
    public func distance(to other: Fix) -> Double {
        let toRad = Double.pi / 180
        let phi1 = latitude * toRad, phi2 = other.latitude * toRad
        let dPhi = (other.latitude - latitude) * toRad
        let dLambda = (other.longitude - longitude) * toRad
        let s1 = sin(dPhi / 2), s2 = sin(dLambda / 2)
        let a = s1 * s1 + cos(phi1) * cos(phi2) * s2 * s2
        return 2 * earthMeanRadiusMetres * asin(min(1, a.squareRoot()))
    }
}
