import OrderedCollections

/// How many failed authentications each client may make: a token bucket per client
/// (``PeerAddress``), decided with plain values (times are passed in), so every rule is tested
/// without a clock or a server.
///
/// A client starts with ``Limits/burst`` tokens; each failure takes one, and tokens come back at
/// ``Limits/failuresPerSecond`` up to the burst. A client without a whole token is refused at once
/// (429, no bcrypt run) until it has one again. Only failures cost: a user whose password is right
/// is never slowed, whatever the number of requests a page load makes. Failures checked in
/// parallel before the tokens ran out still count (the balance goes below zero, down to
/// ``Limits/longestLockoutSeconds`` of debt), so guessing in parallel buys no more than guessing in
/// turn. A client whose bucket is full again is forgotten.
///
/// At most ``Limits/maximumClients`` are remembered: a new one beyond it evicts the client whose
/// last failure is oldest, so a client with many addresses cannot grow the table.
package struct AuthenticationFailureBuckets: Sendable {
    /// The rates and sizes of the buckets.
    package struct Limits: Sendable, Equatable {
        /// Failures a client earns back per second (its sustained rate of guesses).
        var failuresPerSecond: Double
        /// Failures a client may make in a row (a bucket's size).
        var burst: Int
        /// The most clients remembered at once.
        var maximumClients: Int
        /// The longest a client is refused for, in seconds, however many failures it piled up.
        var longestLockoutSeconds: Double = 60

        /// `burst` failures in a row, earned back at `failuresPerSecond`, for at most
        /// `maximumClients` clients.
        package init(failuresPerSecond: Double, burst: Int, maximumClients: Int, longestLockoutSeconds: Double = 60) {
            (self.failuresPerSecond, self.burst, self.maximumClients) = (failuresPerSecond, burst, maximumClients)
            self.longestLockoutSeconds = longestLockoutSeconds
        }
    }

    /// What to do with a request that brings credentials.
    package enum Admission: Equatable, Sendable {
        /// Check its credentials.
        case check
        /// Answer 429 without checking: the client may try again in `retryAfterSeconds` (at least
        /// 1). `first`: the client's first refusal since its bucket was last full, the one to log.
        case refuse(retryAfterSeconds: Int, first: Bool)
    }

    private struct Bucket: Sendable {
        var tokens: Double
        var updated: ContinuousClock.Instant
        var refused: Bool
    }

    package let limits: Limits
    /// The clients with failures, the one whose last failure is oldest first.
    private var buckets: OrderedDictionary<String, Bucket> = [:]

    /// Buckets with `limits` (a rate below 0.001 per second, a burst below 1 or a table below 1
    /// client are raised to those).
    package init(limits: Limits) {
        var limits = limits
        limits.failuresPerSecond = max(0.001, limits.failuresPerSecond)
        limits.burst = max(1, limits.burst)
        limits.maximumClients = max(1, limits.maximumClients)
        limits.longestLockoutSeconds = max(0, limits.longestLockoutSeconds)
        self.limits = limits
    }

    /// How many clients are remembered.
    package var count: Int { buckets.count }

    /// Whether `client`'s credentials may be checked at `now`.
    package mutating func admit(_ client: String, now: ContinuousClock.Instant) -> Admission {
        guard let index = buckets.index(forKey: client) else { return .check }
        var bucket = buckets.values[index]
        bucket.tokens = refilled(bucket, now: now)
        bucket.updated = now
        if bucket.tokens >= Double(limits.burst) {
            buckets.remove(at: index)
            return .check
        }
        if bucket.tokens >= 1 {
            buckets.values[index] = bucket
            return .check
        }
        let first = !bucket.refused
        bucket.refused = true
        buckets.values[index] = bucket
        let wait = ((1 - bucket.tokens) / limits.failuresPerSecond).rounded(.up)
        return .refuse(retryAfterSeconds: max(1, Int(min(wait, 86_400))), first: first)
    }

    /// `client`'s credentials were wrong at `now`: one token less.
    package mutating func failed(_ client: String, now: ContinuousClock.Instant) {
        var bucket =
            buckets.removeValue(forKey: client) ?? Bucket(tokens: Double(limits.burst), updated: now, refused: false)
        let floor = 1 - limits.failuresPerSecond * limits.longestLockoutSeconds
        bucket.tokens = max(floor, refilled(bucket, now: now) - 1)
        bucket.updated = now
        if buckets.count >= limits.maximumClients { buckets.removeFirst() }
        buckets[client] = bucket
    }

    private func refilled(_ bucket: Bucket, now: ContinuousClock.Instant) -> Double {
        let elapsed = max(Duration.zero, now - bucket.updated)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return min(Double(limits.burst), bucket.tokens + seconds * limits.failuresPerSecond)
    }
}
