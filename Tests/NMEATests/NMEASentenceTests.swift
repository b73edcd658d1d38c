import NMEA
import Testing

@Suite("NMEASentence parsers")
struct NMEASentenceTests {
    func parse(_ payload: String) -> NMEASentence? {
        Array(payload.utf8).withUnsafeBytes { NMEASentence.parse(payload: $0) }
    }

    @Test("RMC: time, status, position, knots, track, date, variation, FAA mode")
    func rmc() throws {
        guard case .rmc(let s) = parse("GPRMC,225446.33,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,E,A") else {
            Issue.record("not RMC"); return
        }
        #expect(s.timeOfDay == ((22 * 60 + 54) * 60 + 46) * 1000 + 330)
        #expect(s.isValid)
        #expect(abs((s.position?.latitude ?? 0) - 49.274166667) < 1e-8)
        #expect(abs((s.position?.longitude ?? 0) - -123.185333333) < 1e-8)
        #expect(s.speedKnots == 0.5)
        #expect(s.trackDegrees == 54.7)
        #expect(s.date == NMEADate(year: 1994, month: 11, day: 19))
        #expect(s.magneticVariation == 20.3)
        #expect(s.faaMode == UInt8(ascii: "A"))
        guard case .rmc(let v) = parse("GPRMC,,V,,,,,,,,,,N") else { Issue.record("not RMC"); return }
        #expect(!v.isValid && v.position == nil && v.timeOfDay == nil && v.magneticVariation == nil)
    }

    @Test("GGA: quality, satellites, HDOP, altitude, separation")
    func gga() {
        guard case .gga(let s) = parse("GPGGA,123519,4807.038,N,01131.324,E,1,08,0.9,545.4,M,46.9,M,,") else {
            Issue.record("not GGA"); return
        }
        #expect(s.quality == 1 && s.satellitesUsed == 8 && s.hdop == 0.9)
        #expect(s.altitudeMSL == 545.4 && s.geoidSeparation == 46.9)
        guard case .gga(let e) = parse("GPGGA,,,,,,0,,99.99,,M,,M,,") else { Issue.record("not GGA"); return }
        #expect(e.quality == 0 && e.position == nil && e.hdop == nil && e.satellitesUsed == 0)
    }

    @Test("GNS, GLL, VTG, ZDA, GST fields")
    func others() {
        guard case .gns(let gns) = parse("GNGNS,224749.00,3333.4268304,N,11153.3538273,W,DAN,19,0.6,406.110,-26.294,6.0,0138,S") else {
            Issue.record("not GNS"); return
        }
        #expect(gns.mode == UInt8(ascii: "D") && gns.satellitesUsed == 19 && gns.altitudeMSL == 406.110 && gns.geoidSeparation == -26.294)
        #expect(gns.navigationStatus == UInt8(ascii: "S"))
        guard case .gll(let gll) = parse("GPGLL,4916.45,N,12311.12,W,225444,A,A") else { Issue.record("not GLL"); return }
        #expect(gll.status == UInt8(ascii: "A") && gll.faaMode == UInt8(ascii: "A") && gll.timeOfDay == 82_484_000)
        guard case .vtg(let vtg) = parse("GPVTG,054.7,T,034.4,M,005.5,N,010.2,K,A") else { Issue.record("not VTG"); return }
        #expect(vtg.trackDegrees == 54.7 && vtg.magneticTrackDegrees == 34.4 && vtg.speedKnots == 5.5 && vtg.faaMode == UInt8(ascii: "A"))
        guard case .zda(let zda) = parse("GPZDA,160012.71,11,03,2004,-1,00") else { Issue.record("not ZDA"); return }
        #expect(zda.date == NMEADate(year: 2004, month: 3, day: 11) && zda.timeOfDay == 57_612_710)
        guard case .zda(let bad) = parse("GPZDA,160012.71,11,13,2004,,") else { Issue.record("not ZDA"); return }
        #expect(bad.date == nil)
        guard case .gst(let gst) = parse("GPGST,112257.00,0.387,317.719,3.872,1.791,317.563,10.659,180.746") else {
            Issue.record("not GST"); return
        }
        #expect(gst.latitudeSigma == 317.563 && gst.longitudeSigma == 10.659 && gst.altitudeSigma == 180.746)
    }

