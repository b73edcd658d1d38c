import FleetCore
import FleetOperations
import FleetProtocol
import FleetcastTestSupport
import Foundation
import GNSS
import MQTTCore
import Testing

/// The bridges with `--zones`: OwnTracks' region events and Home Assistant's `zones` attribute,
/// on the generated drive (issue 34), as OwnTracks' apps and Home Assistant would read them.
@Suite struct BridgeZonesTests {
    static let van = VehicleID("van-7")!

    static func zones() throws -> BridgeZones {
        BridgeZones(zones: try ZoneSet.parse(Array(GeneratedDrive.depotAndCustomerZones.utf8)))
    }

    /// The drive's fixes as the bridge receives them.
    static func events() -> [FleetEvent] {
        GeneratedDrive.threeLegs().samples.enumerated().map { index, sample in
            .fix(
                van, seq: MessageNumber(seq: UInt64(index + 1)),
                Fix(time: sample.time, latitude: sample.latitude, longitude: sample.longitude, speed: sample.speed, mode: .threeD, eph: 3))
        }
    }

    static func object(_ payload: [UInt8]) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any] ?? [:]
    }

    @Test("OwnTracks: enter and leave of Depot, then Customer, as _type transition on …/event, never coalesced")
    func ownTracksTransitions() throws {
        var translator = try OwnTracksTranslator(user: "fleet", zones: try Self.zones())
        let outputs = Self.events().flatMap { translator.outputs(for: $0, at: .zero) }
        let transitions = outputs.filter { $0.message.topic == "owntracks/fleet/van-7/event" }
        let objects = transitions.map { Self.object($0.message.payload) }
        #expect(
            objects.map { "\($0["event"] ?? "?") \($0["desc"] ?? "?")" } == [
                "enter Depot", "leave Depot", "enter Customer", "leave Customer",
            ])
        #expect(objects.allSatisfy { $0["_type"] as? String == "transition" && $0["t"] as? String == "c" && $0["tid"] as? String == "n7" })
        #expect(objects.allSatisfy { $0["tst"] is Int && $0["lat"] is Double && $0["lon"] is Double && $0["acc"] as? Int == 3 })
        // The same zone, the same waypoint number: an app pairs an enter with its leave.
        #expect(objects[0]["wtst"] as? Int == objects[1]["wtst"] as? Int)
        #expect(objects[0]["wtst"] as? Int != objects[2]["wtst"] as? Int)
        #expect(transitions.allSatisfy { !$0.coalesces && !$0.message.retain && $0.message.qos == .atLeastOnce })
        // Locations still go, one a fix, and coalesce as before.
        #expect(outputs.filter { $0.message.topic == "owntracks/fleet/van-7" }.count == 1_740)
    }

    @Test("OwnTracks without zones: no transition")
    func ownTracksWithoutZones() throws {
        var translator = try OwnTracksTranslator(user: "fleet")
        let outputs = Self.events().flatMap { translator.outputs(for: $0, at: .zero) }
        #expect(outputs.allSatisfy { !$0.message.topic.hasSuffix("/event") })
    }

    @Test("Home Assistant: the attributes say which of the fleet's zones the vehicle is in")
    func homeAssistantZones() throws {
        var translator = HomeAssistantTranslator(options: try .init(), zones: try Self.zones())
        let attributes = Self.events().flatMap { translator.outputs(for: $0, at: .zero) }
            .filter { $0.message.topic.hasSuffix("/attributes") }.map { Self.object($0.message.payload) }
        #expect(attributes.count == 1_740)
        // Seconds: the first leg ends at 300; stopped at the Depot to 720; at the Customer from
        // about 1,020 to 1,620.
        #expect(attributes[0]["zones"] as? [String] == [])
        #expect(attributes[500]["zones"] as? [String] == ["Depot"])
        #expect(attributes[900]["zones"] as? [String] == [])
        #expect(attributes[1_300]["zones"] as? [String] == ["Customer"])
        #expect(attributes[1_739]["zones"] as? [String] == [])
        var plain = HomeAssistantTranslator(options: try .init())
        let without = Self.events().prefix(1).flatMap { plain.outputs(for: $0, at: .zero) }.filter {
            $0.message.topic.hasSuffix("/attributes")
        }
        #expect(Self.object(without[0].message.payload)["zones"] == nil, "no zones attribute without --zones")
    }

    @Test("Home Assistant: zone enter and exit as the messages of an MQTT event entity, never coalesced")
    func homeAssistantZoneEvents() throws {
        var translator = HomeAssistantTranslator(options: try .init(), zones: try Self.zones())
        let outputs = Self.events().flatMap { translator.outputs(for: $0, at: .zero) }
        let config = try #require(outputs.first { $0.message.topic == "homeassistant/event/van-7/zone/config" })
        let entity = Self.object(config.message.payload)
        #expect(config.message.retain && entity["unique_id"] as? String == "fleetcast_van-7_zone")
        #expect(entity["state_topic"] as? String == "fleetcast/homeassistant/van-7/zone")
        #expect(entity["event_types"] as? [String] == ["enter", "exit"])
        #expect(entity["value_template"] == nil, "the payload is the event itself")
        #expect((entity["device"] as? [String: Any])?["identifiers"] as? [String] == ["fleetcast_van-7"])

        let events = outputs.filter { $0.message.topic == "fleetcast/homeassistant/van-7/zone" }
        let objects = events.map { Self.object($0.message.payload) }
        // Home Assistant's event platform: `event_type`, one of `event_types`; the rest become
        // the event's attributes. Not retained: it drops a replayed retained event.
        #expect(
            objects.map { "\($0["event_type"] ?? "?") \($0["zone"] ?? "?")" } == [
                "enter Depot", "exit Depot", "enter Customer", "exit Customer",
            ])
        #expect(objects.allSatisfy { $0["time"] is String && $0["latitude"] is Double && $0["longitude"] is Double })
        #expect(objects.allSatisfy { $0["vehicle"] as? String == "van-7" })
        #expect(events.allSatisfy { !$0.coalesces && !$0.message.retain && $0.message.qos == .atLeastOnce })

        // Without zones: no event entity, no zone message.
        var plain = HomeAssistantTranslator(options: try .init())
        let without = Self.events().flatMap { plain.outputs(for: $0, at: .zero) }
        #expect(without.allSatisfy { !$0.message.topic.contains("/event/") && !$0.message.topic.hasSuffix("/zone") })
    }

    @Test("Home Assistant: the event entity can read the recorder's zone events instead of the bridge's")
    func homeAssistantRecorderZoneEvents() throws {
        // With or without the bridge's own zones (then only its `zones` attribute).
        for zones in [nil, try Self.zones()] {
            var translator = HomeAssistantTranslator(options: try .init(recorderZoneEvents: "fleetcast/zones"), zones: zones)
            let outputs = Self.events().flatMap { translator.outputs(for: $0, at: .zero) }
            let config = try #require(outputs.first { $0.message.topic == "homeassistant/event/van-7/zone/config" })
            let entity = Self.object(config.message.payload)
            #expect(entity["state_topic"] as? String == "fleetcast/zones/van-7")
            // The recorder's payload (docs/operations.md) has `event`, not `event_type`.
            let template = try #require(entity["value_template"] as? String)
            #expect(template.contains("'event_type': value_json.event") && template.contains("'zone': value_json.zone"))
            #expect(template.hasSuffix("| to_json }}"))
            #expect(!outputs.contains { $0.message.topic.hasPrefix("fleetcast/zones/") }, "the recorder publishes them, not the bridge")
        }
        #expect(throws: FleetTopics.InvalidPrefix.self) { try HomeAssistantTranslator.Options(recorderZoneEvents: "zones/#") }
    }
}
