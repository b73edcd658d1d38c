import FleetOperations
import FleetcastTestSupport
import GNSS
import Testing

/// Zones from GeoJSON, and their enter and exit events with hysteresis.
@Suite("Zones")
struct ZoneTests {
    /// The issue's drive: 4.5 km north, 7 min stopped, 3.6 km east, 10 min stopped, 1.2 km on.
    static let drive = GeneratedDrive.threeLegs()

    /// A 200 m square around the first stop and a 150 m circle around the second.
    static let zonesFile = GeneratedDrive.depotAndCustomerZones

    /// `[longitude, latitude]` of the point `north` and `east` metres from the start.
    static func position(_ north: Double, _ east: Double) -> String {
        let c = GeneratedDrive.coordinate(north: north, east: east)
        return "[\(c.longitude), \(c.latitude)]"
    }

    @Test("the drive enters and leaves the polygon around its first stop and the circle around its second, once each")
    func oneEnterAndExitPerZone() throws {
        let zones = try ZoneSet.parse(Array(Self.zonesFile.utf8))
        #expect(zones.zones.map(\.name) == ["Depot", "Customer"])
        var tracker = ZoneTracker(zones: zones)
        let events = Self.drive.points.flatMap { tracker.add($0) }
        #expect(events.map { "\($0.kind.rawValue) \($0.zone)" } == ["enter Depot", "exit Depot", "enter Customer", "exit Customer"])
        // Entered 15 m inside the south edge (4,415 m north of the start, second 294 at 15 m/s).
        #expect(
            events.first.map {
                abs(Double($0.point.time.millisecondsSince1970 - Self.drive.points[0].time.millisecondsSince1970) / 1000 - 294) <= 2
            } == true)
        #expect(tracker.inside.isEmpty)
    }

    @Test("a vehicle jumping across a 100 m zone 25 times a second is not fed to zones; one that jumped once is followed again")
    func impossibleJumpsAreNotFedToZones() throws {
        let file = """
            {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "Small", "radius": 100},
             "geometry": {"type": "Point", "coordinates": \(Self.position(0, 0))}}]}
            """
        var operations = VehicleOperations(rules: TripRules(), zones: try ZoneSet.parse(Array(file.utf8)))
        let start = Self.drive.points[0].time.millisecondsSince1970
        func point(_ index: Int, north: Double) -> TripPoint {
            let c = GeneratedDrive.coordinate(north: north, east: 0)
            return TripPoint(
                time: UTCTimestamp(millisecondsSince1970: start + Int64(index) * 40), latitude: c.latitude, longitude: c.longitude)
        }
        // 20,480 fixes, alternately 300 m south of the zone and at its centre, 40 ms apart.
        let jumps = (0..<20_480).map { point($0, north: $0.isMultiple(of: 2) ? -300 : 0) }
        var events: [ZoneEvent] = []
        for chunk in stride(from: 0, to: jumps.count, by: 2_048) {
            if case .closed(_, let new) = operations.add(Array(jumps[chunk..<min(chunk + 2_048, jumps.count)])) { events += new }
        }
        #expect(events.isEmpty, "\(events.count) zone events from impossible jumps")
        #expect(operations.impossibleForZones == 20_479)
        // A receiver that jumped once and stays there (a second later) is followed again: it enters.
        let base = 20_480 * 40 / 1000 + 2
        var stay: [TripPoint] = []
        for second in 0..<10 {
            let c = GeneratedDrive.coordinate(north: 0, east: 0)
            stay.append(
                TripPoint(
                    time: UTCTimestamp(millisecondsSince1970: start + Int64(base + second) * 1000), latitude: c.latitude,
                    longitude: c.longitude))
        }
        if case .closed(_, let new) = operations.add(stay) { events += new }
        #expect(events.map(\.kind.rawValue) == ["enter"])
    }

    @Test("a vehicle parked on a circle's boundary, its position wandering 5 m, enters once and never flaps")
    func boundaryJitterDoesNotFlap() throws {
        // A 4,500 m drive north, then an hour parked: a circle whose edge is where it parks.
        let parked = GeneratedDrive([.leg(bearing: 0, metres: 4_500, speed: 15), .stop(seconds: 3_600)], jitter: 5)
        for radius in [100.0, 100.0 + 10, 100.0 - 10] {
            let file = """
                {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "Edge", "radius": \(radius)},
                 "geometry": {"type": "Point", "coordinates": \(Self.position(4_600, 0))}}]}
                """
            var tracker = ZoneTracker(zones: try ZoneSet.parse(Array(file.utf8)))
            let events = parked.points.flatMap { tracker.add($0) }
            #expect(events.count <= 1, "radius \(radius): \(events.map { $0.kind.rawValue })")
        }
    }

    @Test("a zones file that cannot be used is refused, naming the feature and what is wrong")
    func refusals() {
        func refusal(_ text: String) -> String? {
            do {
                _ = try ZoneSet.parse(Array(text.utf8))
                return nil
            } catch {
                return error.description
            }
        }
        let point = #"{"type": "Point", "coordinates": [9.99, 53.55]}"#
        #expect(refusal("{") == "the zones file is not JSON: not valid JSON")
        #expect(refusal(#"{"type": "Feature"}"#) == "the zones file is not a GeoJSON FeatureCollection")
        #expect(
            refusal(
                #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "A"}, "geometry": \#(point)}]}"#)
                == "zone feature 0 (\"A\"): a Point needs a \"radius\" property in metres, more than 0 and at most 100000")
        #expect(
            refusal(
                #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"radius": 5}, "geometry": \#(point)}]}"#)
                == "zone feature 0: no \"name\" property")
        #expect(
            refusal(
                #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "A", "radius": 5}, "geometry": \#(point)}, {"type": "Feature", "properties": {"name": "A", "radius": 5}, "geometry": \#(point)}]}"#
            ) == "zone feature 1 (\"A\"): a second zone of that name")
        #expect(
            refusal(
                #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "L"}, "geometry": {"type": "LineString", "coordinates": [[0, 0], [1, 1]]}}]}"#
            ) == "zone feature 0 (\"L\"): a \"LineString\" geometry; zones are Polygons and Points")
        #expect(
            refusal(
                #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "P"}, "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [0, 0]]]}}]}"#
            ) == "zone feature 0 (\"P\"): a ring has fewer than 4 positions")
        #expect(
            refusal(
                #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "P"}, "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 500]]]}}]}"#
            ) == "zone feature 0 (\"P\"): a position is not a longitude and latitude")
        var limits = ZoneSet.Limits()
        limits.bytes = 10
        #expect(throws: ZoneFileError.tooLarge(bytes: 11, limit: 10)) { try ZoneSet.parse(Array("{\"a\": 1234}".utf8), limits: limits) }
        #expect(
            refusal(
                #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "a\u0007b", "radius": 5}, "geometry": \#(point)}]}"#
            )?
            .contains("control characters") == true)
    }

    @Test("a polygon with a hole: inside the hole is outside the zone")
    func holes() throws {
        func ring(_ half: Double) -> String {
            "[\(Self.position(-half, -half)), \(Self.position(-half, half)), \(Self.position(half, half)), \(Self.position(half, -half)), \(Self.position(-half, -half))]"
        }
        let file = """
            {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "Ring"},
             "geometry": {"type": "Polygon", "coordinates": [\(ring(500)), \(ring(100))]}}]}
            """
        let zone = try #require(try ZoneSet.parse(Array(file.utf8)).zones.first)
        let centre = GeneratedDrive.coordinate(north: 0, east: 0)
        let band = GeneratedDrive.coordinate(north: 300, east: 0)
        let outside = GeneratedDrive.coordinate(north: 700, east: 0)
        #expect(zone.depth(of: centre, margin: 15).map { abs($0 + 100) < 1 } == true, "in the hole: 100 m outside")
        #expect(zone.depth(of: band, margin: 15).map { abs($0 - 200) < 1 } == true, "in the band: 200 m from both edges")
        #expect(zone.depth(of: outside, margin: 15) == nil, "far outside: refused by the box")
    }
}

