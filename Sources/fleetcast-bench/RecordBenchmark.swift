import EdgeCore
import FleetCore
import FleetHistory
import FleetHistoryCore
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import PostgresNIO

/// `fleetcast-bench record`: how many fixes a second the track history takes, on a real
/// PostgreSQL from Debian's packages started for the run with its durability on (fsync,
/// synchronous commit: what a production server does).
///
/// 1. The store alone: `--fixes` fixes of `--vehicles` vehicles through ``TrackStore/insert(_:)``
///    in the recorder's batches (`--batch`, one batch in flight, as `fleet-watch record` writes).
/// 2. The whole path: the same number of fix messages published to a real mosquitto (QoS 1,
///    `mosquitto_pub -l`), taken by the built `fleet-watch record` into PostgreSQL; timed from
///    the first message sent until the last row is in.
///
/// The goal is 20,000 fixes/s: 10,000 vehicles at 1 Hz, with room to spare.
func runRecordBenchmark(arguments: [String]) async {
    let fixes = intOption(arguments, "--fixes", 200_000)
    let vehicles = intOption(arguments, "--vehicles", 10_000)
    let batch = intOption(arguments, "--batch", 1_000)
    print("record: \(fixes) fixes of \(vehicles) vehicles into PostgreSQL (durable: fsync and synchronous commit on)")
    do {
        try await withPostgres(durable: true) { postgres in
            try await measureStore(postgres, fixes: fixes, vehicles: vehicles, batch: batch)
            try await measureGaps(postgres, rows: intOption(arguments, "--gaps-rows", 1_000_000))
            try await measureMigration(postgres, rows: intOption(arguments, "--migration-rows", 1_000_000))
            try await withBroker(.init(extraConfiguration: ["max_queued_messages 1000000"])) { broker in
                try await measureRecorder(postgres, broker: broker, fixes: fixes, vehicles: vehicles)
            }
        }
    } catch {
        print("record: failed: \(error)")
    }
}

private let quietLogger = Logger(label: "fleetcast-bench") { _ in SwiftLogNoOpLogHandler() }

private func benchFix(_ index: Int, vehicles: Int) -> TrackRecord {
    let vehicle = index % vehicles
    let seq = index / vehicles + 1
    return TrackRecord(
        vehicle: VehicleID("bench-\(vehicle)")!, seq: UInt64(seq),
        payload: .fix(
            Fix(
                time: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000 + Int64(seq) * 1000),
                latitude: 52.37 + Double(vehicle) * 1e-4, longitude: 4.89 + Double(seq) * 1e-5, altitudeHAE: 45.2, altitudeMSL: 2.1,
                speed: 13.9, track: 87.5, climb: 0, mode: .threeD, satellitesUsed: 11, hdop: 0.8, eph: 2.3, epv: 3.1)))
}

/// Runs `body` with a ``TrackStore`` on a new, migrated database of `postgres`, its client
/// running beside it.
private func withMigratedStore(
    _ postgres: TestPostgres, _ body: (_ database: String, TrackStore) async throws -> Void
) async throws {
    let database = try await postgres.createDatabase()
    try await withStore(postgres, database) { store in
        try await store.migrate()
        try await body(database, store)
    }
}

/// Runs `body` with a ``TrackStore`` on `database` as it is (not migrated), its client
/// running beside it.
private func withStore(_ postgres: TestPostgres, _ database: String, _ body: (TrackStore) async throws -> Void) async throws {
    let location = try PostgresLocation(parsing: postgres.url(database: database) + "?sslmode=disable")
    let client = PostgresClient(configuration: location.clientConfiguration, backgroundLogger: quietLogger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        try await body(TrackStore(client: client, logger: quietLogger))
    }
}

private func measureStore(_ postgres: TestPostgres, fixes: Int, vehicles: Int, batch: Int) async throws {
    try await withMigratedStore(postgres) { database, store in
        let records = (0..<fixes).map { benchFix($0, vehicles: vehicles) }
        let clock = ContinuousClock()
        let start = clock.now
        var written = 0
        var index = 0
        while index < records.count {
            let end = min(index + batch, records.count)
            written += try await store.insert(records[index..<end])
            index = end
        }
        let elapsed = (clock.now - start).seconds
        // Once more: every row a duplicate, as after an at-least-once redelivery.
        let again = clock.now
        index = 0
        while index < records.count {
            let end = min(index + batch, records.count)
            _ = try await store.insert(records[index..<end])
            index = end
        }
        let duplicates = (clock.now - again).seconds
        // A partitioned table has no storage of its own: its partitions' sizes, indexes included.
        let size = try await postgres.psql(
            "SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'fleetcast_fixes'::regclass",
            database: database)
        print(
            String(
                format:
                    "  store: %d new rows in %.2f s = %.0f fixes/s (batches of %d); the same again as duplicates: %.0f fixes/s; %.0f bytes a fix on disk with its indexes",
                written, elapsed, Double(written) / elapsed, batch, Double(fixes) / duplicates,
                (Double(size) ?? 0) / Double(max(written, 1))))
    }
}

