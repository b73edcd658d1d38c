import FleetOperations
import FleetProtocol
import GNSS
import MQTTCore

/// Puts the fleet into OwnTracks (its Recorder and Frontend, and Home Assistant's OwnTracks
/// integration) as the OwnTracks apps would: one location message per live fix on
/// `owntracks/{user}/{vehicle}`, retained, QoS 1.
///
/// The payload follows OwnTracks' JSON format (`_type` `location`): `tst` (the fix's UTC time,
/// whole seconds since 1970), `lat`, `lon` (degrees), `tid` (see ``trackerID(_:)``), and the
/// integers `acc` (m, the fix's horizontal error estimate `eph`), `alt` (m above sea level),
/// `vac` (m, `epv`), `vel` (km/h, from the fix's speed in m/s) and `cog` (degrees from true
/// north: the track, else the vehicle's true heading of the same moment). As the apps do,
/// those five are left out when unknown or zero. No `t` (trigger): an automatic update.
///
/// A fix older than the vehicle's latest (by fix time, then `seq`) is not bridged: it would
/// move the retained position back. Headings only lend a fix their course. A vehicle seen online that goes offline gets the
/// apps' last will, `{"_type":"lwt","tst":…}`, not retained. Backlog entries (history, which
/// would move the retained position back) and malformed messages are not bridged.
///
/// With zones (``BridgeZones``), a vehicle entering or leaving one gets the apps' region event
/// on `owntracks/{user}/{vehicle}/event`, QoS 1, not retained, never coalesced: `_type`
/// `transition`, `event` (`enter` or `leave`), `desc` (the zone's name), `t` (`c`), `wtst` (the
/// zone's number, ``BridgeZones/waypointNumber(_:)``), `tst`, `lat`, `lon`, `acc`, `tid` as in
/// a location.
public struct OwnTracksTranslator: FleetBridgeTranslator {
    /// A user name that cannot be one level of an OwnTracks topic.
    public struct InvalidUser: Error, Sendable, Equatable, CustomStringConvertible {
        /// The refused name.
        public let name: String
        public var description: String {
            "invalid OwnTracks user \"\(name.prefix(80))\": expected one topic level of 1 to 64 characters without '/', '+', '#' or control characters"
        }
    }

    /// The topic level between `owntracks/` and the vehicle (OwnTracks' "user").
    public let user: String
    private(set) var tracks: [VehicleID: BridgeVehicleTrack] = [:]
    private var zones: BridgeZones?

    /// A translator publishing under `owntracks/{user}/`; throws ``InvalidUser`` for a name that
    /// is not a single topic level.
    public init(user: String = "fleet", zones: BridgeZones? = nil) throws(InvalidUser) {
        self.zones = zones
        guard (1...64).contains(user.utf8.count), !user.hasPrefix("$"),
            !user.utf8.contains(where: {
                $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 < 0x20 || $0 == 0x7F
            })
        else { throw InvalidUser(name: user) }
        self.user = user
    }

    /// The number of vehicles seen so far (the translator's memory grows with it only).
    public var vehicleCount: Int { tracks.count }

    /// `owntracks/{user}/{vehicle}`.
    public func topic(_ vehicle: VehicleID) -> String { "owntracks/\(user)/\(vehicle.rawValue)" }

    /// The two-character tracker id OwnTracks shows on its map: like the apps' default (the
    /// last two characters of the topic), the last two characters of the vehicle id once its
    /// separators `.`, `_` and `-` are dropped (`van-7` → `n7`, `truck-12` → `12`); an id with
    /// fewer than two such characters keeps its own last one or two.
    public static func trackerID(_ vehicle: VehicleID) -> String {
        let alphanumerics = vehicle.rawValue.filter { $0 != "." && $0 != "_" && $0 != "-" }
        return String((alphanumerics.count >= 2 ? alphanumerics : vehicle.rawValue).suffix(2))
    }

