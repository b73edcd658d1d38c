/// The MQTT quality of service of a publish or a subscription.
public enum MQTTQoS: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// At most once: fire and forget, no acknowledgement.
    case atMostOnce = 0
    /// At least once: acknowledged by PUBACK; may arrive twice.
    case atLeastOnce = 1
    /// Exactly once: four-way handshake, acknowledged by PUBCOMP.
    case exactlyOnce = 2

    /// Orders by guarantee: at most once < at least once < exactly once.
    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The MQTT protocol version the client speaks.
public enum MQTTProtocolVersion: Sendable, Hashable, CustomStringConvertible {
    /// MQTT 5 first; when a broker refuses it for its version (MQTT 5 reason code 0x84, or the
    /// MQTT 3.1.1 return code 1 that a 3.1.1-only broker such as NATS or RabbitMQ answers), the
    /// client connects again at once with 3.1.1, says so once in the log, and keeps 3.1.1 for
    /// its life (every reconnect and fail-over). A close before any CONNACK (RabbitMQ, amqtt)
    /// falls back the same way, but MQTT 5 is tried first again after each later loss. The
    /// default.
    case auto
    /// MQTT 5.0 only: reason codes, properties, content type, message expiry.
    case v5
    /// MQTT 3.1.1 only, for brokers that don't speak 5.
    case v311

    /// Parses `auto`, `5` (or `5.0`) and `3.1.1` (or `311`); `nil` for anything else.
    public init?(parsing text: String) {
        switch text.lowercased() {
        case "auto": self = .auto
        case "5", "5.0", "v5": self = .v5
        case "3.1.1", "311", "v311": self = .v311
        default: return nil
        }
    }

    /// `auto`, `5` or `3.1.1`: the spelling ``init(parsing:)`` takes.
    public var description: String {
        switch self {
        case .auto: "auto"
        case .v5: "5"
        case .v311: "3.1.1"
        }
    }
}
