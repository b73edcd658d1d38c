import FleetCore
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import Testing

/// `fleet-watch bridge`, the built executable, against a real mosquitto: fleet messages go in
/// as an agent publishes them, and a plain MQTT subscriber reads back what OwnTracks Recorder or
/// Home Assistant would receive. Field lists: see OwnTracksTranslatorTests
/// (https://owntracks.org/booklet/tech/json/) and HomeAssistantTranslatorTests
/// (https://www.home-assistant.io/integrations/device_tracker.mqtt/).
@Suite(.serialized) struct FleetBridgeCLITests {
    /// 2026-01-02T03:04:05Z.
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    func later(_ seconds: Int64) -> UTCTimestamp {
        UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + seconds * 1000)
    }

    /// A fix as the agent publishes it: 10 m/s, no track, eph 3.2 m, 121.6 m above sea level.
    func fixJSON(seq: UInt64, lat: Double, at time: UTCTimestamp) -> String {
        let fix = Fix(
            time: time, latitude: lat, longitude: -3.25, altitudeMSL: 121.6, speed: 10, mode: .threeD,
            satellitesUsed: 7, eph: 3.2, epv: 5.1)
        return String(decoding: FleetPayload.encode(fix, vehicle: "van-7", seq: seq), as: UTF8.self)
    }

    func headingJSON(seq: UInt64, degrees: Double) -> String {
        String(
            decoding: FleetPayload.encode(Heading(time: time, trueHeading: degrees, source: .hdt), vehicle: "van-7", seq: seq),
            as: UTF8.self)
    }

    func statusJSON(_ state: VehicleStatus.State) -> String {
        String(
            decoding: FleetPayload.encode(VehicleStatus(vehicle: VehicleID("van-7")!, state: state, agentVersion: "0.3.0")),
            as: UTF8.self)
    }

    /// Starts `fleet-watch bridge …` and waits until it has subscribed (its publishing client
    /// connects first).
    func startBridge(_ arguments: [String], broker: TestBroker, name: String) async throws -> TestProcess {
        let process = try TestProcess(
            FleetWatchCLITests.executable, ["bridge", "--broker", broker.url] + arguments,
            directory: broker.directory, name: "\(name)-\(UUID().uuidString.prefix(8))")
        try await waitUntil("fleet-watch bridge to subscribe", timeout: .seconds(20)) {
            if !process.isRunning { throw TestSupportError.processFailed(process.commandLine, status: -1, output: process.standardError) }
            return process.standardError.contains("Subscribed to the fleet")
        }
        return process
    }

    /// The payload of the message retained on `topic`, read by a new subscriber.
    func retainedPayload(_ broker: TestBroker, _ topic: String) async throws -> String? {
        try await MosquittoCLI.retained(broker: broker, topic: topic)
            .map { String($0.dropFirst(topic.utf8.count + 1)) }
    }

    /// The payloads received on `topic` so far, in order.
    func payloads(_ subscriber: MosquittoCLI.Subscriber, on topic: String) -> [String] {
        subscriber.messagesSoFar.filter { $0.hasPrefix(topic + " ") }.map { String($0.dropFirst(topic.utf8.count + 1)) }
    }

    @Test func owntracksRecorderReceivesARetainedLocationPerFix() async throws {
        try await withBroker { broker in
            // Retained before the bridge starts, as a running agent leaves them.
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: statusJSON(.online), retain: true)
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/fix", message: fixJSON(seq: 1, lat: 48.5, at: time), retain: true)
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/heading", message: headingJSON(seq: 2, degrees: 45), retain: true)
            let recorder = try await MosquittoCLI.subscribe(broker: broker, filter: "owntracks/#", count: 10)
            let bridge = try await startBridge(["--to", "owntracks", "--owntracks-user", "acme"], broker: broker, name: "bridge-owntracks")
            defer { bridge.send(SIGKILL) }
            let topic = "owntracks/acme/van-7"
            try await waitUntil("the retained fix bridged", timeout: .seconds(15)) { !payloads(recorder, on: topic).isEmpty }

            // Live: the vehicle moves on, one second later, still without a track of its own.
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/fix", message: fixJSON(seq: 3, lat: 48.6, at: later(1)), retain: true)
            try await waitUntil("the live fix bridged", timeout: .seconds(15)) { payloads(recorder, on: topic).count >= 2 }

            let received = payloads(recorder, on: topic)
            #expect(received.count == 2)  // the heading and the status publish nothing of their own
            let live = try jsonObject(received[1])
            #expect(live["_type"] as? String == "location")
            #expect(live["tid"] as? String == "n7")
            #expect(live["tst"] as? Int == Int(later(1).millisecondsSince1970 / 1000))
            #expect(live["lat"] as? Double == 48.6 && live["lon"] as? Double == -3.25)
            #expect(live["acc"] as? Int == 3 && live["alt"] as? Int == 122 && live["vac"] as? Int == 5)
            #expect(live["vel"] as? Int == 36)  // 10 m/s
            #expect(live["cog"] as? Int == 45)  // the heading, the fix having no track
            for key in ["tst", "acc", "alt", "vac", "vel", "cog"] {
                #expect(isIntegerToken(rawToken(key, in: received[1])), "\(key): \(received[1])")
            }
            // Retained, so a Recorder or an app that connects later sees the vehicle at once.
            #expect(try await retainedPayload(broker, topic) == received[1])
            #expect(bridge.isRunning)
            await recorder.stop()
        }
    }

    @Test func owntracksGetsTheFleetsZoneTransitionsWithZones() async throws {
        try await withBroker { broker in
            let zonesFile = "\(broker.directory)/zones.geojson"
            try GeneratedDrive.depotAndCustomerZones.write(toFile: zonesFile, atomically: true, encoding: .utf8)
            let recorder = try await MosquittoCLI.subscribe(broker: broker, filter: "owntracks/acme/van-7/event", count: 2)
            let bridge = try await startBridge(
                ["--to", "owntracks", "--owntracks-user", "acme", "--zones", zonesFile], broker: broker, name: "bridge-owntracks-zones")
            defer { bridge.send(SIGKILL) }
            // The start, the Depot (twice), then on the way to the Customer.
            for (seq, (north, east)) in [(0.0, 0.0), (4_500, 0), (4_505, 2), (4_500, 1_500)].enumerated() {
                let position = GeneratedDrive.position(north: north, east: east)
                let fix = Fix(
                    time: later(Int64(seq) * 60), latitude: position.latitude, longitude: position.longitude, speed: 10, mode: .threeD,
                    eph: 3.2)
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/van-7/fix",
                    message: String(decoding: FleetPayload.encode(fix, vehicle: "van-7", seq: UInt64(seq + 1)), as: UTF8.self))
            }
            let received = await recorder.messages(timeout: .seconds(20)).map {
                try? jsonObject(String($0.dropFirst("owntracks/acme/van-7/event ".utf8.count)))
            }
            #expect(
                received.map { "\($0?["_type"] ?? "?") \($0?["event"] ?? "?") \($0?["desc"] ?? "?")" } == [
                    "transition enter Depot", "transition leave Depot",
                ])
            #expect(received.first??["tst"] as? Int == Int(later(60).millisecondsSince1970 / 1000), "the fix that entered")
            #expect(bridge.isRunning)
        }
    }

    @Test func watchWithZonesPrintsEachZoneEventAfterItsFix() async throws {
        try await withBroker { broker in
            let zonesFile = "\(broker.directory)/zones.geojson"
            try GeneratedDrive.depotAndCustomerZones.write(toFile: zonesFile, atomically: true, encoding: .utf8)
            let watch = try TestProcess(
                FleetWatchCLITests.executable, ["watch", "--broker", broker.url, "--json", "--zones", zonesFile],
                directory: broker.directory, name: "watch-zones-\(UUID().uuidString.prefix(8))")
            defer { watch.send(SIGKILL) }
            try await waitUntil("fleet-watch to subscribe", timeout: .seconds(20)) {
                watch.standardError.contains("Subscribed to the fleet")
            }
            for (seq, (north, east)) in [(0.0, 0.0), (4_500, 0), (4_505, 2), (4_500, 1_500)].enumerated() {
                let position = GeneratedDrive.position(north: north, east: east)
                let fix = Fix(
                    time: later(Int64(seq) * 60), latitude: position.latitude, longitude: position.longitude, speed: 10, mode: .threeD)
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/van-7/fix",
                    message: String(decoding: FleetPayload.encode(fix, vehicle: "van-7", seq: UInt64(seq + 1)), as: UTF8.self))
            }
            try await waitUntil("two zone lines", timeout: .seconds(15)) {
                watch.standardOutput.components(separatedBy: #""kind":"zone""#).count == 3
            }
            let lines = watch.standardOutput.split(separator: "\n").map(String.init)
            let kinds = lines.compactMap { try? jsonObject($0) }.map { "\($0["kind"] ?? "?") \($0["event"] ?? "")\($0["zone"] ?? "")" }
            #expect(kinds == ["fix ", "fix ", "zone enterDepot", "fix ", "fix ", "zone exitDepot"], "\(lines)")
        }
    }

    @Test func homeAssistantDiscoversTheVehicleAndFollowsItsPositionAndStatus() async throws {
        try await withBroker { broker in
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: statusJSON(.online), retain: true)
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/fix", message: fixJSON(seq: 1, lat: 48.5, at: time), retain: true)
            let bridge = try await startBridge(["--to", "homeassistant", "--discovery-prefix", "ha"], broker: broker, name: "bridge-ha")
            defer { bridge.send(SIGKILL) }

            let configTopic = "ha/device_tracker/van-7/config"
            var configText: String?
            try await waitUntilAsync("the discovery config with the agent's version") {
                configText = try await retainedPayload(broker, configTopic)
                return configText?.contains(#""sw_version":"0.3.0""#) == true
            }
            let config = try jsonObject(try #require(configText))
            #expect(config["unique_id"] as? String == "fleetcast_van-7")
            #expect(config["source_type"] as? String == "gps")
            let device = try #require(config["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["fleetcast_van-7"] && device["manufacturer"] as? String == "Fleetcast")

            // The location, where the config says Home Assistant should read it.
            let attributesTopic = try #require(config["json_attributes_topic"] as? String)
            var attributesText: String?
            try await waitUntilAsync("the retained attributes") {
                attributesText = try await retainedPayload(broker, attributesTopic)
                return attributesText != nil
            }
            let attributes = try jsonObject(try #require(attributesText))
            #expect(attributes["latitude"] as? Double == 48.5 && attributes["longitude"] as? Double == -3.25)
            #expect(attributes["gps_accuracy"] as? Double == 3.2)
            #expect(attributes["speed"] as? Double == 10 && attributes["altitude"] as? Double == 121.6)
            #expect(attributes["course"] == nil)

            // A live heading gives the trackless fix its course.
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/van-7/heading", message: headingJSON(seq: 2, degrees: 270), retain: true)
            try await waitUntilAsync("the course from the heading") {
                attributesText = try await retainedPayload(broker, attributesTopic)
                return attributesText?.contains(#""course":270"#) == true
            }

            // Availability: what `availability_template` reads from `availability_topic`.
            let availabilityTopic = try #require(config["availability_topic"] as? String)
            #expect(config["availability_template"] as? String == HomeAssistantTranslator.availabilityTemplate)
            let online = try jsonObject(try #require(try await retainedPayload(broker, availabilityTopic)))
            #expect(online["state"] as? String == config["payload_available"] as? String)
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: statusJSON(.offline), retain: true)
            let offline = try jsonObject(try #require(try await retainedPayload(broker, availabilityTopic)))
            #expect(offline["state"] as? String == config["payload_not_available"] as? String)
            #expect(bridge.isRunning)
        }
    }

    /// Issue 44: with zones, zone enter and exit on the event entity's topic; removed as
    /// docs/fleet-watch.md says, then started again: discovered again within 10 s, the same
    /// bridge still running.
    @Test func homeAssistantRediscoversAVehicleThatComesBackAfterItsRemoval() async throws {
        try await withBroker { broker in
            let zonesFile = "\(broker.directory)/zones.geojson"
            try GeneratedDrive.depotAndCustomerZones.write(toFile: zonesFile, atomically: true, encoding: .utf8)
            let configTopics = [
                "ha/device_tracker/van-7/config", "ha/sensor/van-7/speed/config", "ha/sensor/van-7/course/config",
                "ha/event/van-7/zone/config",
            ]
            let zoneEvents = try await MosquittoCLI.subscribe(broker: broker, filter: "fleetcast/homeassistant/van-7/zone", count: 2)
            let bridge = try await startBridge(
                ["--to", "homeassistant", "--discovery-prefix", "ha", "--zones", zonesFile], broker: broker, name: "bridge-ha-again")
            defer { bridge.send(SIGKILL) }

            /// What the agent publishes when it starts: online, then fixes from the start to the Depot and out.
            func drive(from seq: UInt64, at start: Int64) async throws {
                try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: statusJSON(.online), retain: true)
                for (n, (north, east)) in [(0.0, 0.0), (4_500, 0), (4_505, 2), (4_500, 1_500)].enumerated() {
                    let position = GeneratedDrive.position(north: north, east: east)
                    let fix = Fix(
                        time: later(start + Int64(n) * 60), latitude: position.latitude, longitude: position.longitude, speed: 10,
                        mode: .threeD, eph: 3.2)
                    try await MosquittoCLI.publish(
                        broker: broker, topic: "fleet/van-7/fix",
                        message: String(decoding: FleetPayload.encode(fix, vehicle: "van-7", seq: seq + UInt64(n)), as: UTF8.self),
                        retain: true)
                }
            }
            try await drive(from: 1, at: 0)
            for topic in configTopics {
                try await waitUntilAsync("\(topic) retained") { try await retainedPayload(broker, topic) != nil }
            }
            let events = await zoneEvents.messages(timeout: .seconds(20)).map {
                try? jsonObject(String($0.dropFirst("fleetcast/homeassistant/van-7/zone ".utf8.count)))
            }
            #expect(events.map { "\($0?["event_type"] ?? "?") \($0?["zone"] ?? "?")" } == ["enter Depot", "exit Depot"])
            let entity = try jsonObject(try #require(try await retainedPayload(broker, "ha/event/van-7/zone/config")))
            #expect(entity["state_topic"] as? String == "fleetcast/homeassistant/van-7/zone")
            #expect(entity["event_types"] as? [String] == ["enter", "exit"])

            // Removed as the docs say: the agent stopped (its offline), the configs cleared,
            // then the attributes and the fleet's retained topics.
            try await MosquittoCLI.publish(broker: broker, topic: "fleet/van-7/status", message: statusJSON(.offline), retain: true)
            for topic in configTopics + ["fleetcast/homeassistant/van-7/attributes", "fleet/van-7/fix", "fleet/van-7/status"] {
                try await MosquittoCLI.publish(broker: broker, topic: topic, message: "", retain: true)
            }
            #expect(try await MosquittoCLI.retained(broker: broker, topic: "ha/#", timeoutSeconds: 2) == nil, "removed")

            // Started again at once, and driving on as a vehicle does (a fix each check):
            // discovered again, with no bridge restart, within 10 s (the configs' rate limit,
            // HomeAssistantTranslator.rediscoveryInterval, included).
            let started = ContinuousClock.now
            try await drive(from: 5, at: 600)
            var seq: UInt64 = 9
            try await waitUntil("every config retained again", timeout: .seconds(10), interval: .milliseconds(500)) {
                let position = GeneratedDrive.position(north: 4_500, east: 1_500 + Double(seq))
                let fix = Fix(
                    time: later(600 + Int64(seq) * 60), latitude: position.latitude, longitude: position.longitude, speed: 10,
                    mode: .threeD, eph: 3.2)
                try await MosquittoCLI.publish(
                    broker: broker, topic: "fleet/van-7/fix",
                    message: String(decoding: FleetPayload.encode(fix, vehicle: "van-7", seq: seq), as: UTF8.self), retain: true)
                seq += 1
                for topic in configTopics where try await retainedPayload(broker, topic) == nil { return false }
                return true
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < .seconds(10), "rediscovered after \(elapsed)")
            #expect(bridge.isRunning)
        }
    }

    @Test func aBridgeWhoseOutputItsSubscriptionWouldReadRefusesToPublishIt() async throws {
        try await withBroker { broker in
            // The fleet under `owntracks/`: `owntracks/acme/van-7` would come back as a message
            // of vehicle "acme" on channel "van-7".
            let bridge = try await startBridge(
                ["--to", "owntracks", "--owntracks-user", "acme", "--prefix", "owntracks"],
                broker: broker, name: "bridge-loop")
            defer { bridge.send(SIGKILL) }
            let watcher = try await MosquittoCLI.subscribe(broker: broker, filter: "owntracks/acme/#", count: 1, timeoutSeconds: 3)
            let fix = fixJSON(seq: 1, lat: 1, at: time)
            try await MosquittoCLI.publish(broker: broker, topic: "owntracks/van-7/fix", message: fix)
            try await waitUntil("the refusal logged", timeout: .seconds(15)) {
                bridge.standardError.contains("would be read back by its own subscription")
            }
            #expect(await watcher.messages().isEmpty)
            #expect(bridge.isRunning)
        }
    }

    @Test func badBridgeArgumentsAreRefusedWithAReason() async throws {
        let directory = try makeTemporaryDirectory(prefix: "fleet-watch-bridge")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cases: [([String], String)] = [
            (["bridge", "--broker", "mqtt://x", "--to", "traccar"], "traccar"),
            (["bridge", "--broker", "mqtt://x"], "--to"),
            (["bridge", "--broker", "mqtt://x", "--to", "owntracks", "--owntracks-user", "a/b"], "invalid OwnTracks user"),
            (["bridge", "--broker", "mqtt://x", "--to", "homeassistant", "--discovery-prefix", "ha/#"], "invalid topic prefix"),
            (["bridge", "--broker", "mqtt://x", "--to", "owntracks", "--vehicle", "a b"], "invalid vehicle id"),
        ]
        for (arguments, reason) in cases {
            let process = try TestProcess(
                FleetWatchCLITests.executable, arguments, directory: directory, name: "bridge-args-\(UUID().uuidString.prefix(8))")
            let status = try await process.waitForExit(timeout: .seconds(30))
            #expect(status != 0, "\(arguments)")
            #expect(process.standardError.contains(reason), "\(arguments): \(process.standardError)")
        }
    }
}

/// FleetcastTestSupport's ``waitUntil(_:timeout:interval:_:)`` for a condition that asks the
/// broker (a subscription per check): every 100 ms, bounded by 15 s unless told.
func waitUntilAsync(_ what: String, timeout: Duration = .seconds(15), _ condition: () async throws -> Bool) async throws {
    try await waitUntil(what, timeout: timeout, interval: .milliseconds(100), condition)
}
