import GNSS
import NMEA
import Testing

/// One heading per instant: THS/HDT/HDG/HDM of one cycle become one `Heading`.
@Suite("Heading merging")
struct HeadingMergerTests {
    /// An RMC at 12:00:ss on 2024-11-19 (starts a cycle), then the given heading sentences.
    func cycle(_ second: Int, _ headings: String...) -> String {
        sentence("GPRMC,1200\(String(format2: second)).00,A,4807.038,N,01131.324,E,0.0,0.0,191124,,,A")
            + headings.map { sentence($0) }.joined()
    }

    @Test("a dual-antenna THS + HDT cycle gives one heading; THS wins when they disagree")
    func thsAndHDT() {
        let text = (0..<4).map { cycle($0, "GPTHS,77.5,A", "GPHDT,77.9,T") }.joined()
        let headings = decodeAll(text).events.compactMap(\.heading)
        #expect(headings.count == 4)
        #expect(headings.map(\.source) == [.ths, .ths, .ths, .ths])
        #expect(headings.map(\.trueHeading) == [77.5, 77.5, 77.5, 77.5])
        #expect(headings.map { $0.time?.iso8601 } == (0..<4).map { "2024-11-19T12:00:0\($0).000Z" })
        #expect(decodeAll(text).statistics.headings == 4)
    }

    @Test("HDT first and THS second merge the same way")
    func hdtThenTHS() {
        let text = (0..<3).map { cycle($0, "GPHDT,10.0,T", "GPTHS,10.2,E") }.joined()
        let headings = decodeAll(text).events.compactMap(\.heading)
        #expect(headings.count == 3)
        #expect(headings.allSatisfy { $0.source == .ths && $0.trueHeading == 10.2 })
    }

    @Test("a compass's HDG + HDM give one heading with magnetic heading, deviation and variation")
    func hdgAndHDM() throws {
        let text = (0..<3).map { cycle($0, "HCHDG,98.3,1.5,E,12.6,W", "HCHDM,99.8,M") }.joined()
        let headings = decodeAll(text).events.compactMap(\.heading)
        #expect(headings.count == 3)
        let h = try #require(headings.first)
        #expect(h.source == .hdg)
        #expect(h.magneticHeading.map { abs($0 - 99.8) < 1e-9 } == true)
        #expect(h.magneticDeviation == 1.5 && h.magneticVariation == -12.6)
        #expect(h.trueHeading.map { abs($0 - 87.2) < 1e-9 } == true)
    }

    @Test("all four sentences: true heading from THS, the magnetic values from HDG")
    func allFour() throws {
        let text = cycle(0, "HEHDT,274.07,T", "GPTHS,274.5,A", "HCHDG,280.0,0.0,E,5.0,W", "HCHDM,281.0,M")
        let headings = decodeAll(text).events.compactMap(\.heading)
        #expect(headings.count == 1)
        let h = try #require(headings.first)
        #expect(h.source == .ths && h.trueHeading == 274.5)
        #expect(h.magneticHeading == 280.0 && h.magneticDeviation == 0 && h.magneticVariation == -5.0)
        #expect(h.time?.iso8601 == "2024-11-19T12:00:00.000Z")
    }

    @Test("HDM alone is a magnetic heading named HDM; HDG without variation has no true heading")
    func magneticOnly() {
        let hdm = decodeAll(cycle(0, "APHDM,98.3,M")).events.compactMap(\.heading)
        #expect(hdm.count == 1 && hdm.first?.source == .hdm && hdm.first?.trueHeading == nil && hdm.first?.magneticHeading == 98.3)
        let hdg = decodeAll(cycle(0, "HCHDG,98.3,,,,")).events.compactMap(\.heading)
        #expect(hdg.count == 1 && hdg.first?.source == .hdg && hdg.first?.trueHeading == nil && hdg.first?.magneticHeading == 98.3)
    }

    @Test("a THS with mode V is never a heading; the HDT next to it is")
    func invalidTHS() {
        let alone = decodeAll((0..<3).map { cycle($0, "GPTHS,77.5,V") }.joined())
        #expect(alone.events.compactMap(\.heading).isEmpty)
        #expect(alone.statistics.headings == 0)
        let withHDT = decodeAll((0..<3).map { cycle($0, "GPTHS,77.5,V", "GPHDT,78.0,T") }.joined())
        let headings = withHDT.events.compactMap(\.heading)
        #expect(headings.count == 3)
        #expect(headings.allSatisfy { $0.source == .hdt && $0.trueHeading == 78.0 })
    }

    @Test("a sensor faster than the GNSS: each repeat of a sentence is a new reading")
    func repeatedKind() {
        let text = cycle(0, "HCHDG,10.0,,,,", "HCHDG,11.0,,,,", "HCHDG,12.0,,,,") + cycle(1, "HCHDG,13.0,,,,")
        let headings = decodeAll(text).events.compactMap(\.heading)
        #expect(headings.map(\.magneticHeading) == [10, 11, 12, 13])
    }

    @Test("without any timed sentence, a THS + HDT pair is still one heading, with no time")
    func untimed() {
        let text = (0..<3).map { _ in sentence("GPTHS,45.0,A") + sentence("GPHDT,45.1,T") }.joined()
        let headings = decodeAll(text).events.compactMap(\.heading)
        #expect(headings.count == 3)
        #expect(headings.allSatisfy { $0.source == .ths && $0.trueHeading == 45.0 && $0.time == nil })
    }

    @Test("once the pair is learned, the heading is out on its last sentence, not a cycle later")
    func latency() {
        var decoder = NMEADecoder()
        var headingsAfterLine: [Int] = []
        var line = 0
        let text = (0..<4).map { cycle($0, "GPTHS,77.5,A", "GPHDT,77.5,T") }.joined()
        for l in text.split(separator: "\r\n") {
            line += 1
            Array((l + "\r\n").utf8).withUnsafeBytes { raw in
                decoder.decode(raw) { if $0.heading != nil { headingsAfterLine.append(line) } }
            }
        }
        decoder.finish { if $0.heading != nil { headingsAfterLine.append(-1) } }
        // 3 lines per cycle (RMC, THS, HDT). The first pair is emitted when the next cycle
        // starts (line 4); from then on on its HDT (lines 6, 9, 12).
        #expect(headingsAfterLine == [4, 6, 9, 12])
    }

    @Test("a sentence the receiver adds later emits the corrected heading, then the pair grows")
    func growingInstant() {
        let text =
            cycle(0, "GPTHS,1.0,A", "GPHDT,1.0,T") + cycle(1, "GPTHS,2.0,A", "GPHDT,2.0,T", "HCHDM,3.0,M")
            + cycle(2, "GPTHS,4.0,A", "GPHDT,4.0,T", "HCHDM,5.0,M")
        let headings = decodeAll(text).events.compactMap(\.heading)
        #expect(headings.map(\.trueHeading) == [1, 2, 2, 4])
        #expect(headings.map(\.magneticHeading) == [nil, nil, 3, 5])
        #expect(headings[2].time == headings[1].time)
    }

    @Test("the same headings whatever the chunking")
    func chunking() {
        let text = (0..<5).map { cycle($0, "GPTHS,77.5,A", "GPHDT,77.5,T", "HCHDG,80.0,,,2.5,E") }.joined()
        let whole = decodeAll(text).events
        for size in [1, 7, 64] {
            #expect(Fixtures.decode(Array(text.utf8), chunks: [size]).0 == whole)
        }
        #expect(whole.compactMap(\.heading).count == 5)
    }
}
