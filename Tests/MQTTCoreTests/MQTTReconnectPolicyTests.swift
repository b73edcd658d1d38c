import FleetcastTestSupport
import MQTTCore
import Testing

@Suite struct MQTTReconnectPolicyTests {
    @Test func withoutJitterTheDelayDoublesUpToTheCeiling() {
        let policy = MQTTReconnectPolicy(initialDelay: .milliseconds(500), maximumDelay: .seconds(4), multiplier: 2, jitter: 0)
        let delays = (1...6).map { policy.delay(attempt: $0) }
        #expect(delays == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(4), .seconds(4)])
    }

    @Test func jitterSpreadsDelaysWithinBounds() {
        let policy = MQTTReconnectPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(60), multiplier: 2, jitter: 0.25)
        var generator = SplitMix64(seed: 42)
        let delays = (0..<200).map { _ in policy.delay(attempt: 3, using: &generator) }
        #expect(delays.allSatisfy { $0 >= .seconds(3) && $0 <= .seconds(5) })
        #expect(Set(delays).count > 100, "jitter must actually vary the delay")
    }

    @Test func outOfRangeSettingsAreClamped() {
        let policy = MQTTReconnectPolicy(initialDelay: .seconds(2), maximumDelay: .seconds(1), multiplier: 0.5, jitter: 3)
        #expect(policy.maximumDelay == .seconds(2))
        #expect(policy.multiplier == 1)
        #expect(policy.jitter == 1)
    }
}
