import FleetOperations
import FleetProtocol
import GNSS
import MQTTCore

/// Puts the fleet on Home Assistant's map through MQTT discovery: each vehicle becomes a device
/// with a `device_tracker`, a speed sensor, a course sensor and, with zones, a zone event
/// entity, with no YAML.
///
/// For each vehicle, when it is first seen, and again when it comes back (below):
/// - `{discoveryPrefix}/device_tracker/{object id}/config`, retained: the tracker. It names the
///   vehicle's attributes topic as `json_attributes_topic` (no `state_topic`: Home Assistant
///   then sets the tracker's location, and its zone, from the attributes' `latitude`,
///   `longitude` and `gps_accuracy`).
/// - `{discoveryPrefix}/sensor/{object id}/speed/config` and `…/course/config`, retained: two
///   sensors reading the same attributes message, speed in km/h (device class `speed`, state
///   class `measurement`; the attributes' m/s × 3.6) and course in degrees from true north.
/// - `{discoveryPrefix}/event/{object id}/zone/config`, retained, when the bridge has zones
///   (``BridgeZones``) or reads the recorder's zone events (``Options/recorderZoneEvents``): an
///   event entity with the event types `enter` and `exit`.
///
/// Every entity's availability follows the fleet's own retained `status` topic
/// (`availability_template` ``availabilityTemplate``), so that the vehicle is available exactly
/// while its agent says `online`, also when this bridge is down, since the agent's last will
/// says `offline` there itself. Every template reads a payload that is not the JSON it expects
/// (a retained topic cleared with an empty message) as unknown or offline, so that it never
/// makes Home Assistant log a template error. The object id is the vehicle id with `.` and `_`
/// escaped (``objectID(_:)``: Home Assistant's discovery topics allow `[a-zA-Z0-9_-]` only). The
/// configs' only part that can change is the agent's version (`sw_version`, from the status's
/// `agent`, kept only when it is 1 to 32 characters of `[A-Za-z0-9._+-]`,
/// ``validVersion(_:)``; otherwise left out). The first version known is published at once (a
/// fix may come before the status that names it); a later change at most once per
/// ``discoveryInterval`` (1 min) per vehicle: a change within the minute goes out with the
/// vehicle's first event (fix, heading or status) after the minute, carrying the version of that
/// moment. A sender changing its `agent` on every status thus costs a set of retained configs a
/// minute, not one per status.
///
/// A vehicle comes back when, after a status that said `offline`, the bridge takes any other
/// event of it (its `online` status, a fix, a heading): the configs go out again with that
/// event, so that a vehicle whose configs were cleared (removed from Home Assistant, as
/// docs/fleet-watch.md says) is discovered again as soon as its agent runs again, without a
/// bridge restart. Home Assistant ignores a config that did not change, so a vehicle that was
/// only away costs a few retained messages. At most once per ``rediscoveryInterval`` (5 s): a
/// vehicle flapping between `online` and `offline` is announced again with its first event
/// after that.
///
/// For each live fix (and each heading that changes the course of a fix without a track):
/// - `{attributesPrefix}/{vehicle}/attributes`, retained: `latitude`, `longitude` (degrees),
///   `gps_accuracy` (m, the fix's horizontal error estimate `eph`, left out when unknown),
///   `altitude` (m above mean sea level), `vertical_accuracy` (m, `epv`), `speed` (m/s, as
///   Home Assistant's own mobile app reports it), `course` (degrees from true north: the
///   track, else the vehicle's true heading), `source_type` (`gps`), `time` (the fix's UTC
///   time, ISO 8601), `satellites`, `vehicle`. Unknown values are left out. With zones
///   (``BridgeZones``): `zones`, the fleet's zones the vehicle is in now (the file's names, in
///   its order; `[]` when none), beside Home Assistant's own zones, which it sets from the
///   position.
/// - With zones, and unless the event entity reads the recorder's events: each zone enter and
///   exit the fix makes, on `{attributesPrefix}/{vehicle}/zone`, QoS 1, not retained (Home
///   Assistant drops a retained event), each one published (never replaced by a newer one):
///   `event_type` (`enter` or `exit`), `zone` (the zone's name), `time`, `latitude`,
///   `longitude` (the fix that decided it), `vehicle`.
///
/// Backlog entries are history, not where the vehicle is: they are not bridged.
public struct HomeAssistantTranslator: FleetBridgeTranslator {
    /// Where the messages go.
    public struct Options: Sendable {
        /// Home Assistant's discovery prefix (its MQTT integration's setting; default
        /// `homeassistant`).
        public var discoveryPrefix: String
        /// The prefix of the topics this bridge publishes (default `fleetcast/homeassistant`):
        /// `{attributesPrefix}/{vehicle}/attributes` and `…/zone`.
        public var attributesPrefix: String
        /// The fleet's topic layout, for the `status` topics availability follows.
        public var fleetTopics: FleetTopics
        /// The prefix of the recorder's zone events (`fleet-watch record --zones`, published on
        /// `{prefix}/{vehicle}`; the recorder's default is `fleetcast/zones`), for the zone event
        /// entity to read them there, straight from the recorder, instead of the bridge's own;
        /// `nil` (the default): the bridge's own, with zones.
        public var recorderZoneEvents: String?

