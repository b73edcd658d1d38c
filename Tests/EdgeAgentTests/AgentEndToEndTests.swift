import FleetProtocol
import FleetcastTestSupport
import Foundation
import NMEA
import Testing

/// The agent as a user runs it: the built `fleetcast-agent` binary, a real mosquitto, and a
/// client we did not write (`mosquitto_sub`) reading the topics.
@Suite("fleetcast-agent run, end to end", .serialized)
struct AgentEndToEndTests {
    static let fixtures = URL(fileURLWithPath: RepositoryPath.of("Tests/NMEATests/Fixtures/gpsd"))

    /// The fix times our decoder finds in a recording: what the agent must publish.
    static func fixTimes(in recording: String) throws -> [String] {
        var decoder = NMEADecoder()
        var events = decoder.decode(Array(try Data(contentsOf: URL(fileURLWithPath: recording))))
        decoder.finish { events.append($0) }
        var times: [String] = []
        for case .fix(let fix) in events where times.last != fix.time.iso8601 { times.append(fix.time.iso8601) }
        return times
    }

    static func json(_ line: Substring) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test("replay at speed=max is a complete batch upload: every fix, valid JSON, seq without gaps, online then offline")
    func replayBatchUpload() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let recording = Self.fixtures.appendingPathComponent("nmea-rtk.log").path
        let expected = try Self.fixTimes(in: recording)
        #expect(expected.count > 100)
        let fixSubscriber = try await MosquittoCLI.subscribe(
            broker: broker, filter: "fleet/rtk-1/fix", count: expected.count, timeoutSeconds: 30)
        let firstStatus = try await MosquittoCLI.subscribe(
            broker: broker, filter: "fleet/rtk-1/status", count: 1, timeoutSeconds: 30)

