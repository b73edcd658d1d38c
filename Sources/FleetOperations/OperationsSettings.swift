/// What `fleet-watch record` derives beside the fixes: trips and stops by `rules`, and, with
/// `zones`, enter and exit events with `hysteresisMetres` (see `FleetOperations`).
package struct OperationsSettings: Sendable {
    package var rules: TripRules
    package var zones: ZoneSet?
    /// Metres inside a zone to enter it, outside to leave it.
    package var hysteresisMetres: Double
    /// Called with the zone events newly stored, oldest first (to announce them over MQTT).
    /// Must not wait long: the recording waits for it.
    package var announce: (@Sendable ([StoredZoneEvent]) async -> Void)?

    package init(
        rules: TripRules = TripRules(), zones: ZoneSet? = nil, hysteresisMetres: Double = 15,
        announce: (@Sendable ([StoredZoneEvent]) async -> Void)? = nil
    ) {
        (self.rules, self.zones, self.hysteresisMetres, self.announce) = (rules, zones, hysteresisMetres, announce)
    }
}