        /// Validates every prefix as a topic prefix (non-empty levels, no wildcards).
        public init(
            discoveryPrefix: String = "homeassistant", attributesPrefix: String = "fleetcast/homeassistant",
            fleetTopics: FleetTopics = .default, recorderZoneEvents: String? = nil
        ) throws(FleetTopics.InvalidPrefix) {
            self.discoveryPrefix = try FleetTopics(prefix: discoveryPrefix).prefix
            self.attributesPrefix = try FleetTopics(prefix: attributesPrefix).prefix
            self.fleetTopics = fleetTopics
            self.recorderZoneEvents = try recorderZoneEvents.map { prefix throws(FleetTopics.InvalidPrefix) in
                try FleetTopics(prefix: prefix).prefix
            }
        }
    }

    /// One of a vehicle's entities in Home Assistant.
    public enum Entity: String, Sendable, CaseIterable {
        /// The `device_tracker`: the vehicle on the map.
        case tracker
        /// The speed sensor, km/h.
        case speed
        /// The course sensor, degrees from true north.
        case course
        /// The zone event entity: `enter` and `exit`.
        case zone
    }

    /// What has been published for one vehicle.
    package struct Vehicle: Sendable {
        var track = BridgeVehicleTrack()
        /// When the discovery configs last went out (``outputs(for:at:)``'s clock), and with
        /// which `sw_version`; `nil` before the first.
        var announcedAt: Duration?
        var announcedVersion: String?
        /// Whether a config with a version went out (the first one is not held back).
        var announcedAnyVersion = false
        /// The latest valid `agent` version a status named; `nil` when unknown or not valid.
        var agentVersion: String?
        /// Whether the vehicle's latest status said `offline` and nothing of it came since.
        var away = false
        /// Whether the vehicle came back since its last configs (a status `offline`, then any
        /// other event): they go out again.
        var cameBack = false
    }

    /// The shortest time between two discovery configs of one vehicle for a new version: 1 min.
    public static let discoveryInterval: Duration = .seconds(60)
    /// The shortest time between two discovery configs of one vehicle that came back: 5 s.
    public static let rediscoveryInterval: Duration = .seconds(5)
    /// The longest `agent` version published as `sw_version`, in characters: 32.
    public static let maximumVersionLength = 32
    /// The zone event entity's event types (`event_types`): the zone events' kinds.
    public static let zoneEventTypes = ["enter", "exit"]
    /// Every entity's `availability_template`: the status's `state`, and `offline` when the
    /// status topic holds anything else (an empty payload when it was cleared): never a
    /// template error in Home Assistant's log.
    public static let availabilityTemplate =
        "{{ value_json.state if value_json is defined and value_json.state is defined else 'offline' }}"

    /// The tracker's `json_attributes_template`: the attributes message as it is, and `{}` for
    /// anything that is not a JSON object (an empty payload when the topic was cleared).
    public static let attributesTemplate = "{{ value if value_json is defined and value_json is mapping else '{}' }}"

