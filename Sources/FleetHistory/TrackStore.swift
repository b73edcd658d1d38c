import FleetCore
import FleetHistoryCore
import FleetProtocol
import FleetWatch
import Foundation
import GNSS
import Logging
import PostgresNIO

/// The fleet's track history in PostgreSQL: the schema (created and migrated in place,
/// versioned), batched idempotent inserts, and a vehicle's track between two times.
///
/// The store is made of four parts, each a type of its own over the same connection pool and
/// shared knowledge (``TrackDatabase``): ``TrackSchema`` (the tables, their migrations and the
/// move of version 3's rows), ``TrackPartitions`` (the daily partitions and retention),
/// ``TrackWriter`` (the inserts) and ``TrackReader`` (tracks, vehicles, completeness). Its
/// methods are their entry points; the trips, stops and zones (TrackStore+Operations) and the
/// messages set aside (TrackStore+Quarantine) are extensions over the same parts.
///
/// Two tables, one row per message, keyed by `(vehicle, run, seq)` (the contract's message
/// number: numbering run and sequence number, see `MessageNumber`) and the time they are
/// partitioned by, one partition a UTC day (`fleetcast_fixes_p20261128`; see ``HistoryDay``):
/// - `fleetcast_fixes`: `time` (timestamptz), `lat`, `lon` (degrees), `alt_hae`, `alt_msl`
///   (m), `speed` (m/s), `track` (degrees true), `climb` (m/s), `mode` (1–3), `sats`,
///   `hdop`, `eph`, `epv` (m), `backlog` (it came late, in a `backlog` batch) and
///   `received_at` (when the recorder wrote it);
/// - `fleetcast_headings`: `placed_at` (its partition key: `time`, or when it was first stored
///   if it has none), `time`, `heading`, `mag_heading` (degrees), `source`, `backlog`,
///   `received_at`.
///
/// A message number is never reused (the agent keeps `seq` across restarts, and begins a new
/// run when its store is lost), so a message delivered twice (MQTT's at-least-once, a backlog
/// resent after a lost acknowledgement, two recorders) is the same key and the second insert
/// does nothing, while a new fix after any restart of the vehicle's numbering is a new key.
/// Rows of version 1 of the schema (keyed by `(vehicle, seq)`) are run 0, which is also the
/// run of agents that send no `"run"`. A redelivery has the same time, so it maps to the same
/// partition and key. Each table has an index on `(vehicle, time)` (`placed_at` for headings)
/// for "vehicle V between T1 and T2". Partitions are made ahead of need and on demand, and
/// dropped whole by retention (``applyRetention(_:now:)``).
///
/// The store does not own the client: run `client.run()` (or put it in a ServiceGroup)
/// beside it.
public struct TrackStore: Sendable {
    /// The schema version this build writes and reads.
    public static let schemaVersion = TrackSchema.schemaVersion

    /// A database whose schema is newer than this build knows (a newer fleet-watch migrated
    /// it): this build refuses to write into it rather than guess.
    public struct NewerSchema: Error, Sendable, CustomStringConvertible {
        /// The database's version.
        public let found: Int
        /// This build's.
        public let known: Int
        public var description: String {
            "the database's track schema is version \(found), newer than this fleet-watch knows (\(known)); upgrade fleet-watch"
        }
    }

    /// The most rows one INSERT statement carries (``TrackWriter/maximumRowsPerStatement``).
    public static let maximumRowsPerStatement = TrackWriter.maximumRowsPerStatement
    /// The most daily partitions of each table (``TrackPartitions/maximumPartitions``).
    public static let maximumPartitions = TrackPartitions.maximumPartitions
    /// Points per page of a track (``TrackReader/trackChunk``).
    public static let trackChunk = TrackReader.trackChunk
    /// The days of partitions one statement of the completeness check reads at most
    /// (``TrackReader/completenessSpanPartitions``).
    public static let completenessSpanPartitions = TrackReader.completenessSpanPartitions

