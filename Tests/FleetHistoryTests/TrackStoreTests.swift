import FleetHistory
import FleetHistoryCore
import FleetProtocol
import FleetWatch
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import PostgresNIO
import Testing

/// Runs `body` with a ``TrackStore`` on a fresh database of a real PostgreSQL server started
/// for the test, the client running beside it.
func withStore<T: Sendable>(
    _ postgres: TestPostgres, database: String? = nil, sslmode: String = "disable", now: (@Sendable () -> UTCTimestamp)? = nil,
    _ body: (TrackStore, PostgresClient) async throws -> T
) async throws -> T {
    let name: String
    if let database { name = database } else { name = try await postgres.createDatabase() }
    let location = try PostgresLocation(parsing: postgres.url(database: name) + "?sslmode=\(sslmode)")
    let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        return try await body(TrackStore(client: client, logger: logger, now: now), client)
    }
}

func fix(_ vehicle: String, seq: UInt64, run: UInt64 = 0, second: Int64, latitude: Double = 52.5, backlog: Bool = false) -> TrackRecord {
    TrackRecord(
        vehicle: VehicleID(vehicle)!, seq: seq, run: run,
        payload: .fix(
            Fix(
                time: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000 + second * 1000), latitude: latitude, longitude: 13.4,
                altitudeMSL: 34, speed: 8.5, track: 271, mode: .threeD, satellitesUsed: 9, eph: 3.5)),
        backlog: backlog)
}

