/// GGA, fix data: time, position, quality, satellites used, HDOP, altitude, geoid separation.
public struct GGASentence: Sendable, Equatable {
    /// UTC time of day, milliseconds since midnight.
    public var timeOfDay: Int?
    /// Position, when given and well-formed.
    public var position: NMEAPosition?
    /// Quality indicator 0...8 (`nil` when blank: gpsd then leaves the status alone).
    public var quality: Int?
    /// Satellites used in the solution (0 when blank, as gpsd reads it).
    public var satellitesUsed: Int
    /// Horizontal dilution of precision (kept only within 0.01...89.99, as gpsd).
    public var hdop: Double?
    /// Altitude above mean sea level, metres.
    public var altitudeMSL: Double?
    /// Geoid separation (geoid above ellipsoid), metres.
    public var geoidSeparation: Double?

    /// The two-letter talker (`GP`, `GN`, `GL`…), as two ASCII bytes.
    public var talker: (UInt8, UInt8) { (talkerFirst, talkerSecond) }
    var talkerFirst: UInt8 = 0, talkerSecond: UInt8 = 0

    init(_ f: NMEAFields) {
        talkerFirst = f.payload.count > 0 ? f.payload[0] : 0
        talkerSecond = f.payload.count > 1 ? f.payload[1] : 0
        timeOfDay = f.timeOfDay(1)
        position = NMEAPosition(f, at: 2)
        quality = f.int(6)
        satellitesUsed = f.int(7) ?? 0
        if let h = f.double(8), h >= 0.01, h <= 89.99 { hdop = h } else { hdop = nil }
        altitudeMSL = f.double(9)
        geoidSeparation = f.double(11)
    }
}
