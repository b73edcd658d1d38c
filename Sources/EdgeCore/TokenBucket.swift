/// A rate limiter: `rate` tokens per second, at most `burst` saved up. Taking more than is
/// there goes into debt, and the answer is how long to wait before acting, so the average
/// never exceeds `rate`. A plain value; the caller passes the time in.
package struct TokenBucket: Sendable {
    /// Tokens added per second (> 0).
    package let rate: Double
    /// Most tokens saved up.
    package let burst: Double
    private var tokens: Double
    private var last: ContinuousClock.Instant

    /// A full bucket at `now`.
    package init(rate: Double, burst: Double, now: ContinuousClock.Instant) {
        self.rate = max(rate, 0.001)
        self.burst = max(burst, 1)
        self.tokens = self.burst
        self.last = now
    }

    /// Takes `count` tokens at `now`; returns how long to wait before using them (zero when
    /// they were there).
    package mutating func take(_ count: Int, at now: ContinuousClock.Instant) -> Duration {
        refill(now)
        tokens -= Double(count)
        return tokens >= 0 ? .zero : .nanoseconds(Int64((-tokens / rate * 1e9).rounded(.up)))
    }

    private mutating func refill(_ now: ContinuousClock.Instant) {
        guard now > last else { return }
        let elapsed = last.duration(to: now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        tokens = min(burst, tokens + seconds * rate)
        last = now
    }
}
