#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// gpsd's own bookkeeping of the fix, sentence by sentence, so that the decoder reports the
/// mode, and derives speed and climb, exactly as gpsd does.
///
/// It mirrors, for the fields that reach a `Fix`, the session state of gpsd's NMEA driver
/// (`drivers/driver_nmea0183.c`) and core (`gpsd/libgpsd_core.c`), gpsd commit 46977faa8:
/// - `newdata` (what one sentence says: its mode and the `*_SET` mask bits) is built by
///   `processGGA`, `processGSA`, `processRMC`, `processGLL`, `processGNS`, `processVTG`,
///   `processZDA`, with their rules verbatim: GGA gives 2D with a position, 3D with an
///   altitude and ≥ 4 satellites, no fix for a GP/GN GGA with < 3 satellites; the latch on
///   a GGA whose time does not advance (same talker) makes the next GSA untrusted; GSA sets
///   the mode 1…3, except a GPGSA after another talker's GSA was ever seen, and always for
///   the first of a run of GNGSA; RMC/GLL keep 2D or 3D from the last fix, 3D with > 3
///   satellites used or an altitude in the fix.
/// - `processPGRMZ` (Garmin): altitude in whole feet as MSL, and the fix dimension.
/// - `nmea_parse`'s last rule: a mode other than "no fix" never lowers a 3D fix while the
///   last or previous fix had an altitude.
/// - `gpsd_poll`: a sentence that registers a new time of day (`CLEAR_IS`) clears the fix,
///   then `gps_merge_fix` copies what the sentence set.
/// - `gpsd_error_model`: `lastfix` / `oldfix` (the fix of the previous time), speed from
///   the earth distance (Vincenty, WGS 84) over the time between them when the receiver
///   gave none (dropped above 9999.9 m/s), climb from the altitudes of two 3D fixes.
struct GPSDFixModel {
    /// One `struct gps_fix_t`, reduced to what the decoder reports. NaN = unknown (as gpsd).
    struct Snapshot {
        /// 0 not seen, 1 no fix, 2 2D, 3 3D (gpsd's `MODE_*`).
        var mode = 0
        /// UTC, milliseconds since 1970; 0 = no time (gpsd tests `tv_sec > 0`).
        var time: Int64 = 0
        var latitude = Double.nan, longitude = Double.nan
        /// Metres: above mean sea level, and above the ellipsoid (MSL + geoid separation).
        var altMSL = Double.nan, altHAE = Double.nan
        /// m/s, receiver's or derived.
        var speed = Double.nan, climb = Double.nan
        /// Degrees true; the receiver's geoid separation (metres) where it gave one.
        var track = Double.nan, geoidSeparation = Double.nan

        var hasAltitude: Bool { altMSL.isFinite || altHAE.isFinite }

        /// The same values, bit for bit (NaN equals NaN).
        func isSame(as o: Snapshot) -> Bool {
            mode == o.mode && time == o.time && latitude.bitPattern == o.latitude.bitPattern
                && longitude.bitPattern == o.longitude.bitPattern && altMSL.bitPattern == o.altMSL.bitPattern
                && altHAE.bitPattern == o.altHAE.bitPattern && speed.bitPattern == o.speed.bitPattern
                && climb.bitPattern == o.climb.bitPattern && track.bitPattern == o.track.bitPattern
                && geoidSeparation.bitPattern == o.geoidSeparation.bitPattern
        }
    }

    /// What one sentence said (gpsd's `newdata` and the mask its handler returned).
    struct SentenceData {
        var mode = 0
        var modeSet = false
        var time: Int64?
        var latitude = Double.nan, longitude = Double.nan
        var altMSL: Double?, geoidSeparation: Double?
        var speed: Double?
        var track: Double?
    }

