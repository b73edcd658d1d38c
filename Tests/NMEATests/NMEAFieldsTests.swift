import NMEA
import Testing

@Suite("NMEAFields")
struct NMEAFieldsTests {
    func withFields<R>(_ payload: String, _ body: (NMEAFields) -> R) -> R {
        Array(payload.utf8).withUnsafeBytes { NMEAFields.withFields(of: $0, body) }
    }

    @Test("fields split on commas, empty ones kept, past the end reads empty")
    func tokenizer() {
        withFields("GPGSA,A,,3,") { f in
            #expect(f.count == 5)
            #expect(f.field(0, equals: "GPGSA"))
            #expect(f.character(1) == UInt8(ascii: "A"))
            #expect(f.isEmpty(2))
            #expect(f.int(3) == 3)
            #expect(f.isEmpty(4))
            #expect(f.isEmpty(40))
            #expect(f.double(40) == nil)
        }
    }

    @Test("decimal numbers parse exactly as strtod, malformed ones are nil")
    func numbers() {
        for text in ["0", "1.5", "-12.25", "545.4", "0.013", "99.99", "+3.0", "123456.789012345", "4404.1306024"] {
            withFields("X,\(text)") { f in #expect(f.double(1) == Double(text), "\(text)") }
        }
        for text in ["", ".", "1.2.3", "1e5", "12a", "-"] {
            withFields("X,\(text)") { f in #expect(f.double(1) == nil, "\(text)") }
        }
    }

    @Test("latitude/longitude use gpsd's arithmetic and honour the hemisphere")
    func angles() {
        withFields("X,4807.038,N,01131.324,E,3844.24011,S,00908.43828,W") { f in
            #expect(f.angle(1, hemisphere: 2, isLatitude: true) == (Double(48 * 60 + 7) + 0.038) * (1.0 / 60.0))
            #expect(f.angle(3, hemisphere: 4, isLatitude: false) == (Double(11 * 60 + 31) + 0.324) * (1.0 / 60.0))
            let lat = f.angle(5, hemisphere: 6, isLatitude: true)
            #expect(lat.map { abs($0 - -38.737335167) < 1e-9 } == true)
            let lon = f.angle(7, hemisphere: 8, isLatitude: false)
            #expect(lon.map { abs($0 - -9.140638000) < 1e-9 } == true)
        }
        withFields("X,4807,N,4807.0,Q,9100.0,N,,N") { f in
            #expect(f.angle(1, hemisphere: 2, isLatitude: true) == nil)  // no decimal point
            #expect(f.angle(3, hemisphere: 4, isLatitude: true) == nil)  // bad hemisphere
            #expect(f.angle(5, hemisphere: 6, isLatitude: true) == nil)  // > 90°
            #expect(f.angle(7, hemisphere: 8, isLatitude: true) == nil)  // empty
        }
    }

    @Test("time of day to the millisecond, fractions truncated")
    func times() {
        withFields("X,123519,000231.099,235959.9999,12,246060,") { f in
            #expect(f.timeOfDay(1) == ((12 * 60 + 35) * 60 + 19) * 1000)
            #expect(f.timeOfDay(2) == (2 * 60 + 31) * 1000 + 99)
            #expect(f.timeOfDay(3) == 86_399_999)
            #expect(f.timeOfDay(4) == nil)
            #expect(f.timeOfDay(5) == nil)
            #expect(f.timeOfDay(6) == nil)
        }
    }

    @Test("ddmmyy dates get gpsd's century; malformed ones are nil")
    func dates() {
        withFields("X,191194,220899,070419,010168,010169,2208-1,321299,011399") { f in
            #expect(f.ddmmyy(1) == NMEADate(year: 1994, month: 11, day: 19))
            #expect(f.ddmmyy(2) == NMEADate(year: 1999, month: 8, day: 22))
            #expect(f.ddmmyy(3) == NMEADate(year: 2019, month: 4, day: 7))
            #expect(f.ddmmyy(4) == NMEADate(year: 2068, month: 1, day: 1))
            #expect(f.ddmmyy(5) == NMEADate(year: 1969, month: 1, day: 1))
            #expect(f.ddmmyy(6) == nil)
            #expect(f.ddmmyy(7) == nil)
            #expect(f.ddmmyy(8) == nil)
        }
    }
}
