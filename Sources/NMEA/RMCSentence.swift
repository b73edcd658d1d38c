/// RMC, recommended minimum data: time, date, status, position, speed, track, variation.
public struct RMCSentence: Sendable, Equatable {
    /// UTC time of day, milliseconds since midnight.
    public var timeOfDay: Int?
    /// Status `A` (valid) or anything else (void).
    public var isValid: Bool
    /// Position, when given and well-formed.
    public var position: NMEAPosition?
    /// Speed over ground, knots.
    public var speedKnots: Double?
    /// Course over ground, degrees true.
    public var trackDegrees: Double?
    /// The date (`ddmmyy`, century supplied as gpsd does).
    public var date: NMEADate?
    /// Magnetic variation, degrees, positive east (`nil` when blank or |v| ≤ 0.09, as gpsd).
    public var magneticVariation: Double?
    /// FAA mode indicator (NMEA 2.3+), field 12.
    public var faaMode: UInt8?

    init(_ f: NMEAFields) {
        timeOfDay = f.timeOfDay(1)
        isValid = f.character(2) == UInt8(ascii: "A")
        position = NMEAPosition(f, at: 3)
        speedKnots = f.double(7)
        trackDegrees = f.double(8)
        date = f.ddmmyy(9)
        if let v = f.double(10), abs(v) > 0.09 {
            switch f.character(11) {
            case UInt8(ascii: "E"): magneticVariation = v
            case UInt8(ascii: "W"): magneticVariation = -v
            default: magneticVariation = nil
            }
        } else {
            magneticVariation = nil
        }
        faaMode = f.character(12)
    }
}
