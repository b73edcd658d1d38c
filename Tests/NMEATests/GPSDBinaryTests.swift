import Foundation
import GNSS
import NMEA
import Testing

/// UBX NAV-PVT (92 bytes) at 2024-03-24 20:42:`second`, 3D unless `fixType` says otherwise.
func navPVT(
    iTOW: UInt32, second: UInt8, nano: Int32 = 0, fixType: UInt8 = 3, latE7: Int32 = 464_046_109, lonE7: Int32 = -1_170_207_312,
    heightMM: Int32 = 272_081, hMSLmm: Int32 = 290_253, gSpeedMMs: Int32 = 15, headMotE5: Int32 = 3_077_060
) -> [UInt8] {
    var p = Payload(92)
    p.put(0, le(iTOW))
    p.put(4, le(UInt16(2024)))
    p.put(6, [3, 24, 20, 42, second, 0x07])  // month, day, hour, minute, second, valid date+time
    p.put(16, le(nano))
    p.put(20, [fixType, 0x01, 0, 6])
    p.put(24, le(lonE7))
    p.put(28, le(latE7))
    p.put(32, le(heightMM))
    p.put(36, le(hMSLmm))
    p.put(40, le(UInt32(13_223)))
    p.put(44, le(UInt32(18_590)))
    p.put(60, le(gSpeedMMs))
    p.put(64, le(headMotE5))
    return ubxFrame(0x01, 0x07, p.bytes)
}

/// CASIC NAV-PV (80 bytes), 3D position and velocity.
func casicPV(runTime: UInt32, lat: Double, lon: Double, height: Float, sep: Float, speed: Float, heading: Float) -> [UInt8] {
    var p = Payload(80)
    p.put(0, le(runTime))
    p.put(4, [7, 7, 0, 17])  // posValid 3D, velValid 3D, system, numSV
    p.put(16, le(lon.bitPattern))
    p.put(24, le(lat.bitPattern))
    p.put(32, le(height.bitPattern))
    p.put(36, le(sep.bitPattern))
    p.put(40, le(Float(4).bitPattern))  // hAcc variance, m²
    p.put(44, le(Float(9).bitPattern))
    p.put(56, le(Float(0.5).bitPattern))  // velU
    p.put(64, le(speed.bitPattern))
    p.put(68, le(heading.bitPattern))
    return casicFrame(0x01, 0x03, p.bytes)
}

/// CASIC NAV-TIMEUTC (24 bytes) at 2026-08-06 07:15:`second`.`ms`, UTC and date valid.
func casicTimeUTC(runTime: UInt32, second: UInt8, ms: UInt16 = 0) -> [UInt8] {
    var p = Payload(24)
    p.put(0, le(runTime))
    p.put(12, le(ms))
    p.put(14, le(UInt16(2026)))
    p.put(16, [8, 6, 7, 15, second, 0x07, 0, 3])
    return casicFrame(0x01, 0x10, p.bytes)
}

func decodeBytes(_ bytes: [UInt8]) -> (events: [GNSSEvent], statistics: NMEAStatistics) {
    var decoder = NMEADecoder()
    let events = decoder.decode(bytes)
    return (events, decoder.statistics)
}

/// The last fix published for each time (what a consumer keeps).
func lastFixes(_ events: [GNSSEvent]) -> [String: Fix] {
    var out: [String: Fix] = [:]
    for f in events.compactMap(\.fix) { out[f.time.iso8601] = f }
    return out
}

