import CTCPTraffic

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
struct MQTTTrafficMeter: Sendable {
    /// Connections that have ended.
    private var ended = MQTTTraffic()
    /// The current connection at its last sample.
    private var current = MQTTTraffic()

    /// Everything so far.
    var total: MQTTTraffic {
        MQTTTraffic(
            sent: ended.sent &+ current.sent, received: ended.received &+ current.received,
            segmentsSent: ended.segmentsSent &+ current.segmentsSent,
            segmentsReceived: ended.segmentsReceived &+ current.segmentsReceived)
    }

    /// The counters of the connection on `socket` (`mosquitto_socket`): a system call, made
    /// outside any lock; `nil` when the socket is gone.
    static func read(socket: Int32) -> MQTTTraffic? {
        var sent: UInt64 = 0
        var received: UInt64 = 0
        var segmentsOut: UInt32 = 0
        var segmentsIn: UInt32 = 0
        var headerBytes: UInt32 = 0
        guard fleetcast_tcp_traffic(socket, &sent, &received, &segmentsOut, &segmentsIn, &headerBytes) == 0 else { return nil }
        return MQTTTraffic(
            sent: sent &+ UInt64(segmentsOut) &* UInt64(headerBytes),
            received: received &+ UInt64(segmentsIn) &* UInt64(headerBytes),
            segmentsSent: UInt64(segmentsOut), segmentsReceived: UInt64(segmentsIn))
    }

    /// The current connection's counters as last read.
    mutating func update(_ reading: MQTTTraffic?) {
        if let reading { current = reading }
    }

    /// The connection sampled last has ended: its figures join the total.
    mutating func connectionEnded() {
        ended = total
        current = MQTTTraffic()
    }
}

extension MQTTTraffic {
    init(sent: UInt64, received: UInt64, segmentsSent: UInt64, segmentsReceived: UInt64) {
        self.sent = sent
        self.received = received
        self.segmentsSent = segmentsSent
        self.segmentsReceived = segmentsReceived
    }
}
