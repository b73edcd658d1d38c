import FleetProtocol
import FleetcastTestSupport
import GNSS
import Testing

@Suite struct FleetPayloadDecodingTests {
    let time = UTCTimestamp(year: 2020, month: 3, day: 18, hour: 13, minute: 28, second: 19, millisecond: 600)!
    let van = VehicleID("van-7")!

    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func fixRoundTripsThroughTheEncoder() throws {
        let fix = Fix(
            time: time, latitude: 41.57496591, longitude: -93.750571901, altitudeHAE: 246.719,
            altitudeMSL: 278.161, geoidSeparation: -31.442, speed: 0.076, track: 124.888,
            magneticVariation: -1.5, climb: -0.2, mode: .threeD, quality: .rtkFixed,
            satellitesUsed: 10, hdop: 0.9, vdop: 1.2, pdop: 1.5, eph: 2.5, epv: 4.125)
        let decoded = try FleetPayload.decodeFix(FleetPayload.encode(fix, vehicle: "van-7", seq: 42), vehicle: van)
        #expect(decoded == DecodedFix(vehicle: van, seq: 42, fix: fix))
    }

    @Test func theNumberingRunTravelsWithSeqAndIsLeftOutInRunZero() throws {
        let fix = Fix(time: time, latitude: 1, longitude: 2, mode: .threeD)
        let bytes = FleetPayload.encode(fix, vehicle: "van-7", seq: 3, run: 1_764_072_000_123)
        #expect(String(decoding: bytes, as: UTF8.self).contains(#""seq":3,"run":1764072000123,"#))
        let decoded = try FleetPayload.decodeFix(bytes, vehicle: van)
        #expect(decoded.number == MessageNumber(run: 1_764_072_000_123, seq: 3))
        let legacy = FleetPayload.encode(fix, vehicle: "van-7", seq: 3)
        #expect(!String(decoding: legacy, as: UTF8.self).contains("run"))
        #expect(try FleetPayload.decodeFix(legacy, vehicle: van).number == MessageNumber(run: 0, seq: 3))
        let heading = FleetPayload.encode(Heading(trueHeading: 4, source: .hdt), vehicle: "van-7", seq: 4, run: 9)
        #expect(try FleetPayload.decodeHeading(heading, vehicle: van).number == MessageNumber(run: 9, seq: 4))
        #expect(throws: FleetPayload.DecodingError.self) {
            try FleetPayload.decodeFix(
                Array(#"{"v":1,"seq":1,"run":-1,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2,"mode":3}"#.utf8), vehicle: van)
        }
        #expect(MessageNumber(run: 1, seq: 900) < MessageNumber(run: 2, seq: 1))
    }

    @Test func aPayloadOfThousandsOfKeysIsRefusedAtTheMemberCapAndLongDuplicateKeysAreFound() throws {
        var wide = #"{"v":1,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2,"mode":3"#
        for i in 0..<5_000 { wide += #","k\#(i)":1"# }
        wide += "}"
        #expect(throws: FleetPayload.DecodingError.invalidJSON("more than 64 members")) {
            try FleetPayload.decodeFix(Array(wide.utf8), vehicle: van)
        }
        #expect(
            FleetPayload.duplicateKeyCheckComparisons(Array(wide.utf8)) <= 64 * 63 / 2 * 17,
            "pairs of the 64 members, keys of at most 16 bytes compared bytewise")
        // 59 members of unknown keys besides the 5 required: accepted (room for later versions).
        var roomy = #"{"v":1,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2,"mode":3"#
        for i in 0..<59 { roomy += #","later\#(i)":true"# }
        _ = try FleetPayload.decodeFix(Array((roomy + "}").utf8), vehicle: van)
        // A duplicate long key is found through its hash.
        let long = String(repeating: "x", count: 300)
        let twice = #"{"v":1,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2,"mode":3,"\#(long)":1,"\#(long)":2}"#
        #expect(throws: FleetPayload.DecodingError.self) { try FleetPayload.decodeFix(Array(twice.utf8), vehicle: van) }
        let differ = #"{"v":1,"time":"2026-01-01T00:00:00Z","lat":1,"lon":2,"mode":3,"\#(long)a":1,"\#(long)b":2}"#
        _ = try FleetPayload.decodeFix(Array(differ.utf8), vehicle: van)
    }

    @Test func headingAndStatusRoundTrip() throws {
        let h = Heading(
            time: time, trueHeading: 274.07, magneticHeading: 270.5, magneticDeviation: -1,
            magneticVariation: 2.5, source: .hdg)
        #expect(
            try FleetPayload.decodeHeading(FleetPayload.encode(h, vehicle: "van-7", seq: 7), vehicle: van)
                == DecodedHeading(vehicle: van, seq: 7, heading: h))
        let noTime = Heading(trueHeading: 0, source: .hdt)
        #expect(try FleetPayload.decodeHeading(FleetPayload.encode(noTime), vehicle: van).heading == noTime)

        let status = VehicleStatus(
            vehicle: van, state: .online, since: time, agentVersion: "0.1.0",
            source: "gpsd://localhost", gnss: .sourceLost, droppedFixes: 3, reason: "x")
        #expect(try FleetPayload.decodeStatus(FleetPayload.encode(status), vehicle: van) == status)
        let drops = VehicleStatus.Drops(full: 1, expired: 2, unclean: 3, rejected: 4)
        let counted = VehicleStatus(vehicle: van, state: .online, droppedFixes: drops.total, drops: drops, backlog: 5)
        let text = String(decoding: FleetPayload.encode(counted), as: UTF8.self)
        #expect(text.contains(#""dropped":10,"droppedFull":1,"droppedExpired":2,"droppedUnclean":3,"rejected":4"#), "\(text)")
        #expect(try FleetPayload.decodeStatus(FleetPayload.encode(counted), vehicle: van) == counted)
        let link = VehicleStatus(vehicle: van, state: .online, bytesSent: 123_456, bytesReceived: 7_890)
        #expect(String(decoding: FleetPayload.encode(link), as: UTF8.self).hasSuffix(#""bytesSent":123456,"bytesReceived":7890}"#))
        #expect(try FleetPayload.decodeStatus(FleetPayload.encode(link), vehicle: van) == link)
        #expect(
            try FleetPayload.decodeStatus(bytes(#"{"v":1,"state":"offline"}"#), vehicle: van)
                == VehicleStatus(vehicle: van, state: .offline))
    }

    @Test func vehicleComesFromTheTopicAndMustAgreeWithThePayload() throws {
        let payload = bytes(#"{"v":1,"vehicle":"bus-1","time":"2020-03-18T13:28:19.600Z","lat":1,"lon":2,"mode":2}"#)
        #expect(throws: FleetPayload.DecodingError.vehicleMismatch(topic: "van-7", payload: "bus-1")) {
            try FleetPayload.decodeFix(payload, vehicle: van)
        }
        #expect(try FleetPayload.decodeFix(payload, vehicle: nil).vehicle.rawValue == "bus-1")
        let anonymous = bytes(#"{"v":1,"time":"2020-03-18T13:28:19.600Z","lat":1,"lon":2,"mode":2}"#)
        #expect(throws: FleetPayload.DecodingError.missingKey("vehicle")) { try FleetPayload.decodeFix(anonymous, vehicle: nil) }
        #expect(try FleetPayload.decodeFix(anonymous, vehicle: van).seq == nil)
    }

    @Test func badPayloadsGetATypedReason() {
        let t = #""time":"2020-03-18T13:28:19.600Z""#
        let cases: [(String, FleetPayload.DecodingError)] = [
            (#"{"v":1,"lat":1,"lon":2,"mode":3}"#, .missingKey("time")),
            ("{\"v\":1,\(t),\"lon\":2,\"mode\":3}", .missingKey("lat")),
            ("{\"v\":1,\(t),\"lat\":1,\"mode\":3}", .missingKey("lon")),
            ("{\"v\":1,\(t),\"lat\":1,\"lon\":2}", .missingKey("mode")),
            ("{\(t),\"lat\":1,\"lon\":2,\"mode\":3}", .missingKey("v")),
            ("{\"v\":2,\(t),\"lat\":1,\"lon\":2,\"mode\":3}", .unsupportedVersion(2)),
            ("{\"v\":\"1\",\(t),\"lat\":1,\"lon\":2,\"mode\":3}", .wrongType(key: "v", expected: "an integer")),
            ("{\"v\":1,\(t),\"lat\":\"1\",\"lon\":2,\"mode\":3}", .wrongType(key: "lat", expected: "a number")),
            ("{\"v\":1,\(t),\"lat\":null,\"lon\":2,\"mode\":3}", .wrongType(key: "lat", expected: "a number")),
            ("{\"v\":1,\(t),\"lat\":90.5,\"lon\":2,\"mode\":3}", .invalidValue(key: "lat", detail: "is outside -90...90")),
            ("{\"v\":1,\(t),\"lat\":1,\"lon\":-181,\"mode\":3}", .invalidValue(key: "lon", detail: "is outside -180...180")),
            ("{\"v\":1,\(t),\"lat\":1e999,\"lon\":2,\"mode\":3}", .invalidValue(key: "lat", detail: "is not finite")),
            ("{\"v\":1,\(t),\"lat\":1,\"lon\":2,\"mode\":1}", .invalidValue(key: "mode", detail: "is outside 2...3")),
            ("{\"v\":1,\(t),\"lat\":1,\"lon\":2,\"mode\":3.5}", .wrongType(key: "mode", expected: "an integer")),
            ("{\"v\":1,\(t),\"lat\":1,\"lon\":2,\"mode\":3,\"seq\":-4}", .invalidValue(key: "seq", detail: "is negative")),
            ("{\"v\":1,\(t),\"lat\":1,\"lon\":2,\"mode\":3,\"speed\":-1}", .invalidValue(key: "speed", detail: "is outside 0...100000")),
            ("{\"v\":1,\(t),\"lat\":1,\"lon\":2,\"mode\":3,\"sats\":true}", .wrongType(key: "sats", expected: "an integer")),
            (
                #"{"v":1,"time":"yesterday","lat":1,"lon":2,"mode":3}"#,
                .invalidValue(key: "time", detail: "is not an ISO 8601 UTC time (YYYY-MM-DDTHH:MM:SS.sssZ)")
            ),
        ]
        for (text, expected) in cases {
            #expect(throws: expected, "\(text)") { try FleetPayload.decodeFix(Array(text.utf8), vehicle: van) }
        }
        #expect(throws: FleetPayload.DecodingError.invalidValue(key: "state", detail: "is not online or offline")) {
            try FleetPayload.decodeStatus(bytes(#"{"v":1,"state":"asleep"}"#), vehicle: van)
        }
        #expect(throws: FleetPayload.DecodingError.missingKey("heading")) {
            try FleetPayload.decodeHeading(bytes(#"{"v":1,"source":"HDT"}"#), vehicle: van)
        }
        #expect(throws: FleetPayload.DecodingError.invalidValue(key: "heading", detail: "is outside 0...360")) {
            try FleetPayload.decodeHeading(bytes(#"{"v":1,"source":"HDT","heading":361}"#), vehicle: van)
        }
    }

    @Test func syntaxErrorsAndOversizedPayloadsAreRefused() {
        for text in [
            "", "[]", "1", "{", #"{"v":1"#, #"{"v":1,}"#, #"{"v":01}"#, #"{"v":1} x"#, "{\"v\":1,\"v\":1}",
            #"{"a":"\x"}"#, "{\"a\":\"\u{1}\"}", #"{"a":tru}"#, #"{"a":1.}"#, #"{"a":-}"#, #"{"a":"\ud800"}"#,
            #"{"a":NaN}"#, #"{'a':1}"#, String(repeating: "[", count: 10_000),
        ] {
            let error = #expect(throws: FleetPayload.DecodingError.self, "\(text.prefix(40))") {
                try FleetPayload.decodeStatus(Array(text.utf8), vehicle: van)
            }
            if case .invalidJSON = error {} else { Issue.record("\(text.prefix(40)): \(String(describing: error))") }
        }
        #expect(throws: FleetPayload.DecodingError.invalidJSON("invalid UTF-8 in string at byte 10")) {
            try FleetPayload.decodeStatus([UInt8](#"{"state":""#.utf8) + [0xFF, 0x22, 0x7D], vehicle: van)
        }
        let deep = "{\"v\":1,\"state\":\"online\",\"x\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}"
        #expect(throws: FleetPayload.DecodingError.invalidJSON("nesting too deep at byte 44")) {
            try FleetPayload.decodeStatus(bytes(deep), vehicle: van)
        }
        let big = bytes(#"{"v":1,"state":"online","pad":""# + String(repeating: " ", count: 70_000) + #""}"#)
        #expect(throws: FleetPayload.DecodingError.tooLarge(byteCount: big.count)) { try FleetPayload.decodeStatus(big, vehicle: van) }
        #expect(FleetPayload.DecodingError.tooLarge(byteCount: big.count).description.contains("65536"))
    }

    @Test func unknownKeysAndEscapesAreRead() throws {
        let text =
            #"{"v":1,"state":"online","future":{"a":[1,2,{"b":null}],"c":"\u00e9\ud83d\ude97"},"reason":"a\"b\\c\/d\u00e9\ud83d\ude97\n","extra":null}"#
        let status = try FleetPayload.decodeStatus(bytes(text), vehicle: van)
        #expect(status.reason == "a\"b\\c/dé🚗\n")
        #expect(
            try FleetPayload.decodeFix(
                bytes(#"{"v":1,"seq":18446744073709551615,"time":"2020-03-18T13:28:19Z","lat":-0.5e1,"lon":1E2,"mode":2}"#), vehicle: van)
                == DecodedFix(
                    vehicle: van, seq: .max,
                    fix: Fix(
                        time: UTCTimestamp(millisecondsSince1970: 1_584_538_099_000),
                        latitude: -5, longitude: 100, mode: .twoD)))
    }

    /// The parser's fast path for decimals must give the same double as Swift's own parser.
    @Test func numbersParseExactlyAsSwiftDoes() throws {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<20_000 {
            var text = rng.next() % 2 == 0 ? "-" : ""
            text += String(rng.next() % 90)
            let fraction = Int(rng.next() % 20)
            if fraction > 0 { text += "." + (0..<fraction).map { _ in String(rng.next() % 10) }.joined() }
            if rng.next() % 8 == 0 { text += "e-\(rng.next() % 3)" }
            let payload = #"{"v":1,"time":"2020-03-18T13:28:19.600Z","lon":0,"mode":2,"lat":"# + text + "}"
            let decoded = try FleetPayload.decodeFix(Array(payload.utf8), vehicle: van)
            #expect(decoded.fix.latitude == Double(text), "\(text)")
        }
    }

    /// Random bytes, and random mutations (byte flips, insertions, deletions, truncations) of
    /// valid payloads: the decoders must return or throw, never trap, and a decoded fix must
    /// still satisfy the contract's ranges.
    @Test func randomAndMutatedPayloadsNeverCrash() {
        var rng = SplitMix64(seed: 0x5EED_F1EE_7CA5_7001)
        let seeds: [[UInt8]] = [
            FleetPayload.encode(
                Fix(
                    time: time, latitude: 41.5, longitude: -93.7, altitudeHAE: 246.7, speed: 1.5,
                    track: 124.8, mode: .threeD, quality: .gps, satellitesUsed: 10, hdop: 0.9),
                vehicle: "van-7", seq: 42),
            FleetPayload.encode(Heading(time: time, trueHeading: 274.07, source: .hdt), vehicle: "van-7", seq: 43),
            FleetPayload.encode(VehicleStatus(vehicle: van, state: .online, since: time, agentVersion: "0.1.0")),
        ]
        let alphabet = Array(#"{}[]":,.-+eE0123456789 \nulltruefalse"\u"#.utf8)
        var decodedCount = 0, refusedCount = 0
        for round in 0..<30_000 {
            var input: [UInt8]
            if round % 10 == 0 {
                input = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            } else {
                input = seeds[round % seeds.count]
                for _ in 0..<(1 + Int(rng.next() % 4)) {
                    let i = input.isEmpty ? 0 : Int(rng.next() % UInt64(input.count))
                    let byte =
                        rng.next() % 2 == 0 ? alphabet[Int(rng.next() % UInt64(alphabet.count))] : UInt8(truncatingIfNeeded: rng.next())
                    switch rng.next() % 4 {
                    case 0 where !input.isEmpty: input[i] = byte
                    case 1: input.insert(byte, at: i)
                    case 2 where !input.isEmpty: input.remove(at: i)
                    default: input = Array(input.prefix(i))
                    }
                }
            }
            do {
                let d = try FleetPayload.decodeFix(input, vehicle: van)
                #expect((-90...90).contains(d.fix.latitude) && (-180...180).contains(d.fix.longitude))
                decodedCount += 1
            } catch { refusedCount += 1 }
            if (try? FleetPayload.decodeHeading(input, vehicle: van)) != nil { decodedCount += 1 }
            if (try? FleetPayload.decodeStatus(input, vehicle: nil)) != nil { decodedCount += 1 }
        }
        // Both outcomes occur: mutations that keep a payload valid decode, the others are refused.
        #expect(decodedCount > 100)
        #expect(refusedCount > 10_000)
    }
}
