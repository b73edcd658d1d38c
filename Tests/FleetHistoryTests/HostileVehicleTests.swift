import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import MQTT
import Testing

/// One vehicle cannot stop the fleet's record, and every honest message is kept: a vehicle
/// with valid credentials for its own topics only (mosquitto with the shipped ACL) sends what
/// would once have stopped all recording, while another drives; and an operator replays a
/// drive recorded a month before. Real mosquitto, PostgreSQL at its default settings, agent
/// and `fleet-watch record`. The partition bomb and the rebuild attack load the machine (a million
/// fixes into PostgreSQL): they take their turns with the other suites that do.
@Suite(.serialized, .tags(.loadsTheMachine), .oneMachineLoadAtATime) struct HostileVehicleTests {
    static let password = "s3cret-for-tests"

    /// mosquitto with the shipped ACL and a password for each of `users`.
    static func withShippedACL<T>(_ users: [String], _ body: (TestBroker) async throws -> T) async throws -> T {
        let acl = try String(contentsOfFile: RepositoryPath.of("deploy/mosquitto/fleetcast.acl"), encoding: .utf8)
        return try await withBroker(
            .init(users: Dictionary(uniqueKeysWithValues: users.map { ($0, password) }), acl: acl)
        ) { broker in try await body(broker) }
    }

    /// `broker`'s URL with `user` in it.
    static func url(_ broker: TestBroker, user: String) -> String {
        broker.url.replacingOccurrences(of: "://", with: "://\(user)@")
    }

    /// A client logged in as `user`.
    static func client(_ broker: TestBroker, user: String) async throws -> MQTTClient {
        var logger = Logger(label: user)
        logger.logLevel = .warning
        let client = try MQTTClient(
            configuration: MQTTConfiguration(
                broker: try BrokerURL(parsing: broker.url), clientID: "\(user)-\(UUID().uuidString.prefix(8))", username: user,
                password: password, maxInflightMessages: 100),
            logger: logger)
        try await client.connect()
        return client
    }

    /// A compact batch of `vehicle`'s fixes at `times` (ms), numbered from `firstSeq` in a run
    /// that began now.
    static func batch(_ vehicle: VehicleID, times: [Int64], firstSeq: UInt64 = 1, run: UInt64) -> [UInt8] {
        var writer = FleetPayload.CompactBatchWriter(vehicle: vehicle, run: run, maximumBytes: 60_000)
        for (index, time) in times.enumerated() {
            let fix = Fix(
                time: UTCTimestamp(millisecondsSince1970: time), latitude: 48.85 + Double(index) * 1e-5, longitude: 2.29, speed: 3,
                mode: .threeD)
            _ = writer.append(fix, seq: firstSeq + UInt64(index))
        }
        return writer.finish()
    }

    static func nowMilliseconds() -> Int64 { UTCTimestamp.wallClockNow.millisecondsSince1970 }

    static func count(_ postgres: TestPostgres, _ database: String, _ sql: String) async throws -> Int {
        Int(try await postgres.psql(sql, database: database)) ?? -1
    }

    /// A steady vehicle publishing a fix every 200 ms until cancelled; returns the last seq sent.
    static func drive(_ client: MQTTClient, vehicle: String, run: UInt64, from seq: UInt64, last: Locked<UInt64>) async {
        var seq = seq
        while !Task.isCancelled {
            let fix = Fix(time: UTCTimestamp.wallClockNow, latitude: 45.0 + Double(seq) * 1e-5, longitude: 5.0, speed: 8, mode: .threeD)
            let payload = FleetPayload.encode(fix, vehicle: vehicle, seq: seq, run: run)
            guard (try? await client.publish(topic: "fleet/\(vehicle)/fix", payload: payload, qos: .atLeastOnce)) != nil else { return }
            last.withLock { $0 = seq }
            seq += 1
            await pace(.milliseconds(200))
        }
    }

    /// A sending vehicle's pace: the one wait for time in these tests (everything else waits
    /// for what happens).
    static func pace(_ interval: Duration) async {
        try? await Task.sleep(for: interval)
    }

    /// Waits until the steady vehicle has sent `count` more fixes.
    static func waitSent(_ count: UInt64, more last: Locked<UInt64>) async throws {
        let mark = last.withLock { $0 } + count
        try await waitUntil("\(count) more fixes sent", timeout: .seconds(60)) { last.withLock { $0 } >= mark }
    }

    /// Waits until `vehicle`'s fix `seq` is stored; returns how long it took.
    static func waitStored(
        _ postgres: TestPostgres, _ database: String, vehicle: String, seq: UInt64, within: Duration, recorder: TestProcess
    ) async throws -> Duration {
        let start = ContinuousClock.now
        do {
            try await waitUntil("\(vehicle)'s fix \(seq) stored", timeout: within, interval: .milliseconds(100)) {
                try await count(postgres, database, "SELECT count(*) FROM fleetcast_fixes WHERE vehicle = '\(vehicle)' AND seq = \(seq)")
                    == 1
            }
        } catch {
            Issue.record("recorder: \(recorder.standardError.suffix(4000))")
            throw error
        }
        return ContinuousClock.now - start
    }

    @Test(
        "the partition bomb, near and far into the past, and 80 batches of forged days: a steady vehicle stored at once, the poison set aside once, a good vehicle's 3-day-old backlog stored, SIGTERM within 30 s"
    )
    func aPartitionBombStopsNoOtherVehicle() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-partition-bomb")
        defer { directory.remove() }
        try await Self.withShippedACL(["bomb", "steady", "good", "watch+recorder"]) { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                try Self.password.write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
                _ = chmod(directory.file("password"), 0o600)
                func start() throws -> TestProcess {
                    try TestProcess(
                        builtProduct("fleet-watch"),
                        [
                            "record", "--broker", Self.url(broker, user: "watch+recorder"), "--password-file", directory.file("password"),
                            "--postgres", FleetRecorderDurabilityTests.postgresURL(postgres, database), "--client-id", "recorder-bomb",
                            "--log-level", "info",
                        ], directory: directory.path, name: "recorder-bomb", environment: ["PGPASSWORD": postgres.password ?? ""])
                }
                var recorder = try start()
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                let steadyClient = try await Self.client(broker, user: "steady")
                let bombClient = try await Self.client(broker, user: "bomb")
                let run = UInt64(Self.nowMilliseconds())
                let last = Locked<UInt64>(0)
                let driving = Task { await Self.drive(steadyClient, vehicle: "steady", run: run, from: 1, last: last) }
                try await waitUntil("the steady vehicle stored", timeout: .seconds(20)) {
                    try await Self.count(postgres, database, "SELECT count(*) FROM fleetcast_fixes WHERE vehicle = 'steady'") > 0
                }
                // 2,048 fixes one day apart back from today, retained on the batch topic (it comes
                // back at each restart); then 2,048 more far into the past (1900 on).
                let day: Int64 = 86_400_000
                let now = Self.nowMilliseconds()
                let bomb = VehicleID("bomb")!
                try await bombClient.publish(
                    topic: "fleet/bomb/batch",
                    payload: Self.batch(bomb, times: (0..<2_048).map { now - Int64(2_047 - $0) * day }, run: run),
                    qos: .atLeastOnce, retain: true)
                let year1900: Int64 = -2_208_988_800_000
                try await bombClient.publish(
                    topic: "fleet/bomb/batch",
                    payload: Self.batch(bomb, times: (0..<2_048).map { year1900 + Int64($0) * day }, firstSeq: 3_000, run: run),
                    qos: .atLeastOnce)
                // The cap attack: 80 small batches of forged days spread over ten years.
                for index in 0..<80 {
                    let times = (0..<45).map { now - Int64(3_600 - index * 45 - $0) * day }
                    try await bombClient.publish(
                        topic: "fleet/bomb/batch", payload: Self.batch(bomb, times: times, firstSeq: UInt64(10_000 + index * 45), run: run),
                        qos: .atLeastOnce)
                }
                // A good vehicle's backlog from three days ago, sent after all that.
                let good = VehicleID("good")!
                let goodClient = try await Self.client(broker, user: "good")
                try await goodClient.publish(
                    topic: "fleet/good/batch",
                    payload: Self.batch(good, times: (0..<60).map { now - 3 * day + Int64($0) * 1_000 }, run: run),
                    qos: .atLeastOnce)

                // The steady vehicle's fixes go on being stored within seconds of being sent.
                try await Self.waitSent(15, more: last)
                let lag = try await Self.waitStored(
                    postgres, database, vehicle: "steady", seq: last.withLock { $0 }, within: .seconds(30), recorder: recorder)
                #expect(lag < .seconds(30))
                try await waitUntil("the good vehicle's backlog stored", timeout: .seconds(30)) {
                    try await Self.count(postgres, database, "SELECT count(*) FROM fleetcast_fixes WHERE vehicle = 'good'") == 60
                }
                // The bomb made its 32 partitions at most; its messages past them are set aside.
                let partitions = try await Self.count(
                    postgres, database, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'fleetcast_fixes'::regclass")
                #expect(partitions <= 5 + 1 + 32, "\(partitions) daily partitions")
                try await waitUntil("the bomb's messages set aside", timeout: .seconds(30)) {
                    try await Self.count(postgres, database, "SELECT count(*) FROM fleetcast_quarantine WHERE vehicle = 'bomb'") >= 80
                }
                #expect(
                    try await postgres.psql(
                        "SELECT DISTINCT topic FROM fleetcast_quarantine", database: database) == "fleet/bomb/batch")
                // `gaps` answers for the fleet and for one vehicle, and says what is set aside.
                let fleet = try await FleetRecorderDurabilityTests.gaps(postgres, database, directory: directory)
                #expect([0, 1].contains(fleet.status), "\(fleet.output)")
                #expect(fleet.output.contains("messages set aside by the recorder"), "\(fleet.output)")
                let one = try await FleetRecorderDurabilityTests.gaps(
                    postgres, database, directory: directory, extra: ["--vehicle", "good"])
                #expect(one.status == 0, "\(one.output)")

                // SIGTERM within 30 s, exit 0; the summary counts what was set aside.
                let stopping = ContinuousClock.now
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError.suffix(3000))")
                #expect(ContinuousClock.now - stopping < .seconds(30))
                let log = recorder.standardError
                #expect(log.contains("messages.set_aside="), "\(log.suffix(2000))")
                let named = log.split(separator: "\n").filter { $0.contains("is set aside in fleetcast_quarantine") }
                #expect(named.count == 1 && named[0].contains("vehicle=bomb"), "\(named)")

                // After a restart (the retained bomb comes back), new fixes are stored at once.
                recorder = try start()
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                try await Self.waitSent(5, more: last)
                let afterRestart = try await Self.waitStored(
                    postgres, database, vehicle: "steady", seq: last.withLock { $0 }, within: .seconds(10), recorder: recorder)
                #expect(afterRestart < .seconds(5))
                driving.cancel()
                await driving.value
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError.suffix(3000))")
                await steadyClient.shutdown()
                await bombClient.shutdown()
                await goodClient.shutdown()
            }
        }
    }

    @Test func aMessagePostgreSQLRefusesIsSetAsideAndTheOthersGoOn() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-poison")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                var recorder = try FleetRecorderTests.startRecorder(
                    "recorder-poison", broker: broker, postgres: postgres, database: database, directory: directory)
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                // A row PostgreSQL refuses, for a reason of the row (as a constraint or a data
                // exception would): a trigger standing in for whatever such a message hits.
                _ = try await postgres.psql(
                    """
                    CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN IF NEW.lat = 66.6 THEN RAISE EXCEPTION 'poisoned row' USING ERRCODE = '22023'; END IF; RETURN NEW; END $$;
                    CREATE TRIGGER refuse_poison BEFORE INSERT ON fleetcast_fixes FOR EACH ROW EXECUTE FUNCTION refuse_poison();
                    """, database: database)
                let run = UInt64(Self.nowMilliseconds())
                let now = UTCTimestamp.wallClockNow
                func fix(_ vehicle: String, _ seq: UInt64, lat: Double) -> String {
                    String(
                        decoding: FleetPayload.encode(
                            Fix(time: now, latitude: lat, longitude: 5, mode: .threeD), vehicle: vehicle, seq: seq, run: run), as: UTF8.self
                    )
                }
                try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-1/fix", message: fix("van-1", 1, lat: 45))
                try await MosquittoCLI.publish(broker: broker, topic: "fleet/evil/fix", message: fix("evil", 1, lat: 66.6))
                for seq in 2...5 {
                    try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-1/fix", message: fix("van-1", UInt64(seq), lat: 45))
                }
                _ = try await Self.waitStored(postgres, database, vehicle: "van-1", seq: 5, within: .seconds(20), recorder: recorder)
                try await waitUntil("the poison set aside", timeout: .seconds(10)) {
                    try await Self.count(postgres, database, "SELECT count(*) FROM fleetcast_quarantine") == 1
                }
                #expect(
                    try await postgres.psql(
                        "SELECT vehicle, topic, rows, reason LIKE '%poisoned row%' FROM fleetcast_quarantine", database: database)
                        == "evil|fleet/evil/fix|1|t")
                let gaps = try await FleetRecorderDurabilityTests.gaps(postgres, database, directory: directory)
                #expect(gaps.status == 0 && gaps.output.contains("1 messages set aside by the recorder"), "\(gaps.output)")
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0)
                let log = recorder.standardError
                #expect(log.contains("messages.set_aside=1"), "\(log.suffix(2000))")
                #expect(log.components(separatedBy: "is set aside in fleetcast_quarantine").count == 2, "\(log.suffix(2000))")
                #expect(log.contains("vehicle=evil") && log.contains("SQLSTATE 22023"), "\(log.suffix(2000))")
                // Replayed once the cause is mended: the payload as received, to its topic.
                _ = try await postgres.psql("DROP TRIGGER refuse_poison ON fleetcast_fixes", database: database)
                recorder = try FleetRecorderTests.startRecorder(
                    "recorder-poison", broker: broker, postgres: postgres, database: database, directory: directory)
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                let payload = try await postgres.psql("SELECT convert_from(payload, 'UTF8') FROM fleetcast_quarantine", database: database)
                try await MosquittoCLI.publish(broker: broker, topic: "fleet/evil/fix", message: payload)
                _ = try await Self.waitStored(postgres, database, vehicle: "evil", seq: 1, within: .seconds(20), recorder: recorder)
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0)
            }
        }
    }

    @Test func aMonthOldRecordingReplayedThroughTheAgentIsStoredWholeAndGapsIsComplete() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-month-old")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let recorder = try FleetRecorderTests.startRecorder(
                    "recorder-month-old", broker: broker, postgres: postgres, database: database, directory: directory)
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                let now = Self.nowMilliseconds()
                let start = UTCTimestamp(millisecondsSince1970: now - now % 60_000 - 31 * 86_400_000)
                let drive = GeneratedDrive.threeLegs(start: start).part(0..<600)
                try await OperationsRecordingTests.replay(drive, broker: broker, directory: directory, name: "month-old")
                let published = drive.samples.count
                try await waitUntil("the replayed drive stored", timeout: .seconds(30)) {
                    try await OperationsRecordingTests.fixCount(postgres, database) >= published
                }
                #expect(try await OperationsRecordingTests.fixCount(postgres, database) == published)
                let gaps = try await FleetRecorderDurabilityTests.gaps(postgres, database, directory: directory)
                #expect(gaps.status == 0, "\(gaps.output)")
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0)
                #expect(!recorder.standardError.contains("implausible"), "\(recorder.standardError.suffix(2000))")
            }
        }
    }

    @Test func twoRecordersOfOneGroupOnOneHostTakeDistinctClientIDsAndBothStoreRows() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-two-recorders")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                func start(_ name: String, clientID: [String] = []) throws -> TestProcess {
                    try TestProcess(
                        builtProduct("fleet-watch"),
                        [
                            "record", "--broker", broker.url, "--postgres", FleetRecorderDurabilityTests.postgresURL(postgres, database),
                            "--share-group", "recorders", "--state-dir", directory.file("state"), "--log-level", "debug",
                        ] + clientID, directory: directory.path, name: name, environment: ["PGPASSWORD": postgres.password ?? ""])
                }
                // Default ids, one host, one group: each takes its own, and keeps it after a restart.
                let first = try start("recorder-a")
                try await FleetRecorderDurabilityTests.waitForLog(first, "Subscribed to the fleet")
                var second = try start("recorder-b")
                try await FleetRecorderDurabilityTests.waitForLog(second, "Subscribed to the fleet")
                second.send(SIGTERM)
                #expect(try await second.waitForExit(timeout: .seconds(30)) == 0)
                second = try start("recorder-b2")
                try await FleetRecorderDurabilityTests.waitForLog(second, "Subscribed to the fleet")
                let run = UInt64(Self.nowMilliseconds())
                for seq in 1...40 {
                    let vehicle = "van-\(seq % 4)"
                    let fix = FleetPayload.encode(
                        Fix(time: UTCTimestamp.wallClockNow, latitude: 45, longitude: 5, mode: .threeD), vehicle: vehicle,
                        seq: UInt64(seq), run: run)
                    try await MosquittoCLI.publish(
                        broker: broker, topic: "fleet/\(vehicle)/fix", message: String(decoding: fix, as: UTF8.self))
                }
                try await waitUntil("40 fixes stored", timeout: .seconds(20)) {
                    try await Self.count(postgres, database, "SELECT count(*) FROM fleetcast_fixes") == 40
                }
                for recorder in [first, second] {
                    recorder.send(SIGTERM)
                    #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError.suffix(2000))")
                }
                for recorder in [first, second] {
                    let log = recorder.standardError
                    #expect(!log.contains("rows.new=0"), "both store rows: \(log.suffix(1500))")
                    #expect(!log.contains("MQTT connection lost"), "no reconnect loop: \(log.suffix(1500))")
                    #expect(!log.contains("takes this client's session over"))
                }
                // The same id given twice: named once, at error, with the id and the remedy.
                let a = try start("recorder-same-a", clientID: ["--client-id", "one-id"])
                try await FleetRecorderDurabilityTests.waitForLog(a, "Subscribed to the fleet")
                let b = try start("recorder-same-b", clientID: ["--client-id", "one-id"])
                try await FleetRecorderDurabilityTests.waitForLog(b, "Subscribed to the fleet")
                try await waitUntil("the takeover named", timeout: .seconds(30)) {
                    (a.standardError + b.standardError).contains("takes this client's session over")
                }
                // The takeover goes on (each throws the other out); it is not said again.
                try await waitUntil("six more connections lost", timeout: .seconds(30)) {
                    (a.standardError + b.standardError).components(separatedBy: "MQTT connection lost").count > 7
                }
                let both = a.standardError + b.standardError
                #expect(both.components(separatedBy: "takes this client's session over").count <= 3, "once per recorder at most")
                #expect(both.contains("mqtt.client_id=one-id") && both.contains("--client-id"), "\(both.suffix(2000))")
                a.send(SIGKILL)
                b.send(SIGKILL)
            }
        }
    }

    @Test func theRebuildAttackKeepsASteadyVehiclesLagUnderFiveSecondsBeforeAndAfterARestart() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-rebuild-attack")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                var recorder = try FleetRecorderTests.startRecorder(
                    "recorder-rebuild", broker: broker, postgres: postgres, database: database, directory: directory)
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                // 300,000 plausible fixes of the attacker in the last 21 hours (4 Hz), stored.
                let now = Self.nowMilliseconds()
                let run = UInt64(now - 86_400_000)
                _ = try await postgres.psql(
                    """
                    INSERT INTO fleetcast_fixes (vehicle, run, seq, time, lat, lon, speed, mode, backlog)
                    SELECT 'hog', \(run), n, to_timestamp((\(now) - 76000000 + n * 250) / 1000.0), 48 + n * 1e-6, 11, 12, 3, false
                    FROM generate_series(1, 300000) AS n
                    """, database: database)
                let steadyClient = try await Self.client(broker, user: "steady")
                let hogClient = try await Self.client(broker, user: "hog")
                let last = Locked<UInt64>(0)
                let driving = Task { await Self.drive(steadyClient, vehicle: "steady", run: UInt64(now), from: 1, last: last) }
                // The attack: a live fix, then every 300 ms one 26 s older than the newest (each a
                // rebuild of the vehicle's history before).
                let attacking = Task {
                    var seq: UInt64 = 300_001
                    while !Task.isCancelled {
                        let newest = Self.nowMilliseconds()
                        for time in [newest, newest - 26_000] {
                            let fix = Fix(
                                time: UTCTimestamp(millisecondsSince1970: time), latitude: 48.3, longitude: 11, speed: 12, mode: .threeD)
                            let payload = FleetPayload.encode(fix, vehicle: "hog", seq: seq, run: run)
                            _ = try? await hogClient.publish(topic: "fleet/hog/fix", payload: payload, qos: .atLeastOnce)
                            seq += 1
                        }
                        await Self.pace(.milliseconds(300))
                    }
                }
                for phase in ["before a restart", "after a restart"] {
                    try await Self.waitSent(40, more: last)
                    let lag = try await Self.waitStored(
                        postgres, database, vehicle: "steady", seq: last.withLock { $0 }, within: .seconds(30), recorder: recorder)
                    #expect(lag < .seconds(5), "\(phase): the steady vehicle's last fix stored \(lag) after it was sent")
                    if phase == "before a restart" {
                        recorder.send(SIGTERM)
                        #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError.suffix(2000))")
                        recorder = try FleetRecorderTests.startRecorder(
                            "recorder-rebuild", broker: broker, postgres: postgres, database: database, directory: directory)
                        try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                    }
                }
                attacking.cancel()
                driving.cancel()
                await attacking.value
                await driving.value
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError.suffix(2000))")
                #expect(recorder.standardError.contains("vehicles.rebuilt="))
                await steadyClient.shutdown()
                await hogClient.shutdown()
            }
        }
    }
}
