import FoundationEssentials
import GNSS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A named area of the fleet's map: a polygon (an outer ring and holes, GeoJSON's winding not
/// required) or a circle (a centre and a radius in metres).
package struct Zone: Sendable, Equatable {
    /// A position, degrees (WGS 84).
    package struct Coordinate: Sendable, Equatable {
        package var latitude: Double
        package var longitude: Double

        package init(latitude: Double, longitude: Double) {
            (self.latitude, self.longitude) = (latitude, longitude)
        }
    }

    package enum Shape: Sendable, Equatable {
        /// The first ring is the outline, the others holes.
        case polygon([[Coordinate]])
        case circle(centre: Coordinate, radiusMetres: Double)
    }

    package var name: String
    package var shape: Shape
    /// South-west and north-east corners, degrees, for a quick refusal.
    let minimum: Coordinate
    let maximum: Coordinate

    package init(name: String, shape: Shape) {
        self.name = name
        self.shape = shape
        switch shape {
        case .polygon(let rings):
            let points = rings.first ?? []
            minimum = Coordinate(
                latitude: points.map(\.latitude).min() ?? 0, longitude: points.map(\.longitude).min() ?? 0)
            maximum = Coordinate(
                latitude: points.map(\.latitude).max() ?? 0, longitude: points.map(\.longitude).max() ?? 0)
        case .circle(let centre, let radius):
            let latitudeSpan = radius / Self.metresPerDegree
            let longitudeSpan = latitudeSpan / max(cos(centre.latitude * Double.pi / 180), 1e-6)
            minimum = Coordinate(latitude: centre.latitude - latitudeSpan, longitude: centre.longitude - longitudeSpan)
            maximum = Coordinate(latitude: centre.latitude + latitudeSpan, longitude: centre.longitude + longitudeSpan)
        }
    }

    static let metresPerDegree = earthMeanRadiusMetres * Double.pi / 180

    /// How far inside the zone `point` is, in metres: positive inside, negative outside (the
    /// distance to the boundary), or `nil` when it is farther than `margin` from the zone's
    /// bounding box (surely outside by more than the margin).
    package func depth(of point: Coordinate, margin: Double) -> Double? {
        let latitudeMargin = margin / Self.metresPerDegree
        let longitudeMargin = latitudeMargin / max(cos(point.latitude * Double.pi / 180), 1e-6)
        guard point.latitude >= minimum.latitude - latitudeMargin, point.latitude <= maximum.latitude + latitudeMargin,
            point.longitude >= minimum.longitude - longitudeMargin, point.longitude <= maximum.longitude + longitudeMargin
        else { return nil }
        switch shape {
        case .circle(let centre, let radius):
            return radius - Self.distance(point, centre)
        case .polygon(let rings):
            // Metres east and north of the point, on a plane tangent there (zones are small
            // next to the Earth: a town's polygon is off by millimetres).
            let scale = cos(point.latitude * Double.pi / 180)
            func plane(_ c: Coordinate) -> (x: Double, y: Double) {
                ((c.longitude - point.longitude) * Self.metresPerDegree * scale, (c.latitude - point.latitude) * Self.metresPerDegree)
            }
            var inside = false
            var nearest = Double.infinity
            for (index, ring) in rings.enumerated() {
                var crossings = false
                for i in ring.indices {
                    let a = plane(ring[i])
                    let b = plane(ring[(i + 1) % ring.count])
                    if (a.y > 0) != (b.y > 0), a.x + (0 - a.y) * (b.x - a.x) / (b.y - a.y) > 0 { crossings.toggle() }
                    nearest = min(nearest, Self.distanceToSegment(a, b))
                }
                if index == 0 { inside = crossings } else if crossings { inside = false }
            }
            return inside ? nearest : -nearest
        }
    }

    /// Distance from the origin to the segment `a`–`b` on the plane, metres.
    private static func distanceToSegment(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double)) -> Double {
        let dx = b.x - a.x
        let dy = b.y - a.y
        let length = dx * dx + dy * dy
        let t = length > 0 ? max(0, min(1, -(a.x * dx + a.y * dy) / length)) : 0
        let x = a.x + t * dx
        let y = a.y + t * dy
        return (x * x + y * y).squareRoot()
    }

    static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
        greatCircleMetres(a.latitude, a.longitude, b.latitude, b.longitude)
    }
}