    /// `session->gpsdata.fix`, `lastfix`, `oldfix`.
    private(set) var fix = Snapshot()
    private var lastfix = Snapshot(), oldfix = Snapshot()
    /// `gpsdata.satellites_used`: GSA's count, kept across cycles.
    private var satellitesUsed = 0
    /// `nmea.latch_mode`, `nmea.last_gga_talker`, `nmea.last_gga_timestamp` (`nil`: empty).
    private var latchMode = false
    private var lastGGATalker: UInt8 = 0
    private var lastGGATime: Int?
    /// `nmea.last_gsa_talker` (0 after any other sentence) and the `seen_*gsa` flags
    /// other than GP's.
    private var lastGSATalker: UInt8 = 0
    private var seenOtherGSA = false
    /// A sentence whose values the decoder does not use (proprietary, unknown, or one gpsd
    /// finds too short): it still ends a run of GSA, and a timed one (GBS) can start a
    /// reporting cycle, which clears the fix.
    mutating func other(clear: Bool, averagePosition: (latitude: Double, longitude: Double, altHAE: Double)? = nil) {
        lastGSATalker = 0
        // The error model changes nothing for a fix the sentence left as it was.
        guard clear || averagePosition != nil else { return }
        if clear { fix = Snapshot() }
        if let p = averagePosition {
            fix.latitude = p.latitude
            fix.longitude = p.longitude
            fix.altHAE = p.altHAE
        }
        errorModel()
    }

    /// Runs one sentence through gpsd's handler, mode rule, clear, merge and error model.
    /// - Parameters:
    ///   - time: the sentence's UTC instant when gpsd would set `TIME_SET` (a time of day
    ///     and a known date), in milliseconds since 1970.
    ///   - clear: it starts a reporting cycle (`CLEAR_IS`, see `GPSDCycleDetector`).
    ///   - gsaUsed: for a GSA, the satellites used after it (accumulated over the run).
    mutating func update(_ sentence: NMEASentence, time: Int64?, clear: Bool, gsaUsed: Int) {
        var new = SentenceData()
        new.time = time
        var isGSA = false
        switch sentence {
        case .gga(let s):
            let lastLast = lastGGATalker
            lastGGATalker = s.talkerSecond
            if lastLast != 0 && lastLast != s.talkerSecond {
                latchMode = false
            } else {
                latchMode = s.timeOfDay == lastGGATime
            }
            if latchMode {
                new.mode = 1
            } else {
                lastGGATime = s.timeOfDay
            }
            if let p = s.position {
                new.mode = 2
                new.latitude = p.latitude
                new.longitude = p.longitude
                new.geoidSeparation = s.geoidSeparation
                if let alt = s.altitudeMSL {
                    new.altMSL = alt
                    if s.satellitesUsed >= 4 { new.mode = 3 }
                }
                if s.satellitesUsed < 3, s.talkerFirst == UInt8(ascii: "G"),
                    s.talkerSecond == UInt8(ascii: "P") || s.talkerSecond == UInt8(ascii: "N")
                {
                    new.mode = 1
                }
            } else {
                new.mode = 1
            }
            new.modeSet = true
        case .gsa(let s):
            isGSA = true
            let lastLast = lastGSATalker
            if !latchMode {
                if let m = s.mode {
                    new.mode = m
                    new.modeSet = true
                }
                satellitesUsed = gsaUsed
                lastGSATalker = s.talker
                if s.talker != UInt8(ascii: "P") { seenOtherGSA = true }
            }
            if seenOtherGSA && s.talker == UInt8(ascii: "P") {
                new.modeSet = false
            } else if lastLast != UInt8(ascii: "N") && s.talker == UInt8(ascii: "N") {
                new.modeSet = true
            }
        case .rmc(let s):
            new.modeSet = true
            guard s.isValid else {
                new.mode = 1
                break
            }
            if let p = s.position {
                new.latitude = p.latitude
                new.longitude = p.longitude
                if lastfix.mode <= 2 { new.mode = 2 } else if lastfix.mode == 3 { new.mode = 3 }
            } else {
                new.mode = 1
            }
            if let k = s.speedKnots { new.speed = k * 1852 / 3600 }
            if let t = s.trackDegrees { new.track = t }
            if satellitesUsed > 3 {
                new.mode = 3
            } else if fix.hasAltitude {
                new.mode = 3
            }
        case .gll(let s):
            new.modeSet = true
            if s.status == UInt8(ascii: "A"), s.faaMode != UInt8(ascii: "N"), let p = s.position {
                new.latitude = p.latitude
                new.longitude = p.longitude
                if fix.hasAltitude {
                    new.mode = 3
                } else if satellitesUsed > 3 {
                    new.mode = 3
                } else if fix.mode < 2 || !oldfix.hasAltitude {
                    new.mode = 2
                }
            } else {
                new.mode = 1
            }
        case .gns(let s):
            if s.mode == nil || s.mode == UInt8(ascii: "N") {
                new.mode = 1
                new.modeSet = true
            } else if s.navigationStatus == UInt8(ascii: "U") || s.navigationStatus == UInt8(ascii: "V") {
                break
            } else {
                new.modeSet = true
                if let p = s.position {
                    new.latitude = p.latitude
                    new.longitude = p.longitude
                    new.mode = 2
                    if let alt = s.altitudeMSL {
                        new.altMSL = alt
                        new.geoidSeparation = s.geoidSeparation
                        if s.satellitesUsed > 3 { new.mode = 3 }
                    }
                } else {
                    new.mode = 1
                }
            }
        case .pgrmz(let s):
            new.altMSL = s.altitudeMSL
            if let m = s.mode {
                new.mode = m
                new.modeSet = true
            }
        case .vtg(let s):
            if s.isUsable, let k = s.speedKnots {
                new.speed = k * 1852 / 3600
                new.track = s.trackDegrees
            }
        default:
            break
        }
        if !isGSA { lastGSATalker = 0 }

        // nmea_parse: don't downgrade mode if holding previous fix.
        if new.modeSet, fix.mode == 3, new.mode != 1, lastfix.hasAltitude || oldfix.hasAltitude {
            new.mode = 3
        }
        // gpsd_poll: CLEAR_IS on a sentence whose time of day moved by more than 10 ms.
        if clear { fix = Snapshot() }
        // gps_merge_fix
        if let t = new.time { fix.time = t }
        if new.latitude.isFinite {
            fix.latitude = new.latitude
            fix.longitude = new.longitude
        }
        if new.modeSet { fix.mode = new.mode }
        if let alt = new.altMSL {
            fix.altMSL = alt
            fix.altHAE = new.geoidSeparation.map { alt + $0 } ?? .nan
            fix.geoidSeparation = new.geoidSeparation ?? .nan
        }
        if let v = new.speed { fix.speed = v }
        if let v = new.track { fix.track = v }
        errorModel()
    }

