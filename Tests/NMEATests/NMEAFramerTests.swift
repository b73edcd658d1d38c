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
}