/// A zones file that cannot be used, naming where: the file, or the feature by its index (and
/// name when it has one).
package enum ZoneFileError: Error, Equatable, CustomStringConvertible {
    case tooLarge(bytes: Int, limit: Int)
    case notJSON(String)
    case notAFeatureCollection
    case tooManyFeatures(count: Int, limit: Int)
    case feature(index: Int, name: String?, problem: String)

    package var description: String {
        switch self {
        case .tooLarge(let bytes, let limit): "the zones file has \(bytes) bytes, more than \(limit)"
        case .notJSON(let detail): "the zones file is not JSON: \(detail)"
        case .notAFeatureCollection: "the zones file is not a GeoJSON FeatureCollection"
        case .tooManyFeatures(let count, let limit): "the zones file has \(count) features, more than \(limit)"
        case .feature(let index, let name, let problem):
            "zone feature \(index)\(name.map { " (\(String(reflecting: $0)))" } ?? ""): \(problem)"
        }
    }
}

/// The fleet's zones, read from a GeoJSON FeatureCollection: Polygons, and Points with a
/// `radius` property in metres, each named by its `name` property. The file is an operator's,
/// but checked as hostile: bounded in bytes, features and vertices, every coordinate a finite
/// position, every name unique, short and printable.
package struct ZoneSet: Sendable, Equatable {
    package let zones: [Zone]
    /// Which zones lie near each part of the map, so that a fix is checked against a few zones,
    /// not thousands.
    let index: ZoneIndex

    /// Limits on a zones file.
    package struct Limits: Sendable {
        package var bytes = 16 << 20
        package var features = 10_000
        package var verticesPerZone = 100_000
        package var nameLength = 100
        package var radiusMetres = 100_000.0

        package init() {}
    }

    package init(zones: [Zone]) {
        self.zones = zones
        index = ZoneIndex(zones)
    }

    package static func == (a: ZoneSet, b: ZoneSet) -> Bool { a.zones == b.zones }

    /// Reads a GeoJSON FeatureCollection; throws ``ZoneFileError`` naming the feature at fault.
    package static func parse(_ bytes: [UInt8], limits: Limits = Limits()) throws(ZoneFileError) -> ZoneSet {
        guard bytes.count <= limits.bytes else { throw .tooLarge(bytes: bytes.count, limit: limits.bytes) }
        let collection: GeoJSONCollection
        do {
            collection = try JSONDecoder().decode(GeoJSONCollection.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw .notJSON(Self.describe(error))
        } catch {
            throw .notJSON("\(error)")
        }
        guard collection.type == "FeatureCollection", let features = collection.features else { throw .notAFeatureCollection }
        guard features.count <= limits.features else { throw .tooManyFeatures(count: features.count, limit: limits.features) }
        var zones: [Zone] = []
        var names: Set<String> = []
        for (index, feature) in features.enumerated() {
            let name = feature.properties?.name
            func problem(_ text: String) -> ZoneFileError { .feature(index: index, name: name, problem: text) }
            guard let name, !name.isEmpty else { throw problem("no \"name\" property") }
            guard name.count <= limits.nameLength, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { throw problem("the name is longer than \(limits.nameLength) characters or has control characters") }
            guard names.insert(name).inserted else { throw problem("a second zone of that name") }
            guard let geometry = feature.geometry else { throw problem("no geometry") }
            switch geometry.type {
            case "Polygon":
                guard case .polygon(let rings)? = geometry.coordinates, !rings.isEmpty else {
                    throw problem("a Polygon's coordinates are a list of rings of [longitude, latitude] positions")
                }
                guard rings.reduce(0, { $0 + $1.count }) <= limits.verticesPerZone else {
                    throw problem("more than \(limits.verticesPerZone) vertices")
                }
                var converted: [[Zone.Coordinate]] = []
                for ring in rings {
                    guard ring.count >= 4 else { throw problem("a ring has fewer than 4 positions") }
                    var coordinates: [Zone.Coordinate] = []
                    for position in ring {
                        guard let coordinate = Self.coordinate(position) else {
                            throw problem("a position is not a longitude and latitude")
                        }
                        coordinates.append(coordinate)
                    }
                    converted.append(coordinates)
                }
                zones.append(Zone(name: name, shape: .polygon(converted)))
            case "Point":
                guard case .position(let position)? = geometry.coordinates, let centre = Self.coordinate(position) else {
                    throw problem("a Point's coordinates are one [longitude, latitude] position")
                }
                guard let radius = feature.properties?.radius, radius.isFinite, radius > 0, radius <= limits.radiusMetres else {
                    throw problem("a Point needs a \"radius\" property in metres, more than 0 and at most \(Int(limits.radiusMetres))")
                }
                zones.append(Zone(name: name, shape: .circle(centre: centre, radiusMetres: radius)))
            default:
                throw problem("a \(String(reflecting: String(geometry.type.prefix(40)))) geometry; zones are Polygons and Points")
            }
        }
        return ZoneSet(zones: zones)
    }

    private static func coordinate(_ position: [Double]) -> Zone.Coordinate? {
        guard position.count >= 2, position.allSatisfy(\.isFinite), abs(position[1]) <= 90, abs(position[0]) <= 180 else {
            return nil
        }
        return Zone.Coordinate(latitude: position[1], longitude: position[0])
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context), .keyNotFound(_, let context), .typeMismatch(_, let context), .valueNotFound(_, let context):
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return path.isEmpty ? "not valid JSON" : "at \(path)"
        @unknown default:
            return "not valid JSON"
        }
    }
}

