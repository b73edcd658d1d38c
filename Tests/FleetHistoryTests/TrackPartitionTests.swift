import FleetCore
import FleetHistory
import FleetHistoryCore
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

/// Days of the history: the calendar of partition names and retention, checked against
/// Foundation's Gregorian calendar.
@Suite struct HistoryDayTests {
    @Test func daysAgreeWithTheGregorianCalendarAndNameTheirPartitions() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        // 1600 to 2400 (Foundation's calendar is Julian before 1582), every 11th day.
        let first = HistoryDay(year: 1600, month: 1, day: 1)!.daysSince1970
        let last = HistoryDay(year: 2400, month: 12, day: 31)!.daysSince1970
        for days in stride(from: first, through: last, by: 11) {
            let day = HistoryDay(daysSince1970: days)
            let parts = calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(days) * 86_400))
            let civil = day.civil
            #expect(civil.year == Int64(parts.year!) && civil.month == parts.month! && civil.day == parts.day!, "\(days)")
            #expect(HistoryDay(compact: Substring(day.compact)) == day)
        }
        // An instant belongs to the day it falls in, before 1970 too.
        #expect(HistoryDay(UTCTimestamp(millisecondsSince1970: -1)).description == "1969-12-31")
        #expect(HistoryDay(UTCTimestamp(millisecondsSince1970: 1_795_000_000_000)).description == "2026-11-18")
        #expect(HistoryDay(UTCTimestamp(millisecondsSince1970: 1_795_000_000_000)).compact == "20261118")
        #expect(HistoryDay(year: 2026, month: 2, day: 29) == nil, "no such day")
        #expect(HistoryDay(compact: "2026021") == nil && HistoryDay(compact: "2026-0-01") == nil)
        #expect(HistoryDay(year: 12, month: 3, day: 4)?.compact == "00120304")
        #expect(HistoryDay(year: 10_000, month: 1, day: 1)?.isNameable == false)
    }

    @Test func retentionIsWholeDaysAndTheDayOfTheHorizonIsKept() throws {
        #expect(try HistoryRetention(parsing: "30d").days == 30)
        #expect(try HistoryRetention(parsing: " 8w").days == 56)
        #expect(try HistoryRetention(parsing: "forever") == .forever)
        #expect(try HistoryRetention(parsing: "") == .forever, "an empty RETENTION= in the unit's file")
        for bad in ["30", "0d", "-1d", "1y", "999999d", "d", "3.5d"] {
            #expect(throws: HistoryRetentionError.self, "\(bad)") { try HistoryRetention(parsing: bad) }
        }
        let now = UTCTimestamp(millisecondsSince1970: 1_795_000_000_000)  // 2026-11-18T06:13:20Z
        #expect(try HistoryRetention(parsing: "30d").keptFrom(now: now)?.description == "2026-10-19")
        #expect(HistoryRetention.forever.keptFrom(now: now) == nil)
    }
}

/// The partitioned history against a real PostgreSQL: partitions made ahead and on demand,
/// retention by whole days, the move of a filled older schema with a restart in its middle,
/// and the plans of `history` and `gaps`; checked with `psql`.
@Suite struct TrackPartitionTests {
    /// 2026-11-28T12:00:00Z, the day the tests' stores believe it is.
    static let noon = UTCTimestamp(millisecondsSince1970: 1_795_867_200_000)
    static var today: HistoryDay { HistoryDay(noon) }

    /// A fix of `vehicle` on the day `days` after today, at `second` past its midnight.
    static func fix(_ vehicle: String, seq: UInt64, run: UInt64 = 1, day days: Int64, second: Int64 = 0) -> TrackRecord {
        TrackRecord(
            vehicle: VehicleID(vehicle)!, seq: seq, run: run,
            payload: .fix(
                Fix(
                    time: UTCTimestamp(millisecondsSince1970: today.adding(days).start.millisecondsSince1970 + second * 1000),
                    latitude: 48.1, longitude: 11.5, mode: .threeD)))
    }