    /// Runs one binary message (UBX, CASIC) through gpsd's core: the clear of a new cycle,
    /// `gps_merge_fix` of what the message set (finite values only, as for altitudes), the
    /// altitude gpsd completes from the receiver's geoid separation, and the error model.
    /// gpsd's NMEA state (GGA latch, GSA talkers) is not touched: the binary drivers keep
    /// their own.
    mutating func binary(_ s: GPSDBinaryMessage.Solution?, clear: Bool) {
        guard clear || s != nil else { return }
        if clear { fix = Snapshot() }
        if let s {
            if let t = s.time { fix.time = t }
            if s.latitude.isFinite, s.longitude.isFinite {
                // gpsd_error_model drops a position off the globe.
                let onGlobe = abs(s.latitude) <= 90 && abs(s.longitude) <= 180
                fix.latitude = onGlobe ? s.latitude : .nan
                fix.longitude = onGlobe ? s.longitude : .nan
            }
            if s.mode != 0 { fix.mode = s.mode }
            if s.altHAE.isFinite || s.altMSL.isFinite {
                if s.altHAE.isFinite { fix.altHAE = s.altHAE }
                if s.altMSL.isFinite { fix.altMSL = s.altMSL }
                if s.geoidSeparation.isFinite { fix.geoidSeparation = s.geoidSeparation }
            }
            // gpsd_error_model's sanity limit: 9999.9 m/s.
            if s.speed.isFinite, abs(s.speed) <= 9999.9 { fix.speed = s.speed }
            if s.climb.isFinite, abs(s.climb) <= 9999.9 { fix.climb = s.climb }
            if s.track.isFinite { fix.track = s.track.truncatingRemainder(dividingBy: 360) }
            if fix.track < 0 { fix.track += 360 }
            if let n = s.satellitesUsed { satellitesUsed = n }
        }
        // gpsd_error_model: the missing one of altMSL and altHAE from the geoid separation.
        if fix.geoidSeparation.isFinite {
            if fix.altHAE.isFinite, !fix.altMSL.isFinite {
                fix.altMSL = fix.altHAE - fix.geoidSeparation
            } else if !fix.altHAE.isFinite, fix.altMSL.isFinite {
                fix.altHAE = fix.altMSL + fix.geoidSeparation
            }
        }
        errorModel()
    }

