import FleetCore
import FleetHistory
import FleetHistoryCore
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

/// Nothing lost end to end: the recorder's history against what the vehicles really
/// published, through a vehicle's lost store, a redelivery of everything, the recorder's own
/// `kill -9` and a PostgreSQL outage. Real mosquitto, agents, PostgreSQL and `fleet-watch`.
@Suite struct FleetRecorderDurabilityTests {
    /// A message number as stored or published: vehicle, run, seq.
    struct Number: Hashable, CustomStringConvertible {
        var vehicle: String
        var run: Int
        var seq: Int
        var description: String { "\(vehicle) \(run)/\(seq)" }
    }

    /// The numbers of the fixes and of the headings stored.
    static func stored(_ postgres: TestPostgres, _ database: String) async throws -> (fixes: Set<Number>, headings: Set<Number>) {
        func numbers(_ table: String) async throws -> Set<Number> {
            let text = try await postgres.psql("SELECT vehicle, run, seq FROM \(table)", database: database)
            return Set(
                text.split(separator: "\n").compactMap { line -> Number? in
                    let f = line.split(separator: "|").map(String.init)
                    guard f.count == 3, let run = Int(f[1]), let seq = Int(f[2]) else { return nil }
                    return Number(vehicle: f[0], run: run, seq: seq)
                })
        }
        return (try await numbers("fleetcast_fixes"), try await numbers("fleetcast_headings"))
    }

    /// The numbers of the fixes that carry their instant's heading, as stored.
    static func storedJoined(_ postgres: TestPostgres, _ database: String) async throws -> Set<Number> {
        let text = try await postgres.psql(
            "SELECT vehicle, run, seq FROM fleetcast_fixes WHERE heading IS NOT NULL OR mag_heading IS NOT NULL", database: database)
        return Set(
            text.split(separator: "\n").compactMap { line -> Number? in
                let f = line.split(separator: "|").map(String.init)
                guard f.count == 3, let run = Int(f[1]), let seq = Int(f[2]) else { return nil }
                return Number(vehicle: f[0], run: run, seq: seq)
            })
    }

