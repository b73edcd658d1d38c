// libFuzzer harness: fleet-watch's message decoding, topic + payload → FleetEvent. Input: the
// topic, a newline, the payload. Compiled together with Sources/FleetCore/FleetMessageDecoder.swift
// and FleetEvent.swift (pure, as all of FleetCore).
import FleetProtocol
import GNSS

let layouts = [FleetTopics.default, try! FleetTopics(prefix: "acme/fleet")]
/// The consumer's clock, fixed (2026-01-01T00:00:00Z): the same judgement on every run.
let now = UTCTimestamp(millisecondsSince1970: 1_767_225_600_000)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFleetMessage(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? size
    let topic = String(decoding: bytes[..<newline], as: UTF8.self)
    let payload = Array(bytes[min(newline + 1, size)...])

    for topics in layouts {
        let decoder = FleetMessageDecoder(topics: topics, clock: { now })
        let events = decoder.events(topic: topic, payload: payload)
        guard let (vehicle, channel) = topics.parse(topic) else {
            if topics.isCheck(topic) {
                // `fleetcast-agent check`'s test message: ignored, neither an event nor malformed.
                check(events.isEmpty, "a check topic gave \(events.count) events")
                continue
            }
            check(events.count == 1, "a topic outside the layout gave \(events.count) events")
            let event = events[0]
            guard case .malformed(let kept, _) = event else {
                check(false, "an event from a topic outside the layout: \(event)")
                return 0
            }
            check(kept.utf8.count <= FleetMessageDecoder.maximumTopicBytesKept + "…".utf8.count, "a malformed topic kept whole")
            continue
        }
        check(topics.topic(vehicle, channel) == topic, "parse(topic) does not give back the topic")
        check(events.allSatisfy { $0.vehicle == nil || $0.vehicle == vehicle }, "an event of another vehicle than its topic's")
        if channel == .backlog {
            // One event per entry: backlog events, or malformed ones naming the topic.
            let direct = try? FleetPayload.decodeBacklog(payload, vehicle: vehicle)
            check(events.count <= FleetPayload.maximumBacklogEvents || direct == nil, "more events than a batch may hold")
            for event in events {
                switch event {
                case .backlog: check(event.isBacklog, "a backlog event not marked as such")
                case .malformed(let kept, _): check(kept == topic, "a malformed backlog entry names another topic")
                default: check(false, "a backlog topic gave \(event)")
                }
            }
            continue
        }
        if channel == .batch {
            // One event per entry (compact or JSON): live fixes and headings, as decodeBatch
            // reads them, or malformed ones naming the topic.
            let direct = try? FleetPayload.decodeBatch(payload, vehicle: vehicle)
            check(events.count <= FleetPayload.maximumBacklogEvents || direct == nil, "more events than a batch may hold")
            let live = events.filter { if case .malformed = $0 { false } else { true } }
            // Less what FleetPlausibility refuses: an implausible batch whole, an implausible
            // number alone.
            let all = direct?.events ?? []
            let plausible =
                FleetPlausibility.batchProblem(all) != nil
                ? []
                : all.filter { entry in
                    let time: UTCTimestamp? =
                        switch entry {
                        case .fix(let f): f.fix.time
                        case .heading(let h): h.heading.time
                        }
                    return FleetPlausibility.numberProblem(entry.number, time: time, now: now) == nil
                }
            check(live.count == plausible.count, "a batch gave other events than decodeBatch")
            for (event, entry) in zip(live, plausible) {
                switch (event, entry) {
                case (.fix(_, let seq, let fix), .fix(let d)): check(seq == d.number && fix == d.fix, "a batch fix is not decodeBatch's")
                case (.heading(_, let seq, let h), .heading(let d)): check(seq == d.number && h == d.heading, "a batch heading differs")
                default: check(false, "a batch topic gave \(event) for \(entry)")
                }
            }
            for case .malformed(let kept, _) in events { check(kept == topic, "a malformed batch entry names another topic") }
            continue
        }
        check(events.count == 1, "a \(channel) topic gave \(events.count) events")
        let event = events[0]
        switch (channel, event) {
        case (.fix, .fix(_, let seq, let fix)):
            checkSaneFix(fix)
            let expected = try? FleetPayload.decodeFix(payload, vehicle: vehicle)
            // The event carries the message number (seq and run together); a run without a seq
            // numbers nothing, so it is compared through `number`, not field by field.
            check(
                expected?.vehicle == vehicle && expected?.fix == fix && expected?.number == seq,
                "the event is not decodeFix's")
            checkFixRoundTrip(fix, vehicle: vehicle, seq: seq?.seq)
        case (.heading, .heading(_, let seq, let heading)):
            checkSaneHeading(heading)
            checkHeadingRoundTrip(heading, vehicle: vehicle, seq: seq?.seq)
        case (.status, .status(let status)):
            check(status.vehicle == vehicle, "a status of another vehicle")
        case (_, .malformed(let kept, _)):
            check(kept == topic, "a malformed event of a valid topic names another topic")
        default:
            check(false, "a \(channel) topic gave \(event)")
        }
    }
    return 0
}
