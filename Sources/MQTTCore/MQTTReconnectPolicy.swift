import FleetcastCore

/// Exponential backoff with jitter between reconnection attempts.
///
/// The delay before attempt `n` (1-based) is `min(maximumDelay, initialDelay × multiplier^(n-1))`,
/// then shortened by a random fraction up to `jitter` (0.2 means up to 20 % shorter; never past the cap) so that a fleet of clients
/// losing the same broker does not come back in lock-step.
public struct MQTTReconnectPolicy: Sendable, Hashable {
    /// The delay before the first reconnection attempt.
    public var initialDelay: Duration
    /// The ceiling of the delay (before jitter).
    public var maximumDelay: Duration
    /// The growth factor per attempt (≥ 1).
    public var multiplier: Double
    /// The random spread as a fraction of the delay, 0...1.
    public var jitter: Double

    /// Creates a policy; out-of-range values are clamped (multiplier ≥ 1, jitter 0...1).
    ///
    /// The default ceiling is 5 s: a vehicle leaving a tunnel or a dead zone reconnects within
    /// a few seconds of the network coming back (with 30 s it took up to 19 s after a
    /// 2.5-minute cut), while one TCP connection attempt every few seconds costs a client
    /// nothing and the jitter spreads a fleet returning from a broker outage.
    public init(
        initialDelay: Duration = .milliseconds(500),
        maximumDelay: Duration = .seconds(5),
        multiplier: Double = 2,
        jitter: Double = 0.2
    ) {
        self.initialDelay = max(initialDelay, .zero)
        self.maximumDelay = max(maximumDelay, self.initialDelay)
        self.multiplier = max(multiplier, 1)
        self.jitter = min(max(jitter, 0), 1)
    }

    /// The delay before attempt `attempt` (1-based), using `random` for the jitter.
    public func delay(attempt: Int, using random: inout some RandomNumberGenerator) -> Duration {
        Backoff(initial: initialDelay, maximum: maximumDelay, multiplier: multiplier, jitter: jitter)
            .delay(attempt: max(attempt, 1), using: &random)
    }

    public func delay(attempt: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(attempt: attempt, using: &generator)
    }
}
