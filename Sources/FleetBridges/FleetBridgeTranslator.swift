import FleetWatch
import MQTT

/// Turns the fleet's events into the MQTT messages of another application (Home Assistant,
/// OwnTracks), for ``FleetBridge`` to publish.
///
/// Pure and synchronous: no I/O, no clock. A translator keeps per-vehicle state only (what it
/// has announced, the latest fix and heading), so its memory grows with the vehicles the
/// subscription sees and nothing else.
public protocol FleetBridgeTranslator: Sendable {
    /// The messages to publish for `event`, in order; none for an event the application has
    /// no use for (a malformed message, a backlog entry: history, not the current position).
    mutating func messages(for event: FleetEvent) -> [MQTTMessage]
}