/// The store against a real PostgreSQL: the schema it creates and migrates, inserts keyed by
/// `(vehicle, seq)`, and the track read back; checked with `psql`, not with the store.
@Suite struct TrackStoreTests {
    @Test func migrationCreatesTheSchemaOnceEvenWhenTwoRecordersStartTogether() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            async let first = withStore(postgres, database: database) { store, _ in try await store.migrate() }
            async let second = withStore(postgres, database: database) { store, _ in try await store.migrate() }
            let found = try await [first, second].sorted()
            #expect(found == [0, TrackStore.schemaVersion], "one migrated from an empty database, the other found it done")
            #expect(
                try await postgres.psql("SELECT version FROM fleetcast_schema ORDER BY version", database: database) == "1\n2\n3\n4\n5\n6")
            let tables = try await postgres.psql(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'fleetcast_%' ORDER BY tablename", database: database)
            #expect(
                tables
                    == "fleetcast_fixes\nfleetcast_headings\nfleetcast_partition_makers\nfleetcast_quarantine\nfleetcast_retention\nfleetcast_schema\nfleetcast_segments\nfleetcast_zone_events",
                "nothing left to move; trips, stops and zone events (version 5)")
            let indexes = try await postgres.psql(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'fleetcast_fixes_vehicle_time'", database: database)
            #expect(indexes.contains("(vehicle, \"time\")"))
            // Started again, it finds the current version and changes nothing.
            #expect(try await withStore(postgres, database: database) { store, _ in try await store.migrate() } == TrackStore.schemaVersion)
        }
    }

    @Test func aNewerSchemaIsRefusedNotOverwritten() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database) { store, _ in try await store.migrate() }
            _ = try await postgres.psql("INSERT INTO fleetcast_schema (version) VALUES (99)", database: database)
            await #expect(throws: TrackStore.NewerSchema.self) {
                try await withStore(postgres, database: database) { store, _ in try await store.migrate() }
            }
        }
    }

    @Test func duplicatesAreNoOpsAndTheTrackComesBackInTimeOrder() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database) { store, _ in
                try await store.migrate()
                let heading = TrackRecord(
                    vehicle: VehicleID("van-1")!, seq: 3,
                    payload: .heading(
                        Heading(time: UTCTimestamp(millisecondsSince1970: 1_795_000_002_500), trueHeading: 90.5, source: .hdt)))
                // Out of order, as a backlog arrives after live fixes.
                let first = [
                    fix("van-1", seq: 4, second: 4), fix("van-1", seq: 1, second: 1, backlog: true), heading,
                    fix("van-2", seq: 1, second: 2),
                ]
                #expect(try await store.insert(first) == 4)
                // At-least-once: the same messages again, plus one new.
                #expect(try await store.insert(first + [fix("van-1", seq: 5, second: 5)]) == 1)
                // More rows than one statement carries.
                let many = (10..<(10 + UInt64(TrackStore.maximumRowsPerStatement) + 7)).map { fix("van-3", seq: $0, second: Int64($0)) }
                #expect(try await store.insert(many) == many.count)

                var points: [TrackPoint] = []
                try await store.track(
                    vehicle: VehicleID("van-1")!, since: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000),
                    until: UTCTimestamp(millisecondsSince1970: 1_795_000_005_000)
                ) { points.append($0) }
                #expect(points.map(\.seq) == [1, 4], "seq 5 is at the excluded end; the heading is not a fix")
                #expect(points.first?.backlog == true)
                #expect(points.first?.latitude == 52.5)
                #expect(points.first?.altitudeMSL == 34)
                #expect(points.first?.satellites == 9)
                #expect(points.first?.time == UTCTimestamp(millisecondsSince1970: 1_795_000_001_000))
                #expect(try await store.vehicles() == ["van-1", "van-2", "van-3"])
            }
            #expect(
                try await postgres.psql("SELECT count(*) FROM fleetcast_fixes", database: database)
                    == "\(4 + TrackStore.maximumRowsPerStatement + 7)")
            #expect(try await postgres.psql("SELECT heading, source FROM fleetcast_headings", database: database) == "90.5|HDT")
        }
    }

    @Test func aVersionOneDatabaseMigratesInPlaceItsRowsBecomeRunZeroAndANewRunIsANewKey() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            // The schema and rows of the first version, as an earlier fleet-watch left them.
            _ = try await postgres.psql(
                """
                \(OldTrackSchema.sql(version: 1))
                INSERT INTO fleetcast_fixes (vehicle, seq, time, lat, lon, mode, backlog)
                    SELECT 'van-1', s, to_timestamp(1795000000 + s), 52.5, 13.4, 3, false FROM generate_series(1, 40) s;
                """, database: database)
            try await withStore(postgres, database: database) { store, _ in
                let found = try await store.migrate()
                #expect(found == 1)
                // The old numbering again: duplicates, before the rows are moved into partitions
                // and after. The same numbers in a new run: new rows.
                #expect(try await store.insert([fix("van-1", seq: 40, second: 40)]) == 0)
                let moved = try await store.moveUnpartitionedRows(now: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000))
                #expect(moved == TrackStore.RowsMoved(moved: 40, discarded: 0))
                let again = try await store.insert([fix("van-1", seq: 40, second: 40)])
                #expect(again == 0)
                let newRun = try await store.insert((1...3).map { fix("van-1", seq: $0, run: 1_795_000_100_000, second: 100 + Int64($0)) })
                #expect(newRun == 3)
            }
            #expect(
                try await postgres.psql("SELECT run, count(*) FROM fleetcast_fixes GROUP BY run ORDER BY run", database: database)
                    == "0|40\n1795000100000|3", "nothing lost, the old rows in run 0")
            #expect(
                try await postgres.psql(
                    "SELECT indexdef FROM pg_indexes WHERE indexname = 'fleetcast_fixes_pkey'", database: database
                ).contains("(vehicle, run, seq, \"time\")"))
        }
    }

    @Test func completenessNamesEachRunsHolesAndCountsFixesAndHeadingsTogether() async throws {
        try await withPostgres { postgres in
            try await withStore(postgres) { store, _ in
                try await store.migrate()
                let empty = try await store.completeness()
                #expect(empty.isComplete, "an empty history lacks nothing")
                func heading(_ seq: UInt64, run: UInt64) -> TrackRecord {
                    TrackRecord(vehicle: VehicleID("van-1")!, seq: seq, run: run, payload: .heading(Heading(trueHeading: 1, source: .hdt)))
                }
                // Run 7: 1…10 with 4 a heading and 6…7 missing; run 9 (the store lost): 1…3, whole.
                var records = [1, 2, 3, 5, 8, 9, 10].map { fix("van-1", seq: UInt64($0), run: 7, second: Int64($0)) }
                records.append(heading(4, run: 7))
                records += (1...3).map { fix("van-1", seq: UInt64($0), run: 9, second: 100 + Int64($0)) }
                records += (3...6).map { fix("van-2", seq: UInt64($0), second: Int64($0)) }
                try await store.insert(records)
                let report = try await store.completeness()
                #expect(report.gaps == [SequenceGap(vehicle: "van-1", run: 7, first: 6, last: 7)])
                #expect(report.missing == 2)
                #expect(
                    report.runs.map { "\($0.vehicle) \($0.run) \($0.first)-\($0.last) \($0.held)" } == [
                        "van-1 7 1-10 8", "van-1 9 1-3 3", "van-2 0 3-6 4",
                    ])
                let second = try await store.completeness(vehicle: VehicleID("van-2")!)
                #expect(second.isComplete)
                // A time window: run 7's fixes from second 8 on hold 8…10, whole.
                let late = try await store.completeness(
                    vehicle: VehicleID("van-1")!, since: UTCTimestamp(millisecondsSince1970: 1_795_000_008_000),
                    until: UTCTimestamp(millisecondsSince1970: 1_795_000_050_000))
                #expect(late.isComplete)
                #expect(late.runs.map(\.run) == [7])
                let early = try await store.completeness(
                    vehicle: VehicleID("van-1")!, since: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000),
                    until: UTCTimestamp(millisecondsSince1970: 1_795_000_050_000))
                #expect(early.missing == 2)
            }
        }
    }

    @Test func tlsModesMeanWhatLibpqsDo() async throws {
        // A server with TLS and a certificate from a CA the system does not trust, as Debian's
        // own clusters serve their self-signed "snakeoil" one.
        try await withPostgres(tls: true) { postgres in
            let database = try await postgres.createDatabase()
            for mode in ["prefer", "require"] {
                let encrypted = try await withStore(postgres, database: database, sslmode: mode) { store, client in
                    try await store.migrate()
                    var ssl = false
                    for try await value in try await client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                        .decode(Bool.self)
                    {
                        ssl = value
                    }
                    return ssl
                }
                #expect(encrypted, "sslmode=\(mode): the server says the connection is encrypted")
            }
            // verify-full checks the certificate against the system's CAs: refused, as a TLS
            // failure (not a time-out).
            let strict = try PostgresLocation(parsing: postgres.url(database: database) + "?sslmode=verify-full")
            let refusal = await #expect(throws: (any Error).self) {
                try await withTimeout(.seconds(30), "a verify-full connection") {
                    let connection = try await PostgresConnection.connect(
                        configuration: try strict.connectionConfiguration(), id: 1,
                        logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
                    try await connection.close()
                }
            }
            #expect(String(reflecting: refusal).localizedCaseInsensitiveContains("certificate"), "\(String(reflecting: refusal))")
            // With the CA that signed it (sslrootcert), verify-full and verify-ca connect.
            let ca = try #require(postgres.caFile)
            for mode in ["verify-full", "verify-ca"] {
                let verified = try PostgresLocation(parsing: postgres.url(database: database) + "?sslmode=\(mode)&sslrootcert=\(ca)")
                try await withTimeout(.seconds(30), "a \(mode) connection with the server's CA") {
                    let connection = try await PostgresConnection.connect(
                        configuration: try verified.connectionConfiguration(), id: 2,
                        logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
                    try await connection.close()
                }
            }
        }
    }

    @Test func urlsAreParsedAsLibpqDoesAndPasswordsNeverShown() throws {
        let location = try PostgresLocation(
            parsing: "postgresql://rec%40fleet:s%3Acret@db.example.net:6543/tracks?sslmode=require", environment: ["PGPASSWORD": "other"])
        #expect(location.user == "rec@fleet")
        #expect(location.password == "s:cret")
        #expect(location.host == "db.example.net")
        #expect(location.port == 6543)
        #expect(location.database == "tracks")
        #expect(location.tlsMode == .require)
        #expect(!location.description.contains("cret"))
        // Decoded once: a literal "%" (sent as %25) stays a "%".
        #expect(try PostgresLocation(parsing: "postgres://u:50%25off%2541@db/x").password == "50%off%41")
        #expect(try PostgresLocation(parsing: "postgres://db/x?sslmode=verify-full").tlsMode == .verifyFull)
        let fromEnvironment = try PostgresLocation(parsing: "postgres://db/tracks", environment: ["PGPASSWORD": "p"])
        #expect(fromEnvironment.password == "p")
        #expect(fromEnvironment.port == 5432)
        #expect(fromEnvironment.user == "postgres")
        #expect(fromEnvironment.tlsMode == .prefer)
        let rooted = try PostgresLocation(parsing: "postgres://db/x?sslmode=verify-ca&sslrootcert=/etc/fleetcast/pg-ca.pem")
        #expect(rooted.tlsMode == .verifyCA)
        #expect(rooted.rootCertificateFile == "/etc/fleetcast/pg-ca.pem")
        for bad in [
            "mysql://db/x", "postgres://db", "postgres://db/x?sslmode=verify-all", "postgres:///x", "postgres://db/x?timeout=3",
            "postgres://db/x?sslrootcert=",
        ] {
            #expect(throws: PostgresLocation.InvalidURL.self, "\(bad)") { try PostgresLocation(parsing: bad) }
        }
    }
}