/// `fleet-watch gaps` on a big history: `rows` messages (fixes, every tenth number a heading)
/// of 100 vehicles in two numbering runs each, made by the server itself; the check timed
/// complete, then with holes cut in, and its plan printed.
private func measureGaps(_ postgres: TestPostgres, rows: Int) async throws {
    try await withMigratedStore(postgres) { database, store in
        let perRun = max(1, rows / 200)
        // The days of the rows below (2026-11-19 to 11-21, and the 22nd of the day's track),
        // made as the recorder makes them.
        try await store.preparePartitions(now: UTCTimestamp(millisecondsSince1970: 1_795_150_000_000))
        _ = try await postgres.psql(
            """
            INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, mode, backlog)
                SELECT 'bench-' || v, r, s, to_timestamp(1795000000 + r * 100000 + s), 52.37, 4.89, 3, false
                FROM generate_series(1, 100) v, generate_series(1, 2) r, generate_series(1, \(perRun)) s WHERE s % 10 <> 0;
            INSERT INTO fleetcast_headings (vehicle, run, seq, placed_at, time, heading, source, backlog)
                SELECT 'bench-' || v, r, s, to_timestamp(1795000000 + r * 100000 + s), to_timestamp(1795000000 + r * 100000 + s), 90,
                    'HDT', false
                FROM generate_series(1, 100) v, generate_series(1, 2) r, generate_series(1, \(perRun)) s WHERE s % 10 = 0;
            """, database: database)
        // Outside the transaction psql puts one -c in.
        _ = try await postgres.psql("VACUUM ANALYZE fleetcast_fixes", database: database)
        _ = try await postgres.psql("VACUUM ANALYZE fleetcast_headings", database: database)
        let clock = ContinuousClock()
        func timed(_ label: String, vehicle: VehicleID? = nil) async throws {
            let start = clock.now
            let report = try await store.completeness(vehicle: vehicle)
            let elapsed = (clock.now - start).seconds
            print(
                String(
                    format: "  gaps (%@): %d messages in %d runs checked in %.3f s, %d missing in %d gaps", label,
                    Int(report.runs.reduce(0) { $0 + $1.held }), report.runs.count, elapsed, Int(report.missing), report.gaps.count))
        }
        try await timed("complete, whole fleet")
        // With retention on, `gaps` checks from the first day kept: the windowed search.
        try await store.applyRetention(HistoryRetention(days: 30), now: UTCTimestamp(millisecondsSince1970: 1_795_150_000_000))
        try await timed("complete, whole fleet, from the retention's first day")
        _ = try await postgres.psql("TRUNCATE fleetcast_retention", database: database)
        _ = try await postgres.psql(
            "DELETE FROM fleetcast_fixes WHERE seq IN (17, 4242, 4243) OR (vehicle = 'bench-7' AND seq BETWEEN 100 AND 199)",
            database: database)
        try await timed("holes cut in, whole fleet")
        try await timed("holes cut in, one vehicle", vehicle: VehicleID("bench-7"))
        print("  gaps: the plan of the hole search, whole fleet:")
        for line in try await store.completenessPlan().split(separator: "\n") { print("    \(line)") }

        // `history` of one vehicle's whole day at 1 Hz, among the rows above.
        let day = HistoryDay(year: 2026, month: 11, day: 20)!
        _ = try await postgres.psql(
            """
            INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, alt_msl, speed, track, mode, sats, eph, backlog)
                SELECT 'day-van', 1, s + 1, to_timestamp(\(day.start.millisecondsSince1970 / 1000) + s), 52.37, 4.89, 2.1, 13.9, 87.5, 3, 11,
                    2.3, false
                FROM generate_series(0, 86399) s;
            INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, alt_msl, speed, track, mode, sats, eph, backlog)
                SELECT 'day-van-10s', 1, s + 1, to_timestamp(\(day.start.millisecondsSince1970 / 1000) + s * 10), 52.37, 4.89, 2.1, 13.9,
                    87.5, 3, 11, 2.3, false
                FROM generate_series(0, 8639) s;
            ANALYZE fleetcast_fixes;
            """, database: database)
        for (vehicle, label) in [("day-van", "1 Hz"), ("day-van-10s", "a fix every 10 s")] {
            var best = Double.infinity
            var points = 0
            for _ in 0..<5 {
                points = 0
                let start = clock.now
                try await store.track(vehicle: VehicleID(vehicle)!, since: day.start, until: day.adding(1).start) { _ in points += 1 }
                best = min(best, (clock.now - start).seconds)
            }
            print(
                String(
                    format: "  history (one vehicle's day, %@): %d fixes read in %.0f ms (best of 5), %.1f µs a fix", label, points,
                    best * 1000, best * 1e6 / Double(max(points, 1))))
        }
        let plan = try await store.trackPlan(vehicle: VehicleID("day-van")!, since: day.start, until: day.adding(1).start)
        print("  history: the plan of its first page (\(TrackStore.trackChunk) fixes):")
        for line in plan.split(separator: "\n") { print("    \(line)") }
    }
}

