/// The state of a client's connection to its broker, as reported by
/// ``MQTTClient/connectionStates()``.
public enum MQTTConnectionState: Sendable, Hashable {
    /// Created, `connect()` not yet called.
    case idle
    /// The first connection attempt is under way.
    case connecting
    /// Connected: the broker accepted the CONNECT (CONNACK success).
    case connected
    /// The connection was lost or refused; `reason` says why.
    case disconnected(reason: String)
    /// Waiting `delay` before reconnection attempt number `attempt` (1-based).
    case reconnecting(attempt: Int, delay: Duration)
    /// Shut down: the client will not connect again.
    case closed
}
