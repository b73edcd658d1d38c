import FleetOperations
import FleetProtocol
import GNSS

/// A bridge's zones (`fleet-watch bridge --zones FILE`): each vehicle's zone tracker, fed the
/// live fixes the bridge takes (each newer than the one before, as the bridge only takes
/// those), so that a bridge tells the application where a vehicle is in the fleet's own zones,
/// with the recorder's rules (`FleetOperations`' ``ZoneTracker``, the same hysteresis). Memory
/// grows with the vehicles seen, a set of zone numbers each.
public struct BridgeZones: Sendable {
    let zones: ZoneSet
    let hysteresisMetres: Double
    private var trackers: [VehicleID: ZoneTracker] = [:]
    private var newest: [VehicleID: UTCTimestamp] = [:]

    /// Zones read from a GeoJSON file (see `ZoneSet.parse`).
    package init(zones: ZoneSet, hysteresisMetres: Double = 15) {
        (self.zones, self.hysteresisMetres) = (zones, hysteresisMetres)
    }

    /// The enter and exit events `fix` of `vehicle` makes; none for a fix not newer than the
    /// vehicle's newest (a late or repeated message).
    package mutating func events(_ vehicle: VehicleID, _ fix: Fix) -> [ZoneEvent] {
        if let newest = newest[vehicle], fix.time <= newest { return [] }
        newest[vehicle] = fix.time
        var tracker = trackers[vehicle] ?? ZoneTracker(zones: zones, hysteresisMetres: hysteresisMetres)
        let events = tracker.add(TripPoint(time: fix.time, latitude: fix.latitude, longitude: fix.longitude, speed: fix.speed))
        trackers[vehicle] = tracker
        return events
    }

    /// The zones `vehicle` is in, in the file's order.
    func inside(_ vehicle: VehicleID) -> [String] {
        guard let inside = trackers[vehicle]?.inside, !inside.isEmpty else { return [] }
        return zones.zones.map(\.name).filter { inside.contains($0) }
    }

    /// A stable number for a zone, from its name (FNV-1a, 32 bits): OwnTracks' `wtst`, which
    /// names the waypoint a transition is about, the same across restarts and file edits.
    static func waypointNumber(_ name: String) -> Int {
        var hash: UInt32 = 2_166_136_261
        for byte in name.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return Int(hash)
    }
}
