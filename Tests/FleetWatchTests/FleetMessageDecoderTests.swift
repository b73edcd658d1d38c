import FleetProtocol
import FleetWatch
import GNSS
import Testing

@Suite struct FleetMessageDecoderTests {
    let van = VehicleID("van-7")!
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    @Test func topicsAndPayloadsBecomeEvents() throws {
        let decoder = FleetMessageDecoder(topics: try FleetTopics(prefix: "acme/fleet"))
        let fix = Fix(time: time, latitude: 1, longitude: 2, mode: .twoD)
        #expect(decoder.event(topic: "acme/fleet/van-7/fix", payload: FleetPayload.encode(fix, vehicle: "van-7", seq: 3))
                == .fix(van, seq: 3, fix))
        let heading = Heading(trueHeading: 12, source: .ths)
        #expect(decoder.event(topic: "acme/fleet/van-7/heading", payload: FleetPayload.encode(heading))
                == .heading(van, seq: nil, heading))
        let status = VehicleStatus(vehicle: van, state: .offline)
        #expect(decoder.event(topic: "acme/fleet/van-7/status", payload: FleetPayload.encode(status)) == .status(status))
    }

    @Test func badTopicsAndPayloadsBecomeMalformedEvents() {
        let decoder = FleetMessageDecoder()
        let fixPayload = FleetPayload.encode(Fix(time: time, latitude: 1, longitude: 2, mode: .twoD), vehicle: "van-7")
        for topic in ["fleet/van-7/fix/extra", "fleet/b@d/fix", "fleet/van-7/speed", "other/van-7/fix"] {
            guard case .malformed(let t, let reason) = decoder.event(topic: topic, payload: fixPayload) else {
                Issue.record("\(topic) was accepted"); continue
            }
            #expect(t == topic)
            #expect(reason.contains("topic does not match fleet/{vehicle}"))
        }
        #expect(decoder.event(topic: "fleet/bus-1/fix", payload: fixPayload)
                == .malformed(topic: "fleet/bus-1/fix", reason: #"vehicle "van-7" in payload differs from topic vehicle "bus-1""#))
        #expect(decoder.event(topic: "fleet/van-7/status", payload: Array("{".utf8))
                == .malformed(topic: "fleet/van-7/status", reason: "invalid JSON: expected a string at byte 1"))
        let longTopic = "fleet/" + String(repeating: "x", count: 5000)
        guard case .malformed(let kept, _) = decoder.event(topic: longTopic, payload: []) else { Issue.record(); return }
        #expect(kept.utf8.count <= FleetMessageDecoder.maximumTopicBytesKept + 3)
    }

    /// Found by `deploy/fuzz.sh` (target fleet-message, crashing input inlined): the kept part
    /// of a bad topic was cut inside a multi-byte character, which decoded as U+FFFD and kept
    /// more than `maximumTopicBytesKept` bytes. The cut is now at a character boundary.
    @Test func fuzzFindingClippedTopicStaysWithinItsLimit() {
        let input: [UInt8] = Array("fl/e".utf8) + Array(repeating: 0xFF, count: 120)
            + [0x65, 0x74, 0x87, 0x2F] + Array("vanRanfi=x\n".utf8)
        let newline = input.firstIndex(of: 0x0A)!
        let topic = String(decoding: input[..<newline], as: UTF8.self)
        guard case .malformed(let kept, _) = FleetMessageDecoder().event(topic: topic, payload: []) else {
            Issue.record("a bad topic was accepted"); return
        }
        #expect(kept.utf8.count <= FleetMessageDecoder.maximumTopicBytesKept + "…".utf8.count)
        #expect(topic.hasPrefix(String(kept.dropLast())))
    }
}
