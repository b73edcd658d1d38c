/// Delays between reconnection attempts: exponential growth with jitter, capped, reset
/// after a success.
///
/// Attempt `n` (from 0) waits `min(maximum, initial × multiplierⁿ)`, reduced by a random
/// fraction of up to `jitter` of itself (so many agents restarted together do not retry in
/// lockstep, and the cap is never exceeded). Call ``reset()`` once data flows again.
public struct Backoff: Sendable, Equatable {
    /// Delay before the first retry.
    public var initial: Duration
    /// Largest delay ever returned.
    public var maximum: Duration
    /// Growth factor per attempt (≥ 1).
    public var multiplier: Double
    /// Fraction (0...1) of each delay that is randomised away.
    public var jitter: Double
    /// Retries since the last success.
    public private(set) var attempt = 0

    /// The default for sources: 250 ms doubling up to 30 s, 20 % jitter.
    public static let `default` = Backoff(initial: .milliseconds(250), maximum: .seconds(30))

    /// A backoff policy; out-of-range values are clamped (multiplier ≥ 1, jitter 0...1,
    /// maximum ≥ initial ≥ 0).
    public init(initial: Duration, maximum: Duration, multiplier: Double = 2, jitter: Double = 0.2) {
        let initial = max(initial, .zero)
        self.initial = initial
        self.maximum = max(maximum, initial)
        self.multiplier = multiplier.isFinite ? max(multiplier, 1) : 2
        self.jitter = jitter.isFinite ? min(max(jitter, 0), 1) : 0
    }

    /// The delay before the next attempt, using the system random number generator.
    public mutating func next() -> Duration {
        var rng = SystemRandomNumberGenerator()
        return next(using: &rng)
    }

    /// The delay before the next attempt, drawing the jitter from `rng`.
    public mutating func next<R: RandomNumberGenerator>(using rng: inout R) -> Duration {
        let delay = delay(attempt: attempt < Int.max ? attempt + 1 : attempt, using: &rng)
        if attempt < Int.max { attempt += 1 }
        return delay
    }

    /// The delay before retry number `attempt` (1 for the first retry), without changing any
    /// state: `initial × multiplier^(attempt−1)`, capped at `maximum`, then shortened by a random
    /// fraction up to `jitter` (so it never exceeds the cap).
    public func delay<R: RandomNumberGenerator>(attempt: Int, using rng: inout R) -> Duration {
        let cap = Self.seconds(maximum)
        var base = Self.seconds(initial)
        var n = 1
        while n < attempt, base < cap {
            base *= multiplier
            n += 1
        }
        base = min(base, cap)
        let reduction = jitter > 0 ? Double.random(in: 0...jitter, using: &rng) : 0
        return .nanoseconds(Int64((base * (1 - reduction) * 1e9).rounded()))
    }

    /// Starts again from ``initial`` (after a successful connection).
    public mutating func reset() {
        attempt = 0
    }

    static func seconds(_ d: Duration) -> Double {
        let c = d.components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