/// GeoJSON as far as zones need it.
private struct GeoJSONCollection: Decodable {
    var type: String
    var features: [Feature]?

    struct Feature: Decodable {
        var geometry: Geometry?
        var properties: Properties?
    }

    struct Properties: Decodable {
        var name: String?
        var radius: Double?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            name = try? container.decodeIfPresent(String.self, forKey: .name)
            radius = try? container.decodeIfPresent(Double.self, forKey: .radius)
        }

        enum Key: String, CodingKey {
            case name, radius
        }
    }

    struct Geometry: Decodable {
        var type: String
        var coordinates: Coordinates?

        enum Coordinates: Decodable {
            case position([Double])
            case polygon([[[Double]]])
            case other

            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let position = try? container.decode([Double].self) {
                    self = .position(position)
                } else if let polygon = try? container.decode([[[Double]]].self) {
                    self = .polygon(polygon)
                } else {
                    self = .other
                }
            }
        }
    }
}

/// What a vehicle did at a zone.
package struct ZoneEvent: Sendable, Equatable {
    package enum Kind: String, Sendable {
        case enter
        case exit
    }

    package var zone: String
    package var kind: Kind
    /// The fix that decided it.
    package var point: TripPoint

    package init(zone: String, kind: Kind, point: TripPoint) {
        (self.zone, self.kind, self.point) = (zone, kind, point)
    }
}