    /// Where the messages go.
    public let options: Options
    private(set) var vehicles: [VehicleID: Vehicle] = [:]

    /// A translator with no vehicle seen yet.
    public init(options: Options, zones: BridgeZones? = nil) {
        self.options = options
        self.zones = zones
    }

    private var zones: BridgeZones?

    /// The number of vehicles seen so far (the translator's memory grows with it only).
    public var vehicleCount: Int { vehicles.count }

    /// The entities each vehicle has: the tracker and both sensors, and the zone event entity
    /// with zones or the recorder's zone events.
    public var entities: [Entity] {
        zones != nil || options.recorderZoneEvents != nil ? Entity.allCases : [.tracker, .speed, .course]
    }

    /// `{discoveryPrefix}/device_tracker/{object id}/config`.
    public func configTopic(_ vehicle: VehicleID) -> String { configTopic(vehicle, .tracker) }

    /// The discovery topic of one of `vehicle`'s entities:
    /// `{discoveryPrefix}/device_tracker/{object id}/config`,
    /// `{discoveryPrefix}/sensor/{object id}/speed/config`, `…/sensor/{object id}/course/config`,
    /// `{discoveryPrefix}/event/{object id}/zone/config`.
    public func configTopic(_ vehicle: VehicleID, _ entity: Entity) -> String {
        let id = Self.objectID(vehicle)
        return switch entity {
        case .tracker: "\(options.discoveryPrefix)/device_tracker/\(id)/config"
        case .speed, .course: "\(options.discoveryPrefix)/sensor/\(id)/\(entity.rawValue)/config"
        case .zone: "\(options.discoveryPrefix)/event/\(id)/zone/config"
        }
    }

    /// `{attributesPrefix}/{vehicle}/attributes`.
    public func attributesTopic(_ vehicle: VehicleID) -> String {
        "\(options.attributesPrefix)/\(vehicle.rawValue)/attributes"
    }

    /// Where the zone event entity reads: `{recorderZoneEvents}/{vehicle}`, or the bridge's own
    /// `{attributesPrefix}/{vehicle}/zone`.
    public func zoneEventsTopic(_ vehicle: VehicleID) -> String {
        if let recorder = options.recorderZoneEvents { return "\(recorder)/\(vehicle.rawValue)" }
        return "\(options.attributesPrefix)/\(vehicle.rawValue)/zone"
    }

    /// The vehicle id as a discovery object id, one to one: Home Assistant allows
    /// `[a-zA-Z0-9_-]`, so `.` is written `_2e` and `_` itself `_5f` (the characters' code in
    /// hex, as percent-encoding would); an id with neither stays as it is (`van-7`). Replacing
    /// `.` by `_` alone would give `van.7` and `van_7` one entity.
    public static func objectID(_ vehicle: VehicleID) -> String {
        var id = ""
        id.reserveCapacity(vehicle.rawValue.utf8.count)
        for character in vehicle.rawValue {
            switch character {
            case ".": id += "_2e"
            case "_": id += "_5f"
            default: id.append(character)
            }
        }
        return id
    }

    /// The tracker's and the device's unique id: `fleetcast_{vehicle}`.
    public static func uniqueID(_ vehicle: VehicleID) -> String { "fleetcast_\(vehicle.rawValue)" }

    /// An entity's unique id: ``uniqueID(_:)`` for the tracker, with `_speed`, `_course` or
    /// `_zone` after it for the others (another domain, and a suffix no vehicle id's entity of
    /// the same kind can end in otherwise).
    public static func uniqueID(_ vehicle: VehicleID, _ entity: Entity) -> String {
        entity == .tracker ? uniqueID(vehicle) : "\(uniqueID(vehicle))_\(entity.rawValue)"
    }

