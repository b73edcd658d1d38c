import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

@Suite("Compact batch encoding")
struct CompactBatchTests {
    let van = VehicleID("van-7")!
    let start: Int64 = 1_764_072_000_000  // 2025-11-25T12:00:00Z
    let run: UInt64 = 1_764_071_000_123

    /// A drive: 1 Hz fixes at 12 m/s north-east, a heading each second, with fields that come
    /// and go (DGPS, then none; a dropped altitude; a heading without time) and odd values
    /// (negative longitude, a track wrapping past 360°, a climb below zero).
    func drive(_ seconds: Int) -> [(seq: UInt64, event: Either)] {
        var events: [(UInt64, Either)] = []
        var seq: UInt64 = 40
        for second in 0..<seconds {
            let time = UTCTimestamp(millisecondsSince1970: start + Int64(second) * 1000 + (second == 7 ? 3 : 0))
            let fix = Fix(
                time: time, latitude: 52.370216 + Double(second) * 0.000_076_3, longitude: -4.895_168 + Double(second) * 0.000_125_1,
                altitudeHAE: second % 11 == 5 ? nil : 55.25 + Double(second % 3) * 0.1, altitudeMSL: 10.7, geoidSeparation: 44.55,
                speed: 12 + Double(second % 4) * 0.013, track: Double((358 + second) % 360) + 0.25,
                magneticVariation: second < 3 ? -1.3 : nil, climb: second % 2 == 0 ? -0.05 : 0.1, mode: .threeD,
                quality: second < 5 ? .dgps : .gps, satellitesUsed: 9 + second % 3, hdop: 0.8, vdop: 1.2, pdop: 1.44,
                eph: 2.121, epv: second % 5 == 0 ? nil : 2.5)
            seq += 1
            if second % 3 == 1 {
                // The agent's usual message: the heading of the instant inside its fix (an HDG one
                // with deviation and variation once, when the receiver gave no variation).
                var joined = fix
                joined.heading = Heading(
                    time: time, trueHeading: second == 4 ? nil : Double((3 + second) % 360) + 0.7, magneticHeading: 88.5,
                    magneticDeviation: second == 7 ? -2.5 : nil, magneticVariation: second == 7 ? 1.5 : nil,
                    source: second == 7 ? .hdg : .ths)
                events.append((seq, .fix(joined)))
                continue
            }
            events.append((seq, .fix(fix)))
            let heading = Heading(
                time: second % 6 == 2 ? nil : time, trueHeading: Double((358 + second) % 360) + 0.3,
                magneticHeading: second % 2 == 0 ? 91.25 : nil, source: second < 4 ? .hdt : .ths)
            seq += second == 9 ? 5 : 1  // a gap, as the store has after a dropped record
            events.append((seq, .heading(heading)))
        }
        return events
    }

    enum Either {
        case fix(Fix)
        case heading(Heading)
    }

    func compact(_ events: [(seq: UInt64, event: Either)], run: UInt64? = nil, maximumBytes: Int = 32_768) -> [UInt8] {
        var writer = FleetPayload.CompactBatchWriter(vehicle: van, run: run ?? self.run, maximumBytes: maximumBytes)
        for (seq, event) in events {
            let appended: Bool
            switch event {
            case .fix(let fix): appended = writer.append(fix, seq: seq)
            case .heading(let heading): appended = writer.append(heading, seq: seq)
            }
            #expect(appended)
        }
        return writer.finish()
    }

    /// What the JSON form of the same events decodes to.
    func viaJSON(_ events: [(seq: UInt64, event: Either)]) throws -> [FleetPayload.BacklogEvent] {
        try events.map { seq, event in
            switch event {
            case .fix(let fix):
                .fix(try FleetPayload.decodeFix(FleetPayload.encode(fix, vehicle: "van-7", seq: seq, run: run), vehicle: van))
            case .heading(let heading):
                .heading(try FleetPayload.decodeHeading(FleetPayload.encode(heading, vehicle: "van-7", seq: seq, run: run), vehicle: van))
            }
        }
    }

