import FleetCore
import FleetHistoryCore
import FleetProtocol
import Foundation
import GNSS
import Logging
import PostgresNIO

/// The track history's schema: its tables, created and migrated in place by version
/// (``TrackStore/schemaVersion``), and the move of the rows version 4 left in the tables of
/// version 3 into the daily partitions. One of the four parts of a ``TrackStore``.
public struct TrackSchema: Sendable {
    let database: TrackDatabase
    var client: PostgresClient { database.client }
    var logger: Logger { database.logger }
    var partitionState: TrackPartitionState { database.partitionState }

    /// The schema version this build writes and reads.
    package static let schemaVersion = migrations.count

    /// A fix's measurements, as versions 1 and 4 both create them (history: never edited).
    private static let fixColumns = """
        lat double precision NOT NULL, lon double precision NOT NULL, alt_hae double precision, alt_msl double precision,
        speed double precision, track double precision, climb double precision, mode smallint NOT NULL, sats smallint,
        hdop double precision, eph double precision, epv double precision
        """

    /// A heading's columns after its time, as versions 1 and 4 both create them (history: never edited).
    private static let headingColumns = """
        heading double precision, mag_heading double precision, source text, backlog boolean NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now()
        """

    /// Each version's statements, in order; version n is `migrations[n - 1]`. Only ever
    /// append: a database records the versions it has applied.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE fleetcast_fixes (
                vehicle text NOT NULL,
                seq bigint NOT NULL,
                time timestamptz NOT NULL,
                \(fixColumns),
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
                \(headingColumns),
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
                \(fixColumns),
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
                \(headingColumns),
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
        TrackStore.operationsMigration,
        // Version 6: messages set aside, whole, when they cannot be stored (see
        // TrackStore+Quarantine).
        TrackStore.quarantineMigration,
    ]

    /// A constant key for `pg_advisory_xact_lock`: recorders started together migrate one
    /// after the other, never both (ASCII "fleetcas").
    static let migrationLockKey: Int64 = 0x666c_6565_7463_6173

    /// Creates the schema, or brings it up to ``schemaVersion``, in one transaction under an
    /// advisory lock; returns the version found before (0 for an empty database). Throws
    /// ``TrackStore/NewerSchema`` for a database a newer build migrated.
    @discardableResult
    package func migrate() async throws -> Int {
        let logger = self.logger
        let found: Int
        do {
            found = try await migrateInTransaction(logger: logger)
        } catch let error as PostgresTransactionError {
            // Rolled back; what went wrong inside is the error to report.
            if let newer = error.closureError as? TrackStore.NewerSchema { throw newer }
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
            guard found <= Self.schemaVersion else { throw TrackStore.NewerSchema(found: found, known: Self.schemaVersion) }
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

    // MARK: Moving the rows of schema 3

    /// What ``moveUnpartitionedRows(chunk:now:)`` did.
    public struct RowsMoved: Sendable, Equatable {
        /// Rows now in the partitioned tables (a row that was there already, a duplicate, counts).
        public var moved = 0
        /// Rows older than retention keeps, or of a day no partition can have, not moved.
        public var discarded = 0

        /// Counts of each.
        public init(moved: Int = 0, discarded: Int = 0) {
            self.moved = moved
            self.discarded = discarded
        }
    }

    /// Whether the tables of schema 3 (renamed `…_unpartitioned` by the migration to 4) still
    /// hold rows to move: (fixes, headings).
    func unpartitionedTables() async throws -> (fixes: Bool, headings: Bool) {
        var result = (fixes: false, headings: false)
        for try await (fixes, headings) in try await client.query(
            """
            SELECT to_regclass('fleetcast_fixes_unpartitioned') IS NOT NULL, to_regclass('fleetcast_headings_unpartitioned') IS NOT NULL
            """, logger: logger
        ).decode((Bool, Bool).self) { result = (fixes, headings) }
        return result
    }

    /// Moves the rows the migration to schema 4 left in `fleetcast_fixes_unpartitioned` and
    /// `fleetcast_headings_unpartitioned` into the daily partitions, about `chunk` rows (a
    /// 64th as many pages) per statement, each deleting its rows there and inserting them here
    /// at once:
    /// stopped at any moment (a kill, a restart, an outage), every row is in exactly one of the
    /// two tables, which `track`, `vehicles` and `completeness` read together until the move
    /// ends. Drops each table once empty. Returns `nil` when there was nothing to move.
    ///
    /// `maximumChunks` stops it early (as a kill would, between two statements), for tests.
    package func moveUnpartitionedRows(chunk: Int = 50_000, now: UTCTimestamp, maximumChunks: Int = .max) async throws -> RowsMoved? {
        let present = try await unpartitionedTables()
        guard present.fixes || present.headings else { return nil }
        var total = RowsMoved()
        var chunks = 0
        let firstYear = HistoryDay(year: 1, month: 1, day: 1)!
        let keptFrom = Date(max(partitionState.state.withLock { $0.admission.keptFrom } ?? firstYear, firstYear).start)
        // The last instant of year 9999: later ones cannot name a partition.
        let end = Date(timeIntervalSince1970: 253_402_300_800)
        for (table, placement, moving) in [
            ("fleetcast_fixes", "time", present.fixes), ("fleetcast_headings", "coalesce(time, received_at)", present.headings),
        ] where moving {
            let source = "\(table)_unpartitioned"
            if !partitionState.state.withLock({ $0.moveReady.contains(source) }) {
                // The partitions of every day there, once (one pass over the table).
                var days = Set<HistoryAdmission.VehicleDay>()
                let dayRows = try await client.query(
                    PostgresQuery(unsafeSQL: "SELECT DISTINCT floor(extract(epoch FROM \(placement)) / 86400)::bigint FROM \(source)"),
                    logger: logger)
                for try await day in dayRows.decode(Int64.self) { days.insert(TrackPartitions.anyVehicle(HistoryDay(daysSince1970: day))) }
                _ = try await TrackPartitions(database: database).admit(days, now: now, force: true)
                partitionState.state.withLock { _ = $0.moveReady.insert(source) }
            }
            let columns =
                table == "fleetcast_fixes"
                ? "vehicle, run, seq, time, lat, lon, alt_hae, alt_msl, speed, track, climb, mode, sats, hdop, eph, epv, heading, mag_heading, heading_source, backlog, received_at"
                : "vehicle, run, seq, time, heading, mag_heading, source, backlog, received_at"
            let conflict = table == "fleetcast_fixes" ? "vehicle, run, seq, time" : "vehicle, run, seq, placed_at"
            let insertColumns = table == "fleetcast_fixes" ? columns : columns + ", placed_at"
            let selected = table == "fleetcast_fixes" ? columns : columns + ", coalesce(time, received_at)"
            // Page range by page range (a TID range scan: each page is read once, however many
            // rows before it are already moved; a call stopped by `maximumChunks` goes on at the
            // page it reached), until the table is found empty and dropped.
            let pagesPerChunk = Int64(max(1, chunk / 64))
            while true {
                var pages: Int64 = 0
                for try await count in try await client.query(
                    PostgresQuery(unsafeSQL: "SELECT pg_relation_size('\(source)') / current_setting('block_size')::bigint"),
                    logger: logger
                ).decode(Int64.self) { pages = count }
                var page = partitionState.state.withLock { $0.movePage[source] ?? 0 }
                while page < pages {
                    guard chunks < maximumChunks else { return total }
                    chunks += 1
                    var bindings = PostgresBindings(capacity: 4)
                    bindings.append(keptFrom)
                    bindings.append(end)
                    bindings.append("(\(page),0)")
                    bindings.append("(\(page + pagesPerChunk),0)")
                    let statement = PostgresQuery(
                        unsafeSQL: """
                            WITH moved AS (
                                DELETE FROM \(source) WHERE ctid >= $3::tid AND ctid < $4::tid
                                RETURNING \(columns)),
                            kept AS (
                                INSERT INTO \(table) (\(insertColumns)) SELECT \(selected) FROM moved
                                WHERE \(placement) >= $1 AND \(placement) < $2
                                ON CONFLICT (\(conflict)) DO NOTHING RETURNING 1)
                            SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM moved WHERE \(placement) >= $1 AND \(placement) < $2),
                                (SELECT count(*) FROM kept)
                            """, binds: bindings)
                    for try await (taken, admitted, _) in try await client.query(statement, logger: logger).decode(
                        (Int64, Int64, Int64).self)
                    {
                        total.moved += Int(admitted)
                        total.discarded += Int(taken - admitted)
                    }
                    page += pagesPerChunk
                    partitionState.state.withLock { [page] in $0.movePage[source] = page }
                }
                partitionState.state.withLock { $0.movePage[source] = 0 }
                if try await dropIfEmpty(source) { break }
            }
        }
        return total
    }

    /// Drops `table` if it holds no row, under a lock that keeps another recorder's move from
    /// adding to what is dropped; returns whether it is gone. (Two recorders may move at once:
    /// each then finds part of its pages already moved by the other.)
    private func dropIfEmpty(_ table: String) async throws -> Bool {
        try await client.withTransaction(logger: logger) { connection in
            guard try await tableExists(table, connection) else { return true }
            try await connection.query(PostgresQuery(unsafeSQL: "LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE"), logger: logger)
            var empty = false
            for try await value in try await connection.query(
                PostgresQuery(unsafeSQL: "SELECT NOT EXISTS (SELECT 1 FROM \(table))"), logger: logger
            ).decode(Bool.self) { empty = value }
            if empty { try await connection.query(PostgresQuery(unsafeSQL: "DROP TABLE \(table)"), logger: logger) }
            return empty
        }
    }

    private func tableExists(_ table: String, _ connection: PostgresConnection) async throws -> Bool {
        var exists = false
        for try await value in try await connection.query("SELECT to_regclass(\(table)) IS NOT NULL", logger: logger).decode(Bool.self) {
            exists = value
        }
        return exists
    }
}
