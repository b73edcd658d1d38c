import GNSS
import NMEA
import Testing

@Suite("Epoch assembly")
struct EpochAssemblerTests {
    /// One u-blox-like cycle at the given second.
    func cycle(_ second: Int, lat: String = "4807.038", gsaMode: Int = 3) -> String {
        let t = String(format2: second)
        return sentence("GNRMC,1235\(t).00,A,\(lat),N,01131.324,E,10.0,054.7,191124,,,A")
            + sentence("GNVTG,054.7,T,,M,10.0,N,18.5,K,A")
            + sentence("GNGGA,1235\(t).00,\(lat),N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,")
            + sentence("GNGSA,A,\(gsaMode),13,16,21,15,,,,,,,,,1.5,0.9,1.2,1")
            + sentence("GNGSA,A,\(gsaMode),82,66,81,,,,,,,,,,1.5,0.9,1.2,2")
            + sentence("GPGSV,1,1,04,13,48,243,32,16,66,049,38,21,15,070,31,15,32,280,35")
            + sentence("GNGST,1235\(t).00,1.0,2.0,1.5,45.0,3.0,4.0,5.0")
    }

    @Test("a cycle becomes one fix with every value the receiver gave")
    func fullFix() throws {
        let (events, stats) = decodeAll(cycle(10) + cycle(11))
        let fixes = events.compactMap(\.fix)
        #expect(fixes.count == 2)
        let f = try #require(fixes.first)
        #expect(f.time.iso8601 == "2024-11-19T12:35:10.000Z")
        #expect(abs(f.latitude - 48.1173) < 1e-9 && abs(f.longitude - 11.522066667) < 1e-8)
        #expect(f.altitudeMSL == 545.4 && f.geoidSeparation == 46.9)
        #expect(f.altitudeHAE.map { abs($0 - 592.3) < 1e-9 } == true)
        #expect(f.speed == 10.0 * 1852 / 3600)
        #expect(f.track == 54.7)
        #expect(f.mode == .threeD && f.quality == .gps)
        #expect(f.satellitesUsed == 7)
        #expect(f.hdop == 0.9 && f.vdop == 1.2 && f.pdop == 1.5)
        #expect(f.eph == 5.0 && f.epv == 5.0)
        #expect(f.climb == nil && f.magneticVariation == nil)
        #expect(stats.fixes == 2 && stats.badChecksums == 0 && stats.ignored == 0)
    }

    @Test("once the cycle ender is learned, a fix is out before the next cycle starts")
    func latency() {
        var decoder = NMEADecoder()
        var fixesAfterLine: [Int] = []
        var line = 0
        let text = (10..<14).map { cycle($0) }.joined()
        for l in text.split(separator: "\r\n") {
            line += 1
            Array((l + "\r\n").utf8).withUnsafeBytes { raw in
                decoder.decode(raw) { if $0.fix != nil { fixesAfterLine.append(line) } }
            }
        }
        decoder.finish { if $0.fix != nil { fixesAfterLine.append(-1) } }
        // 7 lines per cycle. Cycle 1 is emitted when cycle 2 starts (line 8); from then on
        // each cycle is emitted on its own last fix sentence (GST, line 7 of the cycle).
        #expect(fixesAfterLine == [8, 14, 21, 28])
    }

    @Test("no usable position: .noFix once, never a Fix; the fix after it is emitted")
    func noFix() {
        let void = sentence("GPRMC,120000.00,V,,,,,,,191124,,,N") + sentence("GPGGA,120000.00,,,,,0,00,99.99,,,,,,")
        let void2 = sentence("GPRMC,120001.00,V,,,,,,,191124,,,N") + sentence("GPGGA,120001.00,,,,,0,00,99.99,,,,,,")
        // gpsd learns the GGA as its cycle ender: the cycle is reported on its GGA.
        let good =
            sentence("GPRMC,120002.00,A,4807.038,N,01131.324,E,0.0,,191124,,,A")
            + sentence("GPGGA,120002.00,4807.038,N,01131.324,E,1,08,0.9,,,,,,")
        let (events, _) = decodeAll(void + void2 + good)
        #expect(events == [.state(.noFix), events.last].compactMap { $0 })
        #expect(events.last?.fix?.mode == .twoD)
        #expect(events.last?.fix?.speed == 0)
        #expect(events.last?.fix?.track == nil)
    }