    /// deploy/decode-compact-batch.py run on `payload` (written to a new temporary directory
    /// named from `prefix`), which must exit 0 within 30 s; the ended process, its output read.
    func decodeInPython(
        _ payload: [UInt8], prefix: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> TestProcess {
        let directory = try makeTemporaryDirectory(prefix: prefix)
        let file = "\(directory)/batch.bin"
        try Data(payload).write(to: URL(fileURLWithPath: file))
        let python = try TestProcess(
            "/usr/bin/python3", [RepositoryPath.of("deploy/decode-compact-batch.py"), file], directory: directory, name: "decode")
        #expect(try await python.waitForExitOrStop(timeout: .seconds(30)) == 0, "\(python.standardError)", sourceLocation: sourceLocation)
        return python
    }

    @Test("a compact batch decodes to exactly what the JSON form of its events decodes to, absent fields, gaps and all")
    func sameAsJSON() throws {
        let events = drive(30)
        let decoded = try FleetPayload.decodeCompactBatch(compact(events), vehicle: van)
        #expect(decoded.vehicle == van)
        #expect(decoded.refused.isEmpty)
        #expect(decoded.events == (try viaJSON(events)))
        #expect(decoded.events.map(\.number) == events.map { MessageNumber(run: run, seq: $0.seq) })
    }

    @Test("a fix carrying its instant's heading comes back with it, from JSON and compact alike")
    func joinedHeadingRoundTrips() throws {
        let events = drive(12)
        let decoded = try FleetPayload.decodeCompactBatch(compact(events), vehicle: van)
        let joined = decoded.events.compactMap { event -> Fix? in
            if case .fix(let f) = event, f.fix.heading != nil { f.fix } else { nil }
        }
        #expect(joined.count == 4)
        for (event, (_, original)) in zip(decoded.events, events) {
            guard case .fix(let decodedFix) = event, case .fix(let fix) = original else { continue }
            #expect(decodedFix.fix.heading == fix.heading, "the heading, with the fix's time, comes back whole")
            #expect(decodedFix.fix.time == fix.time && decodedFix.fix.track == fix.track)
        }
        // One variation per instant: the compass's stands in for the receiver's, which gave none.
        let hdg = try #require(joined.first { $0.heading?.source == .hdg })
        #expect(hdg.heading?.magneticVariation == 1.5 && hdg.heading?.magneticDeviation == -2.5 && hdg.magneticVariation == 1.5)
    }

    @Test("deploy/decode-compact-batch.py, a decoder written in Python from the README, reads the same events")
    func pythonDecoderAgrees() async throws {
        let events = drive(30)
        let payload = compact(events)
        let python = try await decodeInPython(payload, prefix: "compact-batch")
        let lines = python.standardOutput.split(separator: "\n").map { Array($0.utf8) }
        let viaPython = try lines.map { line -> FleetPayload.BacklogEvent in
            line.starts(with: Array(#"{"kind":"fix""#.utf8))
                ? .fix(try FleetPayload.decodeFix(line, vehicle: van)) : .heading(try FleetPayload.decodeHeading(line, vehicle: van))
        }
        #expect(viaPython.count == events.count)
        #expect(viaPython == (try FleetPayload.decodeCompactBatch(payload, vehicle: van).events))
        #expect(viaPython == (try viaJSON(events)))
    }

    @Test(
        "deploy/decode-compact-batch.py and the agent's decoder agree key by key, on every field of every event (JSON form, no v in the bytes)"
    )
    func pythonDecoderAgreesOnEveryField() async throws {
        let events = drive(40)
        let payload = compact(events)
        let python = try await decodeInPython(payload, prefix: "compact-fields")
        func object(_ bytes: [UInt8]) -> NSDictionary? {
            (try? JSONSerialization.jsonObject(with: Data(bytes))) as? NSDictionary
        }
        let viaPython = python.standardOutput.split(separator: "\n").map { object(Array($0.utf8)) }
        // The agent's decoder, each event written back as the contract's JSON (every field).
        let viaSwift = try FleetPayload.decodeCompactBatch(payload, vehicle: van).events.map { event -> NSDictionary? in
            switch event {
            case .fix(let f): object(FleetPayload.encode(f.fix, vehicle: "van-7", seq: f.seq, run: f.run, includeKind: true))
            case .heading(let h): object(FleetPayload.encode(h.heading, vehicle: "van-7", seq: h.seq, run: h.run, includeKind: true))
            }
        }
        #expect(viaPython.count == events.count && viaSwift.count == events.count)
        for (index, (python, swift)) in zip(viaPython, viaSwift).enumerated() {
            #expect(
                python != nil && python == swift,
                "event \(index): Python \(python.map { "\($0)" } ?? "-") vs \(swift.map { "\($0)" } ?? "-")")
        }
        // The interleaving the contract names: moving fields step within their own kind.
        #expect(events.contains { if case .heading = $0.event { true } else { false } })
    }

    @Test(
        "a minute of a noisy drive at 1 Hz (fields changing every second) is a tenth of its JSON batch; a steady one under 8 bytes per fix and heading"
    )
    func size() {
        let events = drive(60)
        var json = FleetPayload.BacklogWriter(vehicle: van, maximumBytes: 65_536)
        for (seq, event) in events {
            switch event {
            case .fix(let fix): json.append(kind: .fix, payload: FleetPayload.encode(fix, vehicle: "van-7", seq: seq, run: run))
            case .heading(let h): json.append(kind: .heading, payload: FleetPayload.encode(h, vehicle: "van-7", seq: seq, run: run))
            }
        }
        let compactBytes = compact(events).count
        let jsonBytes = json.finish().count
        #expect(compactBytes * 10 <= jsonBytes, "\(compactBytes) bytes compact, \(jsonBytes) JSON")
        // Steady: the same speed, track and satellites every second, as the simulator drives.
        let steady = (0..<60).flatMap { second -> [(seq: UInt64, event: Either)] in
            let time = UTCTimestamp(millisecondsSince1970: start + Int64(second) * 1000)
            let fix = Fix(
                time: time, latitude: 52.370216, longitude: 4.895_168 + Double(second) * 0.000_176_3, altitudeHAE: 55,
                speed: 12, track: 90, mode: .threeD, quality: .gps, satellitesUsed: 10, hdop: 0.8)
            return [
                (UInt64(2 * second + 1), .fix(fix)), (UInt64(2 * second + 2), .heading(Heading(time: time, trueHeading: 90, source: .hdt))),
            ]
        }
        let steadyBytes = compact(steady).count
        #expect(steadyBytes < 60 * 8, "\(steadyBytes) bytes for a steady minute")
    }

    @Test("the writer refuses an event that would not fit, and keeps what it has")
    func writerLimit() throws {
        var writer = FleetPayload.CompactBatchWriter(vehicle: van, run: run, maximumBytes: 100)
        var accepted = 0
        for (seq, event) in drive(20) {
            guard case .fix(let fix) = event else { continue }
            if writer.append(fix, seq: seq) { accepted += 1 } else { break }
        }
        let bytes = writer.finish()
        #expect(accepted > 1 && accepted < 20 && bytes.count <= 100, "\(accepted) fixes, \(bytes.count) bytes")
        #expect(try FleetPayload.decodeCompactBatch(bytes, vehicle: van).events.count == accepted)
    }

    @Test(
        "hostile batches: every truncation, leftover bytes, an unknown kind or field bit, too many events, a 65-bit varint, another vehicle are refused, none traps"
    )
    func hostile() {
        let good = compact(Array(drive(5)))
        for length in 0..<good.count {
            #expect(throws: FleetPayload.DecodingError.self, "cut at \(length)") {
                try FleetPayload.decodeCompactBatch(Array(good.prefix(length)), vehicle: van)
            }
        }
        #expect(throws: FleetPayload.DecodingError.self) { try FleetPayload.decodeCompactBatch(good + [0], vehicle: van) }
        #expect(throws: FleetPayload.DecodingError.self) { try FleetPayload.decodeCompactBatch(good, vehicle: VehicleID("bus-1")!) }
        let header: [UInt8] = [0xFC, 0x01, 5] + Array("van-7".utf8) + [0]
        let cases: [(String, [UInt8])] = [
            ("kind 2", header + [1, 2, 0, 0]),
            ("a heading with bit 6", header + [1, 1, 2, 0x40]),
            ("2,049 events", header + [0x81, 0x10]),
            ("a 65-bit seq", header + [1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02, 0]),
            ("no vehicle", [0xFC, 0x01, 0, 0, 0]),
            ("a vehicle id with a space", [0xFC, 0x01, 3] + Array("a b".utf8) + [0, 0]),
            ("not compact", Array(#"{"v":1}"#.utf8)),
        ]
        for (name, bytes) in cases {
            #expect(throws: FleetPayload.DecodingError.self, "\(name)") { try FleetPayload.decodeCompactBatch(bytes, vehicle: van) }
        }
    }

    @Test("an event that fails the JSON form's checks (a latitude past 90°, a fix without a mode) is refused in its place; the others stay")
    func badEventRefusedInItsPlace() throws {
        let header: [UInt8] = [0xFC, 0x01, 5] + Array("van-7".utf8) + [0, 3]
        // Event 0: a fix with time 1 ms, lat 91° (91e9 → zigzag 182e9 + 1), lon 0, mode 3.
        // Event 1: the same but lat back to 45°: valid. Event 2: mode absent.
        func varint(_ value: UInt64) -> [UInt8] {
            var out: [UInt8] = []
            var v = value
            while v >= 0x80 {
                out.append(UInt8(v & 0x7F) | 0x80)
                v >>= 7
            }
            return out + [UInt8(v)]
        }
        let mask: UInt64 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 10
        let first = [0, 2] + varint(mask) + varint(3) + varint(182_000_000_000 + 1) + varint(1) + varint(7)
        let second: [UInt8] = [0, 2] + varint(1 << 1) + varint(92_000_000_000)  // 91e9 − 46e9 = 45e9: zigzag(−46e9) + 1
        let third: [UInt8] = [0, 2] + varint(1 << 10) + [0]
        let decoded = try FleetPayload.decodeCompactBatch(header + first + second + third, vehicle: van)
        #expect(decoded.refused.map(\.index) == [0, 2], "\(decoded.refused)")
        guard case .fix(let fix) = decoded.events.first else {
            Issue.record("\(decoded.events)")
            return
        }
        #expect(fix.fix.latitude == 45 && fix.fix.mode == .threeD && fix.seq == 2)
    }
}
