import FleetCore
import FleetHistoryCore
import FleetOperations
import FleetProtocol
import FleetcastCore
import GNSS
import JSONEscaping
import Logging

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
    /// The most stored fixes one rebuild reads: 20,000 (five and a half hours of a 1 Hz
    /// vehicle). A vehicle with more since its resume point is rebuilt from its newest 20,000;
    /// what closed before them stands as stored.
    static let maximumRebuildFixes = 20_000
    /// The longest one rebuild may take (2 s); past it the rebuild is given up and counted.
    static let rebuildTimeLimit: Duration = .seconds(2)
    /// Rebuilds given up (``rebuildTimeLimit``).
    private(set) var abandoned = 0
    /// After a rebuild for a late fix, the vehicle's next late fixes within this (10 s) wait
    /// and are rebuilt together, once, when it is over: a vehicle sending a fix 26 s late every
    /// 300 ms costs one bounded rebuild every 10 s, not one a batch.
    static let lateRebuildInterval: Duration = .seconds(10)
    private var lateRebuiltAt: [VehicleID: ContinuousClock.Instant] = [:]
    /// Vehicles whose late fixes wait for their rebuild, from the earliest of them.
    private var pendingRebuilds: [VehicleID: UTCTimestamp] = [:]
    /// Zone events announced (logged at info and published over MQTT) per vehicle: 20 at once,
    /// then one every 3 s. Past that they are stored and not announced, counted, and said once
    /// per episode: a vehicle cannot turn 144 KB of fixes into 20,000 messages and log lines.
    static let announcementBurst = 20.0
    static let announcementsPerSecond = 1.0 / 3
    private var announcementTokens: [VehicleID: (tokens: Double, at: ContinuousClock.Instant)] = [:]
    /// Zone events stored and not announced (see ``announcementBurst``).
    private(set) var unannounced = 0
    /// Vehicles in an episode of impossible implied speeds, or of zone events past their rate,
    /// already said.
    private var impossibleSaid: Set<VehicleID> = []
    private var quietedSaid: Set<VehicleID> = []

    init(settings: OperationsSettings, store: TrackStore, logger: Logger) {
        (self.settings, self.store, self.logger) = (settings, store, logger)
    }

    /// Takes a committed batch. `retrying` runs a database step until it succeeds (or the
    /// recording is cancelled).
    ///
    /// `bounded` runs a rebuild once within a time limit (it throws past it): a rebuild that
    /// does not finish in time is given up, never retried (a rebuild of 1.4 million fixes once
    /// was, for ever).
    mutating func process(
        _ records: [TrackRecord],
        retrying: (String, @escaping @Sendable () async throws -> [StoredZoneEvent]) async throws -> [StoredZoneEvent],
        bounded: (Duration, @escaping @Sendable () async throws -> [StoredZoneEvent]) async throws -> [StoredZoneEvent]
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
            var points = points
            let impossibleBefore = vehicles[vehicle]?.impossibleForZones ?? 0
            if let operations = vehicles[vehicle], let last = operations.last, let late = points.map(\.time).min(), late <= last,
                let at = lateRebuiltAt[vehicle], ContinuousClock.now - at < Self.lateRebuildInterval
            {
                // Late again soon after a rebuild: coalesced into one rebuild when the interval
                // is over; what is newer than the newest fed is derived now.
                pendingRebuilds[vehicle] = min(pendingRebuilds[vehicle] ?? late, late)
                points = points.filter { $0.time > last }
                if points.isEmpty { continue }
            }
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
                let late = vehicles[vehicle] != nil
                announced = try await rebuild(vehicle, reaching: points.map(\.time).min()!, feeding: points, late: late, bounded: bounded)
            }
            stored.zoneEvents += announced.count
            sayImpossibleSpeeds(vehicle, before: impossibleBefore)
            await announce(announced, of: vehicle)
        }
        // The coalesced rebuilds whose interval is over.
        for (vehicle, reaching) in pendingRebuilds.sorted(by: { $0.key.rawValue < $1.key.rawValue })
        where lateRebuiltAt[vehicle].map({ ContinuousClock.now - $0 >= Self.lateRebuildInterval }) ?? true {
            pendingRebuilds[vehicle] = nil
            let announced = try await rebuild(vehicle, reaching: reaching, feeding: [], late: true, bounded: bounded)
            stored.zoneEvents += announced.count
            await announce(announced, of: vehicle)
        }
    }

    /// At a graceful stop: the coalesced rebuilds still waiting, as many as fit in 5 s (a
    /// vehicle left is rebuilt when the next recorder first sees it).
    mutating func finish(
        bounded: (Duration, @escaping @Sendable () async throws -> [StoredZoneEvent]) async throws -> [StoredZoneEvent]
    ) async throws {
        let start = ContinuousClock.now
        for (vehicle, reaching) in pendingRebuilds.sorted(by: { $0.key.rawValue < $1.key.rawValue })
        where ContinuousClock.now - start < .seconds(5) {
            pendingRebuilds[vehicle] = nil
            await announce(try await rebuild(vehicle, reaching: reaching, feeding: [], late: true, bounded: bounded), of: vehicle)
        }
    }

    /// Logs `events` at info and hands them to the announcer, within `vehicle`'s rate.
    private mutating func announce(_ events: [StoredZoneEvent], of vehicle: VehicleID) async {
        let announced = rateLimited(events, of: vehicle)
        for event in announced {
            logger.info(
                "Zone \(event.kind.rawValue)",
                metadata: ["vehicle": "\(event.vehicle)", "zone": "\(JSONString.escaped(event.zone))", "time": "\(event.time)"])
        }
        if !announced.isEmpty, let announce = settings.announce { await announce(announced) }
    }

    /// Rebuilds `vehicle` for fixes from `reaching` on, one attempt within ``rebuildTimeLimit``;
    /// given up past it (its trips go on afresh from `feeding`, its new fixes). `late`: for a
    /// fix older than its newest (then the next one within ``lateRebuildInterval`` waits).
    private mutating func rebuild(
        _ vehicle: VehicleID, reaching: UTCTimestamp, feeding points: [TripPoint], late: Bool,
        bounded: (Duration, @escaping @Sendable () async throws -> [StoredZoneEvent]) async throws -> [StoredZoneEvent]
    ) async throws -> [StoredZoneEvent] {
        let previous = vehicles[vehicle]
        vehicles[vehicle] = nil
        if late { lateRebuiltAt[vehicle] = ContinuousClock.now }
        if lateRebuiltAt.count > 100_000 {
            lateRebuiltAt = lateRebuiltAt.filter { ContinuousClock.now - $0.value < Self.lateRebuildInterval }
        }
        let (store, settings) = (self.store, self.settings)
        let rebuilt = SanitizerVisibleMutex<(VehicleOperations, Int)?>(nil)
        let announced: [StoredZoneEvent]
        do {
            announced = try await bounded(Self.rebuildTimeLimit) {
                let (operations, new, segments) = try await Self.rebuild(vehicle, reaching: reaching, store: store, settings: settings)
                rebuilt.withLock { $0 = (operations, segments) }
                return new
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // Given up: the vehicle's trips go on from its new fixes; what was stored stands.
            abandoned += 1
            if abandoned == 1 {
                logger.warning(
                    "A vehicle's trips and zone events could not be rebuilt in time; they go on from its new fixes, and such rebuilds are counted",
                    metadata: ["vehicle": "\(vehicle.rawValue)", "error": "\(describePostgresError(error))"])
            }
            var fresh =
                previous ?? VehicleOperations(rules: settings.rules, zones: settings.zones, hysteresisMetres: settings.hysteresisMetres)
            _ = fresh.add(points.filter { point in fresh.last.map { point.time > $0 } ?? true })
            vehicles[vehicle] = fresh
            return []
        }
        if let (operations, segments) = rebuilt.withLock({ $0 }) {
            vehicles[vehicle] = operations
            stored.segments += segments
        }
        stored.rebuilds += 1
        logger.debug(
            "Trips and zone events rebuilt from the stored fixes", metadata: ["vehicle": "\(vehicle.rawValue)", "from": "\(reaching)"])
        return announced
    }

    /// Says once per episode, at warning, that `vehicle`'s fixes imply an impossible speed and
    /// are not fed to zones (``VehicleOperations/maximumZoneSpeedMetresPerSecond``); a batch
    /// without such a fix ends the episode.
    private mutating func sayImpossibleSpeeds(_ vehicle: VehicleID, before: Int) {
        let now = vehicles[vehicle]?.impossibleForZones ?? 0
        guard now > before else {
            impossibleSaid.remove(vehicle)
            return
        }
        guard impossibleSaid.count < 10_000, impossibleSaid.insert(vehicle).inserted else { return }
        logger.warning(
            "A vehicle's fixes imply an impossible speed; they are stored, and not fed to zones while they do",
            metadata: [
                "vehicle": "\(vehicle.rawValue)", "fixes": "\(now - before)",
                "speed.maximum_mps": "\(VehicleOperations.maximumZoneSpeedMetresPerSecond)",
            ])
    }

    /// The part of `events` within `vehicle`'s rate of announcements (``announcementBurst``);
    /// the rest is counted, and said once per episode.
    private mutating func rateLimited(_ events: [StoredZoneEvent], of vehicle: VehicleID) -> [StoredZoneEvent] {
        guard !events.isEmpty else { return events }
        let now = ContinuousClock.now
        var bucket = announcementTokens[vehicle] ?? (Self.announcementBurst, now)
        let elapsed = bucket.at.duration(to: now).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18
        bucket = (min(Self.announcementBurst, bucket.tokens + seconds * Self.announcementsPerSecond), now)
        let allowed = min(events.count, Int(bucket.tokens))
        bucket.tokens -= Double(allowed)
        if announcementTokens.count > 100_000 { announcementTokens.removeAll() }
        announcementTokens[vehicle] = bucket
        guard allowed < events.count else {
            quietedSaid.remove(vehicle)
            return events
        }
        unannounced += events.count - allowed
        if quietedSaid.count < 10_000, quietedSaid.insert(vehicle).inserted {
            logger.warning(
                "A vehicle's zone events come faster than they are announced; they are stored, and the rest of them are not logged or published",
                metadata: [
                    "vehicle": "\(vehicle.rawValue)", "events.per_second": "\(Self.announcementsPerSecond)",
                    "events.burst": "\(Int(Self.announcementBurst))",
                ])
        }
        return Array(events.prefix(allowed))
    }

    /// `vehicle`'s operations rebuilt from its stored fixes, for fixes from `reaching` on; what
    /// the rebuild derived replaces what was stored from its start.
    private static func rebuild(
        _ vehicle: VehicleID, reaching: UTCTimestamp, store: TrackStore, settings: OperationsSettings
    ) async throws -> (VehicleOperations, [StoredZoneEvent], Int) {
        let tripEnd = try await store.settledTripEnd(vehicle: vehicle.rawValue, decidedBefore: reaching)
        let resume = VehicleOperations.resumePoint(after: tripEnd, reaching: reaching)
        // Bounded in rows: from the newest ``maximumRebuildFixes`` at most.
        let from = try await store.rebuildStart(vehicle: vehicle, from: resume, maximumFixes: maximumRebuildFixes)
        let inside = settings.zones == nil ? [] : try await store.zonesInside(vehicle: vehicle.rawValue, before: from)
        var operations = VehicleOperations(
            rules: settings.rules, zones: settings.zones, hysteresisMetres: settings.hysteresisMetres, inside: inside)
        var closed: [VehicleOperations.Closed] = []
        var events: [ZoneEvent] = []
        let until = UTCTimestamp(millisecondsSince1970: store.now().millisecondsSince1970 + 600_001)
        try await store.track(vehicle: vehicle, since: from, until: until, limit: maximumRebuildFixes + 1) { point in
            let (segments, zoneEvents) = operations.replay(
                TripPoint(time: point.time, latitude: point.latitude, longitude: point.longitude, speed: point.speed))
            closed += segments
            events += zoneEvents
        }
        let new = try await store.storeOperations(vehicle: vehicle.rawValue, closed: closed, zoneEvents: events, replacingFrom: from)
        return (operations, new, closed.count)
    }
}
