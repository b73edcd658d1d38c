import NMEA
import Testing

@Suite("NMEAFramer")
struct NMEAFramerTests {
    @Test("CRLF and LF line ends, $ and ! starts")
    func lineEnds() {
        let r = frame(["$GPAAA,1*00\r\n$GPBBB,2*00\n!AIVDM,x*00\r\n"])
        #expect(r.lines == ["$GPAAA,1*00", "$GPBBB,2*00", "!AIVDM,x*00"])
        #expect(r.framingErrors == 0)
    }

    @Test("a sentence split across reads is delivered whole, at any split")
    func splits() {
        let text = "$GPRMC,1,2,3*00\r\n$GPGGA,4,5*00\r\n"
        for cut in 0...text.utf8.count {
            let bytes = Array(text.utf8)
            let a = String(decoding: bytes[..<cut], as: UTF8.self), b = String(decoding: bytes[cut...], as: UTF8.self)
            #expect(frame([a, b]).lines == ["$GPRMC,1,2,3*00", "$GPGGA,4,5*00"], "cut at \(cut)")
        }
    }

    @Test("leading garbage and interleaved binary are skipped")
    func garbage() {
        let binary = String(decoding: [0xB5, 0x62, 0x01, 0x07, 0x00, 0xFF, 0x0A], as: UTF8.self)
        let r = frame(["xx garbage\r\n" + binary + "$GPAAA,1*00\r\n" + binary + "$GPBBB,2*00\r\n"])
        #expect(r.lines == ["$GPAAA,1*00", "$GPBBB,2*00"])
    }

    @Test("a truncated sentence running into the next $ is dropped and counted; the next one is kept")
    func truncated() {
        let r = frame(["$GPRMC,1234,A,48$GPGGA,1*00\r\n"])
        #expect(r.lines == ["$GPGGA,1*00"])
        #expect(r.framingErrors == 1)
    }

    @Test("binary bytes inside a sentence drop it and count a framing error")
    func binaryInside() {
        let r = frame(["$GPRMC,12" + String(decoding: [0x01, 0x80], as: UTF8.self) + "34*00\r\n$GPBBB,2*00\r\n"])
        #expect(r.lines == ["$GPBBB,2*00"])
        #expect(r.framingErrors == 1)
    }

    @Test("an over-long line is dropped and counted, the following sentence kept")
    func overLong() {
        let long = "$GPXXX," + String(repeating: "1", count: NMEAFramer.maximumSentenceLength) + "*00\r\n"
        let exact = "$GPYYY," + String(repeating: "2", count: NMEAFramer.maximumSentenceLength - 10) + "*00"
        #expect(exact.utf8.count == NMEAFramer.maximumSentenceLength)
        let r = frame([long, exact + "\r\n", "$GPBBB,2*00\r\n"])
        #expect(r.lines == [exact, "$GPBBB,2*00"])
        #expect(r.framingErrors == 1)
    }

    @Test("# comment lines of recordings are skipped, even with a $ inside")
    func comments() {
        let r = frame(["# a note with $GPRMC in it\n$GPAAA,1*00\n"])
        #expect(r.lines == ["$GPAAA,1*00"])
    }

    @Test("a last line without a line end is delivered at finish")
    func lastLine() {
        #expect(frame(["$GPAAA,1*00\r\n$GPBBB,2*00"]).lines == ["$GPAAA,1*00", "$GPBBB,2*00"])
    }

    @Test("the framer delivers a UBX frame whole at any split, and the sentences around it")
    func ubxFraming() {
        let frame = navTimeGPS(iTOW: 1000)
        let bytes = Array(sentence("GPAAA,1").utf8) + frame + Array(sentence("GPBBB,2").utf8)
        for cut in 0...bytes.count {
            var framer = NMEAFramer(deliversBinaryFrames: true)
            var out: [[UInt8]] = []
            bytes[..<cut].withUnsafeBytes { framer.append($0) { out.append(Array($0)) } }
            bytes[cut...].withUnsafeBytes { framer.append($0) { out.append(Array($0)) } }
            framer.finish { out.append(Array($0)) }
            #expect(out == [line("GPAAA,1"), frame, line("GPBBB,2")], "cut at \(cut)")
            #expect(framer.framingErrors == 0)
        }
    }

    @Test("a binary frame with a bad checksum is dropped and counted; a sentence inside the false start is kept")
    func badFrame() {
        var frame = casicGPSInfo(runTime: 5)
        frame[frame.count - 1] ^= 0xFF
        var framer = NMEAFramer(deliversBinaryFrames: true)
        var out: [[UInt8]] = []
        // A CASIC header whose length (20) swallows the next sentence's start: reframed, it is found.
        let falseStart: [UInt8] = [0xBA, 0xCE, 20, 0, 1, 3]
        let bytes = frame + falseStart + Array(sentence("GPBBB,2").utf8) + Array(repeating: 0x20, count: 20)
        bytes.withUnsafeBytes { framer.append($0) { out.append(Array($0)) } }
        #expect(out == [line("GPBBB,2")])
        #expect(framer.framingErrors == 2)
    }

    @Test("without the option, binary frames are skipped as before")
    func binaryOff() {
        var framer = NMEAFramer()
        var out: [[UInt8]] = []
        (navTimeGPS(iTOW: 1000) + Array(sentence("GPBBB,2").utf8)).withUnsafeBytes {
            framer.append($0) { out.append(Array($0)) }
        }
        #expect(out == [line("GPBBB,2")])
    }

    @Test("gpsfake's delay cookie is removed after its header line, as gpsfake never sends it")
    func delayCookie() throws {
        // The GGA of gpsd's tcp-torture test, cut by `|` cookies; 4 cookies leave the checksum right.
        let gga = "$GPGGA,|19322|1.00,|2037.|72792,N,08704.08478,W,1,04,1.7,-30.40,M,-13.9,M,,*7D\r\n"
        let rmc = "$GPRMC,193221.00,A,2037.7279,N,08704.0848,W,00.1,201.8,231207,01,W,A*2D\r\n"
        let zda = "$GPZDA,193223.00,23,12,2007,00,00*69\r\n"
        let (events, _) = decodeAll("# Date: 2013-11-03\n# Delay-Cookie: | 0.01\n" + gga + rmc + zda)
        let f = try #require(events.compactMap(\.fix).last)
        #expect(f.mode == .threeD)
        #expect(f.altitudeMSL == -30.4)
        #expect(abs(f.latitude - 20.628798333) < 1e-8)
        // Without the header the cookies stay, and the GGA's fields are garbage: no altitude.
        let (plain, _) = decodeAll(gga + rmc + zda)
        #expect(plain.compactMap(\.fix).last?.altitudeMSL == nil)
    }
}
