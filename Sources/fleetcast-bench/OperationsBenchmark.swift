import FleetOperations
import FleetcastTestSupport
import GNSS

#if canImport(Glibc)
import Glibc
#endif

/// `fleetcast-bench operations [--fixes N] [--runs N]`
///
/// The recorder's operations on fixes already in memory, best of `--runs` (default 3):
/// - trips: the trip detector over N fixes (default 1,000,000) of the generated 29-minute
///   drive repeated;
/// - zones: the zone tracker over 200,000 of those fixes with 10, 1,000 and 10,000 zones
///   (circles of 50–300 m and 8-sided polygons, spread over 200 × 200 km around the drive),
///   through the set's grid index, and, for comparison, every zone looked at for every fix.
/// Prints fixes per second.
func runOperationsBenchmark(arguments: [String]) async {
    let fixes = max(2_000, intOption(arguments, "--fixes", 1_000_000))
    let runs = intOption(arguments, "--runs", 3)
    let drive = GeneratedDrive.threeLegs()
    let lap = drive.samples.count
    var points: [TripPoint] = []
    points.reserveCapacity(fixes)
    while points.count < fixes {
        let shift = Int64(points.count / lap) * Int64(lap + 1_200) * 1_000  // 20 minutes parked between laps
        for sample in drive.samples where points.count < fixes {
            points.append(
                TripPoint(
                    time: UTCTimestamp(millisecondsSince1970: sample.time.millisecondsSince1970 + shift), latitude: sample.latitude,
                    longitude: sample.longitude, speed: sample.speed))
        }
    }
    let clock = ContinuousClock()
    func best(_ body: () -> Int) -> (Duration, Int) {
        var fastest = Duration.seconds(1_000_000)
        var result = 0
        for _ in 0..<runs {
            let start = clock.now
            result = body()
            fastest = min(fastest, clock.now - start)
        }
        return (fastest, result)
    }
    func rate(_ count: Int, _ time: Duration) -> String {
        let seconds = Double(time.components.seconds) + Double(time.components.attoseconds) * 1e-18
        return "\(Int(Double(count) / seconds)) fixes/s"
    }

    let (tripTime, closed) = best {
        var detector = TripDetector()
        var count = 0
        for point in points { count += detector.add(point).count }
        return count + detector.finish().count
    }
    print("operations: trips: \(points.count) fixes in \(tripTime): \(rate(points.count, tripTime)); \(closed) trips and stops closed")

    let zoneFixes = Array(points.prefix(200_000))
    for count in [10, 1_000, 10_000] {
        let zones = ZoneSet(zones: syntheticZones(count))
        let (indexed, events) = best {
            var tracker = ZoneTracker(zones: zones)
            var events = 0
            for point in zoneFixes { events += tracker.add(point).count }
            return events
        }
        let (linear, _) = best {
            var hits = 0
            for point in zoneFixes {
                let coordinate = Zone.Coordinate(latitude: point.latitude, longitude: point.longitude)
                for zone in zones.zones where (zone.depth(of: coordinate, margin: 15) ?? -1) > 15 { hits += 1 }
            }
            return hits
        }
        print(
            "operations: zones: \(count) zones, \(zoneFixes.count) fixes: \(rate(zoneFixes.count, indexed)) indexed "
                + "(\(events) events), \(rate(zoneFixes.count, linear)) looking at every zone")
    }
}

/// `count` zones around the drive's start: Depot and Customer first, the rest circles and
/// octagons on a pseudo-random spread over 200 × 200 km.
private func syntheticZones(_ count: Int) -> [Zone] {
    var random = SplitMix64(seed: 3_400)
    var zones: [Zone] = []
    let depot = GeneratedDrive.position(north: 4_500, east: 0)
    let customer = GeneratedDrive.position(north: 4_500, east: 3_600)
    zones.append(
        Zone(
            name: "Depot", shape: .circle(centre: Zone.Coordinate(latitude: depot.latitude, longitude: depot.longitude), radiusMetres: 150))
    )
    zones.append(
        Zone(
            name: "Customer",
            shape: .circle(centre: Zone.Coordinate(latitude: customer.latitude, longitude: customer.longitude), radiusMetres: 150)))
    while zones.count < count {
        let north = Double.random(in: -100_000...100_000, using: &random)
        let east = Double.random(in: -100_000...100_000, using: &random)
        let radius = Double.random(in: 50...300, using: &random)
        let centre = GeneratedDrive.position(north: north, east: east)
        if zones.count % 2 == 0 {
            zones.append(
                Zone(
                    name: "zone-\(zones.count)",
                    shape: .circle(centre: Zone.Coordinate(latitude: centre.latitude, longitude: centre.longitude), radiusMetres: radius)))
        } else {
            let ring = (0...8).map { step -> Zone.Coordinate in
                let angle = Double(step % 8) * Double.pi / 4
                let corner = GeneratedDrive.position(north: north + radius * cos(angle), east: east + radius * sin(angle))
                return Zone.Coordinate(latitude: corner.latitude, longitude: corner.longitude)
            }
            zones.append(Zone(name: "zone-\(zones.count)", shape: .polygon([ring])))
        }
    }
    return zones
}