    static func partitions(_ postgres: TestPostgres, _ database: String, _ table: String) async throws -> [String] {
        try await postgres.psql(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '\(table)'::regclass ORDER BY 1",
            database: database
        ).split(separator: "\n").map(String.init)
    }

    @Test func aRefusedRecordIsCountedOnceWhenItsWriteFailsAndIsRetried() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database, now: { Self.noon }) { store, _ in
                try await store.migrate()
                try await store.preparePartitions(now: Self.noon)
                // Today's fix and one five days ahead of the clock (refused). Another recorder's
                // retention dropped today's partition meanwhile, unknown to this one: the write
                // fails (no partition for its row), and the recorder retries it.
                let batch = [Self.fix("van-1", seq: 1, day: 0), Self.fix("van-1", seq: 2, day: 5)]
                _ = try await postgres.psql("DROP TABLE fleetcast_fixes_p\(Self.today.compact)", database: database)
                await #expect(throws: (any Error).self) { try await store.write(batch) }
                #expect(store.refusals.total == 0, "a failed attempt counts nothing")
                let outcome = try await store.write(batch)
                #expect(outcome.new == 1, "the day made again, its fix stored")
                #expect(store.refusals == TrackRefusals(olderThanRetention: 0, aheadOfClock: 1, noPartition: 0), "counted once")
            }
        }
    }

    @Test func bothTablesArePartitionedByDayMadeAheadAndOnDemandWithinLimits() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database, now: { Self.noon }) { store, _ in
                try await store.migrate()
                try await store.preparePartitions(now: Self.noon)
                // A backlog from ten days ago gets its day; a fix five days ahead of the clock none.
                #expect(try await store.insert([Self.fix("van-1", seq: 1, day: -10), Self.fix("van-1", seq: 2, day: 5)]) == 1)
                #expect(store.refusals == TrackRefusals(olderThanRetention: 0, aheadOfClock: 1, noPartition: 0))
                // A heading without a time is placed on the day it is first stored…
                let untimed = TrackRecord(
                    vehicle: VehicleID("van-1")!, seq: 3, run: 1, payload: .heading(Heading(trueHeading: 12, source: .hdt)))
                #expect(try await store.insert([untimed, untimed]) == 1)
            }
            // …and stays stored once when it is delivered again on another day.
            let tomorrow = UTCTimestamp(millisecondsSince1970: Self.noon.millisecondsSince1970 + 86_400_000)
            try await withStore(postgres, database: database, now: { tomorrow }) { store, _ async throws in
                let untimed = TrackRecord(
                    vehicle: VehicleID("van-1")!, seq: 3, run: 1, payload: .heading(Heading(trueHeading: 12, source: .hdt)))
                #expect(try await store.insert([untimed]) == 0)
            }
            #expect(try await postgres.psql("SELECT relkind FROM pg_class WHERE relname = 'fleetcast_fixes'", database: database) == "p")
            #expect(try await postgres.psql("SELECT relkind FROM pg_class WHERE relname = 'fleetcast_headings'", database: database) == "p")
            let days = (-1...3).map { Self.today.adding($0).compact }
            let tenDaysAgo = Self.today.adding(-10).compact
            let fixPartitions = try await Self.partitions(postgres, database, "fleetcast_fixes")
            #expect(fixPartitions == (["fleetcast_fixes_p\(tenDaysAgo)"] + days.map { "fleetcast_fixes_p\($0)" }))
            let headingPartitions = try await Self.partitions(postgres, database, "fleetcast_headings")
            #expect(headingPartitions == (["fleetcast_headings_p\(tenDaysAgo)"] + days.map { "fleetcast_headings_p\($0)" }))
            #expect(
                try await postgres.psql("SELECT tableoid::regclass, seq FROM fleetcast_fixes", database: database)
                    == "fleetcast_fixes_p\(tenDaysAgo)|1")
            #expect(
                try await postgres.psql("SELECT tableoid::regclass, time IS NULL FROM fleetcast_headings", database: database)
                    == "fleetcast_headings_p\(Self.today.compact)|t")
        }
    }

    @Test func retentionDropsWholeDaysRefusesOlderMessagesAndGapsChecksFromTheFirstDayKept() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database, now: { Self.noon }) { store, _ in
                try await store.migrate()
                // A vehicle last seen 40 days ago; one whose run began 31 days ago and goes on today.
                try await store.insert((1...50).map { Self.fix("old-1", seq: $0, day: -40, second: Int64($0)) })
                var van = (1...20).map { Self.fix("van-1", seq: $0, day: -31, second: Int64($0)) }
                van += (21...60).map { Self.fix("van-1", seq: $0, day: -29, second: Int64($0)) }
                van += (61...100).map { Self.fix("van-1", seq: $0, day: 0, second: Int64($0)) }
                try await store.insert(van)
                let dropped = try await store.applyRetention(HistoryRetention(days: 30), now: Self.noon)
                #expect(dropped == [Self.today.adding(-40), Self.today.adding(-31)])
                #expect(store.keptFrom == Self.today.adding(-30))

                // A message older than the horizon is not stored, and counted.
                #expect(try await store.insert([Self.fix("van-1", seq: 19, day: -31, second: 19)]) == 0)
                #expect(store.refusals.olderThanRetention == 1)
                // `gaps` does not count what retention removed (van-1's seq 1…20) as missing.
                let report = try await store.completeness()
                #expect(report.isComplete, "\(report.gaps)")
                #expect(report.retainedFrom == Self.today.adding(-30).start)
                #expect(report.runs.map { "\($0.vehicle) \($0.first)-\($0.last) \($0.held)" } == ["van-1 21-100 80"])
                // A hole in what is kept is still one.
                _ = try await postgres.psql("DELETE FROM fleetcast_fixes WHERE vehicle = 'van-1' AND seq IN (70, 71)", database: database)
                #expect(try await store.completeness().gaps == [SequenceGap(vehicle: "van-1", run: 1, first: 70, last: 71)])
                // Applied again, it drops nothing more.
                #expect(try await store.applyRetention(HistoryRetention(days: 30), now: Self.noon) == [])
            }
            #expect(try await postgres.psql("SELECT count(*) FROM fleetcast_fixes WHERE vehicle = 'old-1'", database: database) == "0")
            let left = try await Self.partitions(postgres, database, "fleetcast_fixes")
            #expect(left == ["fleetcast_fixes_p\(Self.today.adding(-29).compact)", "fleetcast_fixes_p\(Self.today.compact)"])
            #expect(
                try await postgres.psql(
                    "SELECT count(*) FROM pg_class WHERE substring(relname FROM '^fleetcast_(?:fixes|headings)_p([0-9]{8})$') < '\(Self.today.adding(-30).compact)'",
                    database: database) == "0", "dropped, not only detached")
        }
    }

    @Test func aRecorderThatStillKnowsADroppedDayRefusesItsMessagesInsteadOfRetryingOrMakingItAgain() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database, now: { Self.noon }) { keeping, _ in
                try await keeping.migrate()
                // This recorder keeps everything, and has written into a day 40 days ago…
                #expect(try await keeping.insert([Self.fix("old-1", seq: 1, day: -40)]) == 1)
                // …which another recorder's 30-day retention then drops.
                try await withStore(postgres, database: database, now: { Self.noon }) { retaining, _ async throws in
                    #expect(try await retaining.applyRetention(HistoryRetention(days: 30), now: Self.noon) == [Self.today.adding(-40)])
                }
                // The first attempt finds no partition; the retry learns the database's horizon.
                let late = [Self.fix("old-1", seq: 2, day: -40)]
                await #expect(throws: (any Error).self) { try await keeping.insert(late) }
                #expect(try await keeping.insert(late) == 0)
                #expect(keeping.refusals.olderThanRetention == 1)
                #expect(keeping.keptFrom == Self.today.adding(-30))
            }
            #expect(
                try await postgres.psql(
                    "SELECT count(*) FROM pg_class WHERE relname LIKE 'fleetcast_%_p\(Self.today.adding(-40).compact)'", database: database)
                    == "0", "not made again")
        }
    }

    @Test func aFilledVersionTwoDatabaseMigratesAndARestartMidMoveLosesNothing() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            // The schema and rows of version 2, as that fleet-watch left them: three vehicles over
            // three days, with headings timed and untimed.
            _ = try await postgres.psql(
                """
                \(OldTrackSchema.sql(version: 2))
                INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, mode, backlog)
                    SELECT 'van-' || v, 7, s, to_timestamp(1795651200 + s * 60), 52.5, 13.4, 3, false
                    FROM generate_series(1, 3) v, generate_series(1, 4000) s WHERE s % 10 <> 0;
                INSERT INTO fleetcast_headings (vehicle, run, seq, time, heading, source, backlog)
                    SELECT 'van-' || v, 7, s, CASE WHEN s % 20 = 0 THEN NULL ELSE to_timestamp(1795651200 + s * 60) END, 90, 'HDT', false
                    FROM generate_series(1, 3) v, generate_series(1, 4000) s WHERE s % 10 = 0;
                """, database: database)
            let vanTwoDay = try await postgres.psql(
                "SELECT count(*) FROM fleetcast_fixes WHERE vehicle = 'van-2' AND time >= '2026-11-27' AND time < '2026-11-28'",
                database: database)
            let movedFirst = try await withStore(postgres, database: database, now: { Self.noon }) { store, _ in
                #expect(try await store.migrate() == 2)
                var movedFirst = 0
                // Before any row moved, and after two chunks (a recorder killed there): every
                // message is read, once.
                for chunks in [0, 2] {
                    if chunks > 0 {
                        let moved = try #require(try await store.moveUnpartitionedRows(chunk: 500, now: Self.noon, maximumChunks: chunks))
                        #expect(moved.moved > 0 && moved.moved < 10_800 && moved.discarded == 0, "\(moved)")
                        movedFirst = moved.moved
                    }
                    let report = try await store.completeness()
                    #expect(report.isComplete)
                    #expect(report.held == 12_000)
                    var points = 0
                    try await store.track(
                        vehicle: VehicleID("van-2")!, since: UTCTimestamp(millisecondsSince1970: 1_795_737_600_000),
                        until: UTCTimestamp(millisecondsSince1970: 1_795_824_000_000)
                    ) { _ in points += 1 }
                    #expect("\(points)" == vanTwoDay, "van-2's 2026-11-27")
                    #expect(try await store.vehicles() == ["van-1", "van-2", "van-3"])
                }
                // A redelivery of a moved row and of one not yet moved: stored once either way.
                func redelivered(_ vehicle: String, _ seq: UInt64) -> TrackRecord {
                    TrackRecord(
                        vehicle: VehicleID(vehicle)!, seq: seq, run: 7,
                        payload: .fix(
                            Fix(
                                time: UTCTimestamp(millisecondsSince1970: (1_795_651_200 + Int64(seq) * 60) * 1000), latitude: 52.5,
                                longitude: 13.4, mode: .threeD)))
                }
                #expect(try await store.insert([redelivered("van-1", 1), redelivered("van-3", 3999)]) == 0, "stored once, moved or not")
                let midMove = try await store.completeness()
                #expect(midMove.isComplete && midMove.held == 12_000, "nothing read twice mid-move")
                return movedFirst
            }
            #expect(
                try await postgres.psql("SELECT to_regclass('fleetcast_fixes_unpartitioned') IS NOT NULL", database: database) == "t",
                "stopped mid-move")
            // Restarted: the move goes on and ends.
            try await withStore(postgres, database: database, now: { Self.noon }) { store, _ in
                #expect(try await store.migrate() == TrackStore.schemaVersion)
                let rest = try await store.moveUnpartitionedRows(now: Self.noon)
                #expect(rest.map { $0.moved + $0.discarded } == 12_000 - movedFirst, "what was left")
                #expect(try await store.moveUnpartitionedRows(now: Self.noon) == nil, "nothing left")
                let report = try await store.completeness()
                #expect(report.isComplete && report.held == 12_000, "\(report.runs)")
            }
            #expect(
                try await postgres.psql("SELECT to_regclass('fleetcast_fixes_unpartitioned') IS NULL", database: database) == "t")
            #expect(try await postgres.psql("SELECT count(*) FROM fleetcast_fixes", database: database) == "10800")
            #expect(try await postgres.psql("SELECT count(*) FROM fleetcast_headings", database: database) == "1200")
            #expect(
                try await postgres.psql(
                    "SELECT count(*) FROM fleetcast_headings WHERE time IS NULL AND placed_at = received_at", database: database)
                    == "600", "an untimed heading of schema 3 is placed when it was received")
            #expect(
                try await Self.partitions(postgres, database, "fleetcast_fixes").contains("fleetcast_fixes_p20261127"))
        }
    }

    @Test func historyAndGapsReadOnlyTheirDaysThroughIndexes() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database, now: { Self.noon }) { store, _ in
                try await store.migrate()
                // One fix a day makes the partitions; the server fills the rest: 40 vehicles, a fix a
                // minute for three days (172,800 rows).
                try await store.insert((-2...0).map { Self.fix("seed", seq: UInt64(3 + $0), day: $0) })
                let start = Self.today.adding(-2).start.millisecondsSince1970 / 1000
                _ = try await postgres.psql(
                    """
                    INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, mode, backlog)
                        SELECT 'van-' || v, 1, m, to_timestamp(\(start) + m * 60), 52.5, 13.4, 3, false
                        FROM generate_series(1, 40) v, generate_series(0, 4319) m;
                    ANALYZE fleetcast_fixes;
                    ANALYZE fleetcast_headings;
                    """, database: database)
                let yesterday = Self.today.adding(-1)
                let plan = try await store.trackPlan(
                    vehicle: VehicleID("van-7")!, since: yesterday.start, until: Self.today.start)
                #expect(plan.contains("fleetcast_fixes_p\(yesterday.compact)"), "\(plan)")
                #expect(
                    !plan.contains("fleetcast_fixes_p\(Self.today.compact)")
                        && !plan.contains("fleetcast_fixes_p\(Self.today.adding(-2).compact)"), "only its day: \(plan)")
                #expect(plan.contains("Index Scan") && !plan.contains("Seq Scan"), "\(plan)")
                var points: [TrackPoint] = []
                try await store.track(vehicle: VehicleID("van-7")!, since: yesterday.start, until: Self.today.start) { points.append($0) }
                #expect(points.count == 1440)
                #expect(points.map(\.seq) == Array(1440..<2880).map(UInt64.init), "in time order, each once")
                // Read in pages of 100 (15 round trips), and with a limit across pages: the same.
                var paged: [TrackPoint] = []
                try await store.track(vehicle: VehicleID("van-7")!, since: yesterday.start, until: Self.today.start, pageSize: 100) {
                    paged.append($0)
                }
                #expect(paged == points)
                var limited: [TrackPoint] = []
                try await store.track(
                    vehicle: VehicleID("van-7")!, since: yesterday.start, until: Self.today.start, limit: 250, pageSize: 100
                ) { limited.append($0) }
                #expect(limited == Array(points.prefix(250)))

                let gapsPlan = try await store.completenessPlan(vehicle: VehicleID("van-7")!)
                #expect(gapsPlan.contains("Index") && !gapsPlan.contains("Seq Scan on fleetcast_fixes"), "\(gapsPlan)")
                let windowed = try await store.completenessPlan(
                    vehicle: VehicleID("van-7")!, since: yesterday.start, until: Self.today.start)
                #expect(windowed.contains("Index") && !windowed.contains("Seq Scan on fleetcast_fixes"), "\(windowed)")
                let report = try await store.completeness(vehicle: VehicleID("van-7")!)
                #expect(report.isComplete && report.held == 4320)
            }
        }
    }

    /// Ten years of a fleet's history at PostgreSQL's defaults (`max_locks_per_transaction` 64):
    /// 3,650 daily partitions of each table and a fix a day of one vehicle, three days of them
    /// missing. One statement over all of them failed with "out of shared memory" (SQLSTATE
    /// 53200) at about 3,000; the check reads them in spans, in one snapshot, and is exact.
    @Test func gapsAnswersOverTenYearsOfDailyPartitionsAtPostgreSQLsDefaults() async throws {
        try await withPostgres { postgres in
            let database = try await postgres.createDatabase()
            try await withStore(postgres, database: database, now: { Self.noon }) { store, _ in
                try await store.migrate()
                try await store.insert([Self.fix("seed", seq: 1, day: 0)])
                // Made by the server, a day a transaction (as the recorder makes them: never
                // all at once), each day's fix with it; seq 1 is the first day. A year a call:
                // each new partition costs a little more than the one before.
                let first = Self.today.adding(-3_649)
                for year in 0..<10 {
                    let (from, to) = (first.adding(Int64(year) * 365), first.adding(Int64(year) * 365 + 364))
                    _ = try await postgres.psql(
                        """
                        DO $$
                        DECLARE d date; n int;
                        BEGIN
                          FOR d IN SELECT generate_series(to_date('\(from.compact)', 'YYYYMMDD'), to_date('\(to.compact)', 'YYYYMMDD'), interval '1 day')::date LOOP
                            n := d - to_date('\(first.compact)', 'YYYYMMDD') + 1;
                            EXECUTE format('CREATE TABLE IF NOT EXISTS fleetcast_fixes_p%s PARTITION OF fleetcast_fixes FOR VALUES FROM (%L) TO (%L)',
                              to_char(d, 'YYYYMMDD'), d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
                            EXECUTE format('CREATE TABLE IF NOT EXISTS fleetcast_headings_p%s PARTITION OF fleetcast_headings FOR VALUES FROM (%L) TO (%L)',
                              to_char(d, 'YYYYMMDD'), d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
                            IF n NOT BETWEEN 1000 AND 1002 THEN
                              INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, mode, backlog)
                                VALUES ('van-1', 1, n, (d::timestamp AT TIME ZONE 'UTC') + interval '12 hours', 52.5, 13.4, 3, false);
                            END IF;
                            COMMIT;
                          END LOOP;
                        END $$
                        """, database: database)
                }
                // (Each block a call of its own: several statements in one `psql -c` are one
                // transaction, where a block may not commit.)
                _ = try await postgres.psql("ANALYZE fleetcast_fixes", database: database)
                #expect(try await store.partitionDays().count >= 3_650)
                let missing = [SequenceGap(vehicle: "van-1", run: 1, first: 1000, last: 1002)]
                let fleet = try await store.completeness()
                #expect(fleet.gaps == missing, "\(fleet.gaps)")
                #expect(fleet.held == 3_650 - 3 + 1)
                let one = try await store.completeness(vehicle: VehicleID("van-1")!)
                #expect(one.gaps == missing && one.held == 3_647, "\(one)")
                #expect(one.runs == [SequenceRunSummary(vehicle: "van-1", run: 1, first: 1, last: 3_650, held: 3_647)])
                // A window of 200 days around the hole: its own partitions, the same hole.
                let windowed = try await store.completeness(
                    vehicle: VehicleID("van-1")!, since: first.adding(900).start, until: first.adding(1_100).start)
                #expect(windowed.gaps == missing && windowed.held == 197, "\(windowed)")
                let plan = try await store.completenessPlan()
                #expect(plan.contains("-- span 19 of 19"), "\(plan.prefix(2000))")
            }
        }
    }
}
