import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

/// The built `fleet-watch` executable, run end to end against a real mosquitto.
@Suite(.serialized) struct FleetWatchCLITests {
    /// `fleet-watch`, built next to the test bundle by `swift build --build-tests`.
    static let executable: String = {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [bundleDirectory, bundleDirectory.deletingLastPathComponent()].map {
            $0.appendingPathComponent("fleet-watch").path
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }()

    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    func fixJSON(_ vehicle: String, seq: UInt64, lat: Double) -> String {
        String(
            decoding: FleetPayload.encode(
                Fix(
                    time: time, latitude: lat, longitude: -3.25, speed: 10, mode: .threeD,
                    satellitesUsed: 7), vehicle: vehicle, seq: seq), as: UTF8.self)
    }

    func publishRetainedFleet(_ broker: TestBroker) async throws {
        try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: fixJSON("van-7", seq: 4, lat: 48.5), retain: true)
        try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: #"{"v":1,"state":"online"}"#, retain: true)
        try await MosquittoCLI.publish(
            broker: broker, topic: "fleet/bus-1/fix", message: fixJSON("bus-1", seq: 9, lat: -33.25), retain: true)
        try await MosquittoCLI.publish(
            broker: broker, topic: "fleet/bus-1/heading",
            message: #"{"v":1,"seq":10,"heading":180,"source":"HDT"}"#, retain: true)
        try await MosquittoCLI.publish(broker: broker, topic: "fleet/bus-1/status", message: "not json", retain: true)
    }

    /// Runs fleet-watch to completion (bounded) and returns its status, stdout and stderr.
    func run(_ arguments: [String], in directory: String, timeout: Duration = .seconds(30)) async throws -> (Int32, String, String) {
        let process = try TestProcess(Self.executable, arguments, directory: directory, name: "fleet-watch-\(UUID().uuidString)")
        let status = try await withTimeout(timeout, "fleet-watch \(arguments.joined(separator: " ")) to exit") {
            await process.waitForExit()
        }
        defer {
            try? FileManager.default.removeItem(atPath: process.stdoutPath)
            try? FileManager.default.removeItem(atPath: process.stderrPath)
        }
        return (status, process.standardOutput, process.standardError)
    }

    /// Starts fleet-watch with `arguments` (live, not `--once`) and waits (20 s at most) until it
    /// says it has subscribed to the fleet; kills it when it does not get there. The caller kills
    /// it in the end.
    func startSubscribed(
        _ arguments: [String], directory: String, name: String, environment: [String: String] = [:]
    ) async throws -> TestProcess {
        let process = try TestProcess(Self.executable, arguments, directory: directory, name: name, environment: environment)
        do {
            try await waitUntil("fleet-watch to subscribe", timeout: .seconds(20)) {
                if !process.isRunning {
                    throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError)
                }
                return process.standardError.contains("Subscribed to the fleet")
            }
        } catch {
            process.send(SIGKILL)
            throw error
        }
        return process
    }

    @Test func oncePrintsTheRetainedSnapshotAndExits() async throws {
        try await withBroker { broker in
            try await publishRetainedFleet(broker)
            let (status, out, err) = try await run(["--broker", broker.url, "--once", "--quiet-period", "0.3"], in: broker.directory)
            #expect(status == 0, "\(err)")
            let lines = out.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
            #expect(lines.first == ["VEHICLE", "STATE", "AGE", "LAT", "LON", "KM/H", "HDG", "SATS", "MODE", "GAPS"])
            // (The age is the fixes' own, from their time in January: see the next test.)
            func withoutAge(_ row: [String]) -> [String] { row.count > 2 ? Array(row[..<2] + row[3...]) : row }
            #expect(lines.map(withoutAge).contains(["bus-1", "-", "-33.250000", "-3.250000", "36.0", "180.0", "7", "3D", "0"]))
            #expect(lines.map(withoutAge).contains(["van-7", "online", "48.500000", "-3.250000", "36.0", "-", "7", "3D", "0"]))
            #expect(out.contains("2 vehicles, 1 malformed messages"))
            #expect(!out.contains("\u{1B}"))
        }
    }