    @Test("a cycle with no date is not a fix; nothing is 0 for unknown")
    func noDate() {
        let (events, _) = decodeAll(sentence("GPGGA,120000.00,4807.038,N,01131.324,E,1,08,0.9,,,,,,"))
        #expect(events.compactMap(\.fix).isEmpty)
        let (dated, _) = decodeAll(
            sentence("GPZDA,120000.00,19,11,2024,,") + sentence("GPGGA,120000.00,4807.038,N,01131.324,E,1,08,0.9,,,,,,"))
        let f = dated.compactMap(\.fix).first
        #expect(f?.time.iso8601 == "2024-11-19T12:00:00.000Z")
        #expect(f?.mode == .twoD && f?.altitudeMSL == nil && f?.altitudeHAE == nil && f?.speed == nil && f?.eph == nil)
    }

    @Test("GGA after midnight uses the next day until a date arrives")
    func midnight() {
        // The GGA is gpsd's cycle ender (the last timed sentence before the time changes).
        let text =
            sentence("GPRMC,235959.00,A,4807.038,N,01131.324,E,0.0,0.0,191124,,,A")
            + sentence("GPGGA,235959.00,4807.038,N,01131.324,E,1,08,0.9,545.4,M,,M,,")
            + sentence("GPGGA,000000.00,4807.038,N,01131.324,E,1,08,0.9,545.4,M,,M,,")
        let times = decodeAll(text).events.compactMap(\.fix).map(\.time.iso8601)
        #expect(times == ["2024-11-19T23:59:59.000Z", "2024-11-20T00:00:00.000Z"])
    }

    @Test("as gpsd_utc_resolve: a date before 2017 gets 1024 weeks, unless a # Date: comment (gpsd's regression mode) came")
    func weekRollover() {
        let rmc = sentence("GPRMC,120000.00,A,4807.038,N,01131.324,E,0.0,0.0,190214,,,A")  // 2014-02-19
        func time(_ text: String) -> String? { decodeAll(text).events.compactMap(\.fix).first?.time.iso8601 }
        #expect(time(rmc) == "2033-10-05T12:00:00.000Z")
        #expect(time("# Date: 2014-02-19\n" + rmc) == "2014-02-19T12:00:00.000Z")
        // gpsfake does not pass the comments of a recording with a delay cookie on to gpsd.
        #expect(time("# Date: 2014-02-19\n# Delay-Cookie: | 0.01\n" + rmc) == "2033-10-05T12:00:00.000Z")
        #expect(time(sentence("GPRMC,120000.00,A,4807.038,N,01131.324,E,0.0,0.0,010117,,,A")) == "2017-01-01T12:00:00.000Z")
    }

    @Test("headings carry the cycle time; HDG is true only with variation; no cycle, no time")
    func headings() {
        let rmc = sentence("GPRMC,120000.00,A,4807.038,N,01131.324,E,0.0,0.0,191124,,,A")
        let hdg = decodeAll(rmc + sentence("HCHDG,98.3,0.0,E,12.6,W")).events.compactMap(\.heading)
        #expect(hdg.map(\.source) == [.hdg])
        #expect(hdg.first?.time?.iso8601 == "2024-11-19T12:00:00.000Z")
        #expect(hdg.first?.trueHeading.map { abs($0 - 85.7) < 1e-9 } == true && hdg.first?.magneticHeading == 98.3)
        let hdm = decodeAll(rmc + sentence("HCHDM,98.3,M")).events.compactMap(\.heading)
        #expect(hdm.first?.trueHeading == nil && hdm.first?.magneticHeading == 98.3 && hdm.first?.source == .hdm)
        #expect(decodeAll(sentence("HEHDT,274.07,T")).events.first?.heading?.time == nil)
    }

    /// A chart-plotter-like stream: GGA (with altitude) only every other second, GLL or
    /// RMC alone in between, no GSA.
    func staggered(_ second: Int, gga: Bool) -> String {
        let t = "1200\(String(format2: second)).00"
        return gga
            ? sentence("GPGGA,\(t),4807.038,N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,")
                + sentence("GPRMC,\(t),A,4807.038,N,01131.324,E,5.0,054.7,191124,,,A")
            : sentence("GPGLL,4807.038,N,01131.324,E,\(t),A,A")
    }

