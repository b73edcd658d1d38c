import CTCPTraffic
import MQTTCore

extension MQTTTrafficMeter {
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
}