/// The zone set's grid index: the tracker looks at a fix's nearby zones only, and finds the
/// same events as looking at every zone.
@Suite("Zone index")
struct ZoneIndexTests {
    @Test("10,000 zones: the drive enters and leaves each small zone on its way, once, and the country-wide one once")
    func manyZones() throws {
        var zones: [Zone] = []
        // A zone bigger than the index's cells, holding the whole drive.
        zones.append(Zone(name: "Region", shape: .circle(centre: GeneratedDrive.coordinate(north: 0, east: 0), radiusMetres: 90_000)))
        // Twenty 50 m circles along the first leg, 200 m apart.
        for k in 1...20 {
            zones.append(
                Zone(
                    name: "on-the-way-\(k)",
                    shape: .circle(centre: GeneratedDrive.coordinate(north: Double(k) * 200, east: 0), radiusMetres: 50)))
        }
        // Thousands more, 20 to 80 km east: never reached.
        var random = SplitMix64(seed: 7)
        while zones.count < 10_000 {
            let centre = GeneratedDrive.coordinate(
                north: Double.random(in: -30_000...30_000, using: &random), east: Double.random(in: 20_000...80_000, using: &random))
            zones.append(Zone(name: "far-\(zones.count)", shape: .circle(centre: centre, radiusMetres: 100)))
        }
        let set = ZoneSet(zones: zones)
        var tracker = ZoneTracker(zones: set)
        let events = GeneratedDrive.threeLegs().points.flatMap { tracker.add($0) }
        var expected = ["enter Region"]
        for k in 1...20 { expected += ["enter on-the-way-\(k)", "exit on-the-way-\(k)"] }
        #expect(events.map { "\($0.kind.rawValue) \($0.zone)" } == expected)
        #expect(tracker.inside == ["Region"])
    }
}