    /// The tables and their migrations.
    package let schema: TrackSchema
    /// The daily partitions and retention.
    package let partitions: TrackPartitions
    /// The inserts.
    package let writer: TrackWriter
    /// The reads.
    package let reader: TrackReader
    /// What the four parts share.
    let database: TrackDatabase

    /// A store over `client`; `now` is the clock (tests set it to a day of their choosing).
    public init(client: PostgresClient, logger: Logger, now: (@Sendable () -> UTCTimestamp)? = nil) {
        let database = TrackDatabase(
            client: client, logger: logger, partitionState: TrackPartitionState(), now: now ?? { UTCTimestamp(Date()) })
        self.database = database
        schema = TrackSchema(database: database)
        partitions = TrackPartitions(database: database)
        writer = TrackWriter(database: database)
        reader = TrackReader(database: database)
    }

    var client: PostgresClient { database.client }
    var logger: Logger { database.logger }
    var partitionState: TrackPartitionState { database.partitionState }
    /// The recorder's clock.
    var now: @Sendable () -> UTCTimestamp { database.now }
}

/// What the parts of one ``TrackStore`` share: the connection pool, the logger, what is known
/// of the partitions (shared by the store's copies), and the recorder's clock (the day of a
/// heading without a time of its own, and "today").
struct TrackDatabase: Sendable {
    let client: PostgresClient
    let logger: Logger
    let partitionState: TrackPartitionState
    let now: @Sendable () -> UTCTimestamp
}

// MARK: The store's entry points, each its part's

extension TrackStore {
    /// What one ``write(_:)`` did (``TrackWriter/WriteOutcome``).
    public typealias WriteOutcome = TrackWriter.WriteOutcome
    /// What ``moveUnpartitionedRows(chunk:now:maximumChunks:)`` did (``TrackSchema/RowsMoved``).
    public typealias RowsMoved = TrackSchema.RowsMoved

    /// Creates the schema or brings it up to ``schemaVersion``; returns the version found
    /// before (``TrackSchema/migrate()``).
    @discardableResult
    public func migrate() async throws -> Int { try await schema.migrate() }

    /// Asks the server for nothing (`SELECT 1`): it is reachable and answers.
    public func ping() async throws {
        for try await _ in try await client.query("SELECT 1", logger: logger).decode(Int32.self) {}
    }

    /// Writes `records`; returns how many rows were new (``TrackWriter/insert(_:)``).
    @discardableResult
    public func insert(_ records: some Collection<TrackRecord>) async throws -> Int { try await writer.insert(records) }

    /// Writes `records`, saying which were refused and why (``TrackWriter/write(_:)``).
    public func write(_ records: [TrackRecord]) async throws -> WriteOutcome { try await writer.write(records) }

    /// The vehicle's fixes with `since ≤ time < until`, in time order, handed to `body` one at
    /// a time (``TrackReader/track(vehicle:since:until:limit:pageSize:_:)``).
    public func track(
        vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, limit: Int? = nil, pageSize: Int = trackChunk,
        _ body: (TrackPoint) throws -> Void
    ) async throws {
        try await reader.track(vehicle: vehicle, since: since, until: until, limit: limit, pageSize: pageSize, body)
    }

    /// PostgreSQL's plan of a track's first page (``TrackReader/trackPlan(vehicle:since:until:)``).
    public func trackPlan(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp) async throws -> String {
        try await reader.trackPlan(vehicle: vehicle, since: since, until: until)
    }

    /// The vehicles with at least one stored fix, sorted.
    public func vehicles() async throws -> [String] { try await reader.vehicles() }

    /// Which message numbers the database does not hold, per vehicle and numbering run
    /// (``TrackReader/completeness(vehicle:since:until:)``).
    public func completeness(
        vehicle: VehicleID? = nil, since: UTCTimestamp? = nil, until: UTCTimestamp? = nil
    ) async throws -> CompletenessReport {
        try await reader.completeness(vehicle: vehicle, since: since, until: until)
    }

