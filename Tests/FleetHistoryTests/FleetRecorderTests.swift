import FleetHistory
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

/// `fleet-watch record`, the real binary, against a real mosquitto, real agents on `sim:`
/// and a real PostgreSQL; stopped with real signals. What is checked is what an operator
/// would: rows per vehicle with no `seq` missing between the first and the last, none twice.
@Suite struct FleetRecorderTests {
    /// Per vehicle: (first seq, last seq, rows) over fixes and headings, from `psql`.
    static func rows(_ postgres: TestPostgres, _ database: String) async throws -> [String: (first: Int, last: Int, count: Int)] {
        let text = try await postgres.psql(
            """
            SELECT vehicle, min(seq), max(seq), count(*) FROM (
                SELECT vehicle, seq FROM fleetcast_fixes UNION ALL SELECT vehicle, seq FROM fleetcast_headings
            ) AS messages GROUP BY vehicle ORDER BY vehicle
            """, database: database)
        var result: [String: (Int, Int, Int)] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "|").map(String.init)
            guard fields.count == 4, let first = Int(fields[1]), let last = Int(fields[2]), let count = Int(fields[3]) else { continue }
            result[fields[0]] = (first, last, count)
        }
        return result
    }

    /// The `seq` of the last fix or heading `vehicle`'s agent published: the higher of its
    /// retained `fix` and `heading` messages (read with `mosquitto_sub`).
    static func lastPublishedSeq(_ vehicle: String, broker: TestBroker) async throws -> Int {
        var last = 0
        for kind in ["fix", "heading"] {
            guard let line = try await MosquittoCLI.retained(broker: broker, topic: "fleet/\(vehicle)/\(kind)"),
                let range = line.range(of: #""seq":[0-9]+"#, options: .regularExpression)
            else { continue }
            last = max(last, Int(line[range].dropFirst(6)) ?? 0)
        }
        return last
    }

    static func startAgent(_ vehicle: String, broker: TestBroker, directory: TemporaryDirectory) throws -> TestProcess {
        try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", vehicle, "--broker", broker.url,
                "--state-dir", directory.file("state-\(vehicle)"),
            ], directory: directory.path, name: "agent-\(vehicle)",
            // Every fix at the defaults otherwise: a heading rides in its fix, or alone at QoS 1.
            environment: ["FLEETCAST_REPORT_EVERY_FIX": "1"])
    }

    static func startRecorder(
        _ name: String, broker: TestBroker, postgres: TestPostgres, database: String, directory: TemporaryDirectory,
        extra: [String] = [], clientID: String? = nil
    ) throws -> TestProcess {
        try TestProcess(
            builtProduct("fleet-watch"),
            [
                "record", "--broker", broker.url, "--postgres",
                "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable",
                "--client-id", clientID ?? name, "--log-level", "info",
            ] + extra,
            directory: directory.path, name: name, environment: ["PGPASSWORD": postgres.password ?? ""])
    }

    /// Waits until `process` logged `text` on stderr.
    static func waitForLog(_ process: TestProcess, _ text: String, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("\(process.commandLine) to log \"\(text)\"", timeout: timeout) {
            guard process.isRunning || process.standardError.contains(text) else {
                throw TestSupportError.processFailed(
                    process.commandLine, status: process.termination?.status ?? -1, output: process.standardError)
            }
            return process.standardError.contains(text)
        }
    }

    @Test func recordsLiveAndBacklogOnceAndWritesEverythingOnSIGTERM() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()

                let recorder = try Self.startRecorder(
                    "recorder", broker: broker, postgres: postgres, database: database, directory: directory)
                try await Self.waitForLog(recorder, "Recording the fleet into PostgreSQL")
                try await Self.waitForLog(recorder, "Subscribed to the fleet")
                let agents = try ["van-a", "van-b"].map { try Self.startAgent($0, broker: broker, directory: directory) }

                // A backlog batch, as an agent sends history it could not deliver live, twice (an
                // at-least-once redelivery), and a fix from some other publisher with no seq.
                func event(_ seq: Int, _ second: Int) -> String {
                    String(
                        decoding: FleetPayload.encode(
                            Fix(
                                time: UTCTimestamp(millisecondsSince1970: 1_795_000_000_000 + Int64(second) * 1000), latitude: 47.1,
                                longitude: 8.2,
                                mode: .threeD),
                            vehicle: "late-1", seq: UInt64(seq), includeKind: true), as: UTF8.self)
                }
                let batch = #"{"v":1,"vehicle":"late-1","events":["# + (1...3).map { event($0, $0) }.joined(separator: ",") + "]}"
                for _ in 0..<2 { try await MosquittoCLI.publish(broker: broker, topic: "fleet/late-1/backlog", message: batch) }
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/stray/fix",
                    message: #"{"v":1,"time":"2026-11-24T00:00:00.000Z","lat":1,"lon":2,"mode":3}"#)

                try await waitUntil("both vehicles and the backlog in PostgreSQL", timeout: .seconds(30), interval: .milliseconds(200)) {
                    let rows = try await Self.rows(postgres, database)
                    return (rows["van-a"]?.count ?? 0) >= 20 && (rows["van-b"]?.count ?? 0) >= 20 && rows["late-1"] != nil
                }
                for agent in agents { agent.send(SIGTERM) }
                for agent in agents { #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0) }
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
                #expect(recorder.standardError.contains("Recorder stopped; everything received is written"), "\(recorder.standardError)")
                #expect(recorder.standardError.contains("A message cannot be recorded"), "the seq-less fix is named in the log")

                let rows = try await Self.rows(postgres, database)
                for vehicle in ["van-a", "van-b"] {
                    let r = try #require(rows[vehicle])
                    #expect(r.count == r.last - r.first + 1, "\(vehicle): seq \(r.first)…\(r.last) but \(r.count) rows")
                    // Nothing lost at the end either: the last row is the last message the agent sent.
                    #expect(r.last == (try await Self.lastPublishedSeq(vehicle, broker: broker)), "\(vehicle)")
                }
                #expect(rows["late-1"].map { [$0.first, $0.last, $0.count] } == [1, 3, 3], "the backlog, once")
                #expect(rows["stray"] == nil)
                #expect(
                    try await postgres.psql("SELECT bool_and(backlog) FROM fleetcast_fixes WHERE vehicle = 'late-1'", database: database)
                        == "t")
                // Live fixes are marked live (an agent may also send a backlog of what it read before
                // its first connection).
                #expect(
                    try await postgres.psql("SELECT bool_or(NOT backlog) FROM fleetcast_fixes WHERE vehicle = 'van-a'", database: database)
                        == "t")

                // What `history` reads back is that track, from the same database.
                let history = try TestProcess(
                    builtProduct("fleet-watch"),
                    [
                        "history", "--postgres", "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable",
                        "--vehicle", "late-1", "--since", "2026-11-18T00:00:00Z", "--until", "2026-11-19T00:00:00Z", "--format", "csv",
                    ],
                    directory: directory.path, name: "history", environment: ["PGPASSWORD": postgres.password ?? ""])
                #expect(try await history.waitForExit(timeout: .seconds(30)) == 0, "\(history.standardError)")
                let lines = history.standardOutput.split(separator: "\r\n")
                #expect(lines.count == 4, "\(history.standardOutput)")
                #expect(lines.dropFirst().map { $0.split(separator: ",")[1] } == ["1", "2", "3"])
            }
        }
    }

    @Test func anUnreachableDatabaseOrBrokerIsNamedOnceAndSIGTERMStillEndsTheRecorderAtOnce() async throws {
        try await withBroker { broker in
            try await withPostgres { postgres in
                let directory = try TemporaryDirectory(prefix: "fleetcast-record-down")
                defer { directory.remove() }
                let closedPort = try FreePort.next()
                // PostgreSQL unreachable: one warning, then SIGTERM ends the wait.
                let noDatabase = try TestProcess(
                    builtProduct("fleet-watch"),
                    ["record", "--broker", broker.url, "--postgres", "postgres://nobody@127.0.0.1:\(closedPort)/fleet?sslmode=disable"],
                    directory: directory.path, name: "no-database")
                try await Self.waitForLog(noDatabase, "PostgreSQL cannot be written to")
                noDatabase.send(SIGTERM)
                let clock = ContinuousClock()
                let stopping = clock.now
                #expect(try await noDatabase.waitForExit(timeout: .seconds(20)) == 0, "\(noDatabase.standardError)")
                #expect(clock.now - stopping < .seconds(10), "not the 25 s graceful-shutdown limit")
                #expect(noDatabase.standardError.components(separatedBy: "PostgreSQL cannot be written to").count == 2, "named once")
                #expect(noDatabase.standardError.contains("\(closedPort)"), "the log names where it tried")
                #expect(
                    noDatabase.standardError.contains("Recorder stopped before PostgreSQL could be reached; nothing was received"),
                    "the stop says that nothing was lost")

                // The broker unreachable: the same.
                let database = try await postgres.createDatabase()
                let noBroker = try TestProcess(
                    builtProduct("fleet-watch"),
                    [
                        "record", "--broker", "mqtt://127.0.0.1:\(closedPort)", "--postgres",
                        "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable",
                    ], directory: directory.path, name: "no-broker", environment: ["PGPASSWORD": postgres.password ?? ""])
                try await Self.waitForLog(noBroker, "Recording the fleet into PostgreSQL")
                try await Self.waitForLog(noBroker, "MQTT broker unreachable, retrying")
                #expect(noBroker.standardError.contains("mqtt://127.0.0.1:\(closedPort)"))
                noBroker.send(SIGTERM)
                let stoppingAgain = clock.now
                #expect(try await noBroker.waitForExit(timeout: .seconds(20)) == 0, "\(noBroker.standardError)")
                #expect(clock.now - stoppingAgain < .seconds(10), "not the 25 s graceful-shutdown limit")
            }
        }
    }

    @Test func aDatabaseThatStopsAnsweringIsNamedWithinTheAttemptLimitAndNothingIsLost() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record-frozen")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let recorder = try Self.startRecorder(
                    "recorder-frozen", broker: broker, postgres: postgres, database: database, directory: directory)
                try await Self.waitForLog(recorder, "Subscribed to the fleet")
                let agent = try Self.startAgent("van-f", broker: broker, directory: directory)
                try await waitUntil("van-f's first rows", timeout: .seconds(30), interval: .milliseconds(200)) {
                    (try await Self.rows(postgres, database)["van-f"]?.count ?? 0) >= 10
                }

                // PostgreSQL freezes, as a hung host would: its connections stay open, no query
                // is answered, nothing is refused. The write in flight is never answered.
                let seqAtFreeze = try await Self.lastPublishedSeq("van-f", broker: broker)
                postgres.pause()
                // Named while it is still frozen (at the 5 s attempt limit), not once it answers
                // again: the wait is a hang guard; the server stays frozen until the line comes.
                try await Self.waitForLog(
                    recorder, "PostgreSQL cannot be written to; retrying, and events wait in memory", timeout: .seconds(90))
                try await waitUntil("the fleet to drive on meanwhile", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await Self.lastPublishedSeq("van-f", broker: broker) >= seqAtFreeze + 20
                }
                postgres.resume()
                try await Self.waitForLog(recorder, "PostgreSQL is back", timeout: .seconds(60))

                agent.send(SIGTERM)
                #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0)
                let last = try await Self.lastPublishedSeq("van-f", broker: broker)
                try await waitUntil("van-f's last message stored", timeout: .seconds(30), interval: .milliseconds(200)) {
                    (try await Self.rows(postgres, database)["van-f"]?.last ?? 0) >= last
                }
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
                // Every message once: what the abandoned write still committed after the thaw, the
                // next attempt found there.
                let r = try #require(try await Self.rows(postgres, database)["van-f"])
                #expect(r.count == r.last - r.first + 1, "seq \(r.first)…\(r.last) but \(r.count) rows")
                #expect(r.last == last, "the last message the agent sent")
                #expect(recorder.standardError.components(separatedBy: "PostgreSQL cannot be written to").count == 2, "named once")
            }
        }
    }

    @Test func aStopWhilePostgreSQLIsFrozenExitsZeroAndTheBrokerKeepsWhatWasHeld() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record-frozen-stop")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let recorder = try Self.startRecorder(
                    "recorder-frozen-stop", broker: broker, postgres: postgres, database: database, directory: directory)
                try await Self.waitForLog(recorder, "Subscribed to the fleet")
                let agent = try Self.startAgent("van-t", broker: broker, directory: directory)
                try await waitUntil("van-t's first rows", timeout: .seconds(30), interval: .milliseconds(200)) {
                    (try await Self.rows(postgres, database)["van-t"]?.count ?? 0) >= 10
                }
                // Frozen, as a hung host is; then the operator stops the recorder (systemd's
                // TimeoutStopSec is 30 s, then SIGKILL). The stop does not wait out the outage.
                postgres.pause()
                var frozen = true
                defer { if frozen { postgres.resume() } }
                try await Self.waitForLog(
                    recorder, "PostgreSQL cannot be written to; retrying, and events wait in memory", timeout: .seconds(90))
                recorder.send(SIGTERM)
                let status = try await recorder.waitForExit(timeout: .seconds(30))
                postgres.resume()
                frozen = false
                #expect(status == 0, "a requested stop, within the unit's stop timeout: \(recorder.standardError)")
                let unwritten = recorder.standardError.range(of: #"rows.unwritten=[0-9]+"#, options: .regularExpression).map {
                    Int(recorder.standardError[$0].dropFirst(15)) ?? 0
                }
                #expect((unwritten ?? 0) > 0, "what it held, counted: \(recorder.standardError)")
                #expect(
                    recorder.standardError.contains(
                        "Recorder stopped while PostgreSQL could not be written to; what it held is not acknowledged"),
                    "the stop says what became of what it held")
                #expect(!recorder.standardError.contains("record failed"))

                // Started again under the same client id: the broker sends what was held.
                let again = try Self.startRecorder(
                    "recorder-frozen-stop", broker: broker, postgres: postgres, database: database, directory: directory)
                agent.send(SIGTERM)
                #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0)
                let last = try await Self.lastPublishedSeq("van-t", broker: broker)
                try await waitUntil("van-t's last message stored", timeout: .seconds(60), interval: .milliseconds(200)) {
                    (try await Self.rows(postgres, database)["van-t"]?.last ?? 0) >= last
                }
                again.send(SIGTERM)
                #expect(try await again.waitForExit(timeout: .seconds(30)) == 0, "\(again.standardError)")
                let r = try #require(try await Self.rows(postgres, database)["van-t"])
                #expect(r.count == r.last - r.first + 1, "seq \(r.first)…\(r.last) but \(r.count) rows")
                #expect(r.last == last, "the last message the agent sent")
            }
        }
    }

    /// Waits until the share group has stored the whole burst and every vehicle's messages up
    /// to the last one it published, without a gap: 180 s at most (one recorder may still work
    /// through its share of a 20,000-message burst on a machine loaded by the other suites).
    static func waitUntilGroupStored(
        _ postgres: TestPostgres, _ database: String, burst: Int, vehicles: [String], lastSeqs: [String: Int]
    ) async throws {
        try await waitUntil("the group to store everything sent", timeout: .seconds(180), interval: .milliseconds(250)) {
            let rows = try await Self.rows(postgres, database)
            guard rows["burst"]?.count == burst else { return false }
            return vehicles.allSatisfy { vehicle in
                guard let r = rows[vehicle] else { return false }
                return r.last == lastSeqs[vehicle] && r.count == r.last - r.first + 1
            }
        }
    }

    @Test func aShareGroupLosesAndDoublesNothingWhenOneRecorderRestarts() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record-share")
        defer { directory.remove() }
        // As the README advises for a broker serving recorders: mosquitto drops QoS 1
        // messages for a client with more than `max_queued_messages` (default 1,000) waiting,
        // which the burst below reaches while one recorder takes the whole group's share.
        try await withBroker(.init(extraConfiguration: ["max_queued_messages 100000"])) { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()

                let group = ["--share-group", "recorders"]
                let first = try Self.startRecorder(
                    "recorder-1", broker: broker, postgres: postgres, database: database, directory: directory, extra: group)
                var second = try Self.startRecorder(
                    "recorder-2", broker: broker, postgres: postgres, database: database, directory: directory, extra: group)
                for recorder in [first, second] { try await Self.waitForLog(recorder, "Subscribed to the fleet") }
                let vehicles = ["van-1", "van-2", "van-3"]
                let agents = try vehicles.map { try Self.startAgent($0, broker: broker, directory: directory) }

                func total() async throws -> Int { try await Self.rows(postgres, database).values.reduce(0) { $0 + $1.count } }
                try await waitUntil("rows from the group", timeout: .seconds(30), interval: .milliseconds(200)) { try await total() >= 60 }
                // A burst as fast as mosquitto_pub sends at QoS 1 (a backlog-heavy reconnect of many
                // vehicles), so that messages are in flight to the recorder that stops: they must reach
                // a recorder, not vanish with its session.
                let burst = 20_000
                let lines = (1...burst).map { seq in
                    #"{"v":1,"vehicle":"burst","seq":\#(seq),"time":"2026-11-24T00:00:00.000Z","lat":1,"lon":2,"mode":3}"#
                }
                let burstFile = try directory.createFile("burst.jsonl", lines.joined(separator: "\n") + "\n")
                let publisher = try TestProcess(
                    "/bin/sh",
                    ["-c", "exec /usr/bin/mosquitto_pub -h 127.0.0.1 -p \(broker.port) -q 1 -t fleet/burst/fix -l < \(burstFile)"],
                    directory: directory.path, name: "burst")
                try await waitUntil("the burst to reach PostgreSQL", timeout: .seconds(30), interval: .milliseconds(20)) {
                    try await Self.rows(postgres, database)["burst"] != nil
                }
                // A restart (systemctl restart: SIGTERM, then a new process under the same client
                // id) while the fleet drives. The stopping member hands over for at most 20 s:
                // on a loaded machine part of its share of the burst may still be queued then,
                // and the restarted member's session brings it.
                second.send(SIGTERM)
                #expect(try await second.waitForExit(timeout: .seconds(30)) == 0, "\(second.standardError)")
                #expect(
                    ["MQTT hand-over done", "MQTT hand-over cut short"].contains { second.standardError.contains($0) },
                    "the stopping member says how its hand-over went: \(second.standardError.suffix(1500))")
                let before = try await total()
                try await waitUntil("rows while one recorder is down", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await total() >= before + 30
                }
                second = try Self.startRecorder(
                    "recorder-2b", broker: broker, postgres: postgres, database: database, directory: directory, extra: group,
                    clientID: "recorder-2")
                try await Self.waitForLog(second, "Subscribed to the fleet")
                let after = try await total()
                try await waitUntil("rows after the restart", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await total() >= after + 60
                }

                #expect(try await publisher.waitForExit(timeout: .seconds(60)) == 0, "\(publisher.standardError)")
                for agent in agents { agent.send(SIGTERM) }
                for agent in agents { #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0) }
                // The broker hands each member of the group its own queue of the group's
                // messages: on a loaded machine one recorder may still be working through its
                // share of the burst (and the vehicles' messages queued behind it) while the other
                // is done. Stopping them then would leave those in the sessions, not lost, but not
                // in the database either: wait until the group has taken everything.
                var lastSeqs: [String: Int] = [:]
                for vehicle in vehicles { lastSeqs[vehicle] = try await Self.lastPublishedSeq(vehicle, broker: broker) }
                // (On a timeout the checks below still run, to say what is missing.)
                let settled: Bool
                do {
                    try await Self.waitUntilGroupStored(postgres, database, burst: burst, vehicles: vehicles, lastSeqs: lastSeqs)
                    settled = true
                } catch {
                    settled = false
                }
                #expect(
                    settled,
                    "the group stored everything within 180 s; the recorders said: \(first.standardError.suffix(1500)) \(second.standardError.suffix(1500))"
                )
                for recorder in [first, second] { recorder.send(SIGTERM) }
                for recorder in [first, second] {
                    #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
                }

                let rows = try await Self.rows(postgres, database)
                #expect(Set(rows.keys) == Set(vehicles + ["burst"]))
                #expect(rows["burst"].map { [$0.first, $0.last, $0.count] } == [1, burst, burst], "every message of the burst, once")
                for vehicle in vehicles {
                    let r = try #require(rows[vehicle])
                    #expect(r.count == r.last - r.first + 1, "\(vehicle): seq \(r.first)…\(r.last) but \(r.count) rows")
                    // Nothing lost at the end either: the last row is the last message the agent sent.
                    #expect(r.last == (try await Self.lastPublishedSeq(vehicle, broker: broker)), "\(vehicle)")
                }
            }
        }
    }
}
