/// The dimension of a position solution, with gpsd's numbering (TPV `mode`).
public enum FixMode: Int, Sendable, Hashable, CaseIterable {
    /// The receiver has no usable position.
    case noFix = 1
    /// Latitude and longitude, no trustworthy altitude.
    case twoD = 2
    /// Latitude, longitude and altitude.
    case threeD = 3
}

/// How a position was obtained: the GGA quality indicator of NMEA 0183 (field 6).
public enum FixQuality: Int, Sendable, Hashable, CaseIterable {
    /// No position (GGA quality 0).
    case invalid = 0
    /// Autonomous GNSS (1).
    case gps = 1
    /// Differential GNSS: SBAS, DGPS beacon (2).
    case dgps = 2
    /// Precise positioning service / military (3).
    case pps = 3
    /// RTK with integer ambiguities fixed: centimetre level (4).
    case rtkFixed = 4
    /// RTK with float ambiguities: decimetre level (5).
    case rtkFloat = 5
    /// Dead reckoning / estimated (6).
    case deadReckoning = 6
    /// Manual input (7).
    case manual = 7
    /// Simulator (8).
    case simulation = 8
}
