import FleetProtocol
import GNSS

/// One recorded position of a vehicle's track, as `fleet-watch history` reads it back from
/// PostgreSQL: the message's `seq`, the fix time, the position in degrees (WGS 84), and what
/// else the fix carried (altitude above mean sea level in metres, speed in m/s, track in
/// degrees true, fix mode, satellites used, horizontal error estimate in metres, and the true
/// heading of the fix's instant in degrees when its message carried one).
public struct TrackPoint: Sendable, Equatable {
    /// The vehicle's per-message sequence number.
    public var seq: UInt64
    /// When the fix was taken (UTC).
    public var time: UTCTimestamp
    /// Latitude, degrees, north positive.
    public var latitude: Double
    /// Longitude, degrees, east positive.
    public var longitude: Double
    /// Altitude above mean sea level, metres.
    public var altitudeMSL: Double?
    /// Speed over ground, m/s.
    public var speed: Double?
    /// Course over ground, degrees true.
    public var track: Double?
    /// 1 no fix, 2 2D, 3 3D.
    public var mode: Int
    /// Satellites used in the solution.
    public var satellites: Int?
    /// Estimated horizontal position error, metres.
    public var eph: Double?
    /// Which way the vehicle pointed, degrees from true north, when the fix carried its heading.
    public var heading: Double?
    /// Whether the fix arrived late, in a `backlog` batch.
    public var backlog: Bool

    /// A track point.
    public init(
        seq: UInt64, time: UTCTimestamp, latitude: Double, longitude: Double, altitudeMSL: Double? = nil, speed: Double? = nil,
        track: Double? = nil, mode: Int = 3, satellites: Int? = nil, eph: Double? = nil, heading: Double? = nil,
        backlog: Bool = false
    ) {
        self.seq = seq
        self.time = time
        self.latitude = latitude
        self.longitude = longitude
        self.altitudeMSL = altitudeMSL
        self.speed = speed
        self.track = track
        self.mode = mode
        self.satellites = satellites
        self.eph = eph
        self.heading = heading
        self.backlog = backlog
    }
}
