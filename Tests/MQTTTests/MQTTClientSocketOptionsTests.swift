import CMosquitto
import FleetcastTestSupport
import Glibc
import MQTT
import Testing

@Suite struct MQTTClientSocketOptionsTests {
    /// With Nagle's algorithm on, a QoS 1 fix published right after a QoS 0 heading waits for
    /// the broker's delayed ACK (~40 ms on Linux): the latency benchmark measured p50 42 ms.
    @Test func brokerConnectionHasNagleOff() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            try await client.connect()
            let fd = mosquitto_socket(client.handle.pointer)
            #expect(fd >= 0)
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            let rc = getsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length)
            #expect(rc == 0)
            #expect(value != 0, "TCP_NODELAY is off on the broker connection")
            await client.shutdown()
        }
    }
}
