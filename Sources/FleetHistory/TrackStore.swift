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
    public static let schemaVersion = migrations.count

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

    /// The most rows one INSERT statement carries (each column goes as one array, so this
    /// bounds a statement's size, about 150 bytes a fix, not its parameter count).
    public static let maximumRowsPerStatement = 5_000

    let client: PostgresClient
    let logger: Logger
    /// The partitions known, retention and refusals, shared by the store's copies.
    let partitionState = TrackPartitionState()
    /// The recorder's clock: the day of a heading without a time of its own, and "today".
    let now: @Sendable () -> UTCTimestamp

    /// A store over `client`; `now` is the clock (tests set it to a day of their choosing).
    public init(client: PostgresClient, logger: Logger, now: (@Sendable () -> UTCTimestamp)? = nil) {
        self.client = client
        self.logger = logger
        self.now = now ?? { UTCTimestamp(Date()) }
    }

    // MARK: Schema

    /// Each version's statements, in order; version n is `migrations[n - 1]`. Only ever
    /// append: a database records the versions it has applied.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE fleetcast_fixes (
                vehicle text NOT NULL,
                seq bigint NOT NULL,
                time timestamptz NOT NULL,
                lat double precision NOT NULL,
                lon double precision NOT NULL,
                alt_hae double precision,
                alt_msl double precision,
                speed double precision,
                track double precision,
                climb double precision,
                mode smallint NOT NULL,
                sats smallint,
                hdop double precision,
                eph double precision,
                epv double precision,
                backlog boolean NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (vehicle, seq)
            )
            """,
            "CREATE INDEX fleetcast_fixes_vehicle_time ON fleetcast_fixes (vehicle, time)",
            """
            CREATE TABLE fleetcast_headings (
                vehicle text NOT NULL,
                seq bigint NOT NULL,
                time timestamptz,
                heading double precision,
                mag_heading double precision,
                source text,
                backlog boolean NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (vehicle, seq)
            )
            """,
            "CREATE INDEX fleetcast_headings_vehicle_time ON fleetcast_headings (vehicle, time)",
        ],
        // Version 2: the numbering run in the key. Existing rows are run 0 (adding a column with
        // a constant default rewrites nothing); the primary key's index is built anew.
        [
            "ALTER TABLE fleetcast_fixes ADD COLUMN run bigint NOT NULL DEFAULT 0",
            "ALTER TABLE fleetcast_fixes DROP CONSTRAINT fleetcast_fixes_pkey",
            "ALTER TABLE fleetcast_fixes ADD CONSTRAINT fleetcast_fixes_pkey PRIMARY KEY (vehicle, run, seq)",
            "ALTER TABLE fleetcast_headings ADD COLUMN run bigint NOT NULL DEFAULT 0",
            "ALTER TABLE fleetcast_headings DROP CONSTRAINT fleetcast_headings_pkey",
            "ALTER TABLE fleetcast_headings ADD CONSTRAINT fleetcast_headings_pkey PRIMARY KEY (vehicle, run, seq)",
        ],
        // Version 3: the heading of a fix's instant, which agents send inside the fix message,
        // in the fix's row (one row per instant; `fleetcast_headings` keeps headings that came
        // alone). Nullable columns without a default: no row is rewritten.
        [
            "ALTER TABLE fleetcast_fixes ADD COLUMN heading double precision",
            "ALTER TABLE fleetcast_fixes ADD COLUMN mag_heading double precision",
            "ALTER TABLE fleetcast_fixes ADD COLUMN heading_source text",
        ],
        // Version 4: both tables partitioned by day (declarative range partitioning), the time
        // in their keys as PostgreSQL requires. Instant: the tables of version 3 are renamed
        // `…_unpartitioned` and read beside the new ones until the recorder has moved their rows
        // (``moveUnpartitionedRows(chunk:now:)``), in chunks, while it records. A heading is
        // placed by `placed_at`: its own time, or when the recorder first stored it.
        [
            "ALTER TABLE fleetcast_fixes RENAME TO fleetcast_fixes_unpartitioned",
            "ALTER TABLE fleetcast_fixes_unpartitioned RENAME CONSTRAINT fleetcast_fixes_pkey TO fleetcast_fixes_unpartitioned_pkey",
            "ALTER INDEX fleetcast_fixes_vehicle_time RENAME TO fleetcast_fixes_unpartitioned_vehicle_time",
            "ALTER TABLE fleetcast_headings RENAME TO fleetcast_headings_unpartitioned",
            "ALTER TABLE fleetcast_headings_unpartitioned RENAME CONSTRAINT fleetcast_headings_pkey TO fleetcast_headings_unpartitioned_pkey",
            "ALTER INDEX fleetcast_headings_vehicle_time RENAME TO fleetcast_headings_unpartitioned_vehicle_time",
            """
            CREATE TABLE fleetcast_fixes (
                vehicle text NOT NULL,
                run bigint NOT NULL,
                seq bigint NOT NULL,
                time timestamptz NOT NULL,
                lat double precision NOT NULL,
                lon double precision NOT NULL,
                alt_hae double precision,
                alt_msl double precision,
                speed double precision,
                track double precision,
                climb double precision,
                mode smallint NOT NULL,
                sats smallint,
                hdop double precision,
                eph double precision,
                epv double precision,
                heading double precision,
                mag_heading double precision,
                heading_source text,
                backlog boolean NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (vehicle, run, seq, time)
            ) PARTITION BY RANGE (time)
            """,
            "CREATE INDEX fleetcast_fixes_vehicle_time ON fleetcast_fixes (vehicle, time)",
            """
            CREATE TABLE fleetcast_headings (
                vehicle text NOT NULL,
                run bigint NOT NULL,
                seq bigint NOT NULL,
                placed_at timestamptz NOT NULL,
                time timestamptz,
                heading double precision,
                mag_heading double precision,
                source text,
                backlog boolean NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (vehicle, run, seq, placed_at)
            ) PARTITION BY RANGE (placed_at)
            """,
            "CREATE INDEX fleetcast_headings_vehicle_placed_at ON fleetcast_headings (vehicle, placed_at)",
            """
            CREATE TABLE fleetcast_retention (
                id boolean PRIMARY KEY DEFAULT true CHECK (id),
                kept_from timestamptz NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
        ],
        // Version 5: trips and stops, and zone events (`fleet-watch record --zones`), derived
        // from the fixes as they are recorded (see TrackStore+Operations).
        operationsMigration,
        // Version 6: messages set aside, whole, when they cannot be stored (see
        // TrackStore+Quarantine).
        quarantineMigration,
    ]

    /// A constant key for `pg_advisory_xact_lock`: recorders started together migrate one
    /// after the other, never both (ASCII "fleetcas").
    static let migrationLockKey: Int64 = 0x666c_6565_7463_6173

    /// Creates the schema, or brings it up to ``schemaVersion``, in one transaction under an
    /// advisory lock; returns the version found before (0 for an empty database). Throws
    /// ``NewerSchema`` for a database a newer build migrated.
    @discardableResult
    public func migrate() async throws -> Int {
        let logger = self.logger
        let found: Int
        do {
            found = try await migrateInTransaction(logger: logger)
        } catch let error as PostgresTransactionError {
            // Rolled back; what went wrong inside is the error to report.
            if let newer = error.closureError as? NewerSchema { throw newer }
            throw error
        }
        if found < Self.schemaVersion {
            logger.notice("Track schema migrated", metadata: ["schema.from": "\(found)", "schema.to": "\(Self.schemaVersion)"])
        }
        return found
    }

    private func migrateInTransaction(logger: Logger) async throws -> Int {
        try await client.withTransaction(logger: logger) { connection -> Int in
            try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLockKey))", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS fleetcast_schema (
                    version integer PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
            var found = 0
            for try await version in try await connection.query("SELECT coalesce(max(version), 0) FROM fleetcast_schema", logger: logger)
                .decode(Int32.self)
            {
                found = Int(version)
            }
            guard found <= Self.schemaVersion else { throw NewerSchema(found: found, known: Self.schemaVersion) }
            for version in (found + 1)..<(Self.schemaVersion + 1) {
                for statement in Self.migrations[version - 1] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("INSERT INTO fleetcast_schema (version) VALUES (\(Int32(version)))", logger: logger)
            }
            if found == 0 {
                // A new database: the tables of version 3 that version 4 renamed hold nothing to move.
                try await connection.query("DROP TABLE fleetcast_fixes_unpartitioned, fleetcast_headings_unpartitioned", logger: logger)
            }
            return found
        }
    }

    /// Asks the server for nothing (`SELECT 1`): it is reachable and answers.
    public func ping() async throws {
        for try await _ in try await client.query("SELECT 1", logger: logger).decode(Int32.self) {}
    }

    // MARK: Writing

    /// What one ``write(_:)`` did: the rows that were new, and the records not stored because
    /// of their day (by index in the records written, with why: ``HistoryAdmission``).
    public struct WriteOutcome: Sendable, Equatable {
        /// Rows stored by this write (not there before).
        public var new = 0
        /// Indices of the records refused, and why.
        public var refused: [Int: HistoryAdmission.Verdict] = [:]
    }

    /// The most days one INSERT statement writes into: each partition it touches is locked
    /// with its indexes until the statement ends, and a batch spread over a thousand days would
    /// exhaust PostgreSQL's lock table.
    public static let maximumDaysPerStatement = 8

    /// Writes `records`, in statements of at most ``maximumRowsPerStatement`` rows and
    /// ``maximumDaysPerStatement`` days; a record whose `(vehicle, run, seq)` is already stored
    /// is skipped. Returns how many rows were new. Each statement is atomic; a failure throws
    /// and the caller retries the whole batch (the rows already written are then duplicates,
    /// which cost nothing).
    ///
    /// Each record goes into its day's partition (a fix by its time; a heading by its time, or
    /// by the day it is first stored when it has none), made first when missing. A record
    /// whose day retention no longer keeps, lies more than ``maximumDaysAhead`` days ahead of
    /// the clock or further back than the horizon, would need a partition past
    /// ``maximumPartitions`` or past its vehicle's budget (``HistoryAdmission``), is not
    /// stored and is counted in ``refusals``.
    @discardableResult
    public func insert(_ records: some Collection<TrackRecord>) async throws -> Int {
        try await write(Array(records)).new
    }

    /// As ``insert(_:)``, saying which records were refused and why.
    public func write(_ records: [TrackRecord]) async throws -> WriteOutcome {
        let now = self.now()
        let today = HistoryDay(now)
        var days = Set<HistoryAdmission.VehicleDay>()
        for record in records { days.insert(HistoryAdmission.VehicleDay(record.vehicle, Self.day(of: record, today: today))) }
        let verdicts = try await admit(days, now: now)
        var fixes: [(day: HistoryDay, record: TrackRecord)] = []
        var headings: [(day: HistoryDay, record: TrackRecord)] = []
        var outcome = WriteOutcome()
        var refused = TrackRefusals()
        for (index, record) in records.enumerated() {
            let day = Self.day(of: record, today: today)
            let verdict = verdicts[HistoryAdmission.VehicleDay(record.vehicle, day)] ?? .noPartition
            guard verdict == .stored else {
                refused.count(verdict)
                outcome.refused[index] = verdict
                continue
            }
            switch record.payload {
            case .fix: fixes.append((day, record))
            case .heading: headings.append((day, record))
            }
        }
        if refused.total > 0 { partitionState.state.withLock { $0.refusals.add(refused) } }
        let placement = Date(now)
        // While the rows of schema 3 are being moved, a message stored there is not stored
        // again here (its copy would be read twice until the move ends, and an untimed
        // heading's for ever: the two are placed apart).
        var unpartitioned = (fixes: false, headings: false)
        if !partitionState.state.withLock({ $0.unpartitionedGone }) {
            unpartitioned = try await unpartitionedTables()
            if !unpartitioned.fixes && !unpartitioned.headings {
                partitionState.state.withLock { $0.unpartitionedGone = true }
            }
        }
        do {
            for part in Self.statements(fixes) {
                outcome.new += try await insertFixes(part, skipping: unpartitioned.fixes)
            }
            for part in Self.statements(headings) {
                outcome.new += try await insertHeadings(part, untimedAt: placement, skipping: unpartitioned.headings)
            }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23514" {
            // No partition for a row: another recorder's retention dropped a day this one still
            // knew. The next attempt reads the partitions and the horizon again.
            partitionState.state.withLock { $0.admission.known = nil }
            throw error
        }
        return outcome
    }

    /// `rows` cut into statements of at most ``maximumRowsPerStatement`` rows and
    /// ``maximumDaysPerStatement`` days, in day order (a batch is mostly one or two days: one
    /// statement, in the batch's order).
    static func statements(_ rows: [(day: HistoryDay, record: TrackRecord)]) -> [ArraySlice<TrackRecord>] {
        var sorted = rows
        if zip(rows, rows.dropFirst()).contains(where: { $0.day > $1.day }) { sorted.sort { $0.day < $1.day } }
        var parts: [ArraySlice<TrackRecord>] = []
        let records = sorted.map(\.record)
        var start = 0
        var days = 0
        for index in sorted.indices {
            let newDay = index == 0 || sorted[index].day != sorted[index - 1].day
            if index > start && (index - start == maximumRowsPerStatement || (newDay && days == maximumDaysPerStatement)) {
                parts.append(records[start..<index])
                start = index
                days = 0
            }
            if newDay || days == 0 { days += 1 }
        }
        if start < records.count { parts.append(records[start...]) }
        return parts
    }

    /// `AND NOT EXISTS` the message in `table` (the rows of schema 3 not yet moved), or nothing.
    private static func notIn(_ table: String, _ skipping: Bool) -> String {
        skipping
            ? "AND NOT EXISTS (SELECT 1 FROM \(table) u WHERE u.vehicle = batch.vehicle AND u.run = batch.run AND u.seq = batch.seq)"
            : ""
    }

    /// The day a record is stored under.
    static func day(of record: TrackRecord, today: HistoryDay) -> HistoryDay {
        switch record.payload {
        case .fix(let fix): HistoryDay(fix.time)
        case .heading(let heading): heading.time.map(HistoryDay.init) ?? today
        }
    }

    private func insertFixes(_ rows: ArraySlice<TrackRecord>, skipping unpartitioned: Bool) async throws -> Int {
        // One array per column, unnested into rows by the server: 20 parameters whatever the
        // batch size, where a VALUES list needs 20 a row (and PostgreSQL parses each). Arrays
        // carry no NULLs here: NaN stands for an unknown number and −1 for unknown
        // satellites, turned back into NULL by NULLIF (neither is a value a fix can have).
        var vehicles: [String] = [], runs: [Int64] = [], seqs: [Int64] = [], times: [Date] = [], lats: [Double] = []
        var lons: [Double] = [], altHAE: [Double] = [], altMSL: [Double] = [], speeds: [Double] = [], tracks: [Double] = [],
            climbs: [Double] = []
        var modes: [Int16] = [], sats: [Int16] = [], hdops: [Double] = [], ephs: [Double] = [], epvs: [Double] = []
        var headings: [Double] = [], magnetic: [Double] = [], sources: [String] = []
        var backlogs: [Bool] = []
        for record in rows {
            guard case .fix(let fix) = record.payload else { continue }
            vehicles.append(record.vehicle.rawValue)
            runs.append(Int64(record.run))
            seqs.append(Int64(record.seq))
            times.append(Date(fix.time))
            lats.append(fix.latitude)
            lons.append(fix.longitude)
            altHAE.append(fix.altitudeHAE ?? .nan)
            altMSL.append(fix.altitudeMSL ?? .nan)
            speeds.append(fix.speed ?? .nan)
            tracks.append(fix.track ?? .nan)
            climbs.append(fix.climb ?? .nan)
            modes.append(Int16(fix.mode.rawValue))
            sats.append(fix.satellitesUsed.map { Int16(clamping: max(0, $0)) } ?? -1)
            hdops.append(fix.hdop ?? .nan)
            ephs.append(fix.eph ?? .nan)
            epvs.append(fix.epv ?? .nan)
            headings.append(fix.heading?.trueHeading ?? .nan)
            magnetic.append(fix.heading?.magneticHeading ?? .nan)
            sources.append(fix.heading?.source.rawValue ?? "")
            backlogs.append(record.backlog)
        }
        guard sources.contains(where: { !$0.isEmpty }) else {
            // No fix of the batch carries a heading (a fleet without compasses): the three
            // columns are left to their NULL default, 10 % faster than sending them empty.
            let query: PostgresQuery = """
                WITH inserted AS (INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv, backlog)
                SELECT vehicle, run, seq, time, lat, lon, NULLIF(alt_hae, 'NaN'), NULLIF(alt_msl, 'NaN'), NULLIF(speed, 'NaN'),
                    NULLIF(track, 'NaN'), NULLIF(climb, 'NaN'), mode, NULLIF(sats, -1), NULLIF(hdop, 'NaN'), NULLIF(eph, 'NaN'),
                    NULLIF(epv, 'NaN'), backlog
                FROM unnest(\(vehicles), \(runs), \(seqs), \(times), \(lats), \(lons), \(altHAE), \(altMSL), \(speeds),
                    \(tracks), \(climbs), \(modes), \(sats), \(hdops), \(ephs), \(epvs), \(backlogs))
                    AS batch (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv, backlog)
                WHERE true \(unescaped: Self.notIn("fleetcast_fixes_unpartitioned", unpartitioned))
                ON CONFLICT (vehicle, run, seq, time) DO NOTHING RETURNING 1)
                SELECT count(*) FROM inserted
                """
            return try await countRows(query)
        }
        let query: PostgresQuery = """
            WITH inserted AS (INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv, heading, mag_heading, heading_source, backlog)
            SELECT vehicle, run, seq, time, lat, lon, NULLIF(alt_hae, 'NaN'), NULLIF(alt_msl, 'NaN'), NULLIF(speed, 'NaN'),
                NULLIF(track, 'NaN'), NULLIF(climb, 'NaN'), mode, NULLIF(sats, -1), NULLIF(hdop, 'NaN'), NULLIF(eph, 'NaN'),
                NULLIF(epv, 'NaN'), NULLIF(heading, 'NaN'), NULLIF(mag_heading, 'NaN'), NULLIF(heading_source, ''), backlog
            FROM unnest(\(vehicles), \(runs), \(seqs), \(times), \(lats), \(lons), \(altHAE), \(altMSL), \(speeds),
                \(tracks), \(climbs), \(modes), \(sats), \(hdops), \(ephs), \(epvs), \(headings), \(magnetic), \(sources), \(backlogs))
                AS batch (vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv,
                    heading, mag_heading, heading_source, backlog)
            WHERE true \(unescaped: Self.notIn("fleetcast_fixes_unpartitioned", unpartitioned))
            ON CONFLICT (vehicle, run, seq, time) DO NOTHING RETURNING 1)
            SELECT count(*) FROM inserted
            """
        return try await countRows(query)
    }

    private func insertHeadings(
        _ rows: ArraySlice<TrackRecord>, untimedAt placement: Date, skipping unpartitioned: Bool
    ) async throws -> Int {
        // As for fixes; a heading's time and source may be unknown: the epoch's first
        // instant and "" stand for them (no heading is from 1970, no source is empty). A
        // heading without a time is placed at `placement` (now): stored once whatever day it
        // is delivered again, because it is inserted only when no partition holds its number
        // (a probe of each partition's key, for these rare headings only).
        var vehicles: [String] = [], runs: [Int64] = [], seqs: [Int64] = [], times: [Date] = [], headings: [Double] = []
        var magnetic: [Double] = []
        var sources: [String] = [], backlogs: [Bool] = []
        for record in rows {
            guard case .heading(let heading) = record.payload else { continue }
            vehicles.append(record.vehicle.rawValue)
            runs.append(Int64(record.run))
            seqs.append(Int64(record.seq))
            times.append(heading.time.map(Date.init) ?? Date(timeIntervalSince1970: 0))
            headings.append(heading.trueHeading ?? .nan)
            magnetic.append(heading.magneticHeading ?? .nan)
            sources.append(heading.source.rawValue)
            backlogs.append(record.backlog)
        }
        let query: PostgresQuery = """
            WITH inserted AS (INSERT INTO fleetcast_headings (vehicle, run, seq, placed_at, time, heading, mag_heading, source, backlog)
            SELECT vehicle, run, seq, CASE WHEN time = 'epoch' THEN \(placement) ELSE time END, NULLIF(time, 'epoch'),
                NULLIF(heading, 'NaN'), NULLIF(mag_heading, 'NaN'), NULLIF(source, ''), backlog
            FROM unnest(\(vehicles), \(runs), \(seqs), \(times), \(headings), \(magnetic), \(sources), \(backlogs))
                AS batch (vehicle, run, seq, time, heading, mag_heading, source, backlog)
            WHERE (batch.time <> 'epoch' OR NOT EXISTS (
                SELECT 1 FROM fleetcast_headings h WHERE h.vehicle = batch.vehicle AND h.run = batch.run AND h.seq = batch.seq))
                \(unescaped: Self.notIn("fleetcast_headings_unpartitioned", unpartitioned))
            ON CONFLICT (vehicle, run, seq, placed_at) DO NOTHING RETURNING 1)
            SELECT count(*) FROM inserted
            """
        return try await countRows(query)
    }

    /// Runs an insert whose result is one row, the count of new rows.
    private func countRows(_ query: PostgresQuery) async throws -> Int {
        var count = 0
        for try await inserted in try await client.query(query, logger: logger).decode(Int64.self) { count = Int(inserted) }
        return count
    }

    // MARK: Reading

    /// The vehicle's fixes with `since ≤ time < until`, in time order (then `seq`), at most
    /// `limit` of them when given, handed to `body` one at a time as they arrive from the
    /// server (a year of 1 Hz fixes is never held in memory at once).
    ///
    /// The points come in pages of `pageSize` (one round trip each).
    public func track(
        vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, limit: Int? = nil, pageSize: Int = trackChunk,
        _ body: (TrackPoint) throws -> Void
    ) async throws {
        // Pages of ``trackChunk`` points, each one row of column arrays, the next page after
        // the last point of the one before (keyset paging along the `(vehicle, time)` index):
        // decoding one row per point costs postgres-nio about 4 µs, an array element a few ns,
        // and no page sorts more than its own points. NaN and −1 stand for NULL, as on the way in.
        let unpartitioned = try await unpartitionedTables().fixes
        var remaining = max(0, limit ?? Int.max)
        var after: (time: String, seq: Int64)?
        while remaining > 0 {
            let page = min(remaining, max(1, pageSize))
            let rows = try await client.query(
                Self.trackQuery(vehicle: vehicle, since: since, until: until, after: after, page: page, unpartitioned: unpartitioned),
                logger: logger)
            var count = 0
            for try await (seqs, millis, lats, lons, altitudes, speeds, tracks, modes, sats, ephs, headings, backlogs, last) in rows.decode(
                (
                    [Int64]?, [Int64]?, [Double]?, [Double]?, [Double]?, [Double]?, [Double]?, [Int16]?, [Int16]?, [Double]?, [Double]?,
                    [Bool]?, String?
                ).self)
            {
                guard let seqs, let millis, let lats, let lons, let altitudes, let speeds, let tracks, let modes, let sats, let ephs,
                    let headings, let backlogs, let last
                else { break }  // no point left: array_agg of nothing is NULL
                count = seqs.count
                guard
                    [millis.count, lats.count, lons.count, altitudes.count, speeds.count, tracks.count, modes.count, sats.count]
                        .allSatisfy({ $0 == count }), ephs.count == count, headings.count == count, backlogs.count == count, count > 0
                else { throw TrackReadError.ragged }
                func known(_ value: Double) -> Double? { value.isNaN ? nil : value }
                // array_agg keeps the order rows reach it, which PostgreSQL does not promise: put
                // back in (time, seq) order if it is not.
                var order = Array(0..<count)
                if zip(order, order.dropFirst()).contains(where: { (millis[$0], seqs[$0]) > (millis[$1], seqs[$1]) }) {
                    order.sort { (millis[$0], seqs[$0]) < (millis[$1], seqs[$1]) }
                }
                for i in order {
                    try body(
                        TrackPoint(
                            seq: UInt64(clamping: seqs[i]),
                            time: UTCTimestamp(millisecondsSince1970: millis[i]),
                            latitude: lats[i], longitude: lons[i], altitudeMSL: known(altitudes[i]), speed: known(speeds[i]),
                            track: known(tracks[i]), mode: Int(modes[i]), satellites: sats[i] < 0 ? nil : Int(sats[i]),
                            eph: known(ephs[i]), heading: known(headings[i]), backlog: backlogs[i]))
                }
                // The next page starts after this one's last point: its time exactly (as text, to
                // the microsecond; the milliseconds above are rounded) and its seq.
                after = (last, seqs[order[count - 1]])
            }
            remaining -= count
            if count < page { break }
        }
    }

    /// Points per page of ``track(vehicle:since:until:limit:pageSize:_:)``: 8,192, about 700 kB.
    public static let trackChunk = 8_192

    /// A track result whose column arrays differ in length (never from this store's query).
    enum TrackReadError: Error { case ragged }

    /// PostgreSQL's plan of the first page of ``track(vehicle:since:until:limit:pageSize:_:)``, as run
    /// (`EXPLAIN (ANALYZE, BUFFERS)`): only the partitions of the days asked for, read by their
    /// `(vehicle, time)` index.
    public func trackPlan(vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp) async throws -> String {
        var lines: [String] = []
        let query = Self.trackQuery(
            vehicle: vehicle, since: since, until: until, after: nil, page: Self.trackChunk,
            unpartitioned: try await unpartitionedTables().fixes, explain: true)
        for try await line in try await client.query(query, logger: logger).decode(String.self) { lines.append(line) }
        return lines.joined(separator: "\n")
    }

    /// One page of `vehicle`'s fixes in `[since, until)` after `after` (time, as PostgreSQL
    /// writes it, and seq) in (time, seq) order, as one row of column arrays and the page's last
    /// time; the rows of schema 3 not yet moved into partitions are read beside them.
    private static func trackQuery(
        vehicle: VehicleID, since: UTCTimestamp, until: UTCTimestamp, after: (time: String, seq: Int64)?, page: Int,
        unpartitioned: Bool, explain: Bool = false
    ) -> PostgresQuery {
        let columns = "seq, time, lat, lon, alt_msl, speed, track, mode, sats, eph, heading, backlog"
        let table =
            unpartitioned
            ? "(SELECT \(columns), vehicle FROM fleetcast_fixes UNION ALL SELECT \(columns), vehicle FROM fleetcast_fixes_unpartitioned) f"
            : "fleetcast_fixes"
        var bindings = PostgresBindings(capacity: 6)
        bindings.append(vehicle.rawValue)
        bindings.append(Date(since))
        bindings.append(Date(until))
        bindings.append(after?.time ?? "-infinity")
        bindings.append(after?.seq ?? Int64.min)
        bindings.append(Int64(page))
        return PostgresQuery(
            unsafeSQL: (explain ? "EXPLAIN (ANALYZE, BUFFERS) " : "") + """
                SELECT array_agg(seq), array_agg(round(date_part('epoch', time) * 1000)::bigint), array_agg(lat), array_agg(lon),
                    array_agg(coalesce(alt_msl, 'NaN')), array_agg(coalesce(speed, 'NaN')), array_agg(coalesce(track, 'NaN')),
                    array_agg(mode), array_agg(coalesce(sats, -1::smallint)), array_agg(coalesce(eph, 'NaN')),
                    array_agg(coalesce(heading, 'NaN')), array_agg(backlog), max(time)::text
                FROM (
                    SELECT \(columns) FROM \(table)
                    WHERE vehicle = $1 AND time >= $2 AND time < $3
                        AND (time, seq) > ($4::timestamptz, $5)
                    ORDER BY time, seq LIMIT $6
                ) page
                """, binds: bindings)
    }

    /// The vehicles with at least one stored fix, sorted.
    public func vehicles() async throws -> [String] {
        var vehicles: [String] = []
        let query =
            try await unpartitionedTables().fixes
            ? "SELECT vehicle FROM fleetcast_fixes UNION SELECT vehicle FROM fleetcast_fixes_unpartitioned ORDER BY vehicle"
            : "SELECT DISTINCT vehicle FROM fleetcast_fixes ORDER BY vehicle"
        for try await vehicle in try await client.query(PostgresQuery(unsafeSQL: query), logger: logger).decode(String.self) {
            vehicles.append(vehicle)
        }
        return vehicles
    }
}

