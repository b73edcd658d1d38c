extension MQTTError {
    /// Whether a failed connect may succeed later without a change of configuration: the
    /// broker is down, unreachable, busy or not yet resolvable. TLS, credential and
    /// authorisation failures are not retried: they need the user.
    public var isWorthRetrying: Bool {
        switch self {
        case .connectionRefused, .hostNotFound, .network, .connectionLost, .notConnected, .library:
            true
        case .connectionRejected(let code, _):
            // MQTT 5: server unavailable, server busy, connection rate exceeded; 3.1.1: 3.
            code == 0x88 || code == 0x89 || code == 0x9F || code == 3
        default:
            false
        }
    }
}