    /// The numbers of the fixes and headings in `mosquitto_sub -v` lines (`topic payload`),
    /// live and in backlog batches, and of the fixes among them that carry their heading.
    static func published(_ lines: [String]) -> (fixes: Set<Number>, headings: Set<Number>, joined: Set<Number>) {
        var fixes = Set<Number>(), headings = Set<Number>(), joined = Set<Number>()
        func add(_ object: [String: Any], kind: String, vehicle: String) {
            guard let seq = object["seq"] as? Int else { return }
            let number = Number(vehicle: vehicle, run: object["run"] as? Int ?? 0, seq: seq)
            if kind == "fix" { fixes.insert(number) } else if kind == "heading" { headings.insert(number) }
            if kind == "fix", object["heading"] != nil || object["magHeading"] != nil { joined.insert(number) }
        }
        for line in lines {
            guard let space = line.firstIndex(of: " ") else { continue }
            let levels = line[..<space].split(separator: "/")
            guard levels.count == 3,
                let object = try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8)) as? [String: Any]
            else { continue }
            let vehicle = String(levels[1])
            if levels[2] == "backlog" {
                for event in object["events"] as? [[String: Any]] ?? [] {
                    add(event, kind: event["kind"] as? String ?? "", vehicle: vehicle)
                }
            } else {
                add(object, kind: String(levels[2]), vehicle: vehicle)
            }
        }
        return (fixes, headings, joined)
    }

    /// Waits until `process` logged `text`; on failure the test shows what it did log.
    static func waitForLog(_ process: TestProcess, _ text: String, timeout: Duration = .seconds(30)) async throws {
        do {
            try await FleetRecorderTests.waitForLog(process, text, timeout: timeout)
        } catch {
            Issue.record("\(process.commandLine) did not log \"\(text)\"; it logged:\n\(process.standardError.suffix(4000))")
            throw error
        }
    }

    static func postgresURL(_ postgres: TestPostgres, _ database: String) -> String {
        "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable"
    }

    /// `fleet-watch gaps` on `database`: its exit status and output.
    static func gaps(
        _ postgres: TestPostgres, _ database: String, directory: TemporaryDirectory, extra: [String] = []
    ) async throws -> (status: Int32, output: String) {
        let process = try TestProcess(
            builtProduct("fleet-watch"), ["gaps", "--postgres", postgresURL(postgres, database)] + extra,
            directory: directory.path, name: "gaps", environment: ["PGPASSWORD": postgres.password ?? ""])
        let status = try await process.waitForExit(timeout: .seconds(30))
        return (status, process.standardOutput + process.standardError)
    }

    @Test func aVehicleWhoseStoreIsLostKeepsEveryFixAndARedeliveryOfEverythingAddsNothing() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record-lost-store")
        defer { directory.remove() }
        try await withBroker(.init(extraConfiguration: ["max_queued_messages 100000"])) { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                // A witness of everything the vehicle publishes, live and backlog.
                let witness = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/van-s/+", count: 100_000, timeoutSeconds: 300)
                let recorder = try FleetRecorderTests.startRecorder(
                    "recorder", broker: broker, postgres: postgres, database: database, directory: directory)
                try await Self.waitForLog(recorder, "Subscribed to the fleet")

                func storedCount() async throws -> Int {
                    let s = try await Self.stored(postgres, database)
                    return s.fixes.count + s.headings.count
                }
                var agent = try FleetRecorderTests.startAgent("van-s", broker: broker, directory: directory)
                try await waitUntil("40 messages stored", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await storedCount() >= 40
                }
                // Mid-drive: the power goes, and the card comes back with the store unreadable.
                agent.send(SIGKILL)
                _ = try await agent.waitForExit(timeout: .seconds(10))
                let store = directory.file("state-van-s") + "/van-s.outbox"
                let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
                for file in [store, store + "-wal"] { try garbage.write(to: URL(fileURLWithPath: file)) }
                try? FileManager.default.removeItem(atPath: store + "-shm")
                let before = try await storedCount()

                agent = try FleetRecorderTests.startAgent("van-s", broker: broker, directory: directory)
                try await Self.waitForLog(agent, "moved aside")
                try await waitUntil("40 more messages stored", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await storedCount() >= before + 40
                }
                agent.send(SIGTERM)
                #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0, "\(agent.standardError)")

                // Everything published is stored, exactly: both numbering runs, nothing extra.
                var published = Self.published(witness.messagesSoFar)
                try await waitUntil("every published message stored", timeout: .seconds(30), interval: .milliseconds(200)) {
                    published = Self.published(witness.messagesSoFar)
                    let stored = try await Self.stored(postgres, database)
                    return stored.fixes == published.fixes && stored.headings == published.headings
                }
                let runs = Set(published.fixes.map(\.run))
                #expect(runs.count == 2, "a new numbering run after the store was lost: \(runs)")
                #expect(
                    published.fixes.union(published.headings).contains { $0.seq == 1 && $0.run == runs.max() },
                    "the new run numbers from 1 again")

                // Everything delivered a second time (an at-least-once broker, a replay): no new row.
                var byTopic: [String: [String]] = [:]
                for line in witness.messagesSoFar {
                    guard let space = line.firstIndex(of: " "), !line.hasSuffix("/status") else { continue }
                    let topic = String(line[..<space])
                    guard !topic.hasSuffix("/status") else { continue }
                    byTopic[topic, default: []].append(String(line[line.index(after: space)...]))
                }
                for (topic, payloads) in byTopic {
                    let file = try directory.createFile(
                        "again-\(topic.split(separator: "/")[2]).txt", payloads.joined(separator: "\n") + "\n")
                    let again = try TestProcess(
                        "/bin/sh", ["-c", "exec /usr/bin/mosquitto_pub -h 127.0.0.1 -p \(broker.port) -q 1 -t \(topic) -l < \(file)"],
                        directory: directory.path, name: "again")
                    #expect(try await again.waitForExit(timeout: .seconds(60)) == 0, "\(again.standardError)")
                }
                // Published after the replay: once it is stored, so is everything before it.
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/sentinel/fix",
                    message: #"{"v":1,"seq":1,"run":7,"time":"2026-11-24T00:00:00.000Z","lat":1,"lon":2,"mode":3}"#)
                try await waitUntil("the sentinel stored", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await Self.stored(postgres, database).fixes.contains(Number(vehicle: "sentinel", run: 7, seq: 1))
                }
                let after = try await Self.stored(postgres, database)
                #expect(after.fixes.filter { $0.vehicle == "van-s" } == published.fixes, "fixes: stored equals published")
                #expect(after.headings == published.headings, "headings: stored equals published")

                let report = try await Self.gaps(postgres, database, directory: directory, extra: ["--vehicle", "van-s"])
                #expect(report.status == 0, "\(report.output)")
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
                await witness.stop()
            }
        }
    }

    @Test func aRecorderKilledAndADatabaseStoppedLoseNothingAndGapsProvesIt() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record-kill")
        defer { directory.remove() }
        try await withBroker(.init(extraConfiguration: ["max_queued_messages 100000"])) { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                var recorder = try FleetRecorderTests.startRecorder(
                    "recorder-k", broker: broker, postgres: postgres, database: database, directory: directory)
                try await Self.waitForLog(recorder, "Subscribed to the fleet")
                let vehicles = ["van-k1", "van-k2"]
                // A witness of everything the vehicles publish, live and backlog.
                let witness = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/+/+", count: 100_000, timeoutSeconds: 300)
                // The agents' defaults: a heading rides in its fix; one that goes alone is QoS 1.
                let agents = try vehicles.map { try FleetRecorderTests.startAgent($0, broker: broker, directory: directory) }
                func storedCount() async throws -> Int {
                    let s = try await Self.stored(postgres, database)
                    return s.fixes.count + s.headings.count
                }
                try await waitUntil("rows of both vehicles", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await storedCount() >= 80
                }

                // kill -9 mid-stream at 10 Hz; 4 s away; back under the same client id.
                recorder.send(SIGKILL)
                _ = try await recorder.waitForExit(timeout: .seconds(10))
                let whileAway = witness.messagesSoFar.count
                try await waitUntil("80 messages (4 s of the fleet) published while the recorder is away", timeout: .seconds(30)) {
                    witness.messagesSoFar.count >= whileAway + 80
                }
                recorder = try FleetRecorderTests.startRecorder(
                    "recorder-k", broker: broker, postgres: postgres, database: database, directory: directory)
                try await Self.waitForLog(recorder, "Subscribed to the fleet")
                // Back under its client id, it stores again: what waited in its session, then live.
                let atRestart = try await storedCount()
                do {
                    try await waitUntil("the restarted recorder storing again", timeout: .seconds(60), interval: .milliseconds(200)) {
                        try await storedCount() >= atRestart + 40
                    }
                } catch {
                    Issue.record("\(error)\nrecorder: \(recorder.standardError.suffix(2000))\nbroker: \(broker.log.suffix(3000))")
                    throw error
                }

                // PostgreSQL stopped for 8 s while the fleet drives.
                let beforeOutage = try await storedCount()
                await postgres.stop()
                try await Self.waitForLog(recorder, "PostgreSQL cannot be written to; retrying, and events wait in memory")
                let duringOutage = witness.messagesSoFar.count
                try await waitUntil("160 messages (8 s of the fleet) published while PostgreSQL is down", timeout: .seconds(60)) {
                    witness.messagesSoFar.count >= duringOutage + 160
                }
                try await postgres.start()
                try await Self.waitForLog(recorder, "PostgreSQL is back", timeout: .seconds(60))
                try await waitUntil("rows after the outage", timeout: .seconds(30), interval: .milliseconds(200)) {
                    try await storedCount() >= beforeOutage + 200
                }

                for agent in agents { agent.send(SIGTERM) }
                for agent in agents { #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0) }
                // Every message each agent sent, from its first to its last, once.
                for vehicle in vehicles {
                    let last = try await FleetRecorderTests.lastPublishedSeq(vehicle, broker: broker)
                    try await waitUntil("\(vehicle)'s last message stored", timeout: .seconds(30), interval: .milliseconds(200)) {
                        let s = try await Self.stored(postgres, database)
                        return s.fixes.union(s.headings).contains { $0.vehicle == vehicle && $0.seq == last }
                    }
                    let s = try await Self.stored(postgres, database)
                    let numbers = s.fixes.union(s.headings).filter { $0.vehicle == vehicle }
                    #expect(Set(numbers.map(\.run)).count == 1, "\(vehicle): one numbering run")
                    #expect(Set(numbers.map(\.seq)) == Set(1...last), "\(vehicle): seq 1…\(last), \(numbers.count) stored")
                }
                // Every fix and heading the agents published is stored, each heading where it came:
                // in its fix's row, or alone.
                let published = Self.published(witness.messagesSoFar)
                await witness.stop()
                let stored = try await Self.stored(postgres, database)
                let storedJoined = try await Self.storedJoined(postgres, database)
                #expect(published.fixes.isSubset(of: stored.fixes), "\(published.fixes.subtracting(stored.fixes).prefix(10))")
                #expect(published.headings.isSubset(of: stored.headings), "\(published.headings.subtracting(stored.headings).prefix(10))")
                #expect(published.joined.isSubset(of: storedJoined), "\(published.joined.subtracting(storedJoined).prefix(10))")
                #expect(published.joined.count > published.fixes.count * 9 / 10, "one message an instant: fixes carry their headings")
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
                let log = recorder.standardError
                #expect(log.components(separatedBy: "PostgreSQL cannot be written to").count == 2, "the outage named once: \(log)")
                #expect(log.components(separatedBy: "PostgreSQL is back").count == 2, "the recovery named once")

                // The proof: complete; and once rows are gone, the hole is named and the exit is 1.
                let complete = try await Self.gaps(postgres, database, directory: directory)
                #expect(complete.status == 0, "\(complete.output)")
                #expect(complete.output.contains("complete:"), "\(complete.output)")
                _ = try await postgres.psql(
                    """
                    DELETE FROM fleetcast_fixes WHERE vehicle = 'van-k1' AND seq BETWEEN 20 AND 24;
                    DELETE FROM fleetcast_headings WHERE vehicle = 'van-k1' AND seq BETWEEN 20 AND 24
                    """, database: database)
                let holed = try await Self.gaps(postgres, database, directory: directory)
                #expect(holed.status == 1, "\(holed.output)")
                #expect(holed.output.contains("van-k1 run "), "\(holed.output)")
                #expect(holed.output.contains(" seq 20-24: 5 missing"), "\(holed.output)")
                let json = try await Self.gaps(
                    postgres, database, directory: directory, extra: ["--format", "json", "--vehicle", "van-k1"])
                #expect(json.status == 1)
                let object = try JSONSerialization.jsonObject(with: Data(json.output.split(separator: "\n")[0].utf8)) as? [String: Any]
                #expect(object?["complete"] as? Bool == false)
                #expect(object?["missing"] as? Int == 5)
                let other = try await Self.gaps(postgres, database, directory: directory, extra: ["--vehicle", "van-k2"])
                #expect(other.status == 0, "\(other.output)")
            }
        }
    }

    @Test func aRecorderWithRetentionDropsAVehicleOfFortyDaysAgoAndKeepsTodaysWhole() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record-retention")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                // A vehicle an earlier recorder stored 40 days ago (by this machine's clock).
                let fortyDaysAgo = UTCTimestamp(millisecondsSince1970: Int64(Date().timeIntervalSince1970 * 1000) - 40 * 86_400_000)
                try await withStore(postgres, database: database) { store, _ in
                    try await store.migrate()
                    try await store.insert(
                        (1...30).map { seq in
                            TrackRecord(
                                vehicle: VehicleID("old-van")!, seq: seq, run: 1,
                                payload: .fix(
                                    Fix(
                                        time: UTCTimestamp(millisecondsSince1970: fortyDaysAgo.millisecondsSince1970 + Int64(seq) * 1000),
                                        latitude: 47.4, longitude: 8.5, mode: .threeD)))
                        })
                }
                #expect(
                    try await postgres.psql("SELECT count(*) FROM fleetcast_fixes WHERE vehicle = 'old-van'", database: database) == "30")

                let recorder = try FleetRecorderTests.startRecorder(
                    "recorder", broker: broker, postgres: postgres, database: database, directory: directory,
                    extra: ["--retention", "30d"])
                try await FleetRecorderTests.waitForLog(recorder, "Retention dropped old history", timeout: .seconds(20))
                #expect(
                    try await postgres.psql("SELECT count(*) FROM fleetcast_fixes WHERE vehicle = 'old-van'", database: database) == "0")
                #expect(
                    try await postgres.psql(
                        "SELECT count(*) FROM pg_class WHERE relname = 'fleetcast_fixes_p\(HistoryDay(fortyDaysAgo).compact)'",
                        database: database) == "0", "its day's partition is dropped whole")

                // A vehicle of today, recorded live beside the retention.
                try await FleetRecorderTests.waitForLog(recorder, "Subscribed to the fleet")
                let agent = try FleetRecorderTests.startAgent("van-today", broker: broker, directory: directory)
                try await waitUntil("van-today in PostgreSQL", timeout: .seconds(30), interval: .milliseconds(200)) {
                    (try await FleetRecorderTests.rows(postgres, database)["van-today"]?.count ?? 0) >= 20
                }
                agent.send(SIGTERM)
                #expect(try await agent.waitForExit(timeout: .seconds(20)) == 0)
                let last = try await FleetRecorderTests.lastPublishedSeq("van-today", broker: broker)
                try await waitUntil("van-today's last message recorded", timeout: .seconds(30), interval: .milliseconds(200)) {
                    (try await FleetRecorderTests.rows(postgres, database)["van-today"]?.last ?? 0) >= last
                }
                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
                #expect(
                    recorder.standardError.components(separatedBy: "Retention dropped old history").count == 2,
                    "said once: \(recorder.standardError)")

                let today = try #require(try await FleetRecorderTests.rows(postgres, database)["van-today"])
                #expect(today.count == today.last - today.first + 1, "seq \(today.first)…\(today.last) but \(today.count) rows")
                let whole = try await Self.gaps(postgres, database, directory: directory, extra: ["--vehicle", "van-today"])
                #expect(whole.status == 0, "\(whole.output)")
                #expect(
                    whole.output.contains("complete:") && whole.output.contains("retention removed the history before it"),
                    "\(whole.output)")
                // A hole in what is kept is named.
                let hole = today.first + 3
                _ = try await postgres.psql("DELETE FROM fleetcast_fixes WHERE vehicle = 'van-today' AND seq = \(hole)", database: database)
                _ = try await postgres.psql(
                    "DELETE FROM fleetcast_headings WHERE vehicle = 'van-today' AND seq = \(hole)", database: database)
                let holed = try await Self.gaps(postgres, database, directory: directory, extra: ["--vehicle", "van-today"])
                #expect(holed.status == 1 && holed.output.contains("seq \(hole): 1 missing"), "\(holed.output)")
            }
        }
    }
}
