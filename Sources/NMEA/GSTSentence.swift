/// GST, pseudorange noise statistics: 1-sigma position errors in metres.
public struct GSTSentence: Sendable, Equatable {
    /// UTC time of day of the fix it refers to, milliseconds since midnight.
    public var timeOfDay: Int?
    /// Standard deviation of latitude error, metres.
    public var latitudeSigma: Double?
    /// Standard deviation of longitude error, metres.
    public var longitudeSigma: Double?
    /// Standard deviation of altitude error, metres.
    public var altitudeSigma: Double?

    init(_ f: NMEAFields) {
        timeOfDay = f.timeOfDay(1)
        latitudeSigma = f.double(6)
        longitudeSigma = f.double(7)
        altitudeSigma = f.double(8)
    }
}
