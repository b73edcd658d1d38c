extension MQTTError {
    /// Whether the broker refused a publish for good: sending it again, on this connection or
    /// the next, gets the same answer until someone changes the broker's ACL or the client's
    /// topics. MQTT 5 PUBACK/PUBREC reason codes 0x87 not authorized, 0x90 topic name invalid,
    /// 0x95 packet too large, 0x99 payload format invalid. (0x83, implementation-specific, is
    /// left out: some brokers use it for passing trouble. MQTT 3.1.1 has no such answer: a
    /// broker drops what it refuses and acknowledges it.)
    public var isPermanentPublishRefusal: Bool {
        guard code == .publishRejected, let reasonCode else { return false }
        return [0x87, 0x90, 0x95, 0x99].contains(reasonCode)
    }

    /// The broker refused a publish as larger than its maximum packet size (0x95): a smaller
    /// message would pass.
    public var isPacketTooLarge: Bool {
        code == .publishRejected && reasonCode == 0x95
    }

    /// Whether a failed connect may succeed later without a change of configuration: the
    /// broker is down, unreachable, busy or not yet resolvable, or the TLS handshake was cut
    /// short (a proxy, a load balancer or a captive portal that takes the connection and
    /// closes it, a reset: the network's doing). A certificate that fails verification (the
    /// broker's, or ours refused by it), credentials and authorisation are not retried: they
    /// need the user.
    public var isWorthRetrying: Bool {
        switch code {
        case .connectionRefused, .hostNotFound, .network, .connectionLost, .notConnected, .library:
            true
        case .tls:
            !detail.lowercased().contains("certificate") && !detail.lowercased().contains("unknown ca")
        case .connectionRejected:
            // MQTT 5: server unavailable, server busy, connection rate exceeded; 3.1.1: 3.
            [0x88, 0x89, 0x9F, 3].contains(reasonCode)
        default:
            false
        }
    }
}
