import FleetCore
import FleetOperations
import FleetProtocol
import FleetcastCore
import GNSS
import JSONEscaping
import Logging

/// What `fleet-watch record` derives beside the fixes: trips and stops by `rules`, and, with
/// `zones`, enter and exit events with `hysteresisMetres` (see `FleetOperations`).
package struct OperationsSettings: Sendable {
    package var rules: TripRules
    package var zones: ZoneSet?
    /// Metres inside a zone to enter it, outside to leave it.
    package var hysteresisMetres: Double
    /// Called with the zone events newly stored, oldest first (to announce them over MQTT).
    /// Must not wait long: the recording waits for it.
    package var announce: (@Sendable ([StoredZoneEvent]) async -> Void)?

    package init(
        rules: TripRules = TripRules(), zones: ZoneSet? = nil, hysteresisMetres: Double = 15,
        announce: (@Sendable ([StoredZoneEvent]) async -> Void)? = nil
    ) {
        (self.rules, self.zones, self.hysteresisMetres, self.announce) = (rules, zones, hysteresisMetres, announce)
    }
}

/// The recorder's operations shell: each vehicle's ``VehicleOperations`` in memory, fed with
/// the fixes of each batch once that batch is committed, and what they close stored in
/// PostgreSQL. A vehicle first seen (after a start) or sent a fix older than its newest (a
/// backlog behind live fixes) is rebuilt from its stored fixes, from its last trip's end (see
/// ``VehicleOperations/resumePoint(after:reaching:horizonSeconds:)``): a restart resumes
/// the open trip, and a late backlog corrects what it touches.
struct RecorderOperations {
    let settings: OperationsSettings
    let store: TrackStore
    let logger: Logger
    private var vehicles: [VehicleID: VehicleOperations] = [:]
    /// Totals for the log at the end.
    private(set) var stored = (segments: 0, zoneEvents: 0, rebuilds: 0)
    /// Fixes not derived: too old or too far ahead (see ``process(_:retrying:)``).
    private(set) var ignored = 0
    /// Fixes older than this (7 days) are not derived.
    static let maximumLatenessSeconds = 7.0 * 86_400

    init(settings: OperationsSettings, store: TrackStore, logger: Logger) {
        (self.settings, self.store, self.logger) = (settings, store, logger)
    }

    /// Takes a committed batch. `retrying` runs a database step until it succeeds (or the
    /// recording is cancelled).
    mutating func process(
        _ records: [TrackRecord],
        retrying: (String, @escaping @Sendable () async throws -> [StoredZoneEvent]) async throws -> [StoredZoneEvent]
    ) async throws {
        // Only fixes a real vehicle's receiver can send now: at most 10 minutes ahead of this
        // clock (a fix dated ahead would become the vehicle's newest, and every later one would
        // look late and rebuild it), and at most ``maximumLatenessSeconds`` old (a rebuild reads
        // the vehicle's fixes from before the oldest one to now). Others are stored, not derived.
        let now = store.now().millisecondsSince1970
        let (earliest, latest) = (now - Int64(Self.maximumLatenessSeconds * 1000), now + 600_000)
        var byVehicle: [VehicleID: [TripPoint]] = [:]
        for record in records {
            guard case .fix(let fix) = record.payload else { continue }
            guard (earliest...latest).contains(fix.time.millisecondsSince1970) else {
                ignored += 1
                if ignored == 1 {
                    logger.notice(
                        "A fix too old or too far ahead of this clock for trips and zones is stored but not derived; such fixes are counted",
                        metadata: ["vehicle": "\(record.vehicle.rawValue)", "time": "\(fix.time)"])
                }
                continue
            }
            byVehicle[record.vehicle, default: []].append(
                TripPoint(time: fix.time, latitude: fix.latitude, longitude: fix.longitude, speed: fix.speed))
        }
        for (vehicle, points) in byVehicle.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            var announced: [StoredZoneEvent] = []
            if var operations = vehicles[vehicle], case .closed(let closed, let events) = operations.add(points) {
                vehicles[vehicle] = operations
                guard !closed.isEmpty || !events.isEmpty else { continue }
                let store = self.store
                announced = try await retrying("store trips and zone events") {
                    try await store.storeOperations(vehicle: vehicle.rawValue, closed: closed, zoneEvents: events)
                }
                stored.segments += closed.count
            } else {
                let reaching = points.map(\.time).min()!
                vehicles[vehicle] = nil
                let (store, settings) = (self.store, self.settings)
                let rebuilt = SanitizerVisibleMutex<(VehicleOperations, Int)?>(nil)
                announced = try await retrying("rebuild trips and zone events") {
                    let (operations, new, segments) = try await Self.rebuild(vehicle, reaching: reaching, store: store, settings: settings)
                    rebuilt.withLock { $0 = (operations, segments) }
                    return new
                }
                if let (operations, segments) = rebuilt.withLock({ $0 }) {
                    vehicles[vehicle] = operations
                    stored.segments += segments
                }
                stored.rebuilds += 1
                logger.debug(
                    "Trips and zone events rebuilt from the stored fixes",
                    metadata: ["vehicle": "\(vehicle.rawValue)", "from": "\(reaching)"])
            }
            stored.zoneEvents += announced.count
            for event in announced {
                logger.info(
                    "Zone \(event.kind.rawValue)",
                    metadata: ["vehicle": "\(event.vehicle)", "zone": "\(JSONString.escaped(event.zone))", "time": "\(event.time)"])
            }
            if !announced.isEmpty, let announce = settings.announce { await announce(announced) }
        }
    }

    /// `vehicle`'s operations rebuilt from its stored fixes, for fixes from `reaching` on; what
    /// the rebuild derived replaces what was stored from its start.
    private static func rebuild(
        _ vehicle: VehicleID, reaching: UTCTimestamp, store: TrackStore, settings: OperationsSettings
    ) async throws -> (VehicleOperations, [StoredZoneEvent], Int) {
        let tripEnd = try await store.settledTripEnd(vehicle: vehicle.rawValue, decidedBefore: reaching)
        let from = VehicleOperations.resumePoint(after: tripEnd, reaching: reaching)
        let inside = settings.zones == nil ? [] : try await store.zonesInside(vehicle: vehicle.rawValue, before: from)
        var operations = VehicleOperations(
            rules: settings.rules, zones: settings.zones, hysteresisMetres: settings.hysteresisMetres, inside: inside)
        var closed: [VehicleOperations.Closed] = []
        var events: [ZoneEvent] = []
        let until = UTCTimestamp(millisecondsSince1970: store.now().millisecondsSince1970 + 600_001)
        try await store.track(vehicle: vehicle, since: from, until: until) { point in
            let (segments, zoneEvents) = operations.replay(
                TripPoint(time: point.time, latitude: point.latitude, longitude: point.longitude, speed: point.speed))
            closed += segments
            events += zoneEvents
        }
        let new = try await store.storeOperations(vehicle: vehicle.rawValue, closed: closed, zoneEvents: events, replacingFrom: from)
        return (operations, new, closed.count)
    }
}
