import GNSS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A binary frame a receiver interleaves with its NMEA (u-blox UBX, CASIC), read the way
/// gpsd's binary drivers read it (`drivers/driver_ubx.c`, `drivers/driver_casic.c`, gpsd
/// commit 46977faa8): gpsd decodes these frames as well as the sentences, and its last
/// report of a second is often one of theirs, more precise than the NMEA (1e-7° and
/// millimetres against the sentences' 1e-5′ and decimetres).
///
/// Only what reaches a `Fix` is read: UBX NAV-PVT, CASIC NAV-PV and NAV-TIMEUTC; every other
/// frame counts only for gpsd's end-of-cycle detection (its time-of-week word).
struct GPSDBinaryMessage {
    /// Which of gpsd's binary drivers reads the frame.
    enum Driver { case ubx, casic }

    /// What one message puts in gpsd's fix (`newdata` and the mask bits), NaN = not set.
    struct Solution {
        /// 1 no fix, 2 2D, 3 3D; 0: the message sets no mode.
        var mode = 0
        /// UTC, milliseconds since 1970, rounded as gpsd prints it.
        var time: Int64?
        var latitude = Double.nan, longitude = Double.nan
        /// Metres above the ellipsoid, above mean sea level, and their difference as the
        /// receiver gives it.
        var altHAE = Double.nan, altMSL = Double.nan, geoidSeparation = Double.nan
        /// m/s over ground; degrees true; m/s up.
        var speed = Double.nan, track = Double.nan, climb = Double.nan
        /// Satellites used in the solution (CASIC sets gpsd's count; UBX NAV-PVT does not).
        var satellitesUsed: Int?
        /// Horizontal and vertical error estimates, metres, as gpsd takes them.
        var eph = Double.nan, epv = Double.nan

        /// The message sets a position or a mode (gpsd reports it while its cycle end is
        /// not reliable).
        var changesFix: Bool { mode != 0 || latitude.isFinite }
    }

    var driver: Driver
    /// Class and id, `class << 8 | id`.
    var id: UInt16
    /// The time word gpsd's driver detects cycles with (UBX iTOW, CASIC run time), ms.
    var timeOfWeek: Int64?
    /// What the message puts in the fix; `nil` for one the decoder does not read.
    var solution: Solution?
    /// gpsd's handler forces a report (UBX NAV-SOL).
    var forcesReport = false

    /// Reads a frame delivered by `NMEAFramer` (checksum already verified).
    init?(frame f: UnsafeRawBufferPointer) {
        guard f.count >= 8 else { return nil }
        if f[0] == 0xB5 {
            driver = .ubx
            id = UInt16(f[2]) << 8 | UInt16(f[3])
            let payload = UnsafeRawBufferPointer(rebasing: f[6..<(f.count - 2)])
            readUBX(payload)
        } else {
            guard f.count >= 10 else { return nil }
            driver = .casic
            id = UInt16(f[4]) << 8 | UInt16(f[5])
            let payload = UnsafeRawBufferPointer(rebasing: f[6..<(f.count - 4)])
            readCASIC(payload)
        }
    }

