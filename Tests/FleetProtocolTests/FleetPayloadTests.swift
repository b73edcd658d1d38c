import FleetProtocol
import FleetcastTestSupport
import GNSS
import Testing

@Suite struct FleetPayloadTests {
    let time = UTCTimestamp(year: 2020, month: 3, day: 18, hour: 13, minute: 28, second: 19, millisecond: 600)!

    @Test func fixCarriesGpsdKeysAndLeavesOutUnknowns() {
        let fix = Fix(
            time: time, latitude: 41.574965910, longitude: -93.750571901, altitudeHAE: 246.719,
            altitudeMSL: 278.161, speed: 0.148 * 1852 / 3600, track: 124.888, mode: .threeD,
            quality: .dgps, satellitesUsed: 10, hdop: 0.9)
        let json = String(decoding: FleetPayload.encode(fix, vehicle: "van-7", seq: 42), as: UTF8.self)
        #expect(
            json
                == #"{"v":1,"vehicle":"van-7","seq":42,"time":"2020-03-18T13:28:19.600Z","lat":41.57496591,"lon":-93.750571901,"altHAE":246.719,"altMSL":278.161,"speed":0.076,"track":124.888,"mode":3,"quality":2,"sats":10,"hdop":0.9}"#
        )
        #expect(!json.contains("null"))
    }

    @Test("the standard field set leaves out what the topic or another key says, and what few read; a reader gets the rest")
    func standardFieldSet() throws {
        var fix = Fix(
            time: time, latitude: 41.574965910, longitude: -93.750571901, altitudeHAE: 246.719, altitudeMSL: 278.161,
            geoidSeparation: -31.442, speed: 1.5, track: 124.888, magneticVariation: 2.1, climb: 0.2, mode: .threeD,
            quality: .dgps, satellitesUsed: 10, hdop: 0.9, vdop: 1.3, pdop: 1.58, eph: 2.5, epv: 4.1)
        fix.heading = Heading(time: time, trueHeading: 127.5, magneticHeading: 125.4, magneticDeviation: 0.5, source: .hdg)
        let payload = FleetPayload.encode(fix, vehicle: "van-7", seq: 42, run: 7, fields: .standard)
        #expect(
            String(decoding: payload, as: UTF8.self)
                == #"{"v":1,"seq":42,"run":7,"time":"2020-03-18T13:28:19.600Z","lat":41.57496591,"lon":-93.750571901,"altMSL":278.161,"speed":1.5,"track":124.888,"mode":3,"sats":10,"eph":2.5,"heading":127.5,"magHeading":125.4,"headingSource":"HDG"}"#
        )
        let decoded = try FleetPayload.decodeFix(payload, vehicle: VehicleID("van-7")!)
        #expect(decoded.vehicle.rawValue == "van-7" && decoded.fix.altitudeMSL == 278.161 && decoded.fix.heading?.trueHeading == 127.5)
        // What stands in for what it leaves out: altHAE without altMSL, hdop without eph.
        let plain = Fix(time: time, latitude: 1, longitude: 2, altitudeHAE: 50, mode: .threeD, hdop: 1.1)
        #expect(
            String(decoding: FleetPayload.encode(plain, vehicle: "van-7", fields: .standard), as: UTF8.self)
                == #"{"v":1,"time":"2020-03-18T13:28:19.600Z","lat":1,"lon":2,"altHAE":50,"mode":3,"hdop":1.1}"#)
        let alone = Heading(time: time, trueHeading: 90, magneticDeviation: 1, magneticVariation: 2, source: .hdg)
        #expect(
            String(decoding: FleetPayload.encode(alone, vehicle: "van-7", seq: 3, fields: .standard), as: UTF8.self)
                == #"{"v":1,"seq":3,"time":"2020-03-18T13:28:19.600Z","heading":90,"source":"HDG"}"#)
    }

    @Test("a fix whose heading fails its checks keeps its position and loses only the heading")
    func badHeadingKeepsTheFix() throws {
        let base = #"{"v":1,"time":"2020-03-18T13:28:19.600Z","lat":1,"lon":2,"mode":3"#
        for members in [#","heading":400,"headingSource":"HDT""#, #","heading":90"#, #","headingSource":"XYZ","heading":9"#] {
            let decoded = try FleetPayload.decodeFix(Array((base + members + "}").utf8), vehicle: VehicleID("van-7")!)
            #expect(decoded.fix.latitude == 1 && decoded.fix.heading == nil, "\(members)")
        }
        // And the encoder never writes a heading's source without the heading.
        var fix = Fix(time: time, latitude: 1, longitude: 2, mode: .threeD)
        fix.heading = Heading(time: time, trueHeading: 400, source: .hdt)
        #expect(!String(decoding: FleetPayload.encode(fix), as: UTF8.self).contains("headingSource"))
    }

    @Test func kindKeyForJSONLines() {
        let fix = Fix(time: time, latitude: -0.0000000001, longitude: 170, mode: .twoD)
        let json = String(decoding: FleetPayload.encode(fix, includeKind: true), as: UTF8.self)
        #expect(json == #"{"kind":"fix","v":1,"time":"2020-03-18T13:28:19.600Z","lat":0,"lon":170,"mode":2}"#)
    }

    @Test func headingKeys() {
        let h = Heading(time: nil, trueHeading: 274.07, source: .hdt)
        #expect(
            String(decoding: FleetPayload.encode(h, includeKind: true), as: UTF8.self)
                == #"{"kind":"heading","v":1,"heading":274.07,"source":"HDT"}"#)
        let m = Heading(time: time, magneticHeading: 12.5, magneticDeviation: -1, source: .hdg)
        #expect(
            String(decoding: FleetPayload.encode(m, vehicle: "a\"b", seq: 1), as: UTF8.self)
                == #"{"v":1,"vehicle":"a\"b","seq":1,"time":"2020-03-18T13:28:19.600Z","magHeading":12.5,"deviation":-1,"source":"HDG"}"#)
    }

    @Test func nonFiniteValuesAreLeftOut() {
        let fix = Fix(time: time, latitude: 1, longitude: 2, speed: .nan, track: .infinity, mode: .twoD)
        let json = String(decoding: FleetPayload.encode(fix), as: UTF8.self)
        #expect(!json.contains("speed") && !json.contains("track"))
    }

    /// Found by the fleet-payload fuzz harness's round-trip check (fed a targeted input): an
    /// `altHAE` of 1.7e308 decodes, but rounding it (× 10⁴) overflowed and the encoder wrote
    /// `"altHAE":inf`, which is not JSON.
    @Test func fuzzFindingHugeNumberEncodesAsJSON() throws {
        let payload = Array(#"{"v":1,"vehicle":"van-7","time":"2026-01-01T00:00:00.000Z","lat":1,"lon":2,"mode":3,"altHAE":1.7e308}"#.utf8)
        let van = VehicleID("van-7")!
        let decoded = try FleetPayload.decodeFix(payload, vehicle: van)
        let again = try FleetPayload.decodeFix(FleetPayload.encode(decoded.fix, vehicle: van.rawValue), vehicle: van)
        #expect(again.fix.altitudeHAE == 1.7e308)
    }

    /// Values outside the contract's ranges are left out by the encoders (as unknown ones), so
    /// a receiver's nonsense costs that value, not the whole message at the subscriber.
    @Test func outOfRangeValuesAreLeftOut() throws {
        let van = VehicleID("van-7")!
        let fix = Fix(
            time: time, latitude: 1, longitude: 2, speed: -1, track: 3239, magneticVariation: 200, mode: .twoD,
            satellitesUsed: 5000, hdop: -1)
        let back = try FleetPayload.decodeFix(FleetPayload.encode(fix, vehicle: van.rawValue), vehicle: van)
        #expect(back.fix.speed == nil && back.fix.track == nil && back.fix.magneticVariation == nil)
        #expect(back.fix.satellitesUsed == nil && back.fix.hdop == nil)
        let heading = Heading(trueHeading: 400, magneticHeading: 12, magneticDeviation: -181, source: .hdg)
        let h = try FleetPayload.decodeHeading(FleetPayload.encode(heading, vehicle: van.rawValue), vehicle: van)
        #expect(h.heading.trueHeading == nil && h.heading.magneticHeading == 12 && h.heading.magneticDeviation == nil)
    }

    /// The gpsd fuzz target's `UTCTimestamp` overflow reached received payloads too: a `time`
    /// of 40 bytes (the decoders' cap) has a 19-digit fraction, which trapped while its digits
    /// were checked, so any publisher on the broker could stop a subscriber. Input found by
    /// fuzzing the gpsd decoder, confirmed against the fleet-payload harness.
    @Test func fuzzFindingNineteenDigitFractionDoesNotTrap() throws {
        let payload = Array(#"{"v":1,"vehicle":"van-7","time":"2026-01-01T00:00:00.9999999999999999999Z","lat":1,"lon":2,"mode":3}"#.utf8)
        let decoded = try FleetPayload.decodeFix(payload, vehicle: VehicleID("van-7"))
        #expect(decoded.fix.time.iso8601 == "2026-01-01T00:00:00.999Z")
    }

    @Test("numbers are written as Double.description writes them rounded: 20,000 values of every magnitude, each at -1 to 12 decimals")
    func numbersMatchDescription() {
        func reference(_ value: Double, decimals: Int) -> String {
            let scale = [1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10][min(max(decimals, 0), 10)]
            let scaled = value * scale
            var rounded = scaled.isFinite ? scaled.rounded() / scale : value
            if rounded == 0 { rounded = 0 }
            return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int64(rounded)) : rounded.description
        }
        func written(_ value: Double, decimals: Int) -> String {
            var bytes: [UInt8] = []
            JSONWriter.appendNumber(value, decimals: decimals, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        var generator = SplitMix64(seed: 31)
        var values: [Double] = [
            0.001, -0.001, 0.0009996, 0.00105, 1e-3, 0.1 + 0.2, 41.574965910, -93.750571901, 0.5, -0.5, 999_999_999_999_999.9,
            1e14 + 0.25, 123_456_789.123_456_789, 1.0000000001, 2.5e-7, -0.0004, 180, -180, 0.05, 0.015, 1.005,
        ]
        for _ in 0..<20_000 {
            // 2^-20 (about 10^-6) to 2^54 (about 10^16), either sign.
            values.append(
                Double(
                    sign: Bool.random(using: &generator) ? .plus : .minus, exponent: Int.random(in: -20...53, using: &generator),
                    significand: Double.random(in: 1..<2, using: &generator)))
        }
        var mismatches: [String] = []
        for value in values {
            for decimals in -1...12 {  // beyond 0...10 the writer clamps
                let (got, want) = (written(value, decimals: decimals), reference(value, decimals: decimals))
                if got != want, mismatches.count < 5 { mismatches.append("\(value) at \(decimals): \(got), not \(want)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }
}
