import GNSS

/// Writes NMEA 0183 sentences for one receiver epoch. Pure: the same input gives the same
/// bytes, so its output can be decoded back and compared.
///
/// One epoch is RMC, GGA, GSA, VTG, HDT and GST, each `$…*hh\r\n` with its checksum;
/// positions to 1e-5 minutes (≈ 2 cm), times to 1/100 s.
public enum NMEASentenceGenerator {
    /// What a simulated receiver knows at one instant.
    public struct Epoch: Sendable, Equatable {
        /// UTC time of the epoch.
        public var time: UTCTimestamp
        /// Latitude, degrees, positive north.
        public var latitude: Double
        /// Longitude, degrees, positive east.
        public var longitude: Double
        /// Height above mean sea level, metres.
        public var altitudeMSL: Double
        /// Geoid separation, metres.
        public var geoidSeparation: Double
        /// Speed over ground, metres per second.
        public var speed: Double
        /// Course over ground, degrees true.
        public var track: Double
        /// Heading of the vehicle body, degrees true.
        public var heading: Double
        /// Satellites used.
        public var satellitesUsed: Int
        /// Horizontal, vertical and position dilution of precision.
        public var hdop: Double, vdop: Double, pdop: Double
        /// 1-sigma position error, metres (GST latitude/longitude/altitude errors).
        public var sigmaHorizontal: Double, sigmaVertical: Double

        /// An epoch; the defaults describe a good open-sky 3D fix.
        public init(
            time: UTCTimestamp, latitude: Double, longitude: Double, altitudeMSL: Double = 10,
            geoidSeparation: Double = 45, speed: Double, track: Double, heading: Double,
            satellitesUsed: Int = 10, hdop: Double = 0.8, vdop: Double = 1.2, pdop: Double = 1.4,
            sigmaHorizontal: Double = 1.5, sigmaVertical: Double = 2.5
        ) {
            self.time = time
            self.latitude = latitude
            self.longitude = longitude
            self.altitudeMSL = altitudeMSL
            self.geoidSeparation = geoidSeparation
            self.speed = speed
            self.track = track
            self.heading = heading
            self.satellitesUsed = satellitesUsed
            self.hdop = hdop
            self.vdop = vdop
            self.pdop = pdop
            self.sigmaHorizontal = sigmaHorizontal
            self.sigmaVertical = sigmaVertical
        }
    }

    /// Knots per metre per second.
    static let knotsPerMetrePerSecond = 3600.0 / 1852.0

    /// The sentences of one epoch, in the order a receiver sends them.
    public static func sentences(for e: Epoch) -> [String] {
        let c = e.time.components
        let time = pad(c.hour, 2) + pad(c.minute, 2) + pad(c.second, 2) + "." + pad(c.millisecond / 10, 2)
        let date = pad(c.day, 2) + pad(c.month, 2) + pad(c.year % 100, 2)
        let lat = angle(e.latitude, degreeDigits: 2) + (e.latitude >= 0 ? ",N" : ",S")
        let lon = angle(e.longitude, degreeDigits: 3) + (e.longitude >= 0 ? ",E" : ",W")
        let knots = e.speed * knotsPerMetrePerSecond
        let track = fixed(normalised(e.track), 2)
        let used = max(0, min(e.satellitesUsed, 12))
        let prns = (0..<12).map { $0 < used ? pad([2, 5, 7, 9, 13, 15, 18, 20, 24, 27, 29, 30][$0], 2) : "" }
        let bodies = [
            "GPRMC,\(time),A,\(lat),\(lon),\(fixed(knots, 3)),\(track),\(date),,,A",
            "GPGGA,\(time),\(lat),\(lon),1,\(pad(used, 2)),\(fixed(e.hdop, 2)),\(fixed(e.altitudeMSL, 1)),M,"
                + "\(fixed(e.geoidSeparation, 1)),M,,",
            "GPGSA,A,3,\(prns.joined(separator: ",")),\(fixed(e.pdop, 2)),\(fixed(e.hdop, 2)),\(fixed(e.vdop, 2))",
            "GPVTG,\(track),T,,M,\(fixed(knots, 3)),N,\(fixed(e.speed * 3.6, 3)),K,A",
            "GPHDT,\(fixed(normalised(e.heading), 2)),T",
            "GPGST,\(time),\(fixed(e.sigmaHorizontal, 2)),\(fixed(e.sigmaHorizontal, 2)),\(fixed(e.sigmaHorizontal, 2)),0.0,"
                + "\(fixed(e.sigmaHorizontal, 2)),\(fixed(e.sigmaHorizontal, 2)),\(fixed(e.sigmaVertical, 2))",
        ]
        return bodies.map(sentence)
    }

    /// The epoch as the bytes a receiver would send.
    public static func bytes(for e: Epoch) -> [UInt8] {
        Array(sentences(for: e).joined().utf8)
    }

    /// `$BODY*hh\r\n` with the XOR checksum of BODY.
    public static func sentence(_ body: String) -> String {
        var sum: UInt8 = 0
        for b in body.utf8 { sum ^= b }
        let hex = Array("0123456789ABCDEF")
        return "$\(body)*\(hex[Int(sum >> 4)])\(hex[Int(sum & 0xF)])\r\n"
    }

    /// `ddmm.mmmmm` / `dddmm.mmmmm` of |degrees|.
    package static func angle(_ degrees: Double, degreeDigits: Int) -> String {
        let scale = 100_000
        let total = Int((abs(degrees) * 60 * Double(scale)).rounded())
        let whole = total / (60 * scale)
        let minuteUnits = total % (60 * scale)
        return pad(whole, degreeDigits) + pad(minuteUnits / scale, 2) + "." + pad(minuteUnits % scale, 5)
    }

    /// `value` with `decimals` decimals (rounded half away from zero), no exponent.
    package static func fixed(_ value: Double, _ decimals: Int) -> String {
        var scale = 1
        for _ in 0..<decimals { scale *= 10 }
        let units = Int((abs(value) * Double(scale)).rounded())
        let sign = value < 0 && units != 0 ? "-" : ""
        return decimals == 0 ? "\(sign)\(units)" : "\(sign)\(units / scale)." + pad(units % scale, decimals)
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let s = String(value)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    static func normalised(_ degrees: Double) -> Double {
        let d = degrees.truncatingRemainder(dividingBy: 360)
        let n = d < 0 ? d + 360 : d
        return n >= 359.995 ? 0 : n
    }
}
