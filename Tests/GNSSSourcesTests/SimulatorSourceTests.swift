import Foundation
import GNSS
import GNSSSources
import Testing

extension LiveSourceTests {
    @Suite struct SimulatorSourceTests {
        @Test func fixesArriveAtTheAskedRateAndMovePlausibly() async throws {
            let source = try GNSSSourceDescriptor(parsing: "sim:?rate=10&speed=15&lat=48.8566&lon=2.3522")
                .makeSource(logger: quietLogger)
            let recorder = EventRecorder(source)
            let events = try await recorder.waitFor("25 fixes") { Set($0.fixes.map(\.time)).count >= 25 }
            await recorder.stop()
            #expect(events.first == .state(.connecting))
            #expect(events.states.contains(.streaming))
            // One fix per time stamp (a cycle may be refined; keep the last one per time).
            var byTime: [UTCTimestamp: Fix] = [:]
            for f in events.fixes { byTime[f.time] = f }
            let fixes = byTime.values.sorted { $0.time < $1.time }
            let steps = zip(fixes, fixes.dropFirst()).map { ($0, $1) }
            let intervals = steps.map { Double($1.time.millisecondsSince1970 - $0.time.millisecondsSince1970) / 1000 }
            let mean = intervals.reduce(0, +) / Double(intervals.count)
            #expect(abs(mean - 0.1) < 0.03, "mean interval \(mean) s at 10 Hz")
            // Near the start, in Paris, a real time stamp.
            #expect(abs(fixes[0].latitude - 48.8566) < 0.02 && abs(fixes[0].longitude - 2.3522) < 0.02)
            #expect(abs(fixes[0].time.secondsSince1970 - Date.nowSeconds) < 60)
            // Each step moves about speed / rate (accelerating from rest, so use the reported speed).
            for (a, b) in steps {
                let dt = Double(b.time.millisecondsSince1970 - a.time.millisecondsSince1970) / 1000
                let expected = (a.speed ?? 0) * dt
                #expect(abs(a.distance(to: b) - expected) < 0.5 + 2.5 * dt * dt, "step \(a.distance(to: b)) m, expected \(expected) m")
            }
            #expect((fixes.last?.speed ?? 0) > (fixes.first?.speed ?? 0), "accelerating from rest")
            #expect(events.contains { $0.heading?.trueHeading != nil })
        }
    }
}