/// The migration from schema 3 (one table each) to 4 (daily partitions) of a history of
/// `rows` fixes over ten days: how long the schema change holds the recorder's writes (it
/// records once it is done), and how long the move into partitions that follows, beside the
/// recording, takes.
private func measureMigration(_ postgres: TestPostgres, rows: Int) async throws {
    let database = try await postgres.createDatabase()
    _ = try await postgres.psql(
        """
        \(OldTrackSchema.sql(version: 3))
        INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, alt_msl, speed, track, mode, sats, eph, backlog)
            SELECT 'bench-' || (i % 100), 1, i, to_timestamp(1795000000 + i * \(864_000.0 / Double(max(1, rows)))), 52.37, 4.89, 2.1,
                13.9, 87.5, 3, 11, 2.3, false
            FROM generate_series(1, \(rows)) i;
        """, database: database)
    _ = try await postgres.psql("VACUUM ANALYZE fleetcast_fixes", database: database)
    try await withStore(postgres, database) { store in
        let clock = ContinuousClock()
        let start = clock.now
        try await store.migrate()
        let schema = (clock.now - start).seconds
        let moving = clock.now
        let moved = try await store.moveUnpartitionedRows(now: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000))
        let move = (clock.now - moving).seconds
        let partitions = try await postgres.psql(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'fleetcast_fixes'::regclass", database: database)
        print(
            String(
                format:
                    "  migration 3 -> 4 of %d fixes: schema changed in %.0f ms (the recorder's writes wait that long); rows moved into %@ daily partitions in %.1f s = %.0f rows/s, beside the recording",
                moved?.moved ?? 0, schema * 1000, partitions, move, Double(moved?.moved ?? 0) / move))
    }
}

private func measureRecorder(_ postgres: TestPostgres, broker: TestBroker, fixes: Int, vehicles: Int) async throws {
    let database = try await postgres.createDatabase()
    let recorder = try TestProcess(
        builtProduct("fleet-watch"),
        [
            "record", "--broker", broker.url, "--postgres",
            "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable", "--log-level", "info",
        ],
        directory: broker.directory, name: "recorder", environment: ["PGPASSWORD": postgres.password ?? ""])
    defer { recorder.send(SIGKILL) }
    try await waitUntil("fleet-watch record to subscribe", timeout: .seconds(30)) {
        recorder.standardError.contains("Subscribed to the fleet")
    }
    // One file per 1,000 vehicles' topics would be closer to a fleet, but mosquitto_pub -l
    // sends to one topic; the vehicle comes from the topic, so each process is one vehicle
    // range: `--vehicles` processes would be too many, so fixes go to 10 vehicles' topics.
    let publishers = min(10, vehicles)
    var files: [String] = []
    for p in 0..<publishers {
        var lines = ""
        for seq in 1...(fixes / publishers) {
            lines +=
                #"{"v":1,"vehicle":"bench-\#(p)","seq":\#(seq),"time":"2026-11-24T00:00:00.000Z","lat":52.37,"lon":4.89,"mode":3,"sats":11,"speed":13.9}"#
            lines += "\n"
        }
        let file = "\(broker.directory)/burst-\(p).jsonl"
        try lines.write(toFile: file, atomically: true, encoding: .utf8)
        files.append(file)
    }
    let expected = (fixes / publishers) * publishers
    let clock = ContinuousClock()
    let start = clock.now
    let senders = try files.enumerated().map { p, file in
        try TestProcess(
            "/bin/sh", ["-c", "exec /usr/bin/mosquitto_pub -h 127.0.0.1 -p \(broker.port) -q 1 -t fleet/bench-\(p)/fix -l < \(file)"],
            directory: broker.directory, name: "pub-\(p)")
    }
    for sender in senders { _ = try await sender.waitForExit(timeout: .seconds(600)) }
    let sent = (clock.now - start).seconds
    try await waitUntil("every fix in PostgreSQL", timeout: .seconds(600), interval: .milliseconds(100)) {
        Int(try await postgres.psql("SELECT count(*) FROM fleetcast_fixes", database: database)) ?? 0 >= expected
    }
    let elapsed = (clock.now - start).seconds
    print(
        String(
            format:
                "  fleet-watch record: %d fixes through mosquitto (QoS 1, %d publishers) into PostgreSQL in %.2f s = %.0f fixes/s (published in %.2f s)",
            expected, publishers, elapsed, Double(expected) / elapsed, sent))
}
