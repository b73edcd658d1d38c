import FleetCore
import FleetProtocol
import GNSS
import Testing

/// What no receiver or agent sends is refused by the decoder every consumer shares (watch,
/// serve, bridge, record), cheaply and the same way: a batch denser than a 20 Hz receiver, and
/// a message number that would pin a vehicle's live position.
@Suite struct FleetPlausibilityTests {
    let van = VehicleID("van-7")!
    let t0: Int64 = 1_767_323_045_000  // 2026-01-02T03:04:05Z

    func batch(_ times: [Int64], run: UInt64 = 0) -> [UInt8] {
        var writer = FleetPayload.CompactBatchWriter(vehicle: van, run: run, maximumBytes: 60_000)
        for (index, time) in times.enumerated() {
            let fix = Fix(time: UTCTimestamp(millisecondsSince1970: time), latitude: 48.85, longitude: 2.29, speed: 10, mode: .threeD)
            let appended = writer.append(fix, seq: UInt64(index + 1))
            #expect(appended)
        }
        return writer.finish()
    }

    @Test func aBatchDenserThanA20HzReceiverIsRefusedWholeAsOneEvent() {
        let decoder = FleetMessageDecoder()
        let hundredHertz = decoder.events(topic: "fleet/van-7/batch", payload: batch((0..<2_048).map { t0 + Int64($0) * 10 }))
        #expect(hundredHertz.count == 1)
        guard case .malformed(_, let reason)? = hundredHertz.first else {
            Issue.record("a 100 Hz batch was taken: \(hundredHertz.count) events")
            return
        }
        #expect(reason.contains("implausible") && reason.contains("within one second"), "\(reason)")
        // All in one instant but for the last: as dense, however long the whole span.
        let burst = decoder.events(topic: "fleet/van-7/batch", payload: batch(Array(repeating: t0, count: 2_000) + [t0 + 200_000]))
        #expect(burst.count == 1)
        // A 20 Hz receiver's minute (1,200 fixes), and one whose time stamps jitter, pass whole.
        let twenty = decoder.events(topic: "fleet/van-7/batch", payload: batch((0..<1_200).map { t0 + Int64($0) * 50 }))
        #expect(twenty.count == 1_200 && twenty.allSatisfy { if case .fix = $0 { true } else { false } })
        let jitter = decoder.events(topic: "fleet/van-7/batch", payload: batch((0..<1_200).map { t0 + Int64($0) * 50 + Int64($0 % 3) * 7 }))
        #expect(jitter.count == 1_200)
        // Backlog batches (JSON) are judged the same way.
        var backlog = FleetPayload.BacklogWriter(vehicle: van)
        for index in 0..<100 {
            let fix = Fix(time: UTCTimestamp(millisecondsSince1970: t0 + Int64(index)), latitude: 1, longitude: 2, mode: .twoD)
            backlog.append(kind: .fix, payload: FleetPayload.encode(fix, vehicle: "van-7", seq: UInt64(index + 1)))
        }
        let dense = decoder.events(topic: "fleet/van-7/backlog", payload: backlog.finish())
        #expect(dense.count == 1, "100 fixes in 100 ms")
    }

