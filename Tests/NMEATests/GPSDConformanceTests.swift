import Foundation
import GNSS
import NMEA
import Testing

/// The decoder against gpsd's own decoding of the same recordings (`NAME.log.chk`).
///
/// Every epoch gpsd reports with mode ≥ 2 and a time (its last TPV for that time) must
/// match one of our fixes: time to the ms, mode, lat/lon 1e-6°, altMSL 0.01 m, speed
/// 0.01 m/s, track 0.01°, each where gpsd has the key. Every true heading gpsd reports
/// (ATT `heading`) must appear among ours, in order, within 0.01°.
@Suite("gpsd conformance")
struct GPSDConformanceTests {
    /// Where we differ from gpsd, because the data does not say what gpsd did. Keep it tiny;
    /// each names the recording, the sentence and the evidence. (rst39's dates, which gpsd
    /// moves 1024 weeks forward, are no exception: gpsd_utc_resolve does that to any date
    /// before 2017 outside its regression-test mode, and so does the decoder.)
    enum Exception {
        /// Only the ATT headings gpsd prints right after a true-heading sentence (HDT, THS)
        /// are headings of ours. gpsd also prints ATT after other sentences:
        /// - `HEROT` (saab-r4): it re-prints the last HDT heading in the ATT of a
        ///   rate-of-turn sentence; we report each heading once, from its HDT;
        /// - `PTNTHTM`, `HCXDR` (tnt-revolution): a proprietary True North compass sentence
        ///   whose values are not degrees (the recording's header says so), and the
        ///   transducer sentence after it re-printing it; proprietary sentences are ignored.
        static func isHeadingSentence(_ address: String) -> Bool {
            address.count == 5 && (address.hasSuffix("HDT") || address.hasSuffix("THS"))
        }

        /// bundg_zeus_9 (HDG): where a cycle has no RMC/VTG track by gpsd's report, gpsd
        /// derives the true track from the HDG magnetic heading minus the magnetic variation
        /// of its World Magnetic Model (`mag_var()`, libgps/geoid.c), e.g. 233.9 − 1.5687 =
        /// 232.3313 at 09:48:22; the decoder has no magnetic model, so it reports no track
        /// there. Everything but the track is compared.
        static let trackNotCompared: Set<String> = ["bundg_zeus_9"]
    }

    struct Expected {
        var epochs: [Int64: [String: Any]] = [:]
        var headings: [Double] = []
    }

    static func parseCheck(_ url: URL) throws -> Expected {
        let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
        var expected = Expected()
        var lastSentence = ""
        for line in text.split(whereSeparator: \.isNewline) {
            if line.hasPrefix("$") || line.hasPrefix("!") {
                lastSentence = String(line.dropFirst().prefix { $0 != "," && $0 != "*" })
                continue
            }
            guard line.hasPrefix("{"),
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let cls = object["class"] as? String
            else { continue }
            if cls == "TPV", let mode = object["mode"] as? Int, mode >= 2,
                let time = object["time"] as? String, let t = UTCTimestamp(iso8601: time)
            {
                expected.epochs[t.millisecondsSince1970] = object
            } else if cls == "ATT", let heading = object["heading"] as? Double,
                Exception.isHeadingSentence(lastSentence)
            {
                expected.headings.append(heading)
            }
        }
        return expected
    }

    @Test("every recording matches gpsd", arguments: Fixtures.recordings)
    func recording(_ log: URL) throws {
        let name = log.deletingPathExtension().lastPathComponent
        let expected = try Self.parseCheck(log.appendingPathExtension("chk"))
        let (events, _) = Fixtures.decode(try Fixtures.bytes(log), chunks: [65_536])
        var ours: [Int64: Fix] = [:]
        var headings: [Double] = []
        for event in events {
            switch event {
            case .fix(let fix): ours[fix.time.millisecondsSince1970] = fix
            case .heading(let h): if let t = h.trueHeading { headings.append(t) }
            case .state: break
            }
        }
        var problems: [String] = []
        for (ms, e) in expected.epochs.sorted(by: { $0.key < $1.key }) {
            let time = UTCTimestamp(millisecondsSince1970: ms).iso8601
            guard let fix = ours[ms] else {
                problems.append("\(name) \(time): missing fix (gpsd mode \(e["mode"] ?? "?"))")
                continue
            }
            if fix.mode.rawValue != e["mode"] as? Int {
                problems.append("\(name) \(time): mode \(fix.mode.rawValue) != gpsd \(e["mode"] ?? "?")")
            }
            func compare(_ key: String, _ ours: Double?, _ tolerance: Double) {
                guard let theirs = e[key] as? Double else { return }
                guard let ours else {
                    problems.append("\(name) \(time): \(key) absent (gpsd \(theirs))")
                    return
                }
                if abs(ours - theirs) > tolerance {
                    problems.append("\(name) \(time): \(key) \(ours) != gpsd \(theirs)")
                }
            }
            compare("lat", fix.latitude, 1e-6)
            compare("lon", fix.longitude, 1e-6)
            compare("altMSL", fix.altitudeMSL, 0.01)
            compare("speed", fix.speed, 0.01)
            if !Exception.trackNotCompared.contains(name) { compare("track", fix.track, 0.01) }
        }
        var matched = 0
        for h in headings where matched < expected.headings.count && abs(h - expected.headings[matched]) <= 0.01 {
            matched += 1
        }
        if matched != expected.headings.count {
            problems.append("\(name): headings \(matched)/\(expected.headings.count) matched in order")
        }
        #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")

        // Extra fixes: cycles gpsd decoded but never reported with a time (the first cycle
        // before its date arrives, the last cycle before a gap in a spliced recording).
        // A few are expected; many would mean we invent fixes.
        let extras = ours.keys.filter { expected.epochs[$0] == nil }.sorted()
        #expect(
            extras.count <= 3 + expected.epochs.count / 10,
            "\(name): \(extras.count) extra fixes gpsd did not report: \(extras.prefix(10).map { UTCTimestamp(millisecondsSince1970: $0).iso8601 })"
        )
    }
}
