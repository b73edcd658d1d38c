/// The MQTT quality of service of a publish or a subscription.
public enum MQTTQoS: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// At most once: fire and forget, no acknowledgement.
    case atMostOnce = 0
    /// At least once: acknowledged by PUBACK; may arrive twice.
    case atLeastOnce = 1
    /// Exactly once: four-way handshake, acknowledged by PUBCOMP.
    case exactlyOnce = 2

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The MQTT protocol version the client speaks.
public enum MQTTProtocolVersion: Sendable, Hashable {
    /// MQTT 5.0 (the default): reason codes, properties, content type, message expiry.
    case v5
    /// MQTT 3.1.1, for brokers that don't speak 5.
    case v311
}
