import FleetCore
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import MQTTCore
import Testing

/// Home Assistant's MQTT device tracker, as its documentation defines it:
/// https://www.home-assistant.io/integrations/device_tracker.mqtt/ (source:
/// github.com/home-assistant/home-assistant.io, source/_integrations/device_tracker.mqtt.markdown).
/// From that page: discovery topic `<discovery_prefix>/device_tracker/[<node_id>/]<object_id>/config`;
/// `json_attributes_topic` whose JSON "include[s] `longitude`, `latitude` and optional
/// `gps_accuracy`" sets the location, "then configuring `state_topic` is not required" (and a
/// state message would override that location); `availability_topic` with
/// `availability_template`, `payload_available` (default `online`), `payload_not_available`
/// (default `offline`); `device` with `identifiers`, `name`, `manufacturer`, `model`,
/// `sw_version` ("At least one of identifiers or connections must be present"); `unique_id`;
/// `source_type` one of `gps`, `router`, `bluetooth`, `bluetooth_le`.
/// Object ids: Home Assistant's discovery matches `[a-zA-Z0-9_-]+` (homeassistant/components/mqtt/discovery.py,
/// TOPIC_MATCHER), so a `.` in a vehicle id cannot be part of one.
/// `"name": null`: "Can be set to `null` if only the device name is relevant" (MQTT entity docs).
/// Units of speed, altitude, course, vertical accuracy: as Home Assistant's own mobile app sends
/// them, https://developers.home-assistant.io/docs/api/native-app-integration/sending-data/
/// ("Update device location": `speed` m/s, `altitude` m, `course` degrees from north,
/// `vertical_accuracy` m, `gps_accuracy` m).
/// Removing a device: "publish an empty (retained) string payload to the discovery topic"
/// (https://www.home-assistant.io/integrations/mqtt/, MQTT discovery) — see the README.
@Suite struct HomeAssistantTranslatorTests {
    let van = VehicleID("van-7")!
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5, millisecond: 250)!

    func fix(track: Double? = nil, eph: Double? = 4.56, at time: UTCTimestamp? = nil) -> Fix {
        Fix(
            time: time ?? self.time, latitude: 48.123456789, longitude: -3.25, altitudeHAE: 170.2, altitudeMSL: 121.64,
            speed: 10, track: track, mode: .threeD, satellitesUsed: 9, eph: eph, epv: 7.44)
    }

    /// The discovery topics of van-7 without zones: the tracker, the speed and course sensors.
    let configTopics = [
        "homeassistant/device_tracker/van-7/config", "homeassistant/sensor/van-7/speed/config",
        "homeassistant/sensor/van-7/course/config",
    ]

    func translator(discoveryPrefix: String = "homeassistant") throws -> HomeAssistantTranslator {
        HomeAssistantTranslator(options: try .init(discoveryPrefix: discoveryPrefix))
    }

    @Test func aVehicleIsAnnouncedOnceWithARetainedDiscoveryConfigAsTheDocsDescribe() throws {
        var t = try translator()
        let first = t.messages(for: .fix(van, seq: 1, fix()))
        #expect(first.map(\.topic) == configTopics + ["fleetcast/homeassistant/van-7/attributes"])
        #expect(first.allSatisfy { $0.retain && $0.qos == .atLeastOnce })
        #expect(t.messages(for: .fix(van, seq: 2, fix())).map(\.topic) == ["fleetcast/homeassistant/van-7/attributes"])

        let config = try jsonObject(first[0])
        #expect(config["unique_id"] as? String == "fleetcast_van-7")
        #expect(config["name"] is NSNull)
        #expect(config["json_attributes_topic"] as? String == "fleetcast/homeassistant/van-7/attributes")
        #expect(config["state_topic"] == nil)  // it would override the attributes' location
        #expect(config["source_type"] as? String == "gps")
        let device = try #require(config["device"] as? [String: Any])
        #expect(device["identifiers"] as? [String] == ["fleetcast_van-7"])
        #expect(device["name"] as? String == "van-7")
        #expect(device["manufacturer"] as? String == "Fleetcast")
        #expect(device["model"] as? String == "Fleetcast")
        #expect(device["sw_version"] == nil)  // not known before a status names it
    }

    @Test func availabilityFollowsTheVehiclesOwnStatusTopic() throws {
        var t = try translator()
        let config = try jsonObject(try #require(t.messages(for: .fix(van, seq: 1, fix())).first))
        #expect(config["availability_topic"] as? String == "fleet/van-7/status")
        #expect(
            config["availability_template"] as? String
                == "{{ value_json.state if value_json is defined and value_json.state is defined else 'offline' }}")
        // What the template yields from the agent's status payloads, compared with the payloads.
        for state in [VehicleStatus.State.online, .offline] {
            let status = try jsonObject(String(decoding: FleetPayload.encode(VehicleStatus(vehicle: van, state: state)), as: UTF8.self))
            let expected = state == .online ? config["payload_available"] : config["payload_not_available"]
            #expect(status["state"] as? String == expected as? String)
        }
        #expect(config["payload_available"] as? String == "online")
        #expect(config["payload_not_available"] as? String == "offline")

        let other = HomeAssistantTranslator(options: try .init(fleetTopics: try FleetTopics(prefix: "acme/fleet")))
        var o = other
        let otherConfig = try jsonObject(try #require(o.messages(for: .status(VehicleStatus(vehicle: van, state: .offline))).first))
        #expect(otherConfig["availability_topic"] as? String == "acme/fleet/van-7/status")
    }

    @Test func attributesCarryTheLocationAndTheMobileAppsUnits() throws {
        var t = try translator()
        let messages = t.messages(for: .fix(van, seq: 1, fix(track: 271.64)))
        let a = try jsonObject(messages[3])
        #expect(a["latitude"] as? Double == 48.1234568)
        #expect(a["longitude"] as? Double == -3.25)
        #expect(a["gps_accuracy"] as? Double == 4.6)  // eph, m
        #expect(a["altitude"] as? Double == 121.6)  // altMSL, m
        #expect(a["vertical_accuracy"] as? Double == 7.4)  // epv, m
        #expect(a["speed"] as? Double == 10)  // m/s, as the fix: not km/h
        #expect(a["course"] as? Double == 271.6)  // degrees true
        #expect(a["source_type"] as? String == "gps")
        #expect(a["time"] as? String == "2026-01-02T03:04:05.250Z")
        #expect(a["satellites"] as? Int == 9)
        #expect(a["vehicle"] as? String == "van-7")

        let unknown = try jsonObject(try #require(t.messages(for: .fix(van, seq: 2, fix(eph: nil))).last))
        #expect(unknown["gps_accuracy"] == nil && unknown["course"] == nil)
    }

    @Test func aHeadingGivesAFixWithoutTrackItsCourseAndRepublishesOnlyOnAChange() throws {
        var t = try translator()
        _ = t.messages(for: .fix(van, seq: 1, fix()))
        let heading = Heading(time: time, trueHeading: 45.04, source: .hdt)
        let update = t.messages(for: .heading(van, seq: 2, heading))
        #expect(update.map(\.topic) == ["fleetcast/homeassistant/van-7/attributes"])
        let a = try jsonObject(try #require(update.first))
        #expect(a["course"] as? Double == 45 && a["latitude"] as? Double == 48.1234568)
        #expect(t.messages(for: .heading(van, seq: 3, heading)).isEmpty)  // same course

        _ = t.messages(for: .fix(van, seq: 4, fix(track: 90)))
        #expect(t.messages(for: .heading(van, seq: 5, Heading(time: time, trueHeading: 10, source: .hdt))).isEmpty)

        // A heading 11 s away from the fix is not its course.
        var u = try translator()
        _ = u.messages(for: .fix(van, seq: 1, fix()))
        let later = UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + 11_000)
        #expect(u.messages(for: .heading(van, seq: 2, Heading(time: later, trueHeading: 10, source: .hdt))).isEmpty)
    }

    /// The `sw_version` of a config message; `nil` when left out.
    func swVersion(_ message: MQTTMessage) throws -> String? {
        let device = try #require(try jsonObject(message)["device"] as? [String: Any])
        return device["sw_version"] as? String
    }

    @Test func theAgentVersionFromTheStatusBecomesSwVersionWhenValid() throws {
        var t = try translator()
        let online = VehicleStatus(vehicle: van, state: .online, agentVersion: "0.3.0-rc.1+deb12_amd64")
        let first = t.messages(for: .status(online), at: .seconds(0))
        #expect(first.map(\.topic) == configTopics)
        #expect(try swVersion(first[0]) == "0.3.0-rc.1+deb12_amd64")
        #expect(t.messages(for: .status(online), at: .seconds(100)).isEmpty)
        #expect(t.messages(for: .status(VehicleStatus(vehicle: van, state: .offline)), at: .seconds(200)).isEmpty)  // no version: kept
        let upgraded = t.messages(for: .status(VehicleStatus(vehicle: van, state: .online, agentVersion: "0.4.0")), at: .seconds(300))
        #expect(try swVersion(try #require(upgraded.first)) == "0.4.0")

        // Not 1 to 32 characters of [A-Za-z0-9._+-]: left out, never the sender's text.
        for bad in ["", "0.3.0 \"beta\"", "0.3.0\n", "<b>0.3</b>", "0.3.0é", String(repeating: "9", count: 33)] {
            var u = try translator()
            let config = try #require(u.messages(for: .status(VehicleStatus(vehicle: van, state: .online, agentVersion: bad))).first)
            #expect(try swVersion(config) == nil, "\(bad)")
            #expect(HomeAssistantTranslator.validVersion(bad) == nil)
        }
        #expect(HomeAssistantTranslator.validVersion(String(repeating: "9", count: 32)) != nil)
    }

    @Test func aSenderChangingItsVersionOnEveryStatusGetsOneConfigAMinute() throws {
        var t = try translator()
        var configs: [(at: Duration, version: String?)] = []
        // 500 statuses, 10 a second (50 s), each with another `agent`; the first 200 characters long.
        for n in 0..<500 {
            let version = n == 0 ? String(repeating: "x", count: 200) : "1.0.\(n)"
            let now = Duration.milliseconds(100 * n)
            for message in t.messages(for: .status(VehicleStatus(vehicle: van, state: .online, agentVersion: version)), at: now)
            where message.topic == configTopics[0] {
                configs.append((now, try swVersion(message)))
            }
        }
        // The first (its version not valid: left out), the first valid version at once (a fix may
        // come before the status naming it), then nothing within the minute.
        #expect(configs.map(\.at) == [.zero, .milliseconds(100)], "\(configs)")
        #expect(configs.map(\.version) == [nil, "1.0.1"])
        // A change within the minute goes out with the vehicle's first event after it: here a
        // fix, 60 s after the last config, with the version of that moment.
        let attributesOnly = t.messages(for: .fix(van, seq: 1, fix()), at: .milliseconds(60_099)).map(\.topic)
        #expect(attributesOnly == ["fleetcast/homeassistant/van-7/attributes"])
        let late = t.messages(for: .fix(van, seq: 2, fix()), at: .milliseconds(60_100))
        #expect(late.map(\.topic) == configTopics + ["fleetcast/homeassistant/van-7/attributes"])
        #expect(try swVersion(late[0]) == "1.0.499")
        // Nothing changed since: no config, however long after.
        #expect(t.messages(for: .fix(van, seq: 3, fix()), at: .seconds(600)).count == 1)
    }

    @Test func anOlderFixIsNotBridgedAndAHeadingsCourseComesAfterItsFix() throws {
        var t = try translator()
        let later = UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + 1000)
        let outputs = t.outputs(for: .fix(van, seq: 5, fix(at: later)), at: .zero)
        #expect(outputs.last?.position == .init(time: later, seq: 5))
        #expect(t.outputs(for: .fix(van, seq: 6, fix()), at: .zero).isEmpty, "a second earlier")
        #expect(t.outputs(for: .fix(van, seq: 4, fix(at: later)), at: .zero).isEmpty, "the same time, an earlier seq")
        let course = t.outputs(for: .heading(van, seq: 7, Heading(time: later, trueHeading: 90, source: .hdt)), at: .zero)
        let position = try #require(course.first?.position)
        #expect(position == .init(time: later, seq: 7) && !position.isOlder(than: .init(time: later, seq: 5)))
        #expect(try jsonObject(try #require(course.first?.message))["course"] as? Double == 90)
    }

    @Test func theDiscoveryPrefixIsConfigurableAndDotsLeaveTheObjectID() throws {
        var t = try translator(discoveryPrefix: "ha/discovery")
        let dotted = VehicleID("van.7")!
        let config = try #require(t.messages(for: .fix(dotted, seq: 1, fix())).first)
        #expect(config.topic == "ha/discovery/device_tracker/van_2e7/config")
        #expect(try jsonObject(config)["unique_id"] as? String == "fleetcast_van.7")
        // One to one: ids that differ only by `.` and `_` are two entities.
        let ids = ["van.7", "van_7", "van_2e7", "van-7", "v._", "v_.", "v__2e"]
        #expect(Set(ids.map { HomeAssistantTranslator.objectID(VehicleID($0)!) }).count == ids.count)
        for id in ids {
            #expect(
                HomeAssistantTranslator.objectID(VehicleID(id)!).allSatisfy {
                    $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-")
                })
        }
        for bad in ["", "a/+/b", "#", "a//b", "$SYS"] {
            #expect(throws: FleetTopics.InvalidPrefix.self, "\(bad)") { try HomeAssistantTranslator.Options(discoveryPrefix: bad) }
            #expect(throws: FleetTopics.InvalidPrefix.self, "\(bad)") { try HomeAssistantTranslator.Options(attributesPrefix: bad) }
        }
    }

    @Test func speedAndCourseAreSensorsOfTheVehiclesDeviceInKmhAndDegrees() throws {
        var t = try translator()
        let configs = try t.messages(for: .fix(van, seq: 1, fix(track: 90))).prefix(3).map(jsonObject)
        let (tracker, speed, course) = (configs[0], configs[1], configs[2])
        #expect(speed["unique_id"] as? String == "fleetcast_van-7_speed")
        #expect(course["unique_id"] as? String == "fleetcast_van-7_course")
        #expect(speed["name"] as? String == "Speed" && course["name"] as? String == "Course")
        // Both read the retained attributes message: m/s × 3.6, and the course as it is.
        for sensor in [speed, course] {
            #expect(sensor["state_topic"] as? String == "fleetcast/homeassistant/van-7/attributes")
            #expect(sensor["availability_topic"] as? String == tracker["availability_topic"] as? String)
            #expect(sensor["availability_template"] as? String == tracker["availability_template"] as? String)
            let device = try #require(sensor["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["fleetcast_van-7"], "one device per vehicle")
        }
        #expect(
            speed["value_template"] as? String
                == "{{ (value_json.speed * 3.6) | round(1) if value_json is defined and value_json.speed is defined else None }}")
        #expect(speed["device_class"] as? String == "speed" && speed["unit_of_measurement"] as? String == "km/h")
        #expect(speed["state_class"] as? String == "measurement")
        #expect(
            course["value_template"] as? String
                == "{{ value_json.course if value_json is defined and value_json.course is defined else None }}")
        #expect(course["unit_of_measurement"] as? String == "°" && course["device_class"] == nil)
        // No zone event entity without zones.
        #expect(!t.entities.contains(.zone))
        // A vehicle id with `.` or `_`: its own node id, one to one.
        #expect(t.configTopic(VehicleID("van.7")!, .speed) == "homeassistant/sensor/van_2e7/speed/config")
    }

    @Test func aVehicleThatComesBackAfterGoingOfflineIsDiscoveredAgain() throws {
        var t = try translator()
        func configs(_ event: FleetEvent, at seconds: Double) -> [String] {
            t.messages(for: event, at: .milliseconds(Int64((seconds * 1000).rounded()))).map(\.topic).filter {
                $0.hasPrefix("homeassistant/")
            }
        }
        let online = FleetEvent.status(VehicleStatus(vehicle: van, state: .online))
        let offline = FleetEvent.status(VehicleStatus(vehicle: van, state: .offline))
        #expect(configs(online, at: 0) == configTopics)
        #expect(configs(.fix(van, seq: 1, fix()), at: 1).isEmpty)
        #expect(configs(online, at: 30).isEmpty, "online again without offline between: nothing new")
        // Stopped (its configs then cleared from Home Assistant), and started again.
        #expect(configs(offline, at: 40).isEmpty)
        #expect(configs(offline, at: 50).isEmpty, "a second offline is not a return")
        #expect(configs(online, at: 60) == configTopics, "back: discovered again at once")
        #expect(configs(.fix(van, seq: 2, fix()), at: 61).isEmpty)

        // In a share group another bridge may get the online: a fix after offline is a return too.
        #expect(configs(offline, at: 100).isEmpty)
        #expect(configs(.fix(van, seq: 3, fix()), at: 110) == configTopics)

        // Flapping: at most once per 5 s, the one held back with the first event after.
        var announced: [Int] = []
        for n in 0..<100 {
            if !configs(n % 2 == 0 ? offline : online, at: 200 + Double(n) / 10).isEmpty { announced.append(n) }
        }
        #expect(announced == [1, 51], "the first online, then 5 s after it")
        #expect(configs(.fix(van, seq: 4, fix()), at: 215) == configTopics, "the return held back since 205.1 s")
        #expect(configs(.fix(van, seq: 5, fix()), at: 216).isEmpty)
    }

    @Test func everyTemplateReadsAClearedTopicWithoutAnError() throws {
        // Home Assistant renders a template with `value_json` only when the payload is JSON; an
        // empty retained message (a topic cleared) leaves it undefined, and reading a field of
        // it then logs "Template variable error". Each template tests for it first.
        var t = try translator()
        let configs = try t.messages(for: .fix(van, seq: 1, fix())).prefix(3).map(jsonObject)
        #expect(
            configs[0]["json_attributes_template"] as? String
                == "{{ value if value_json is defined and value_json is mapping else '{}' }}")
        for config in configs {
            for key in ["availability_template", "value_template", "json_attributes_template"] {
                guard let template = config[key] as? String else { continue }
                #expect(template.hasPrefix("{{ ") && template.contains("value_json is defined"), "\(key): \(template)")
            }
        }
    }

    @Test func backlogAndMalformedMessagesAreNotBridged() throws {
        var t = try translator()
        #expect(t.messages(for: .backlog(.fix(DecodedFix(vehicle: van, seq: 1, fix: fix())))).isEmpty)
        #expect(t.messages(for: .malformed(topic: "fleet/van-7/fix", reason: "bad")).isEmpty)
        #expect(t.vehicleCount == 0)
    }
}
