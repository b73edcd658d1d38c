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

    @Test func aNumberThatWouldPinTheLivePositionIsRefusedAsTheRecorderRefusesIt() {
        let decoder = FleetMessageDecoder()
        let fix = Fix(time: UTCTimestamp(millisecondsSince1970: t0), latitude: 1, longitude: 2, mode: .twoD)
        func decoded(seq: UInt64, run: UInt64) -> FleetEvent? {
            decoder.events(topic: "fleet/van-7/fix", payload: FleetPayload.encode(fix, vehicle: "van-7", seq: seq, run: run)).first
        }
        for (seq, run) in [(UInt64(5), UInt64.max), (UInt64.max, 0), (5, UInt64(t0) + 2 * 86_400_000)] {
            guard case .malformed(_, let reason)? = decoded(seq: seq, run: run) else {
                Issue.record("seq \(seq) run \(run) was taken")
                continue
            }
            #expect(reason.contains("implausible fix"), "\(reason)")
        }
        // A clock a few hours ahead of the receiver (a vehicle's RTC) is not refused.
        #expect(
            decoded(seq: 5, run: UInt64(t0) + 3 * 3_600_000) == .fix(van, seq: MessageNumber(run: UInt64(t0) + 3 * 3_600_000, seq: 5), fix))
        #expect(decoded(seq: 5, run: UInt64(t0) - 86_400_000) != nil)
        // In a batch, such an event alone is refused; the others stay.
        var writer = FleetPayload.CompactBatchWriter(vehicle: van, run: UInt64.max, maximumBytes: 60_000)
        _ = writer.append(fix, seq: 1)
        let events = decoder.events(topic: "fleet/van-7/batch", payload: writer.finish())
        #expect(events.count == 1)
        if case .malformed(_, let reason)? = events.first { #expect(reason.contains("implausible")) } else { Issue.record("taken") }
    }
}
