/// One position solution of a receiver cycle: where the vehicle was, when, and how well known.
///
/// Units follow gpsd's TPV: degrees (WGS 84) for latitude, longitude and track, metres for
/// altitudes and error estimates, metres per second for speed and climb. A value the
/// receiver did not report is `nil`, never 0. A `Fix` always has a time and a position;
/// a cycle without them is not a fix.
public struct Fix: Sendable, Equatable {
    /// UTC time of the solution, from the receiver's own clock.
    public let time: UTCTimestamp
    /// Latitude in degrees, positive north, −90...90.
    public let latitude: Double
    /// Longitude in degrees, positive east, −180...180.
    public let longitude: Double
    /// Height above the WGS 84 ellipsoid, metres (altMSL + geoid separation).
    public let altitudeHAE: Double?
    /// Height above mean sea level (the geoid), metres.
    public let altitudeMSL: Double?
    /// Geoid separation (geoid above ellipsoid), metres, as the receiver gave it.
    public let geoidSeparation: Double?
    /// Speed over ground, metres per second.
    public let speed: Double?
    /// Course over ground, degrees from true north, 0...360.
    public let track: Double?
    /// Magnetic variation, degrees, positive east.
    public let magneticVariation: Double?
    /// Vertical speed, metres per second, positive up.
    public let climb: Double?
    /// 2D or 3D (a `Fix` is never `.noFix`).
    public let mode: FixMode
    /// GGA quality indicator (DGPS, RTK fixed/float, dead reckoning…), when reported.
    public let quality: FixQuality?
    /// Satellites used in the solution.
    public let satellitesUsed: Int?
    /// Horizontal dilution of precision (unitless).
    public let hdop: Double?
    /// Vertical dilution of precision (unitless).
    public let vdop: Double?
    /// Position dilution of precision (unitless).
    public let pdop: Double?
    /// Estimated horizontal position error, metres (from GST where given).
    public let eph: Double?
    /// Estimated vertical position error, metres (from GST where given).
    public let epv: Double?
    /// Which way the vehicle pointed at this instant, when the source reported a heading of the
    /// same receiver cycle (degrees, see ``Heading``); its time is the fix's. A source emits
    /// fixes and headings apart (`nil` here); the agent joins them so that one message carries
    /// the instant.
    public var heading: Heading?

    public init(
        time: UTCTimestamp, latitude: Double, longitude: Double,
        altitudeHAE: Double? = nil, altitudeMSL: Double? = nil, geoidSeparation: Double? = nil,
        speed: Double? = nil, track: Double? = nil, magneticVariation: Double? = nil,
        climb: Double? = nil, mode: FixMode, quality: FixQuality? = nil, satellitesUsed: Int? = nil,
        hdop: Double? = nil, vdop: Double? = nil, pdop: Double? = nil,
        eph: Double? = nil, epv: Double? = nil, heading: Heading? = nil
    ) {
        self.time = time
        self.latitude = latitude
        self.longitude = longitude
        self.altitudeHAE = altitudeHAE
        self.altitudeMSL = altitudeMSL
        self.geoidSeparation = geoidSeparation
        self.speed = speed
        self.track = track
        self.magneticVariation = magneticVariation
        self.climb = climb
        self.mode = mode
        self.quality = quality
        self.satellitesUsed = satellitesUsed
        self.hdop = hdop
        self.vdop = vdop
        self.pdop = pdop
        self.eph = eph
        self.epv = epv
        self.heading = heading
    }
}
