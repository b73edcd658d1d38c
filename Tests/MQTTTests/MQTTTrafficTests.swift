import FleetcastTestSupport
import MQTT
import Testing

/// What a vehicle's link costs: the client's own count of its bytes on the wire, against what
/// it sent, over a real broker connection and a reconnection.
@Suite struct MQTTTrafficTests {
    @Test func bytesOnTheWireCountPayloadsAndHeadersAcrossReconnections() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker)
            try await client.connect()
            let payload = [UInt8](repeating: 0x41, count: 10_000)
            for _ in 0..<20 {
                try await client.publish(topic: "traffic/test", payload: payload, qos: .atLeastOnce)
            }
            // Read once a second by the network loop.
            try await waitUntil("the 200,000 payload bytes counted") { client.traffic.sent >= 200_000 }
            let first = client.traffic
            // Each publish adds its MQTT header and topic (19 bytes), its TCP segment's headers
            // (52 bytes on loopback) and those of our acknowledgement of its PUBACK (52 more);
            // CONNECT a few hundred. What comes back: CONNACK, 20 PUBACKs and TCP
            // acknowledgements, 52-byte headers each.
            #expect(first.sent < 200_000 + 20 * (19 + 52 + 52) + 1_000, "\(first)")
            #expect(first.received > 20 * 4 && first.received < 20 * 2 * (4 + 52) + 1_000, "\(first)")
            #expect(first.segments >= 40, "\(first)")

            try await broker.restart()
            try await waitUntil("the reconnection") { client.connectionState == .connected }
            try await client.publish(topic: "traffic/test", payload: payload, qos: .atLeastOnce)
            try await waitUntil("the new connection's bytes added") { client.traffic.sent >= first.sent + 10_000 }
            #expect(client.traffic.received > first.received, "the first connection's bytes are kept")
            await client.shutdown()
        }
    }

    /// What a vehicle sends after an outage (here 64 QoS 1 messages held while the broker was
    /// away) leaves in few TCP segments, each with one set of IP and TCP headers, not one
    /// segment per message: the network loop corks the socket while it writes. The broker takes
    /// 20 at a time (mosquitto's receive maximum), so they go in waves as its PUBACKs come back.
    /// (Written all in one pass, as with a receive maximum of 100, the kernel gathers them by
    /// itself, `tcp_autocorking`, cork or not; in these waves it does not.) The broker
    /// acknowledges every message.
    @Test func messagesWrittenTogetherShareTCPSegments() async throws {
        try await withBroker { broker in
            let client = try makeClient(broker, configure: { $0.maxInflightMessages = 100 })
            try await client.connect()
            await broker.stop()
            try await waitUntil("the connection lost") { client.connectionState != .connected }
            let before = client.traffic
            let count = 64
            // Each publish returns once the broker has acknowledged its message (PUBACK).
            try await withThrowingDiscardingTaskGroup { group in
                for index in 0..<count {
                    group.addImmediateTask {
                        try await client.publish(topic: "traffic/held", string: "\(index)", qos: .atLeastOnce)
                    }
                }
                try await broker.restart()
            }
            // Each PUBLISH is at least 20 bytes (header, the 12-byte topic, packet id, payload);
            // the counters are read once a second.
            try await waitUntil("the held messages counted") { client.traffic.sent >= before.sent + UInt64(count * 20) }
            let after = client.traffic
            let segments = after.segmentsSent - before.segmentsSent
            // The new connection's handshake (SYN, ACK), CONNECT, the PUBLISH packets, and our
            // acknowledgements of what the broker sends back (CONNACK, the PUBACKs); one segment
            // per message would be 64 and more (56 to 62 measured without the cork, 13 to 20 with it).
            #expect(segments < 40, "\(segments) segments sent for \(count) messages: \(before) -> \(after)")
            await client.shutdown()
        }
    }
}