    @Test("--once: a retained fix 20 s old shows an age of 20 s, and a vehicle's retained heading and fix open no gaps")
    func onceShowsTheFixesAgeAndNoGapsBetweenRetainedMessages() async throws {
        try await withBroker { broker in
            let now = UTCTimestamp.wallClockNow.millisecondsSince1970
            let heading = Heading(time: UTCTimestamp(millisecondsSince1970: now - 25_000), trueHeading: 90, source: .hdt)
            let fix = Fix(
                time: UTCTimestamp(millisecondsSince1970: now - 20_000), latitude: 48.5, longitude: -3.25, speed: 10, mode: .threeD,
                satellitesUsed: 7)
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/heading",
                message: String(decoding: FleetPayload.encode(heading, seq: 1), as: UTF8.self),
                retain: true)
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/fix", message: String(decoding: FleetPayload.encode(fix, seq: 60), as: UTF8.self),
                retain: true)
            let (status, out, err) = try await run(["--broker", broker.url, "--once", "--quiet-period", "0.3"], in: broker.directory)
            #expect(status == 0, "\(err)")
            let row = try #require(
                out.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }.first { $0.first == "van-7" })
            let age = Int(row[2].dropLast()) ?? -1
            #expect(row[2].hasSuffix("s") && (19...25).contains(age), "the fix's own age: \(row)")
            #expect(row[9] == "0", "no gap between the retained heading and fix: \(row)")
        }
    }

    @Test func onceWithJSONPrintsOneValidObjectPerMessage() async throws {
        try await withBroker { broker in
            try await publishRetainedFleet(broker)
            let (status, out, err) = try await run(
                [
                    "--broker", broker.url, "--once", "--json", "--quiet-period", "0.3",
                    "--vehicle", "bus-1",
                ], in: broker.directory)
            #expect(status == 0, "\(err)")
            let objects = try out.split(separator: "\n").map {
                try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)")
            }
            #expect(objects.count == 3)
            #expect(Set(objects.compactMap { $0["kind"] as? String }) == ["fix", "heading", "malformed"])
            #expect(objects.allSatisfy { $0["vehicle"] as? String == "bus-1" })
            let fix = try #require(objects.first { $0["kind"] as? String == "fix" })
            #expect(fix["lat"] as? Double == -33.25 && fix["seq"] as? Int == 9)
        }
    }

    @Test func liveJSONLinesFollowThePublishedMessages() async throws {
        try await withBroker { broker in
            let process = try await startSubscribed(
                ["--broker", broker.url, "--json", "--log-level", "debug"], directory: broker.directory, name: "fleet-watch-live")
            defer { process.send(SIGKILL) }
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: fixJSON("van-7", seq: 1, lat: 1))
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: fixJSON("van-7", seq: 3, lat: 3))
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/heading", message: "[1,2]")
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: #"{"v":1,"state":"offline"}"#)
            try await waitUntil("four JSON lines", timeout: .seconds(15)) {
                process.standardOutput.split(separator: "\n").count >= 4
            }
            await process.stop()
            let objects = try process.standardOutput.split(separator: "\n").map {
                try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)")
            }
            #expect(objects.compactMap { $0["kind"] as? String } == ["fix", "fix", "malformed", "status"])
            #expect(objects.allSatisfy { $0["vehicle"] as? String == "van-7" })
            #expect(objects[2]["reason"] as? String == "invalid JSON: expected an object at byte 0")
        }
    }

    /// The broker's rules change so that fleet-watch may no longer read the fleet: the broker
    /// disconnects it and refuses the restored subscription. fleet-watch says so and exits
    /// non-zero instead of showing a fleet that silently stopped moving.
    @Test func aSubscriptionRefusedAfterAReconnectEndsFleetWatchWithAClearError() async throws {
        let security = try await DynamicSecurityBroker.start()
        do {
            try await security.addUser("watcher", password: "pw", subscribe: ["fleet/#"])
            let url = "mqtt://watcher@127.0.0.1:\(security.broker.port)"
            let process = try await startSubscribed(
                ["--broker", url, "--json"], directory: security.broker.directory, name: "fleet-watch-refused",
                environment: ["FLEETCAST_PASSWORD": "pw"])
            defer { process.send(SIGKILL) }
            try await security.control(["removeRoleACL", "watcher", "subscribePattern", "fleet/#"])
            let status = try await withTimeout(.seconds(30), "fleet-watch to exit after the refusal") { await process.waitForExit() }
            #expect(status != 0)
            #expect(process.standardError.contains("rejected by the broker"), "\(process.standardError)")
            #expect(process.standardError.contains("fleet/+/+"), "\(process.standardError)")
            #expect(process.standardError.contains("check the broker's ACL"), "\(process.standardError)")
        } catch {
            await security.shutdown()
            throw error
        }
        await security.shutdown()
    }

    /// A backlog batch (QoS 1, not retained) as the agent writes it: fixes `seqs`, and a heading
    /// at `headingSeq`, each with its original seq and time.
    func backlogJSON(_ vehicle: String, fixes seqs: [UInt64], headingSeq: UInt64? = nil, bad: String? = nil) -> String {
        var w = FleetPayload.BacklogWriter(vehicle: VehicleID(vehicle)!)
        for seq in seqs.sorted() {
            let fixTime = UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 - Int64(100 - seq) * 1000)
            let fix = Fix(time: fixTime, latitude: Double(seq), longitude: -3.25, speed: 10, mode: .threeD, satellitesUsed: 7)
            var appended = w.append(kind: .fix, payload: FleetPayload.encode(fix, vehicle: vehicle, seq: seq))
            if seq + 1 == headingSeq {
                appended =
                    appended
                    && w.append(
                        kind: .heading,
                        payload: FleetPayload.encode(
                            Heading(time: fixTime, trueHeading: 45, source: .hdt),
                            vehicle: vehicle, seq: headingSeq))
            }
            if let bad, seq == seqs.sorted()[0] { appended = appended && w.append(kind: .fix, payload: Array(bad.utf8)) }
            #expect(appended)
        }
        return String(decoding: w.finish(), as: UTF8.self)
    }

    @Test func liveJSONPrintsEachBacklogEntryAsItsOwnLine() async throws {
        try await withBroker { broker in
            let process = try await startSubscribed(
                ["--broker", broker.url, "--json", "--log-level", "debug"], directory: broker.directory, name: "fleet-watch-backlog")
            defer { process.send(SIGKILL) }
            // The newest fix live (retained, as the agent sends it), then the backlog 5...9
            // oldest first: fixes 5, 6, a heading 7, fixes 8, 9 — and one bad entry after 5.
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/fix", message: fixJSON("van-7", seq: 10, lat: 10), retain: true)
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/backlog",
                message: backlogJSON("van-7", fixes: [5, 6, 8, 9], headingSeq: 7, bad: #"{"v":1,"lat":1}"#))
            try await waitUntil("seven JSON lines", timeout: .seconds(15)) {
                process.standardOutput.split(separator: "\n").count >= 7
            }
            await process.stop()
            let objects = try process.standardOutput.split(separator: "\n").map {
                try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)")
            }
            #expect(objects.count == 7)
            #expect(objects.compactMap { $0["kind"] as? String } == ["fix", "fix", "malformed", "fix", "heading", "fix", "fix"])
            #expect(objects.compactMap { $0["seq"] as? Int } == [10, 5, 6, 7, 8, 9])
            #expect(objects.map { $0["backlog"] as? Bool } == [nil, true, nil, true, true, true, true])
            #expect(objects.allSatisfy { $0["vehicle"] as? String == "van-7" })
            #expect(objects[2]["reason"] as? String == #"backlog event 1: missing key "time""#)
            #expect(objects[1]["time"] as? String == "2026-01-02T03:02:30.000Z")  // its original time
            #expect(objects[4]["heading"] as? Double == 45)
        }
    }

    @Test func withoutATerminalOrJSONEventsArePlainLines() async throws {
        try await withBroker { broker in
            let process = try await startSubscribed(
                ["--broker", broker.url, "--vehicle", "van-7"], directory: broker.directory, name: "fleet-watch-plain")
            defer { process.send(SIGKILL) }
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/bus-1/fix", message: fixJSON("bus-1", seq: 1, lat: 1))
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/fix", message: fixJSON("van-7", seq: 2, lat: 2))
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: #"{"v":1,"state":"offline"}"#)
            try await waitUntil("two lines", timeout: .seconds(15)) { process.standardOutput.split(separator: "\n").count >= 2 }
            await process.stop()
            #expect(
                process.standardOutput == """
                    fix van-7 seq=2 2026-01-02T03:04:05.000Z lat=2.000000 lon=-3.250000 speed=36.0km/h sats=7 mode=3D
                    status van-7 offline

                    """)
        }
    }

    @Test func passwordComesFromAFileOrTheEnvironmentAndIsNeverLogged() async throws {
        let secret = "s3cret-\(UUID().uuidString.prefix(6))"
        try await withBroker(.init(users: ["watcher": secret])) { broker in
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/status", message: #"{"v":1,"state":"online"}"#,
                retain: true, extra: ["-u", "watcher", "-P", secret])
            let url = "mqtt://watcher@127.0.0.1:\(broker.port)"
            let passwordFile = "\(broker.directory)/password"
            try (secret + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
            let fromFile = try await run(
                [
                    "--broker", url, "--once", "--json", "--password-file", passwordFile,
                    "--log-level", "trace", "--quiet-period", "0.3",
                ], in: broker.directory)
            #expect(fromFile.0 == 0, "\(fromFile.2)")
            #expect(fromFile.1.contains(#""kind":"status""#))
            let fromEnvironment = try await run(
                [
                    "/usr/bin/env", "FLEETCAST_PASSWORD=\(secret)", Self.executable, "--broker", url,
                    "--once", "--json", "--log-level", "trace", "--quiet-period", "0.3",
                ],
                in: broker.directory, viaEnv: true)
            #expect(fromEnvironment.0 == 0, "\(fromEnvironment.2)")
            #expect(fromEnvironment.1.contains(#""kind":"status""#))
            #expect(!fromFile.2.contains(secret) && !fromEnvironment.2.contains(secret))

            let wrong = try await run(
                ["/usr/bin/env", "FLEETCAST_PASSWORD=wrong", Self.executable, "--broker", url, "--once"],
                in: broker.directory, viaEnv: true)
            #expect(wrong.0 != 0)
            #expect(wrong.2.contains("bad user name or password"))
        }
    }

    @Test func badArgumentsAreRefusedWithAReason() async throws {
        let directory = try makeTemporaryDirectory(prefix: "fleet-watch-cli")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cases: [([String], String)] = [
            (["--broker", "http://x"], "unsupported scheme"),
            (["--broker", "mqtt://u:p@x"], "password does not belong in the URL"),
            (["--broker", "mqtt://x", "--vehicle", "a/b"], "invalid vehicle id"),
            (["--broker", "mqtt://x", "--prefix", "a/+"], "invalid topic prefix"),
            (["--broker", "mqtt://x", "--once", "--share-group", "g"], "no retained messages to shared subscriptions"),
        ]
        for (arguments, reason) in cases {
            let (status, _, err) = try await run(arguments, in: directory)
            #expect(status != 0)
            #expect(err.contains(reason), "\(arguments): \(err)")
        }
    }

    @Test func anUnreachableBrokerIsNamedAndRetriedUntilTheTimeout() async throws {
        let directory = try makeTemporaryDirectory(prefix: "fleet-watch-cli")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = try FreePort.next()
        let (status, _, err) = try await run(["--broker", "mqtt://127.0.0.1:\(port)", "--once", "--timeout", "2"], in: directory)
        #expect(status != 0)
        #expect(err.contains("MQTT broker unreachable, retrying"))
        #expect(err.contains("mqtt://127.0.0.1:\(port)"))
        #expect(err.contains("connection refused"))
    }
}

extension FleetWatchCLITests {
    /// Runs `/usr/bin/env …` (to set the environment of fleet-watch) like ``run(_:in:timeout:)``.
    func run(_ command: [String], in directory: String, viaEnv: Bool) async throws -> (Int32, String, String) {
        let process = try TestProcess(command[0], Array(command.dropFirst()), directory: directory, name: "env-\(UUID().uuidString)")
        let status = try await withTimeout(.seconds(30), "\(command.joined(separator: " ")) to exit") { await process.waitForExit() }
        return (status, process.standardOutput, process.standardError)
    }
}
