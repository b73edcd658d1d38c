/// A latitude/longitude pair in degrees (WGS 84), as parsed from a sentence.
public struct NMEAPosition: Sendable, Equatable {
    /// Degrees, positive north.
    public var latitude: Double
    /// Degrees, positive east.
    public var longitude: Double

    /// Parses the four fields `lat, N|S, lon, E|W` starting at field `i`.
    init?(_ f: NMEAFields, at i: Int) {
        guard let lat = f.angle(i, hemisphere: i + 1, isLatitude: true),
            let lon = f.angle(i + 2, hemisphere: i + 3, isLatitude: false)
        else { return nil }
        latitude = lat
        longitude = lon
    }
}
