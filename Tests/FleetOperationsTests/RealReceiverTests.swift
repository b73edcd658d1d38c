import FleetOperations
import FleetcastTestSupport
import Foundation
import GNSS
import NMEA
import Testing

/// The rules against real receivers' jitter: gpsd's regression recordings (BSD-2-Clause,
/// `Tests/NMEATests/Fixtures/gpsd/LICENSE-NOTE.txt`), decoded by the agent's decoder.
@Suite("Trips and zones on real recordings")
struct RealReceiverTests {
    struct Figures {
        var name: String
        var fixes: Int
        var seconds: Double
        /// Farthest fix from the median position, metres.
        var wander: Double
        /// Fastest reported speed, m/s.
        var fastest: Double
        var events: [TripEvent]
        /// Enter and exit events at a circle whose edge runs through the median position.
        var edgeEvents: Int
    }

    static func figures() throws -> [Figures] {
        let directory = RepositoryPath.of("Tests/NMEATests/Fixtures/gpsd")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".log") }.sorted()
        var all: [Figures] = []
        for name in names {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
            var decoder = NMEADecoder()
            var points: [TripPoint] = []
            for case .fix(let fix) in decoder.decode(bytes) where fix.mode != .noFix {
                if let last = points.last, fix.time <= last.time { continue }
                points.append(TripPoint(time: fix.time, latitude: fix.latitude, longitude: fix.longitude, speed: fix.speed))
            }
            guard points.count >= 10 else { continue }
            let latitude = points.map(\.latitude).sorted()[points.count / 2]
            let longitude = points.map(\.longitude).sorted()[points.count / 2]
            let median = TripPoint(time: points[0].time, latitude: latitude, longitude: longitude)
            var detector = TripDetector()
            let events = points.flatMap { detector.add($0) } + detector.finish()
            // A 100 m circle whose edge runs through the median position.
            let metresPerDegree = earthMeanRadiusMetres * Double.pi / 180
            let zone = Zone(
                name: "edge",
                shape: .circle(centre: .init(latitude: latitude + 100 / metresPerDegree, longitude: longitude), radiusMetres: 100))
            var tracker = ZoneTracker(zones: ZoneSet(zones: [zone]))
            let edgeEvents = points.reduce(0) { $0 + tracker.add($1).count }
            all.append(
                Figures(
                    name: name, fixes: points.count, seconds: points.last!.seconds(since: points[0]),
                    wander: points.map { $0.distance(to: median) }.max() ?? 0, fastest: points.compactMap(\.speed).max() ?? 0,
                    events: events, edgeEvents: edgeEvents))
        }
        return all
    }

    @Test("a receiver that does not move: its fixes stay within a stop's radius, make no trip, and never flap at a zone's edge")
    func parkedReceiversMakeNoTrip() throws {
        let all = try Self.figures()
        let parked = all.filter { $0.fastest <= TripRules().stopSpeed }
        #expect(parked.count >= 5, "enough parked recordings: \(all.map(\.name))")
        for recording in parked {
            #expect(recording.wander <= TripRules().stopRadius, "\(recording.name): \(recording.wander) m")
            #expect(!recording.events.contains { if case .trip = $0 { true } else { false } }, "\(recording.name): \(recording.events)")
            #expect(recording.edgeEvents == 0, "\(recording.name): \(recording.edgeEvents) events at an edge through it")
        }
    }
}
