/// Which sentence or service a heading came from.
public enum HeadingSource: String, Sendable, Hashable, CaseIterable {
    /// NMEA HDT: true heading (gyro or GNSS compass).
    case hdt = "HDT"
    /// NMEA THS: true heading with a mode indicator.
    case ths = "THS"
    /// NMEA HDG: magnetic sensor heading with deviation and variation.
    case hdg = "HDG"
    /// NMEA HDM: magnetic heading only.
    case hdm = "HDM"
    /// gpsd's ATT object.
    case gpsd = "gpsd"
}

/// Which way the vehicle points (not where it moves: that is `Fix.track`).
///
/// Degrees, clockwise from north, 0..<360. `trueHeading` is referred to true north; it is
/// known from HDT/THS/gpsd, and from HDG when the variation is known. `magneticHeading` is
/// the magnetic sensor's reading with deviation applied where given.
public struct Heading: Sendable, Equatable {
    /// UTC time of the receiver cycle the heading belongs to, when known (HDT carries none).
    public let time: UTCTimestamp?
    /// Heading from true north, degrees.
    public let trueHeading: Double?
    /// Heading from magnetic north, degrees.
    public let magneticHeading: Double?
    /// Magnetic deviation of the sensor, degrees, positive east (HDG).
    public let magneticDeviation: Double?
    /// Magnetic variation at the position, degrees, positive east (HDG).
    public let magneticVariation: Double?
    /// The sentence or service that reported it.
    public let source: HeadingSource

    public init(
        time: UTCTimestamp? = nil, trueHeading: Double? = nil, magneticHeading: Double? = nil,
        magneticDeviation: Double? = nil, magneticVariation: Double? = nil, source: HeadingSource
    ) {
        self.time = time
        self.trueHeading = trueHeading
        self.magneticHeading = magneticHeading
        self.magneticDeviation = magneticDeviation
        self.magneticVariation = magneticVariation
        self.source = source
    }
}