@Suite("gpsd's binary drivers (UBX, CASIC) and gpsfake's delay cookie")
struct GPSDBinaryTests {
    @Test("NAV-PVT after the NMEA of its second is gpsd's last report: its values are published for that time")
    func ubxPVT() throws {
        func nmea(_ s: Int) -> [UInt8] {
            Array(
                (sentence("GNRMC,20422\(s).00,A,4624.27666,N,11701.24387,W,0.029,,240324,,,A")
                    + sentence("GNGGA,20422\(s).00,4624.27666,N,11701.24387,W,1,06,1.36,288.9,M,-18.2,M,,")).utf8)
        }
        var bytes: [UInt8] = []
        for s in 5...7 {
            bytes += nmea(s)
            bytes += navPVT(iTOW: UInt32(74_563_000 + (s - 5) * 1000), second: UInt8(20 + s), latE7: 464_046_100 + Int32(s))
            bytes += navTimeGPS(iTOW: UInt32(74_563_000 + (s - 5) * 1000))
        }
        let (events, stats) = decodeBytes(bytes)
        #expect(stats.binaryFrames == 6)
        let fixes = lastFixes(events)
        // The first UBX cycle only teaches gpsd its cycle ender (NAV-TIMEGPS): the NMEA fix stands.
        #expect(fixes["2024-03-24T20:42:25.000Z"]?.altitudeMSL == 288.9)
        for s in 6...7 {
            let f = try #require(fixes["2024-03-24T20:42:2\(s).000Z"])
            #expect(abs(f.latitude - (46.40461 + Double(s) * 1e-7)) < 1e-9)
            #expect(abs(f.longitude - -117.0207312) < 1e-9)
            #expect(f.altitudeMSL.map { abs($0 - 290.253) < 1e-9 } == true)
            #expect(f.altitudeHAE.map { abs($0 - 272.081) < 1e-9 } == true)
            #expect(f.speed.map { abs($0 - 0.015) < 1e-9 } == true)
            #expect(f.track.map { abs($0 - 30.7706) < 1e-9 } == true)
            #expect(f.mode == .threeD)
            #expect(f.hdop == nil && f.eph.map { abs($0 - 13.223) < 1e-9 } == true)
        }
        #expect(!events.contains { if case .state = $0 { true } else { false } })
    }

    @Test("NAV-PVT's mode is gpsd's: fixType 2 and dead reckoning are 2D, 0 is no fix")
    func ubxModes() {
        func fixes(_ fixType: UInt8) -> [Fix] {
            var bytes: [UInt8] = []
            for k in 0..<3 {
                let t = UInt32(1000 * (k + 1))
                bytes += navPVT(iTOW: t, second: UInt8(10 + k), fixType: fixType) + navTimeGPS(iTOW: t)
            }
            return decodeBytes(bytes).events.compactMap(\.fix)
        }
        #expect(fixes(2).map(\.mode) == [.twoD, .twoD])
        #expect(fixes(1).map(\.mode) == [.twoD, .twoD])
        #expect(fixes(4).map(\.mode) == [.threeD, .threeD])
        #expect(fixes(0).isEmpty)
    }

    @Test("UTC with a negative or sub-millisecond nano part is rounded to the millisecond as gpsd prints it")
    func pvtTimeRounding() {
        func time(nano: Int32) -> String? {
            var bytes: [UInt8] = []
            for k in 0..<2 {
                let t = UInt32(1000 * (k + 1))
                bytes += navPVT(iTOW: t, second: UInt8(10 + k), nano: nano) + navTimeGPS(iTOW: t)
            }
            return decodeBytes(bytes).events.compactMap(\.fix).last?.time.iso8601
        }
        #expect(time(nano: 257_666) == "2024-03-24T20:42:11.000Z")
        #expect(time(nano: 600_000) == "2024-03-24T20:42:11.001Z")
        #expect(time(nano: -400_000) == "2024-03-24T20:42:11.000Z")
        #expect(time(nano: -600_000) == "2024-03-24T20:42:10.999Z")
    }