    @Test("GSA: mode, used satellites without duplicates, DOPs, NMEA 4.10 system id")
    func gsa() {
        guard case .gsa(let a) = parse("GNGSA,A,3,13,16,21,15,10,29,27,20,,,,,1.05,0.64,0.83,1") else { Issue.record("not GSA"); return }
        #expect(a.mode == 3 && a.used.count == 8 && a.pdop == 1.05 && a.hdop == 0.64 && a.vdop == 0.83)
        guard case .gsa(let b) = parse("GNGSA,A,3,13,12,22,19,08,21,,,,,,,1.05,0.64,0.83,4") else { Issue.record("not GSA"); return }
        var all = a.used
        all.formUnion(b.used)
        #expect(all.count == 14)  // BeiDou 13 is not GPS 13
        guard case .gsa(let c) = parse("GPGSA,A,1,,,,,,,,,,,,,99.99,99.99,99.99") else { Issue.record("not GSA"); return }
        #expect(c.mode == 1 && c.used.count == 0 && c.pdop == nil)
        guard case .gsa(let d) = parse("GPGSA,A,3,27,23,13,07,25,,,,,,,,,,,,,,,,,,,,07.9,06.0,05.2") else {
            Issue.record("not GSA"); return
        }
        #expect(d.used.count == 5 && d.pdop == 7.9 && d.vdop == 5.2)
    }

    @Test("headings: HDT and THS true, HDG magnetic + deviation + variation, HDM magnetic")
    func headings() {
        guard case .heading(.hdt, let hdt) = parse("HEHDT,4.0,T") else { Issue.record("not HDT"); return }
        #expect(hdt.trueHeading == 4.0 && hdt.magneticHeading == nil)
        guard case .heading(.ths, let ths) = parse("GPTHS,77.52,E") else { Issue.record("not THS"); return }
        #expect(ths.trueHeading == 77.52)
        #expect(parse("GPTHS,77.52,V") == nil)
        guard case .heading(.hdg, let hdg) = parse("SDHDG,235.3,1.0,W,1.3,E") else { Issue.record("not HDG"); return }
        #expect(hdg.magneticHeading == 234.3 && hdg.deviation == -1.0 && hdg.variation == 1.3)
        #expect(abs((hdg.trueHeading ?? 0) - 235.6) < 1e-9)
        guard case .heading(.hdg, let noVar) = parse("SDHDG,10.0,,,,") else { Issue.record("not HDG"); return }
        #expect(noVar.trueHeading == nil && noVar.magneticHeading == 10.0)
        guard case .heading(.hdm, let hdm) = parse("APHDM,359.9,M") else { Issue.record("not HDM"); return }
        #expect(hdm.magneticHeading == 359.9 && hdm.trueHeading == nil)
        #expect(parse("HEHDT,400.0,T") == nil)
    }

    @Test("any two-letter talker is accepted; proprietary and unknown types are not")
    func talkers() {
        for talker in ["GP", "GN", "GL", "GA", "GB", "BD", "GQ", "QZ", "GI", "IN", "HE", "HC", "SD", "AP"] {
            #expect(parse("\(talker)HDT,12.5,T")?.kind == .hdt, "\(talker)")
        }
        #expect(parse("PGRME,15.0,M,45.0,M,25.0,M") == nil)
        #expect(parse("PASHR,204132.000,010.51,T,+00.39") == nil)
        #expect(parse("GPXTE,,,,,N,N") == nil)
        #expect(parse("GPN") == nil)
        #expect(parse("gpRMC,,V") == nil)
    }
}
