import FleetcastCore
import FleetcastTestSupport
import Testing

@Suite struct BackoffTests {
    @Test func withoutJitterDelaysDoubleUpToTheCap() {
        var b = Backoff(initial: .milliseconds(100), maximum: .seconds(1), multiplier: 2, jitter: 0)
        let delays = (0..<7).map { _ in b.next() }
        #expect(
            delays == [
                .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800),
                .seconds(1), .seconds(1), .seconds(1),
            ])
        #expect(b.attempt == 7)
    }

    @Test func resetStartsAgainFromTheInitialDelay() {
        var b = Backoff(initial: .milliseconds(50), maximum: .seconds(10), jitter: 0)
        _ = b.next(); _ = b.next(); _ = b.next()
        b.reset()
        #expect(b.attempt == 0)
        #expect(b.next() == .milliseconds(50))
    }

    @Test func jitterStaysWithinItsFractionAndUnderTheCap() {
        var rng = SplitMix64(seed: 42)
        var b = Backoff(initial: .milliseconds(100), maximum: .seconds(2), multiplier: 2, jitter: 0.25)
        var nominal = Duration.milliseconds(100)
        var distinct = Set<Duration>()
        for _ in 0..<40 {
            let d = b.next(using: &rng)
            #expect(d <= nominal, "jitter only shortens a delay")
            #expect(d >= nominal * 0.75 - .nanoseconds(1))
            distinct.insert(d)
            nominal = min(nominal * 2, .seconds(2))
        }
        #expect(distinct.count > 10, "jitter varies the delays")
    }

    @Test func outOfRangeSettingsAreClamped() {
        let b = Backoff(initial: .seconds(5), maximum: .seconds(1), multiplier: 0.5, jitter: 3)
        #expect(b.maximum == .seconds(5))
        #expect(b.multiplier == 1)
        #expect(b.jitter == 1)
    }
}
