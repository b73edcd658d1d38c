/// GNS, multi-constellation fix data (NMEA 4): like GGA with a per-system mode string.
public struct GNSSentence: Sendable, Equatable {
    /// UTC time of day, milliseconds since midnight.
    public var timeOfDay: Int?
    /// Position, when given and well-formed.
    public var position: NMEAPosition?
    /// First character of the mode indicator (the GPS one); `N` = no fix.
    public var mode: UInt8?
    /// Satellites used (0 when blank).
    public var satellitesUsed: Int
    /// Horizontal dilution of precision.
    public var hdop: Double?
    /// Altitude above mean sea level, metres.
    public var altitudeMSL: Double?
    /// Geoid separation, metres.
    public var geoidSeparation: Double?
    /// Navigation status (NMEA 4.1): `S` safe, `C` caution, `U` unsafe, `V` not valid.
    public var navigationStatus: UInt8?

    init(_ f: NMEAFields) {
        timeOfDay = f.timeOfDay(1)
        position = NMEAPosition(f, at: 2)
        mode = f.character(6)
        satellitesUsed = f.int(7) ?? 0
        hdop = f.double(8)
        altitudeMSL = f.double(9)
        geoidSeparation = f.double(10)
        navigationStatus = f.character(13)
    }
}
