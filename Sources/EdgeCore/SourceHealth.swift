/// Turns a GNSS source's reconnect reports into what a user sees in the log at the default
/// level: a warning when the source starts failing (naming the cause: "open /dev/ttyUSB9: No
/// such file or directory", "connection refused by 127.0.0.1:2947"), the same again at most
/// every ``repeatEvery`` while it lasts, and a notice when it works again. Not one line per
/// retry.
package struct SourceHealth: Sendable {
    /// What to log.
    package enum Report: Equatable, Sendable {
        /// The source has just started failing.
        case failing(reason: String)
        /// Still failing: `attempts` reconnects over `duration`.
        case stillFailing(reason: String, attempts: Int, duration: Duration)
        /// Working again after `attempts` reconnects over `duration`.
        case recovered(attempts: Int, duration: Duration)
    }

    /// Shortest time between two warnings (a receiver that browns out every 30 s is one
    /// warning and one notice per period, not a pair per brown-out).
    package var repeatEvery: Duration = .seconds(300)
    private var failingSince: ContinuousClock.Instant?
    /// Kept across recoveries: the rate limit spans failures, not one failure.
    private var lastWarning: ContinuousClock.Instant?
    /// This failure was warned about (its recovery then gets a notice).
    private var announced = false
    private var attempts = 0

    /// A source that has not failed.
    package init() {}

    /// Whether the source is failing now.
    package var isFailing: Bool { failingSince != nil }

    /// The source reported a failure (it will retry): what to log, if anything.
    package mutating func failed(reason: String, at now: ContinuousClock.Instant) -> Report? {
        if failingSince == nil {
            failingSince = now
            attempts = 0
        }
        attempts += 1
        if let last = lastWarning, last.duration(to: now) < repeatEvery { return nil }
        lastWarning = now
        defer { announced = true }
        return announced
            ? .stillFailing(reason: reason, attempts: attempts, duration: failingSince!.duration(to: now))
            : .failing(reason: reason)
    }

    /// The source delivered (a fix, a heading, streaming again): a notice if its failure was
    /// warned about.
    package mutating func working(at now: ContinuousClock.Instant) -> Report? {
        guard let since = failingSince else { return nil }
        defer { failingSince = nil; announced = false; attempts = 0 }
        return announced ? .recovered(attempts: attempts, duration: since.duration(to: now)) : nil
    }
}
