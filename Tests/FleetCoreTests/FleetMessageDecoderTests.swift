import FleetCore
import FleetProtocol
import GNSS
import Testing

@Suite struct FleetMessageDecoderTests {
    let van = VehicleID("van-7")!
    let time = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 3, minute: 4, second: 5)!

    @Test func topicsAndPayloadsBecomeEvents() throws {
        let decoder = FleetMessageDecoder(topics: try FleetTopics(prefix: "acme/fleet"))
        let fix = Fix(time: time, latitude: 1, longitude: 2, mode: .twoD)
        #expect(
            decoder.events(topic: "acme/fleet/van-7/fix", payload: FleetPayload.encode(fix, vehicle: "van-7", seq: 3))
                == [.fix(van, seq: 3, fix)])
        let heading = Heading(trueHeading: 12, source: .ths)
        #expect(
            decoder.events(topic: "acme/fleet/van-7/heading", payload: FleetPayload.encode(heading))
                == [.heading(van, seq: nil, heading)])
        let status = VehicleStatus(vehicle: van, state: .offline)
        #expect(decoder.events(topic: "acme/fleet/van-7/status", payload: FleetPayload.encode(status)) == [.status(status)])
    }

    @Test func theAgentChecksTestMessageIsNoEventAndNotMalformed() throws {
        let decoder = FleetMessageDecoder(topics: try FleetTopics(prefix: "acme/fleet"))
        #expect(decoder.events(topic: "acme/fleet/van-7/check", payload: Array("fleetcast-agent check 1".utf8)).isEmpty)
        #expect(decoder.events(topic: "acme/fleet/b@d/check", payload: []).count == 1, "not a vehicle: malformed")
        // Found by the fleet-message fuzzer: "." is a valid vehicle id, so this is a check topic.
        #expect(FleetMessageDecoder().events(topic: "fleet/./check", payload: Array(#"{"fl1"#.utf8)).isEmpty)
    }

    @Test func badTopicsAndPayloadsBecomeMalformedEvents() {
        let decoder = FleetMessageDecoder()
        let fixPayload = FleetPayload.encode(Fix(time: time, latitude: 1, longitude: 2, mode: .twoD), vehicle: "van-7")
        for topic in ["fleet/van-7/fix/extra", "fleet/b@d/fix", "fleet/van-7/speed", "other/van-7/fix"] {
            guard case .malformed(let t, let reason)? = decoder.events(topic: topic, payload: fixPayload).first else {
                Issue.record("\(topic) was accepted"); continue
            }
            #expect(t == topic)
            #expect(reason.contains("topic does not match fleet/{vehicle}"))
        }
        #expect(
            decoder.events(topic: "fleet/bus-1/fix", payload: fixPayload)
                == [.malformed(topic: "fleet/bus-1/fix", reason: #"vehicle "van-7" in payload differs from topic vehicle "bus-1""#)])
        #expect(
            decoder.events(topic: "fleet/van-7/status", payload: Array("{".utf8))
                == [.malformed(topic: "fleet/van-7/status", reason: "invalid JSON: expected a string at byte 1")])
        let longTopic = "fleet/" + String(repeating: "x", count: 5000)
        guard case .malformed(let kept, _)? = decoder.events(topic: longTopic, payload: []).first else { Issue.record(); return }
        #expect(kept.utf8.count <= FleetMessageDecoder.maximumTopicBytesKept + 3)
    }

    // MARK: backlog batches

    func fix(seq: UInt64, lat: Double) -> DecodedFix {
        DecodedFix(
            vehicle: van, seq: seq,
            fix: Fix(
                time: UTCTimestamp(millisecondsSince1970: time.millisecondsSince1970 + Int64(seq) * 1000),
                latitude: lat, longitude: 2, speed: 3, mode: .threeD, satellitesUsed: 8))
    }

    func heading(seq: UInt64) -> DecodedHeading {
        DecodedHeading(vehicle: van, seq: seq, heading: Heading(time: time, trueHeading: Double(seq), source: .hdt))
    }

    /// A batch as an agent writes it, from encoded payloads (raw ones for bad entries).
    func batch(_ entries: [(FleetPayload.Kind, String)], vehicle: String = "van-7") -> [UInt8] {
        var w = FleetPayload.BacklogWriter(vehicle: VehicleID(vehicle)!, maximumBytes: FleetPayload.maximumPayloadBytes)
        for (kind, json) in entries {
            let appended = w.append(kind: kind, payload: Array(json.utf8))
            #expect(appended, "\(json)")
        }
        return w.finish()
    }

    func json(_ f: DecodedFix) -> String { String(decoding: FleetPayload.encode(f.fix, vehicle: "van-7", seq: f.seq), as: UTF8.self) }
    func json(_ h: DecodedHeading) -> String {
        String(decoding: FleetPayload.encode(h.heading, vehicle: "van-7", seq: h.seq), as: UTF8.self)
    }

    @Test func aBacklogBatchBecomesOneEventPerEntryInOrder() {
        let decoder = FleetMessageDecoder()
        let payload = batch([(.fix, json(fix(seq: 41, lat: 1))), (.heading, json(heading(seq: 42))), (.fix, json(fix(seq: 43, lat: 3)))])
        let events = decoder.events(topic: "fleet/van-7/backlog", payload: payload)
        #expect(
            events == [.backlog(.fix(fix(seq: 41, lat: 1))), .backlog(.heading(heading(seq: 42))), .backlog(.fix(fix(seq: 43, lat: 3)))])
        #expect(events.map(\.kind) == [.fix, .heading, .fix])
        #expect(events.allSatisfy { $0.isBacklog && $0.vehicle == van })
        #expect(events.map(\.seq) == [41, 42, 43])
        // The same bytes on the fix topic are not a fix.
        guard case .malformed = decoder.events(topic: "fleet/van-7/fix", payload: payload).first else { Issue.record(); return }
        // An empty batch is no event at all.
        #expect(decoder.events(topic: "fleet/van-7/backlog", payload: batch([])).isEmpty)
    }

    @Test func aCellularBatchBecomesLiveEventsInOrderAndABadEntryIsMalformedInItsPlace() {
        let decoder = FleetMessageDecoder()
        let payload = batch([
            (.fix, json(fix(seq: 41, lat: 1))), (.heading, json(heading(seq: 42))), (.fix, #"{"v":1,"vehicle":"van-7","seq":43}"#),
            (.fix, json(fix(seq: 44, lat: 4))),
        ])
        let events = decoder.events(topic: "fleet/van-7/batch", payload: payload)
        let first = fix(seq: 41, lat: 1)
        let second = heading(seq: 42)
        let fourth = fix(seq: 44, lat: 4)
        #expect(events.count == 4)
        #expect(events.first == .fix(van, seq: first.number, first.fix))
        #expect(events.dropFirst().first == .heading(van, seq: second.number, second.heading))
        guard case .malformed(let topic, let reason) = events.dropFirst(2).first else { Issue.record("\(events)"); return }
        #expect(topic == "fleet/van-7/batch" && reason.hasPrefix("batch event 2: "), "\(reason)")
        #expect(events.last == .fix(van, seq: fourth.number, fourth.fix))
        #expect(events.allSatisfy { !$0.isBacklog })
        // A batch is not a single event, and its entries must be the topic's vehicle's.
        guard case .malformed = decoder.events(topic: "fleet/van-7/heading", payload: payload).first else { Issue.record(); return }
        guard case .malformed = decoder.events(topic: "fleet/bus-1/batch", payload: payload).first else { Issue.record(); return }
    }

    @Test func aBadEntryBecomesOneMalformedEventInItsPlaceAndTheGoodOnesStay() {
        let decoder = FleetMessageDecoder()
        let payload = batch([
            (.fix, json(fix(seq: 5, lat: 5))),
            (.fix, #"{"v":1,"seq":6,"time":"2026-01-02T03:04:11.000Z","lat":"north","lon":2,"mode":3}"#),
            (.heading, json(heading(seq: 7))),
            (.fix, String(json(fix(seq: 8, lat: 8)).replacingOccurrences(of: #""vehicle":"van-7""#, with: #""vehicle":"bus-1""#))),
            (.fix, json(fix(seq: 9, lat: 9))),
        ])
        let events = decoder.events(topic: "fleet/van-7/backlog", payload: payload)
        #expect(
            events == [
                .backlog(.fix(fix(seq: 5, lat: 5))),
                .malformed(topic: "fleet/van-7/backlog", reason: #"backlog event 1: key "lat" is not a number"#),
                .backlog(.heading(heading(seq: 7))),
                .malformed(
                    topic: "fleet/van-7/backlog", reason: #"backlog event 3: vehicle "bus-1" in payload differs from topic vehicle "van-7""#
                ),
                .backlog(.fix(fix(seq: 9, lat: 9))),
            ])
        // Unknown or missing kinds, spliced by hand (the writer only writes fix and heading).
        let raw =
            #"{"v":1,"vehicle":"van-7","events":[{"kind":"status","v":1,"state":"online"},{"v":1,"seq":3,"heading":1},"#
            + "{\"kind\":\"heading\"," + json(heading(seq: 4)).dropFirst() + "]}"
        #expect(
            decoder.events(topic: "fleet/van-7/backlog", payload: Array(raw.utf8)) == [
                .malformed(topic: "fleet/van-7/backlog", reason: #"backlog event 0: key "kind" is not fix or heading"#),
                .malformed(topic: "fleet/van-7/backlog", reason: #"backlog event 1: missing key "kind""#),
                .backlog(.heading(heading(seq: 4))),
            ])
    }

    @Test func aBatchThatIsNotABatchIsOneMalformedEvent() {
        let decoder = FleetMessageDecoder()
        let topic = "fleet/van-7/backlog"
        func reasons(_ payload: [UInt8], on topic: String = "fleet/van-7/backlog") -> [String] {
            decoder.events(topic: topic, payload: payload).map {
                guard case .malformed(_, let reason) = $0 else { return "accepted: \($0)" }
                return reason
            }
        }
        // The batch of another vehicle, on van-7's topic.
        #expect(
            reasons(batch([(.fix, json(fix(seq: 1, lat: 1)))], vehicle: "bus-1"))
                == [#"vehicle "bus-1" in payload differs from topic vehicle "van-7""#])
        #expect(reasons(Array(#"{"v":1,"vehicle":"van-7","events":{"kind":"fix"}}"#.utf8)) == [#"key "events" is not an array"#])
        #expect(reasons(Array(#"{"v":1,"vehicle":"van-7"}"#.utf8)) == [#"missing key "events""#])
        #expect(reasons(Array(#"[{"kind":"fix"}]"#.utf8)).count == 1)
        #expect(reasons(Array(#"{"v":2,"events":[]}"#.utf8)) == ["unsupported contract version 2 (expected 1)"])
        // Over the payload limit: refused whole, without decoding any entry.
        var big = #"{"v":1,"vehicle":"van-7","events":["#
        let entry = "{\"kind\":\"fix\"," + json(fix(seq: 1, lat: 1)).dropFirst()
        while big.utf8.count <= FleetPayload.maximumPayloadBytes { big += entry + "," }
        big += entry + "]}"
        #expect(reasons(Array(big.utf8)) == ["payload of \(big.utf8.count) bytes exceeds \(FleetPayload.maximumPayloadBytes) bytes"])
        // Too many (tiny) entries.
        let many =
            #"{"v":1,"events":["# + Array(repeating: "{}", count: FleetPayload.maximumBacklogEvents + 1).joined(separator: ",") + "]}"
        #expect(reasons(Array(many.utf8)) == [#"key "events" has more than \#(FleetPayload.maximumBacklogEvents) events"#])
        _ = topic
    }

    /// Found by `deploy/fuzz.sh` (target fleet-message, crashing input inlined): the kept part
    /// of a bad topic was cut inside a multi-byte character, which decoded as U+FFFD and kept
    /// more than `maximumTopicBytesKept` bytes. The cut is now at a character boundary.
    @Test func fuzzFindingClippedTopicStaysWithinItsLimit() {
        let input: [UInt8] =
            Array("fl/e".utf8) + Array(repeating: 0xFF, count: 120)
            + [0x65, 0x74, 0x87, 0x2F] + Array("vanRanfi=x\n".utf8)
        let newline = input.firstIndex(of: 0x0A)!
        let topic = String(decoding: input[..<newline], as: UTF8.self)
        guard case .malformed(let kept, _) = FleetMessageDecoder().events(topic: topic, payload: []).first else {
            Issue.record("a bad topic was accepted"); return
        }
        #expect(kept.utf8.count <= FleetMessageDecoder.maximumTopicBytesKept + "…".utf8.count)
        #expect(topic.hasPrefix(String(kept.dropLast())))
    }
}