    @Test("fix mode is the receiver's: a staggered GGA/GLL stream stays 3D, altitude left out; reported when gpsd reports")
    func staggeredKeepsMode() {
        let text =
            (0..<6).map { staggered($0, gga: $0 % 2 == 0) }.joined()
            + sentence("GPRMC,120006.00,A,4807.038,N,01131.324,E,5.0,054.7,191124,,,A")
        let fixes = decodeAll(text).events.compactMap(\.fix)
        // gpsd reports every sentence until it learns a cycle ender (seconds 0 and 1); at
        // second 2 it tags the GLL (the last timed sentence before the time changed), so
        // from then on only the GLL seconds are reported: 0, 1, 3, 5.
        #expect(fixes.map { Int($0.time.millisecondsSince1970 / 1000 % 60) } == [0, 1, 3, 5])
        #expect(fixes.map(\.mode) == Array(repeating: .threeD, count: 4))
        #expect(fixes.map { $0.altitudeMSL != nil } == [true, false, false, false])
        #expect(fixes.allSatisfy { $0.altitudeMSL == nil ? $0.altitudeHAE == nil : true })
    }

    @Test("a staggered stream without a 3D fix stays 2D")
    func staggeredTwoD() {
        let text =
            sentence("GPGGA,120000.00,4807.038,N,01131.324,E,1,08,0.9,,,,,,")
            + sentence("GPRMC,120000.00,A,4807.038,N,01131.324,E,5.0,054.7,191124,,,A")
            + sentence("GPGLL,4807.038,N,01131.324,E,120001.00,A,A")
        #expect(decodeAll(text).events.compactMap(\.fix).map(\.mode) == [.twoD, .twoD])
    }

    @Test("as gpsd: a GSA mode 2 does not lower a 3D fix while an altitude is held; mode 1 does")
    func gsaTwoKeepsThreeD() {
        // gpsd's nmea_parse: "don't downgrade mode if holding previous fix".
        let text = cycle(10) + cycle(11, gsaMode: 2) + cycle(12, gsaMode: 2) + cycle(13, gsaMode: 1) + cycle(14)
        let events = decodeAll(text).events
        #expect(events.compactMap(\.fix).map(\.mode) == [.threeD, .threeD, .threeD, .threeD])
        #expect(events.contains(.state(.noFix)))
    }

    @Test("as gpsd: a GSA mode 2 with 3 satellites is the mode when the GGA has no altitude")
    func gsaTwoWithoutAltitude() {
        let text = (10..<13).map { second in
            sentence("GPGGA,1200\(second).00,4807.038,N,01131.324,E,1,08,0.9,,,,,,")
                + sentence("GPGSA,A,2,13,16,21,,,,,,,,,,1.5,0.9,1.2")
                + sentence("GPRMC,1200\(second).00,A,4807.038,N,01131.324,E,5.0,054.7,191124,,,A")
        }.joined()
        #expect(decodeAll(text).events.compactMap(\.fix).map(\.mode) == [.twoD, .twoD, .twoD])
    }

    @Test("as gpsd's error model: speed from successive positions when the receiver sends none, climb from altitudes")
    func derivedSpeedAndClimb() throws {
        // GGA only: 0.001' of latitude a second is 1.852 m/s; the altitude rises 0.5 m a second.
        let text =
            sentence("GPZDA,120000.00,19,11,2024,00,00")
            + (0..<3).map { i in
                sentence("GPGGA,12000\(i).00,4807.0\(38 + i),N,01131.324,E,1,08,0.9,\(545.0 + 0.5 * Double(i)),M,46.9,M,,")
            }.joined()
        let fixes = decodeAll(text).events.compactMap(\.fix)
        #expect(fixes.count == 3)
        #expect(fixes.first?.speed == nil && fixes.first?.climb == nil)
        let last = try #require(fixes.last)
        // Vincenty on WGS 84, as gpsd's earth_distance: a little more than 1.852 m at 48° N.
        #expect(try abs(#require(last.speed) - 1.8532) < 0.001)
        #expect(try abs(#require(last.climb) - 0.5) < 1e-9)
    }