    public mutating func outputs(for event: FleetEvent, at now: Duration) -> [FleetBridgeOutput] {
        switch event {
        case .fix(let id, let seq, let fix):
            var track = tracks[id] ?? BridgeVehicleTrack()
            // A fix older than the one bridged (a late or repeated message) would move the
            // retained position back.
            guard track.record(fix, seq: seq) else { return [] }
            tracks[id] = track
            let message = MQTTMessage(
                topic: topic(id), payload: location(id, fix, course: track.course(of: fix)), qos: .atLeastOnce, retain: true)
            var outputs = [FleetBridgeOutput(vehicle: id, message: message, position: track.position(seq: seq))]
            for event in zones?.events(id, fix) ?? [] {
                let transition = MQTTMessage(
                    topic: topic(id) + "/event", payload: transition(id, fix, event), qos: .atLeastOnce, retain: false)
                outputs.append(FleetBridgeOutput(vehicle: id, message: transition, coalesces: false))
            }
            return outputs
        case .heading(let id, _, let heading):
            tracks[id, default: BridgeVehicleTrack()].record(heading)
            return []
        case .status(let status):
            // The apps' last will: `_type: lwt` on the location topic, not retained (it must
            // not replace the retained last position), when a vehicle the bridge saw online
            // goes offline. An offline status replayed from the broker's retained store at
            // the bridge's start is no news, and is not repeated.
            let wasOnline = tracks[status.vehicle]?.online ?? false
            tracks[status.vehicle, default: BridgeVehicleTrack()].online = status.state == .online
            guard wasOnline, status.state == .offline else { return [] }
            let message = MQTTMessage(topic: topic(status.vehicle), payload: lastWill(status), qos: .atLeastOnce, retain: false)
            return [FleetBridgeOutput(vehicle: status.vehicle, message: message)]
        case .backlog, .malformed:
            return []
        }
    }

    /// The `_type: lwt` payload: `tst`, in whole seconds, is when the vehicle's agent
    /// connected (the status's `since`), as the apps put the time they first connected.
    package func lastWill(_ status: VehicleStatus) -> [UInt8] {
        var w = JSONWriter(capacity: 40)
        w.raw("_type", "lwt")
        if let since = status.since {
            let ms = since.millisecondsSince1970
            w.int("tst", ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        }
        return w.finish()
    }

    /// The `_type: transition` payload of a zone event at `fix`.
    package func transition(_ id: VehicleID, _ fix: Fix, _ event: ZoneEvent) -> [UInt8] {
        var w = JSONWriter(capacity: 200)
        w.raw("_type", "transition")
        w.int("wtst", BridgeZones.waypointNumber(event.zone))
        let ms = fix.time.millisecondsSince1970
        w.int("tst", ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        w.number("lat", fix.latitude, decimals: 7)
        w.number("lon", fix.longitude, decimals: 7)
        w.int("acc", Self.nonZeroInteger(fix.eph))
        w.string("tid", Self.trackerID(id))
        w.string("event", event.kind == .enter ? "enter" : "leave")
        w.string("desc", event.zone)
        w.raw("t", "c")
        return w.finish()
    }

    /// The `_type: location` payload of a fix.
    package func location(_ id: VehicleID, _ fix: Fix, course: Double?) -> [UInt8] {
        var w = JSONWriter(capacity: 200)
        w.raw("_type", "location")
        w.string("tid", Self.trackerID(id))
        // Whole seconds, rounded down (a fix at 12:00:00.900 is of second 12:00:00).
        let ms = fix.time.millisecondsSince1970
        w.int("tst", ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        w.number("lat", fix.latitude, decimals: 7)
        w.number("lon", fix.longitude, decimals: 7)
        w.int("acc", Self.nonZeroInteger(fix.eph))
        w.int("alt", Self.nonZeroInteger(fix.altitudeMSL))
        w.int("vac", Self.nonZeroInteger(fix.epv))
        w.int("vel", Self.nonZeroInteger(fix.speed.map { $0 * 3.6 }))
        // 359.6° rounds to 360, which is north: 0 (and so left out).
        w.int("cog", Self.nonZeroInteger(course).map { $0 % 360 }.flatMap { $0 == 0 ? nil : $0 })
        return w.finish()
    }

    /// `value` rounded to the nearest integer; `nil` when unknown, not finite, out of `Int`'s
    /// range, or zero once rounded (OwnTracks leaves such elements out).
    package static func nonZeroInteger(_ value: Double?) -> Int? {
        guard let value, value.isFinite, abs(value) < 1e15 else { return nil }
        let rounded = Int(value.rounded())
        return rounded == 0 ? nil : rounded
    }
}
