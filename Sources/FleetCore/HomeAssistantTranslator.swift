import FleetProtocol
import GNSS
import MQTTCore

/// Puts the fleet on Home Assistant's map through MQTT discovery: each vehicle becomes a
/// `device_tracker` with no YAML.
///
/// For each vehicle, when it is first seen:
/// - `{discoveryPrefix}/device_tracker/{object id}/config`, retained: the discovery config. It
///   names the vehicle's attributes topic as `json_attributes_topic` (no `state_topic`: Home
///   Assistant then sets the tracker's location, and its zone, from the attributes'
///   `latitude`, `longitude` and `gps_accuracy`), and the fleet's own retained `status` topic
///   as `availability_topic`, with `availability_template` `{{ value_json.state }}`, so that
///   the vehicle is available exactly while its agent says `online` — also when this bridge
///   is down, since the agent's last will says `offline` there itself. The object id is the
///   vehicle id with `.` and `_` escaped (``objectID(_:)``: Home Assistant's discovery topics
///   allow `[a-zA-Z0-9_-]` only). Its only part that can change is the agent's version
///   (`sw_version`, from the status's `agent`, kept only when it is 1 to 32 characters of
///   `[A-Za-z0-9._+-]`, ``validVersion(_:)``; otherwise left out). The first version known is
///   published at once (a fix may come before the status that names it); a later change at
///   most once per ``discoveryInterval`` (1 min) per vehicle: a change within the minute goes
///   out with the vehicle's first event (fix, heading or status) after the minute, carrying the
///   version of that moment. A sender changing its `agent` on every status thus costs a
///   retained config a minute, not one per status.
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
///
/// Backlog entries are history, not where the vehicle is: they are not bridged.
public struct HomeAssistantTranslator: FleetBridgeTranslator {
    /// Where the messages go.
    public struct Options: Sendable {
        /// Home Assistant's discovery prefix (its MQTT integration's setting; default
        /// `homeassistant`).
        public var discoveryPrefix: String
        /// The prefix of the attributes topics this bridge publishes (default
        /// `fleetcast/homeassistant`): `{attributesPrefix}/{vehicle}/attributes`.
        public var attributesPrefix: String
        /// The fleet's topic layout, for the `status` topics availability follows.
        public var fleetTopics: FleetTopics

        /// Validates both prefixes as topic prefixes (non-empty levels, no wildcards).
        public init(
            discoveryPrefix: String = "homeassistant", attributesPrefix: String = "fleetcast/homeassistant",
            fleetTopics: FleetTopics = .default
        ) throws(FleetTopics.InvalidPrefix) {
            self.discoveryPrefix = try FleetTopics(prefix: discoveryPrefix).prefix
            self.attributesPrefix = try FleetTopics(prefix: attributesPrefix).prefix
            self.fleetTopics = fleetTopics
        }
    }

    /// What has been published for one vehicle.
    package struct Vehicle: Sendable {
        var track = BridgeVehicleTrack()
        /// When the discovery config last went out (``outputs(for:at:)``'s clock), and with
        /// which `sw_version`; `nil` before the first.
        var announcedAt: Duration?
        var announcedVersion: String?
        /// Whether a config with a version went out (the first one is not held back).
        var announcedAnyVersion = false
        /// The latest valid `agent` version a status named; `nil` when unknown or not valid.
        var agentVersion: String?
    }

    /// The shortest time between two discovery configs of one vehicle: 1 min.
    public static let discoveryInterval: Duration = .seconds(60)
    /// The longest `agent` version published as `sw_version`, in characters: 32.
    public static let maximumVersionLength = 32

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

    /// `{discoveryPrefix}/device_tracker/{object id}/config`.
    public func configTopic(_ vehicle: VehicleID) -> String {
        "\(options.discoveryPrefix)/device_tracker/\(Self.objectID(vehicle))/config"
    }

    /// `{attributesPrefix}/{vehicle}/attributes`.
    public func attributesTopic(_ vehicle: VehicleID) -> String {
        "\(options.attributesPrefix)/\(vehicle.rawValue)/attributes"
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

    /// The entity's and the device's unique id: `fleetcast_{vehicle}`.
    public static func uniqueID(_ vehicle: VehicleID) -> String { "fleetcast_\(vehicle.rawValue)" }

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
                _ = zones?.events(id, fix)
                out.append(attributes(id, fix, course: vehicle.track.course(of: fix), seq: seq))
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
            let out = announce(status.vehicle, &vehicle, at: now)
            vehicles[status.vehicle] = vehicle
            return out
        case .backlog, .malformed:
            return []
        }
    }

    /// The discovery config when the vehicle is new, when its first agent version is known, or
    /// when its version changed and the previous config is at least ``discoveryInterval`` old.
    private func announce(_ id: VehicleID, _ vehicle: inout Vehicle, at now: Duration) -> [FleetBridgeOutput] {
        if let announcedAt = vehicle.announcedAt {
            guard vehicle.announcedVersion != vehicle.agentVersion else { return [] }
            let firstVersion = !vehicle.announcedAnyVersion && vehicle.agentVersion != nil
            guard firstVersion || now - announcedAt >= Self.discoveryInterval else { return [] }
        }
        vehicle.announcedAt = now
        vehicle.announcedVersion = vehicle.agentVersion
        if vehicle.agentVersion != nil { vehicle.announcedAnyVersion = true }
        let message = MQTTMessage(
            topic: configTopic(id), payload: config(id, swVersion: vehicle.agentVersion), qos: .atLeastOnce, retain: true)
        return [FleetBridgeOutput(vehicle: id, message: message)]
    }

    /// The discovery config payload.
    package func config(_ id: VehicleID, swVersion: String?) -> [UInt8] {
        var w = JSONWriter(capacity: 640)
        w.string("unique_id", Self.uniqueID(id))
        // null: the entity takes the device's name, so it shows as the vehicle id.
        w.null("name")
        w.string("json_attributes_topic", attributesTopic(id))
        w.string("availability_topic", options.fleetTopics.status(id))
        w.string("availability_template", "{{ value_json.state }}")
        w.string("payload_available", VehicleStatus.State.online.rawValue)
        w.string("payload_not_available", VehicleStatus.State.offline.rawValue)
        w.string("source_type", "gps")
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
}
