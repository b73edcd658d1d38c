import MQTTCore

/// Turns the fleet's events into the MQTT messages of another application (Home Assistant,
/// OwnTracks), for ``FleetBridge`` to publish.
///
/// Pure and synchronous: no I/O, no clock (the time comes in as a value). A translator keeps
/// per-vehicle state only (what it has announced, the latest fix and heading), so its memory
/// grows with the vehicles the subscription sees and nothing else; the bridge admits at most
/// ``BridgeQueueLimits/maximumVehicles`` of them.
public protocol FleetBridgeTranslator: Sendable {
    /// The messages to publish for `event`, in order; none for an event the application has
    /// no use for (a malformed message, a backlog entry: history, not the current position).
    ///
    /// - Parameter now: when the event is handled, as a monotonic time since a fixed origin
    ///   (the bridge's start), for what a translator does at most so often.
    mutating func outputs(for event: FleetEvent, at now: Duration) -> [FleetBridgeOutput]
}

extension FleetBridgeTranslator {
    /// The messages of ``outputs(for:at:)`` alone, without what the bridge needs to coalesce
    /// them.
    public mutating func messages(for event: FleetEvent, at now: Duration = .zero) -> [MQTTMessage] {
        outputs(for: event, at: now).map(\.message)
    }
}
