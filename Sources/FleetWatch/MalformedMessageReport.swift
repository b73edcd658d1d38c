import FleetCore
import FleetProtocol
import FleetcastCore
import JSONEscaping
import Logging

/// Names malformed and implausible messages (``FleetEvent/malformed(topic:reason:)``) in the
/// log once per vehicle, at warning, and counts them all: a consumer of the fleet's messages
/// (`record`, `serve`, `bridge`) says what it skips without a line per message. A plain value
/// for the one task that consumes the events; it names at most ``maximumVehiclesNamed``
/// vehicles (a hostile fleet of ids cannot grow it).
public struct MalformedMessageReport: Sendable {
    /// The most vehicles named; past it, malformed messages are only counted.
    public static let maximumVehiclesNamed = 10_000

    private var named = Set<String>()
    /// Malformed or implausible messages seen.
    public private(set) var count = 0

    /// A report that has seen nothing.
    public init() {}

    /// Counts `event` when it is malformed, and names it (its vehicle, topic and reason) when it
    /// is the first of its vehicle's, the vehicle taken from its topic (`topics`' layout).
    public mutating func note(_ event: FleetEvent, topics: FleetTopics = .default, logger: Logger) {
        guard case .malformed(let topic, let reason) = event else { return }
        count += 1
        let vehicle = topics.parse(topic)?.vehicle.rawValue ?? ""
        guard named.count < Self.maximumVehiclesNamed, named.insert(vehicle).inserted else { return }
        logger.warning(
            "A malformed or implausible message was skipped; this vehicle's are counted and skipped",
            metadata: [
                "vehicle": "\(JSONString.escaped(vehicle))", "mqtt.topic": "\(JSONString.escaped(topic))",
                "reason": "\(JSONString.escaped(reason))",
            ])
    }
}