/// Which zones one vehicle is in, and its enter and exit events, with hysteresis: it enters a
/// zone once it is ``hysteresisMetres`` inside, and leaves once it is as far outside, so a
/// vehicle parked on a boundary, its position wandering a few metres, does not flap. A plain
/// value, fed one fix at a time; a recorder resumes it with the zones it was in.
package struct ZoneTracker: Sendable {
    package let zones: ZoneSet
    /// Metres inside to enter, outside to leave.
    package let hysteresisMetres: Double
    /// The zones the vehicle is in, by name.
    package var inside: Set<String> { Set(insideNumbers.map { zones.zones[$0].name }) }
    /// The zones the vehicle is in, by number in the set.
    private var insideNumbers: Set<Int>

    /// A tracker of a vehicle in the zones named `inside` (names not in the set are ignored).
    package init(zones: ZoneSet, hysteresisMetres: Double = 15, inside: Set<String> = []) {
        // The index finds the zones within its margin of a fix: a wider hysteresis is cut to it.
        (self.zones, self.hysteresisMetres) = (zones, min(hysteresisMetres, ZoneIndex.marginMetres))
        insideNumbers = inside.isEmpty ? [] : Set(zones.zones.indices.filter { inside.contains(zones.zones[$0].name) })
    }

    /// The events `point` leads to, in the zones' order. Only the zones near it (by the set's
    /// index) and those the vehicle is in are looked at.
    package mutating func add(_ point: TripPoint) -> [ZoneEvent] {
        var events: [ZoneEvent] = []
        let coordinate = Zone.Coordinate(latitude: point.latitude, longitude: point.longitude)
        var candidates = zones.index.candidates(near: coordinate)
        if !insideNumbers.isEmpty {
            candidates = Array(insideNumbers.union(candidates)).sorted()
        }
        for number in candidates {
            let zone = zones.zones[number]
            let depth = zone.depth(of: coordinate, margin: hysteresisMetres)
            if insideNumbers.contains(number) {
                if (depth ?? -.infinity) <= -hysteresisMetres {
                    insideNumbers.remove(number)
                    events.append(ZoneEvent(zone: zone.name, kind: .exit, point: point))
                }
            } else if let depth, depth >= hysteresisMetres {
                insideNumbers.insert(number)
                events.append(ZoneEvent(zone: zone.name, kind: .enter, point: point))
            }
        }
        return events
    }
}

/// A uniform grid over the map (cells of ``cellDegrees``), each cell listing the zones whose
/// bounding box, widened by ``marginMetres``, touches it; zones wider than ``maximumCells``
/// cells are listed apart and always looked at. A fix's candidates are then its cell's few
/// zones: looking at a fix costs the same with ten zones or ten thousand spread over a country.
struct ZoneIndex: Sendable {
    /// About 5.6 km north–south.
    static let cellDegrees = 0.05
    /// The widest hysteresis the index serves (`--zone-hysteresis` is bounded by it).
    static let marginMetres = 1_000.0
    static let maximumCells = 400

    private var cells: [Int64: [Int]] = [:]
    private var everywhere: [Int] = []

    init(_ zones: [Zone]) {
        let latitudeMargin = Self.marginMetres / Zone.metresPerDegree
        for (number, zone) in zones.enumerated() {
            let longitudeMargin =
                latitudeMargin / max(cos(max(abs(zone.minimum.latitude), abs(zone.maximum.latitude)) * Double.pi / 180), 1e-6)
            let rows = Self.cell(zone.minimum.latitude - latitudeMargin)...Self.cell(zone.maximum.latitude + latitudeMargin)
            let columns = Self.cell(zone.minimum.longitude - longitudeMargin)...Self.cell(zone.maximum.longitude + longitudeMargin)
            guard rows.count * columns.count <= Self.maximumCells else {
                everywhere.append(number)
                continue
            }
            for row in rows {
                for column in columns { cells[Self.key(row, column), default: []].append(number) }
            }
        }
    }

    /// The zones that may be within ``marginMetres`` of `point`, by number, ascending.
    func candidates(near point: Zone.Coordinate) -> [Int] {
        let near = cells[Self.key(Self.cell(point.latitude), Self.cell(point.longitude))] ?? []
        guard !everywhere.isEmpty else { return near }
        return (near + everywhere).sorted()
    }

    private static func cell(_ degrees: Double) -> Int { Int((degrees / cellDegrees).rounded(.down)) }

    private static func key(_ row: Int, _ column: Int) -> Int64 { Int64(row) << 32 ^ Int64(column & 0xFFFF_FFFF) }
}
