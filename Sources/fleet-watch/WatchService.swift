import FleetCore
import FleetHistory
import FleetOperations
import FleetWatch
import JSONEscaping
import ServiceLifecycle

/// `fleet-watch [watch]` without `--once`, as a Service: the live table on a terminal, or one
/// line per event (JSON or plain), until a graceful shutdown has handed the subscription over
/// and every event received is shown (``FleetSubscriber/events()``), or the subscription fails.
struct WatchService: Service {
    /// How events are shown.
    enum Output {
        case table(LiveTable)
        case json(FleetEventFormatter, StandardOutput)
        case plain(FleetEventFormatter, StandardOutput)
    }

    let subscriber: FleetSubscriber
    let output: Output
    /// With `--zones`: each live fix's zone events, a line each after the fix's own.
    var zones: BridgeZones?

    func run() async throws {
        var zones = self.zones
        switch output {
        case .table(let table):
            try await table.run(subscriber.receivedEvents())
        case .json(let formatter, let output):
            for try await event in subscriber.events() {
                output.writeLine(formatter.jsonLine(event))
                for line in Self.zoneLines(event, &zones, json: true) { output.writeLine(line) }
            }
        case .plain(let formatter, let output):
            for try await event in subscriber.events() {
                output.writeLine(formatter.plainLine(event))
                for line in Self.zoneLines(event, &zones, json: false) { output.writeLine(line) }
            }
        }
    }

    /// The zone events of a live fix: `{"kind":"zone","vehicle":…,"zone":…,"event":…,"time":…,
    /// "lat":…,"lon":…}`, or `zone VEHICLE enter|exit ZONE TIME` (the name escaped).
    static func zoneLines(_ event: FleetEvent, _ zones: inout BridgeZones?, json: Bool) -> [String] {
        guard zones != nil, case .fix(let vehicle, _, let fix) = event else { return [] }
        return zones!.events(vehicle, fix).map { zoneEvent in
            let stored = StoredZoneEvent(vehicle: vehicle.rawValue, zoneEvent)
            guard json else {
                return "zone \(vehicle.rawValue) \(zoneEvent.kind.rawValue) \(JSONString.escaped(zoneEvent.zone)) \(stored.time.iso8601)"
            }
            return #"{"kind":"zone","# + OperationsOutput.zoneEventJSON(stored).dropFirst()
        }
    }
}