    /// PostgreSQL's plan of the gap search, as run (``TrackReader/completenessPlan(vehicle:since:until:)``).
    public func completenessPlan(
        vehicle: VehicleID? = nil, since: UTCTimestamp? = nil, until: UTCTimestamp? = nil
    ) async throws -> String {
        try await reader.completenessPlan(vehicle: vehicle, since: since, until: until)
    }

    /// What was refused so far (``TrackRefusals``).
    public var refusals: TrackRefusals { partitions.refusals }

    /// The first day kept by the retention this store last applied, if any.
    public var keptFrom: HistoryDay? { partitions.keptFrom }

    /// The days that have a partition of `fleetcast_fixes`, from the catalog.
    public func partitionDays() async throws -> Set<HistoryDay> { try await partitions.partitionDays() }

    /// Makes the missing partitions of yesterday to ``TrackPartitions/partitionsAhead`` days ahead
    /// (``TrackPartitions/preparePartitions(now:)``).
    public func preparePartitions(now: UTCTimestamp) async throws { try await partitions.preparePartitions(now: now) }

    /// Applies `retention` at `now`; returns the days dropped
    /// (``TrackPartitions/applyRetention(_:now:)``).
    @discardableResult
    public func applyRetention(_ retention: HistoryRetention, now: UTCTimestamp) async throws -> [HistoryDay] {
        try await partitions.applyRetention(retention, now: now)
    }

    /// The first instant retention keeps, as last recorded; `nil` when none was applied.
    public func retentionHorizon() async throws -> UTCTimestamp? { try await partitions.retentionHorizon() }

    /// Moves the rows of schema 3 into the daily partitions; `nil` when there was nothing to move
    /// (``TrackSchema/moveUnpartitionedRows(chunk:now:maximumChunks:)``).
    public func moveUnpartitionedRows(chunk: Int = 50_000, now: UTCTimestamp, maximumChunks: Int = .max) async throws -> RowsMoved? {
        try await schema.moveUnpartitionedRows(chunk: chunk, now: now, maximumChunks: maximumChunks)
    }

    /// Whether the tables of schema 3 still hold rows to move: (fixes, headings).
    func unpartitionedTables() async throws -> (fixes: Bool, headings: Bool) { try await schema.unpartitionedTables() }
}

extension TrackRecord {
    /// The record of a fleet event, or why there is none.
    public static func from(_ event: FleetEvent) -> Result<TrackRecord, Skip> {
        let made: (VehicleID, MessageNumber?, Payload, Bool)
        switch event {
        case .fix(let vehicle, let seq, let fix): made = (vehicle, seq, .fix(fix), false)
        case .heading(let vehicle, let seq, let heading): made = (vehicle, seq, .heading(heading), false)
        case .backlog(.fix(let f)): made = (f.vehicle, f.number, .fix(f.fix), true)
        case .backlog(.heading(let h)): made = (h.vehicle, h.number, .heading(h.heading), true)
        case .status, .malformed: return .failure(.notAPosition)
        }
        guard let number = made.1 else { return .failure(.noSequenceNumber) }
        guard number.seq <= UInt64(Int64.max), number.run <= UInt64(Int64.max) else { return .failure(.sequenceNumberTooLarge) }
        return .success(TrackRecord(vehicle: made.0, seq: number.seq, run: number.run, payload: made.2, backlog: made.3))
    }
}

extension Date {
    /// The same instant as `timestamp`.
    init(_ timestamp: UTCTimestamp) {
        self.init(timeIntervalSince1970: Double(timestamp.millisecondsSince1970) / 1000)
    }
}

extension UTCTimestamp {
    /// The instant of `date`, to the millisecond.
    init(_ date: Date) {
        self.init(millisecondsSince1970: Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }
}