    @Test func aNumberOrATimeAheadOfTheConsumersClockIsRefusedAsTheRecorderRefusesIt() {
        // The consumer's clock says t0; the sender chooses everything else.
        let decoder = FleetMessageDecoder(clock: { [t0] in UTCTimestamp(millisecondsSince1970: t0) })
        let fix = Fix(time: UTCTimestamp(millisecondsSince1970: t0), latitude: 1, longitude: 2, mode: .twoD)
        func decoded(_ fix: Fix, seq: UInt64?, run: UInt64) -> FleetEvent? {
            decoder.events(topic: "fleet/van-7/fix", payload: FleetPayload.encode(fix, vehicle: "van-7", seq: seq, run: run)).first
        }
        for (seq, run) in [(UInt64(5), UInt64.max), (UInt64.max, 0), (5, UInt64(t0) + 2 * 86_400_000)] {
            guard case .malformed(_, let reason)? = decoded(fix, seq: seq, run: run) else {
                Issue.record("seq \(seq) run \(run) was taken")
                continue
            }
            #expect(reason.contains("implausible fix"), "\(reason)")
        }
        // A fix dated 9000 or 9999 with a run of its own date: the lead over its own time is
        // nothing, over the consumer's clock millennia. Refused, with or without a number.
        for year in [9000, 9999] {
            let forgedTime = UTCTimestamp(millisecondsSince1970: Int64(year - 1970) * 31_556_952_000)
            let forged = Fix(time: forgedTime, latitude: 1, longitude: 2, mode: .twoD)
            for seq in [UInt64(5), nil] {
                guard
                    case .malformed(_, let reason)? = decoded(
                        forged, seq: seq, run: seq == nil ? 0 : UInt64(forgedTime.millisecondsSince1970))
                else {
                    Issue.record("a fix dated \(year) was taken (seq \(String(describing: seq)))")
                    continue
                }
                #expect(reason.contains("ahead of this consumer's clock"), "\(reason)")
            }
        }
        // A clock a few hours ahead of the consumer's (a vehicle's RTC) is not refused, nor a
        // fix timed a few hours ahead.
        #expect(
            decoded(fix, seq: 5, run: UInt64(t0) + 3 * 3_600_000)
                == .fix(van, seq: MessageNumber(run: UInt64(t0) + 3 * 3_600_000, seq: 5), fix))
        let early = Fix(time: UTCTimestamp(millisecondsSince1970: t0 + 3 * 3_600_000), latitude: 1, longitude: 2, mode: .twoD)
        #expect(decoded(early, seq: 5, run: UInt64(t0)) == .fix(van, seq: MessageNumber(run: UInt64(t0), seq: 5), early))
        // In a batch, such an event alone is refused; the others stay.
        var writer = FleetPayload.CompactBatchWriter(vehicle: van, run: UInt64.max, maximumBytes: 60_000)
        _ = writer.append(fix, seq: 1)
        let events = decoder.events(topic: "fleet/van-7/batch", payload: writer.finish())
        #expect(events.count == 1)
        if case .malformed(_, let reason)? = events.first { #expect(reason.contains("implausible")) } else { Issue.record("taken") }
    }

    @Test func anOldRecordingReplayedNowIsTakenWhole() {
        // A drive recorded a month, or years, before: the agent's run begins now (the consumer's
        // clock), the fixes carry their own old times. The rule of the first version (a run at
        // most a day ahead of the event's own time) refused every one of them.
        let now = t0 + 30 * 86_400_000
        let decoder = FleetMessageDecoder(clock: { UTCTimestamp(millisecondsSince1970: now) })
        for age in [Int64(30), 400, 3_000] {
            let start = now - age * 86_400_000
            var writer = FleetPayload.CompactBatchWriter(vehicle: van, run: UInt64(now - 5_000), maximumBytes: 60_000)
            for index in 0..<600 {
                let fix = Fix(
                    time: UTCTimestamp(millisecondsSince1970: start + Int64(index) * 1_000), latitude: 48.85, longitude: 2.29, speed: 10,
                    mode: .threeD)
                _ = writer.append(fix, seq: UInt64(index + 1))
            }
            let events = decoder.events(topic: "fleet/van-7/batch", payload: writer.finish())
            #expect(events.count == 600 && events.allSatisfy { if case .fix = $0 { true } else { false } }, "\(age) days old")
            var backlog = FleetPayload.BacklogWriter(vehicle: van)
            let fix = Fix(time: UTCTimestamp(millisecondsSince1970: start), latitude: 1, longitude: 2, mode: .twoD)
            backlog.append(kind: .fix, payload: FleetPayload.encode(fix, vehicle: "van-7", seq: 9, run: UInt64(now)))
            #expect(decoder.events(topic: "fleet/van-7/backlog", payload: backlog.finish()).count == 1)
            if case .backlog? = decoder.events(topic: "fleet/van-7/backlog", payload: backlog.finish()).first {
            } else {
                Issue.record("a backlog fix \(age) days old was refused")
            }
        }
    }
}