    private mutating func readUBX(_ p: UnsafeRawBufferPointer) {
        // The NAV (and ESF) messages whose gpsd decoder sets iTOW, and where it sits.
        let iTOWOffset: Int? =
            switch id {
            case 0x0101, 0x0102, 0x0103, 0x0104, 0x0106, 0x0107, 0x0111, 0x0112, 0x0117, 0x0120, 0x0121, 0x0122,
                0x0126, 0x0130, 0x0131, 0x0132, 0x0135, 0x013D, 0x0143, 0x0161, 0x1010, 0x1014:
                0
            case 0x0113, 0x0114, 0x013C: 4
            case 0x1015: 8
            default: nil
            }
        if let o = iTOWOffset, p.count >= o + 4 { timeOfWeek = Int64(Self.u32(p, o)) }
        if id == 0x0106 {
            // NAV-SOL: "mask |= REPORT_IS"; see `readSOL`.
            forcesReport = true
            if p.count >= 52 { readSOL(p) }
            return
        }
        // NAV-PVT: u-blox 6 and 7 send 84 bytes, 8 and later 92; gpsd refuses less than 84.
        guard id == 0x0107, p.count >= 84 else { return }
        var s = Solution()
        s.mode = Self.ubxMode(p[20])
        if p[11] & 0x03 == 0x03,  // validDate and validTime
            let t = UTCTimestamp(
                year: Int(Self.u16(p, 4)), month: Int(p[6]), day: Int(p[7]), hour: Int(p[8]), minute: Int(p[9]),
                second: Int(p[10]))
        {
            s.time = Self.roundedMilliseconds(seconds: t.millisecondsSince1970 / 1000, nanoseconds: Int64(Self.s32(p, 16)))
        }
        s.longitude = 1e-7 * Double(Self.s32(p, 24))
        s.latitude = 1e-7 * Double(Self.s32(p, 28))
        s.altHAE = 1e-3 * Double(Self.s32(p, 32))
        s.altMSL = 1e-3 * Double(Self.s32(p, 36))
        s.eph = Double(Self.s32(p, 40)) / 1000
        s.epv = Double(Self.s32(p, 44)) / 1000
        s.speed = 1e-3 * Double(Self.s32(p, 60))
        s.track = 1e-5 * Double(Self.s32(p, 64))
        solution = s
    }

    /// gpsd's fix mode of a u-blox `gpsFix`/`fixType`: time only, 3D and GNSS + dead
    /// reckoning are 3D, 2D and dead reckoning alone 2D, anything else no fix.
    private static func ubxMode(_ fixType: UInt8) -> Int {
        switch fixType {
        case 3, 4, 5: 3
        case 1, 2: 2
        default: 1
        }
    }

    /// NAV-SOL: its mode and satellites used, and the climb gpsd's error model takes from
    /// its ECEF velocity (`ecef_to_wgs84fix`: the velocity's component along the local
    /// vertical at the ECEF position, WGS 84). gpsd's NAV-SOL report comes first in the
    /// cycle, with a position converted from ECEF and no UTC; NAV-PVT then replaces every
    /// value but the climb, so that is all the decoder keeps of it.
    private mutating func readSOL(_ p: UnsafeRawBufferPointer) {
        var s = Solution()
        s.mode = Self.ubxMode(p[10])
        s.satellitesUsed = Int(p[47])
        let x = Double(Self.s32(p, 12)) / 100, y = Double(Self.s32(p, 16)) / 100, z = Double(Self.s32(p, 20)) / 100
        let vx = Double(Self.s32(p, 28)) / 100, vy = Double(Self.s32(p, 32)) / 100, vz = Double(Self.s32(p, 36)) / 100
        if abs(x) + abs(y) + abs(z) > 10 {
            let a = 6_378_137.0, b = 6_356_752.314245
            let e2 = (a * a - b * b) / (a * a), ep2 = (a * a - b * b) / (b * b)
            let lambda = atan2(y, x)
            let r = (x * x + y * y).squareRoot()
            let theta = atan2(z * a, r * b)
            let phi = atan2(z + ep2 * b * pow(sin(theta), 3), r - e2 * a * pow(cos(theta), 3))
            s.climb = vx * cos(phi) * cos(lambda) + vy * cos(phi) * sin(lambda) + vz * sin(phi)
        }
        solution = s
    }

