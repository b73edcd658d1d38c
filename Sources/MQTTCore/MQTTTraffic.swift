/// What a client's broker connections have cost on the network since it was made, from the
/// kernel's TCP counters (every connection, reconnections included): bytes as the link carries
/// them, TLS records and TCP/IP headers counted, not MQTT payloads.
public struct MQTTTraffic: Sendable, Equatable {
    /// Bytes sent and acknowledged by the broker's host: TCP payload (TLS records, MQTT packets)
    /// plus the IP and TCP headers of every segment sent.
    public var sent: UInt64 = 0
    /// Bytes received: TCP payload plus the IP and TCP headers of every segment received.
    public var received: UInt64 = 0
    /// TCP segments sent (data and acknowledgements).
    public var segmentsSent: UInt64 = 0
    /// TCP segments received.
    public var segmentsReceived: UInt64 = 0

    /// No traffic.
    public init() {}

    /// `sent` + `received`.
    public var total: UInt64 { sent &+ received }

    /// TCP segments both ways, `segmentsSent` + `segmentsReceived`.
    public var segments: UInt64 { segmentsSent &+ segmentsReceived }
}

/// Sums ``MQTTTraffic`` over a client's connections: read by the network loop once a second and
/// by a shutdown before its DISCONNECT, folded into the total when a connection ends. What a
/// lost connection carried after its last reading is not seen.
package struct MQTTTrafficMeter: Sendable {
    /// No connection yet.
    package init() {}

    /// Connections that have ended.
    private var ended = MQTTTraffic()
    /// The current connection at its last sample.
    private var current = MQTTTraffic()

    /// Everything so far.
    package var total: MQTTTraffic {
        MQTTTraffic(
            sent: ended.sent &+ current.sent, received: ended.received &+ current.received,
            segmentsSent: ended.segmentsSent &+ current.segmentsSent,
            segmentsReceived: ended.segmentsReceived &+ current.segmentsReceived)
    }

    /// The current connection's counters as last read.
    package mutating func update(_ reading: MQTTTraffic?) {
        if let reading { current = reading }
    }

    /// The connection sampled last has ended: its figures join the total.
    package mutating func connectionEnded() {
        ended = total
        current = MQTTTraffic()
    }
}

extension MQTTTraffic {
    package init(sent: UInt64, received: UInt64, segmentsSent: UInt64, segmentsReceived: UInt64) {
        self.sent = sent
        self.received = received
        self.segmentsSent = segmentsSent
        self.segmentsReceived = segmentsReceived
    }
}