    /// `version` when it can be shown as `sw_version`: 1 to ``maximumVersionLength``
    /// characters of `[A-Za-z0-9._+-]` (`0.3.0`, `1.2.0-rc.1+deb12`); `nil` otherwise.
    public static func validVersion(_ version: String) -> String? {
        let bytes = version.utf8
        guard (1...maximumVersionLength).contains(bytes.count),
            bytes.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "+"),
                    UInt8(ascii: "-"):
                    true
                default: false
                }
            })
        else { return nil }
        return version
    }

    public mutating func outputs(for event: FleetEvent, at now: Duration) -> [FleetBridgeOutput] {
        switch event {
        case .fix(let id, let seq, let fix):
            var vehicle = vehicles[id] ?? Vehicle()
            var out = announce(id, &vehicle, at: now)
            // A fix older than the one bridged (a late or repeated message) would move the
            // retained position back.
            if vehicle.track.record(fix, seq: seq) {
                let zoneEvents = zones?.events(id, fix) ?? []
                out.append(attributes(id, fix, course: vehicle.track.course(of: fix), seq: seq))
                // The recorder's own events, when the entity reads those: not these twice.
                if options.recorderZoneEvents == nil {
                    for zoneEvent in zoneEvents { out.append(self.zoneEvent(id, zoneEvent)) }
                }
            }
            vehicles[id] = vehicle
            return out
        case .heading(let id, let seq, let heading):
            var vehicle = vehicles[id] ?? Vehicle()
            var out = announce(id, &vehicle, at: now)
            if let fix = vehicle.track.fix {
                let before = vehicle.track.course(of: fix)
                vehicle.track.record(heading)
                let after = vehicle.track.course(of: fix)
                // The same fix with a new course: newer than the fix's own message.
                if after != before { out.append(attributes(id, fix, course: after, seq: seq)) }
            } else {
                vehicle.track.record(heading)
            }
            vehicles[id] = vehicle
            return out
        case .status(let status):
            var vehicle = vehicles[status.vehicle] ?? Vehicle()
            if let version = status.agentVersion { vehicle.agentVersion = Self.validVersion(version) }
            let out = announce(status.vehicle, &vehicle, at: now, arriving: status.state != .offline)
            if status.state == .offline { vehicle.away = true }
            vehicles[status.vehicle] = vehicle
            return out
        case .backlog, .malformed:
            return []
        }
    }

    /// The discovery configs when the vehicle is new, when it came back (at most once per
    /// ``rediscoveryInterval``), when its first agent version is known, or when its version
    /// changed and the previous configs are at least ``discoveryInterval`` old. An event
    /// `arriving` (any but an `offline` status) ends the vehicle's being away: it came back.
    private func announce(
        _ id: VehicleID, _ vehicle: inout Vehicle, at now: Duration, arriving: Bool = true
    ) -> [FleetBridgeOutput] {
        if arriving, vehicle.away {
            vehicle.away = false
            vehicle.cameBack = true
        }
        if let announcedAt = vehicle.announcedAt {
            let elapsed = now - announcedAt
            let versionChanged = vehicle.announcedVersion != vehicle.agentVersion
            let firstVersion = versionChanged && !vehicle.announcedAnyVersion && vehicle.agentVersion != nil
            guard
                (vehicle.cameBack && elapsed >= Self.rediscoveryInterval) || firstVersion
                    || (versionChanged && elapsed >= Self.discoveryInterval)
            else { return [] }
        }
        vehicle.announcedAt = now
        vehicle.announcedVersion = vehicle.agentVersion
        vehicle.cameBack = false
        if vehicle.agentVersion != nil { vehicle.announcedAnyVersion = true }
        return entities.map { entity in
            let message = MQTTMessage(
                topic: configTopic(id, entity), payload: config(id, entity, swVersion: vehicle.agentVersion), qos: .atLeastOnce,
                retain: true)
            return FleetBridgeOutput(vehicle: id, message: message)
        }
    }

    /// The tracker's discovery config payload.
    package func config(_ id: VehicleID, swVersion: String?) -> [UInt8] { config(id, .tracker, swVersion: swVersion) }

    /// An entity's discovery config payload.
    package func config(_ id: VehicleID, _ entity: Entity, swVersion: String?) -> [UInt8] {
        var w = JSONWriter(capacity: 900)
        w.string("unique_id", Self.uniqueID(id, entity))
        switch entity {
        case .tracker:
            // null: the entity takes the device's name, so it shows as the vehicle id.
            w.null("name")
            w.string("json_attributes_topic", attributesTopic(id))
            // A cleared (empty) attributes topic is no attributes, not "Erroneous JSON".
            w.string("json_attributes_template", Self.attributesTemplate)
            w.string("source_type", "gps")
        case .speed:
            w.string("name", "Speed")
            w.string("state_topic", attributesTopic(id))
            // m/s × 3.6; unknown (HA's "None") when the fix had no speed or the topic was cleared.
            w.string(
                "value_template",
                "{{ (value_json.speed * 3.6) | round(1) if value_json is defined and value_json.speed is defined else None }}")
            w.string("device_class", "speed")
            w.string("state_class", "measurement")
            w.string("unit_of_measurement", "km/h")
            w.int("suggested_display_precision", 0)
        case .course:
            w.string("name", "Course")
            w.string("state_topic", attributesTopic(id))
            w.string(
                "value_template",
                "{{ value_json.course if value_json is defined and value_json.course is defined else None }}")
            w.string("unit_of_measurement", "°")
            w.string("icon", "mdi:compass-outline")
        case .zone:
            w.string("name", "Zone")
            w.string("state_topic", zoneEventsTopic(id))
            w.strings("event_types", Self.zoneEventTypes)
            if options.recorderZoneEvents != nil {
                // The recorder's payload (docs/operations.md): `event`, `zone`, `time`, `lat`, `lon`.
                w.string(
                    "value_template",
                    "{{ {'event_type': value_json.event, 'zone': value_json.zone, 'time': value_json.time, "
                        + "'latitude': value_json.lat, 'longitude': value_json.lon, 'vehicle': value_json.vehicle} | to_json }}")
            }
            w.string("icon", "mdi:map-marker-radius")
        }
        w.string("availability_topic", options.fleetTopics.status(id))
        w.string("availability_template", Self.availabilityTemplate)
        w.string("payload_available", VehicleStatus.State.online.rawValue)
        w.string("payload_not_available", VehicleStatus.State.offline.rawValue)
        w.int("qos", 1)
        w.object("device") { d in
            d.strings("identifiers", [Self.uniqueID(id)])
            d.string("name", id.rawValue)
            d.string("manufacturer", "Fleetcast")
            d.string("model", "Fleetcast")
            d.string("sw_version", swVersion)
        }
        return w.finish()
    }

    /// The attributes message of a fix, positioned by `seq` (the fix's, or the heading's that
    /// gave it its course).
    private func attributes(_ id: VehicleID, _ fix: Fix, course: Double?, seq: MessageNumber?) -> FleetBridgeOutput {
        var w = JSONWriter(capacity: 320)
        w.number("latitude", fix.latitude, decimals: 7)
        w.number("longitude", fix.longitude, decimals: 7)
        w.number("gps_accuracy", fix.eph, decimals: 1)
        w.number("altitude", fix.altitudeMSL, decimals: 1)
        w.number("vertical_accuracy", fix.epv, decimals: 1)
        w.number("speed", fix.speed, decimals: 2)
        w.number("course", course, decimals: 1)
        w.string("source_type", "gps")
        w.time("time", fix.time)
        w.int("satellites", fix.satellitesUsed)
        w.string("vehicle", id.rawValue)
        if let zones { w.strings("zones", zones.inside(id)) }
        let message = MQTTMessage(topic: attributesTopic(id), payload: w.finish(), qos: .atLeastOnce, retain: true)
        return FleetBridgeOutput(vehicle: id, message: message, position: .init(time: fix.time, seq: seq))
    }

    /// A zone enter or exit as the event entity's message: not retained, never replaced.
    private func zoneEvent(_ id: VehicleID, _ event: ZoneEvent) -> FleetBridgeOutput {
        var w = JSONWriter(capacity: 200)
        w.string("event_type", event.kind.rawValue)
        w.string("zone", event.zone)
        w.time("time", event.point.time)
        w.number("latitude", event.point.latitude, decimals: 7)
        w.number("longitude", event.point.longitude, decimals: 7)
        w.string("vehicle", id.rawValue)
        let message = MQTTMessage(topic: zoneEventsTopic(id), payload: w.finish(), qos: .atLeastOnce, retain: false)
        return FleetBridgeOutput(vehicle: id, message: message, coalesces: false)
    }
}