        let state = try makeTemporaryDirectory(prefix: "agent-e2e")
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "replay:\(recording)?speed=max", "--vehicle", "rtk-1",
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--state-dir", state,
            ], directory: state, name: "agent", environment: agentEveryFixEnvironment)
        let status = try await withTimeout(.seconds(60), "the agent to finish the replay") { await agent.waitForExit() }
        #expect(status == 0, "agent exit status; stderr: \(agent.standardError)")

        let fixes = try await fixSubscriber.messages().map { try Self.json($0.dropFirst("fleet/rtk-1/fix ".count)) }
        #expect(fixes.compactMap { $0["time"] as? String } == expected)
        #expect(fixes.compactMap { ($0["seq"] as? NSNumber)?.intValue } == Array(1...expected.count))
        // The standard field set: the topic names the vehicle; position, time and accuracy are there.
        #expect(fixes.allSatisfy { $0["v"] as? Int == 1 && $0["vehicle"] == nil && $0["lat"] is Double && $0["lon"] is Double })
        let online = try #require(await firstStatus.messages().first)
        #expect(try Self.json(online.dropFirst("fleet/rtk-1/status ".count))["state"] as? String == "online")
        // After the agent has gone, the broker's retained status says so, for any later client.
        let retained = try await MosquittoCLI.retained(broker: broker, topic: "fleet/rtk-1/status")
        let offline = try Self.json(try #require(retained).dropFirst("fleet/rtk-1/status ".count))
        #expect(offline["state"] as? String == "offline")
        #expect(offline["reason"] as? String == "shutdown")
        #expect(offline["dropped"] as? Int == 0)
        // What the link cost, from the kernel's counters: at least every fix's payload went out.
        let payloadBytes = await fixSubscriber.messages().reduce(0) { $0 + $1.utf8.count - "fleet/rtk-1/fix ".count }
        let sent = (offline["bytesSent"] as? NSNumber)?.intValue ?? 0
        #expect(sent > 0 && (offline["bytesReceived"] as? NSNumber)?.intValue ?? 0 > 0, "\(offline)")
        let stopped = try #require(agent.standardError.split(separator: "\n").first { $0.contains("agent stopped") })
        let finalSent = stopped.split(separator: " ").first { $0.hasPrefix("mqtt.bytesSent=") }.flatMap { Int($0.dropFirst(15)) }
        #expect((finalSent ?? 0) >= payloadBytes, "the last figures are whole: \(stopped), \(payloadBytes) bytes of fixes")
    }

    @Test("a restarted agent continues seq where it stopped")
    func seqSurvivesRestart() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let recording = Self.fixtures.appendingPathComponent("magellan-ec10.log").path
        let perRun = try Self.fixTimes(in: recording).count
        let state = try makeTemporaryDirectory(prefix: "agent-seq")
        var seqs: [Int] = []
        for run in 1...2 {
            let subscriber = try await MosquittoCLI.subscribe(
                broker: broker, filter: "fleet/mag-1/fix", count: perRun, timeoutSeconds: 30,
                extra: ["-R"])  // not the retained fix of the previous run
            let agent = try TestProcess(
                builtProduct("fleetcast-agent"),
                [
                    "run", "--source", "replay:\(recording)?speed=max", "--vehicle", "mag-1",
                    "--broker", "mqtt://127.0.0.1:\(broker.port)", "--state-dir", state,
                ], directory: state, name: "agent-\(run)", environment: agentEveryFixEnvironment)
            #expect(try await withTimeout(.seconds(60), "run \(run)") { await agent.waitForExit() } == 0)
            for line in await subscriber.messages() {
                seqs.append(try #require((try Self.json(line.dropFirst("fleet/mag-1/fix ".count))["seq"] as? NSNumber)?.intValue))
            }
        }
        // Status messages carry no seq; fixes and headings share one counter per vehicle.
        #expect(seqs == Array(1...(2 * perRun)))
    }

    @Test(
        "gpsd → agent → broker: fixes from gpsfake's gpsd arrive (live, and batched with uplink.batch 1); SIGTERM publishes offline and exits 0",
        arguments: [false, true])
    func gpsdToBroker(batched: Bool) async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let directory = try makeTemporaryDirectory(prefix: "agent-gpsd")
        let gpsdPort = try FreePort.next()
        let recording = Self.fixtures.appendingPathComponent("bt451.log").path
        let gpsfake = GPSFake(port: gpsdPort, recording: recording, secondsBetweenSentences: 0.05, directory: directory)
        // gpsfake and the gpsd it started are stopped (and awaited) however the test ends.
        do {
            try await gpsfake.startServing()

            // Batched: the first fix at once, then a batch a second.
            let topic = batched ? "fleet/gpsd-1/batch" : "fleet/gpsd-1/fix"
            let subscriber = try await MosquittoCLI.subscribe(
                broker: broker, filter: topic, count: batched ? 4 : 5, timeoutSeconds: 40, extra: MosquittoCLI.hexOutput)
            let agent = try TestProcess(
                builtProduct("fleetcast-agent"),
                [
                    "run", "--source", "gpsd://127.0.0.1:\(gpsdPort)", "--vehicle", "gpsd-1",
                    "--broker", "mqtt://127.0.0.1:\(broker.port)", "--state-dir", directory,
                ], directory: directory, name: "agent",
                environment: agentEveryFixEnvironment.merging(batched ? ["FLEETCAST_UPLINK_BATCH": "1"] : [:]) { $1 })
            let fixes = try await subscriber.messages().compactMap { MosquittoCLI.hexMessage($0) }.flatMap {
                message -> [(lat: Double, lon: Double)] in
                guard batched else {
                    let object = try Self.json(Substring(decoding: message.payload, as: UTF8.self))
                    return [(try #require(object["lat"] as? Double), try #require(object["lon"] as? Double))]
                }
                // A batch (compact, the default encoding): its fixes.
                return try FleetPayload.decodeBatch(message.payload, vehicle: VehicleID("gpsd-1")!).events.compactMap {
                    guard case .fix(let decoded) = $0 else { return nil }
                    return (decoded.fix.latitude, decoded.fix.longitude)
                }
            }
            #expect(
                batched ? fixes.count >= 3 : fixes.count == 5,
                "\(fixes.count) fixes; agent stderr: \(agent.standardError)\ngpsfake stderr: \(gpsfake.standardError)")
            // bt451 was recorded near 49.4°N 8.5°E (gpsd's own decoding; see the .chk file).
            let chk = try String(contentsOf: URL(fileURLWithPath: recording + ".chk"), encoding: .utf8)
            for (lat, lon) in fixes {
                #expect(
                    chk.contains(String(format: "\"lat\":%.9f", lat)) || chk.contains(String(format: "\"lat\":%.6f", lat)), "lat \(lat)")
                #expect(abs(lon) <= 180)
            }

            let offline = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/gpsd-1/status", count: 2, timeoutSeconds: 20)
            agent.send(SIGTERM)
            #expect(try await withTimeout(.seconds(30), "the agent to stop") { await agent.waitForExit() } == 0)
            let last = try #require(await offline.messages().last)
            #expect(try Self.json(last.dropFirst("fleet/gpsd-1/status ".count))["state"] as? String == "offline")
        } catch {
            await gpsfake.stop()
            throw error
        }
        await gpsfake.stop()
    }
}