    /// `gpsd_error_model`: the derived speed and climb.
    private mutating func errorModel() {
        guard fix.time > 0 else { return }
        var deltaTime = Double(fix.time - lastfix.time) / 1000
        if abs(deltaTime) > 0.0099 {
            oldfix = lastfix
        } else {
            deltaTime = Double(fix.time - oldfix.time) / 1000
        }
        if deltaTime > 0, fix.mode >= 2, oldfix.mode >= 2 {
            if !fix.speed.isFinite {
                let v = Self.earthDistance(fix.latitude, fix.longitude, oldfix.latitude, oldfix.longitude) / deltaTime
                fix.speed = abs(v) > 9999.9 ? .nan : v
            }
            if fix.mode >= 3, oldfix.mode >= 3, !fix.climb.isFinite {
                // gpsd uses altHAE, which it fills in from its geoid model where the receiver
                // gives no separation; with the separation constant between two fixes, the
                // difference of altMSL is the same.
                let now = fix.altHAE.isFinite && oldfix.altHAE.isFinite ? fix.altHAE : fix.altMSL
                let before = fix.altHAE.isFinite && oldfix.altHAE.isFinite ? oldfix.altHAE : oldfix.altMSL
                if now.isFinite, before.isFinite {
                    let c = (now - before) / deltaTime
                    fix.climb = abs(c) > 9999.9 ? .nan : c
                }
            }
        }
        lastfix = fix
    }

    /// gpsd's `earth_distance`: Vincenty's inverse formula on the WGS 84 ellipsoid, metres
    /// (Chris Veness's translation, as in `libgps/gpsutils.c`). NaN when it does not converge.
    static func earthDistance(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let a = 6_378_137.0, b = 6_356_752.314245, f = 1 / 298.257223563
        let rad = Double.pi / 180
        let l = (lon2 - lon1) * rad
        let u1 = atan((1 - f) * tan(lat1 * rad)), u2 = atan((1 - f) * tan(lat2 * rad))
        let sU1 = sin(u1), cU1 = cos(u1), sU2 = sin(u2), cU2 = cos(u2)
        var lambda = l, lambdaP = 0.0
        var sS = 0.0, cS = 0.0, s = 0.0, cSqA = 0.0, c2SM = 0.0
        var i = 100
        repeat {
            let sL = sin(lambda), cL = cos(lambda)
            let x = cU2 * sL, y = cU1 * sU2 - sU1 * cU2 * cL
            sS = (x * x + y * y).squareRoot()
            if sS == 0 { return 0 }
            cS = sU1 * sU2 + cU1 * cU2 * cL
            s = atan2(sS, cS)
            let sA = cU1 * cU2 * sL / sS
            cSqA = 1 - sA * sA
            c2SM = cS - 2 * sU1 * sU2 / cSqA
            if !c2SM.isFinite { c2SM = 0 }
            let c = f / 16 * cSqA * (4 + f * (4 - 3 * cSqA))
            lambdaP = lambda
            lambda = l + (1 - c) * f * sA * (s + c * sS * (c2SM + c * cS * (2 * c2SM * c2SM - 1)))
            i -= 1
        } while abs(lambda - lambdaP) > 1e-12 && i > 0
        if i == 0 { return .nan }
        let uSq = cSqA * (a * a - b * b) / (b * b)
        let bigA = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
        let bigB = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
        let dS =
            bigB * sS
            * (c2SM + bigB / 4 * (cS * (-1 + 2 * c2SM * c2SM) - bigB / 6 * c2SM * (-3 + 4 * sS * sS) * (-3 + 4 * c2SM * c2SM)))
        return b * bigA * (s - dS)
    }
}