    private mutating func readCASIC(_ p: UnsafeRawBufferPointer) {
        switch id {
        case 0x0101, 0x0103, 0x0110, 0x0120, 0x0121, 0x0122:  // DOP, PV, TIMEUTC, GPS/BDS/GLNINFO
            if p.count >= 4 { timeOfWeek = Int64(Self.u32(p, 0)) }
        default:
            return
        }
        if id == 0x0103, p.count >= 80 {
            var s = Solution()
            // posValid: 6 2D, 7 3D, 8 GNSS + dead reckoning; anything else no fix.
            let dimensions = p[4] == 6 ? 2 : p[4] == 7 || p[4] == 8 ? 3 : 0
            s.mode = dimensions == 0 ? 1 : dimensions
            if dimensions > 0 {
                s.latitude = Self.f64(p, 24)
                s.longitude = Self.f64(p, 16)
                s.geoidSeparation = Double(Self.f32(p, 36))
                s.eph = Self.sigma(Self.f32(p, 40))
                if dimensions == 3 {
                    s.altHAE = Double(Self.f32(p, 32))
                    s.epv = Self.sigma(Self.f32(p, 44))
                }
            }
            if (6...8).contains(p[5]) {  // velValid
                s.speed = Double(Self.f32(p, 64))
                s.track = Double(Self.f32(p, 68))
                // velU with a 3D velocity: gpsd's NED.velD, from which its error model takes climb.
                if p[5] != 6 { s.climb = Double(Self.f32(p, 56)) }
            }
            s.satellitesUsed = Int(p[7])
            solution = s
        } else if id == 0x0110, p.count >= 24 {
            // A complete UTC (time of week, week, leap seconds valid) and a date, or nothing.
            guard p[21] & 0x07 == 0x07, p[23] != 0,
                let t = UTCTimestamp(
                    year: Int(Self.u16(p, 14)), month: Int(p[16]), day: Int(p[17]), hour: Int(p[18]),
                    minute: Int(p[19]), second: Int(p[20]))
            else { return }
            var s = Solution()
            s.time = t.millisecondsSince1970 + Int64(Self.u16(p, 12))
            solution = s
        }
    }

    /// gpsd's `casic_sigma`: the square root of a positive, finite variance; else NaN.
    private static func sigma(_ variance: Float) -> Double {
        variance.isFinite && variance > 0 ? Double(variance).squareRoot() : .nan
    }

    /// Seconds and a signed nanosecond part, rounded to the millisecond as gpsd prints times.
    static func roundedMilliseconds(seconds: Int64, nanoseconds: Int64) -> Int64 {
        var sec = seconds, ns = nanoseconds
        while ns < 0 {
            ns += 1_000_000_000
            sec -= 1
        }
        sec += ns / 1_000_000_000
        ns %= 1_000_000_000
        if ns > 999_499_999 { return (sec + 1) * 1000 }
        return sec * 1000 + (ns + 500_000) / 1_000_000
    }

    private static func u16(_ p: UnsafeRawBufferPointer, _ o: Int) -> UInt16 { UInt16(p[o]) | UInt16(p[o + 1]) << 8 }
    private static func u32(_ p: UnsafeRawBufferPointer, _ o: Int) -> UInt32 {
        UInt32(p[o]) | UInt32(p[o + 1]) << 8 | UInt32(p[o + 2]) << 16 | UInt32(p[o + 3]) << 24
    }
    private static func s32(_ p: UnsafeRawBufferPointer, _ o: Int) -> Int32 { Int32(bitPattern: u32(p, o)) }
    private static func f32(_ p: UnsafeRawBufferPointer, _ o: Int) -> Float { Float(bitPattern: u32(p, o)) }
    private static func f64(_ p: UnsafeRawBufferPointer, _ o: Int) -> Double {
        Double(bitPattern: UInt64(u32(p, o)) | UInt64(u32(p, o + 4)) << 32)
    }
}

/// gpsd's end-of-cycle detection for a binary driver (`ubx_parse`, `casic_parse`): a message
/// whose time word moved more than 10 ms from the last starts a cycle (`CLEAR_IS`), and the
/// message seen last before that becomes the cycle ender, which reports (`REPORT_IS`).
struct GPSDBinaryCycle {
    private var lastTime: Int64 = 0
    private var lastID: UInt16 = 0
    /// The learned cycle ender (0: none yet).
    private(set) var ender: UInt16 = 0

    /// One message; UBX checks the ender before learning a new one, CASIC after.
    mutating func step(_ m: GPSDBinaryMessage) -> (clear: Bool, report: Bool) {
        guard let t = m.timeOfWeek else { return (false, false) }
        var report = m.driver == .ubx && ender == m.id
        var clear = false
        if abs(lastTime - t) > 10 {
            if lastID != 0, ender != lastID { ender = lastID }
            lastTime = t
            clear = true
        }
        if m.driver == .casic, ender == m.id { report = true }
        lastID = m.id
        return (clear, report)
    }
}