    /// A GGA-only stream dated by one ZDA: gpsd reports each GGA (its cycle ender).
    func ggaStream(_ ggas: [String]) -> String {
        sentence("GPZDA,120000.00,19,11,2024,00,00")
            + ggas.enumerated().map { sentence("GPGGA,12000\($0.offset).00,\($0.element)") }.joined()
    }

    @Test("GGA quality 0 ends the fix; the fix after it is 2D until the receiver says 3D")
    func ggaQualityZero() {
        let text = ggaStream([
            "4807.038,N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,", "4807.038,N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,",
            "4807.038,N,01131.324,E,0,00,,,,,,,", "4807.038,N,01131.324,E,1,08,0.9,,,,,,",
            "4807.038,N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,",
        ])
        let events = decodeAll(text).events
        #expect(events.map { $0.fix?.mode } == [.threeD, .threeD, nil, .twoD, .threeD])
        #expect(events[2] == .state(.noFix))
    }

    @Test("RMC or GLL status V ends the fix, whatever the receiver said before")
    func statusV() {
        // RMC alone: the RMC is gpsd's cycle ender; an RMC V registers no time, so it is
        // reported as the sentence right after the ender. GLL alone: a GLL continues the
        // cycle, so gpsd never learns an ender and reports every one.
        func rmc(_ s: Int, _ status: String) -> String {
            sentence("GPRMC,12000\(s).00,\(status),4807.038,N,01131.324,E,5.0,054.7,191124,,,A")
        }
        func gll(_ s: Int, _ status: String) -> String {
            sentence("GPGLL,4807.038,N,01131.324,E,12000\(s).00,\(status),A")
        }
        let zda = sentence("GPZDA,120000.00,19,11,2024,00,00")
        for text in [
            rmc(0, "A") + rmc(1, "A") + rmc(2, "V") + rmc(3, "A"),
            zda + gll(0, "A") + gll(1, "A") + gll(2, "V") + gll(3, "A"),
        ] {
            let events = decodeAll(text).events
            #expect(events.map { $0.fix?.mode } == [.twoD, .twoD, nil, .twoD])
        }
    }

    @Test("a cycle with no position ends the fix")
    func noPosition() {
        let text = ggaStream([
            "4807.038,N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,", "4807.038,N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,",
            ",,,,1,08,0.9,,,,,,", "4807.038,N,01131.324,E,1,08,0.9,,,,,,",
        ])
        let events = decodeAll(text).events
        #expect(events.map { $0.fix?.mode } == [.threeD, .threeD, nil, .twoD])
    }

    @Test("bad and missing checksums are counted and lose nothing else")
    func checksums() {
        let good = sentence("GPRMC,120000.00,A,4807.038,N,01131.324,E,0.0,0.0,191124,,,A")
        let bad = "$GPRMC,120001.00,A,4807.038,N,01131.324,E,0.0,0.0,191124,,,A*00\r\n"
        let bare = "$GPRMC,120002.00,A,4807.038,N,01131.324,E,0.0,0.0,191124,,,A\r\n"
        let strict = decodeAll(good + bad + bare)
        #expect(strict.events.compactMap(\.fix).map(\.time.iso8601) == ["2024-11-19T12:00:00.000Z"])
        #expect(strict.statistics.badChecksums == 1 && strict.statistics.missingChecksums == 1 && strict.statistics.sentences == 1)
        let lenient = decodeAll(good + bad + bare, options: .init(acceptsMissingChecksum: true))
        #expect(lenient.events.compactMap(\.fix).count == 2)
        #expect(lenient.statistics.badChecksums == 1 && lenient.statistics.sentences == 2)
    }

    @Test("proprietary, unknown and AIS sentences are ignored, not errors")
    func ignored() {
        let text =
            sentence("PGRME,15.0,M,45.0,M,25.0,M") + sentence("GPXTE,,,,,N,N")
            + "!AIVDM,1,1,,A,13aEOK?P00PD2wVMdLDRhgvL289?,0*26\r\n"
        let r = decodeAll(text)
        #expect(r.events.isEmpty)
        #expect(r.statistics.ignored == 3 && r.statistics.sentences == 3 && r.statistics.badChecksums == 0)
    }
}

extension String {
    /// Two-digit zero-padded decimal.
    init(format2 value: Int) {
        self = value < 10 ? "0\(value)" : "\(value)"
    }
}