    @Test("NAV-SOL gives the climb gpsd reports (its ECEF velocity's vertical), which NAV-PVT keeps")
    func solClimb() throws {
        // At 46.4046 N 117.0207 W, 0.07 m/s straight up, expressed in ECEF (cm/s).
        let lat = 46.4046 * Double.pi / 180, lon = -117.0207 * Double.pi / 180
        func sol(_ iTOW: UInt32) -> [UInt8] {
            var p = Payload(52)
            p.put(0, le(iTOW))
            p.put(10, [3])
            p.put(12, le(Int32(-200_172_379)))
            p.put(16, le(Int32(-392_509_248)))
            p.put(20, le(Int32(459_657_282)))
            let up = 7.0  // cm/s
            p.put(28, le(Int32((up * cos(lat) * cos(lon)).rounded())))
            p.put(32, le(Int32((up * cos(lat) * sin(lon)).rounded())))
            p.put(36, le(Int32((up * sin(lat)).rounded())))
            p.put(47, [6])
            return ubxFrame(0x01, 0x06, p.bytes)
        }
        var bytes: [UInt8] = []
        for k in 0..<3 {
            let t = UInt32(1000 * (k + 1))
            bytes += sol(t) + navPVT(iTOW: t, second: UInt8(10 + k)) + navTimeGPS(iTOW: t)
        }
        let (events, _) = decodeBytes(bytes)
        let f = try #require(events.compactMap(\.fix).last)
        #expect(f.climb.map { abs($0 - 0.07) < 0.006 } == true)
        #expect(f.satellitesUsed == 6)
        #expect(!events.contains { if case .state = $0 { true } else { false } })
    }

    @Test("CASIC NAV-PV and NAV-TIMEUTC after the NMEA: altMSL is height minus the receiver's geoid separation")
    func casic() throws {
        var bytes: [UInt8] = []
        for k in 0..<3 {
            let s = 51 + k
            bytes += Array(
                (sentence("GNGGA,0715\(s).000,4739.71754,N,12219.58177,W,1,17,0.8,77.5,M,-21.6,M,,")
                    + sentence("GNRMC,0715\(s).000,A,4739.71754,N,12219.58177,W,0.00,286.35,060826,,,A,V")).utf8)
            let run = UInt32(10_000 + 1000 * k)
            bytes += casicPV(runTime: run, lat: 47.661959153, lon: -122.326362865, height: 55.5, sep: -21.75, speed: 0.25, heading: 286.5)
            bytes += casicTimeUTC(runTime: run, second: UInt8(s)) + casicGPSInfo(runTime: run)
        }
        let (events, stats) = decodeBytes(bytes)
        #expect(stats.binaryFrames == 9)
        let fixes = lastFixes(events)
        // The first CASIC cycle teaches the ender: gpsd's report there has no time yet.
        #expect(fixes["2026-08-06T07:15:51.000Z"]?.altitudeMSL == 77.5)
        for s in 52...53 {
            let f = try #require(fixes["2026-08-06T07:15:\(s).000Z"])
            #expect(f.altitudeMSL == 77.25 && f.altitudeHAE == 55.5 && f.geoidSeparation == -21.75)
            #expect(abs(f.latitude - 47.661959153) < 1e-12 && abs(f.longitude - -122.326362865) < 1e-12)
            #expect(f.speed == 0.25 && f.track == 286.5 && f.climb == 0.5)
            #expect(f.mode == .threeD && f.satellitesUsed == 17 && f.eph == 2 && f.epv == 3)
        }
    }

    @Test("a binary position off the globe is dropped, as gpsd_error_model drops it; no fix comes of it")
    func offGlobe() {
        func fixes(lat: Double) -> [Fix] {
            var bytes: [UInt8] = []
            for k in 0..<3 {
                let run = UInt32(1000 * (k + 1))
                bytes += casicPV(runTime: run, lat: lat, lon: 11.5, height: 500, sep: 47, speed: 1, heading: 90)
                bytes += casicTimeUTC(runTime: run, second: UInt8(10 + k)) + casicGPSInfo(runTime: run)
            }
            return decodeBytes(bytes).events.compactMap(\.fix)
        }
        #expect(fixes(lat: 48.25).map(\.latitude) == [48.25, 48.25])
        #expect(fixes(lat: 95).isEmpty)
        #expect(fixes(lat: .infinity).isEmpty)
    }
}