/// One message for the track history: a fix or heading of a vehicle with its `seq`, live or
/// from a backlog batch.
public struct TrackRecord: Sendable, Equatable {
    /// What the message carried.
    public enum Payload: Sendable, Equatable {
        /// A position.
        case fix(Fix)
        /// A heading.
        case heading(Heading)
    }

    /// The vehicle.
    public var vehicle: VehicleID
    /// The per-vehicle sequence number, the row's key with the vehicle and the run.
    public var seq: UInt64
    /// The numbering run `seq` belongs to (0: the publisher sent none).
    public var run: UInt64
    /// The fix or heading.
    public var payload: Payload
    /// Whether it came in a `backlog` batch.
    public var backlog: Bool

    /// A record.
    public init(vehicle: VehicleID, seq: UInt64, run: UInt64 = 0, payload: Payload, backlog: Bool = false) {
        self.vehicle = vehicle
        self.seq = seq
        self.run = run
        self.payload = payload
        self.backlog = backlog
    }

    /// Why an event is not recorded.
    public enum Skip: Error, Sendable, Equatable {
        /// A status or malformed message: nothing for the history.
        case notAPosition
        /// A fix or heading without `seq` (not from a Fleetcast agent): it has no key, so a
        /// redelivery could not be told from a new message.
        case noSequenceNumber
        /// A `seq` or `run` above 2⁶³−1, which PostgreSQL's `bigint` cannot hold.
        case sequenceNumberTooLarge
    }

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
