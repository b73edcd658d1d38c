/// Turns a GNSS source's reconnect reports into what a user sees in the log at the default
/// level: a warning when the source starts failing (naming the cause: "open /dev/ttyUSB9: No
/// such file or directory", "connection refused by 127.0.0.1:2947"), the same again at most
/// every ``repeatEvery`` while it lasts, and a notice when it works again. Not one line per
/// retry.
struct SourceHealth: Sendable {
    /// What to log.
    enum Report: Equatable, Sendable {
        /// The source has just started failing.
        case failing(reason: String)
        /// Still failing: `attempts` reconnects over `duration`.
        case stillFailing(reason: String, attempts: Int, duration: Duration)
        /// Working again after `attempts` reconnects over `duration`.
        case recovered(attempts: Int, duration: Duration)
    }

    /// Shortest time between two warnings about the same failure.
    var repeatEvery: Duration = .seconds(300)
    private var failingSince: ContinuousClock.Instant?
    private var lastWarning: ContinuousClock.Instant?
    private var attempts = 0

    /// Whether the source is failing now.
    var isFailing: Bool { failingSince != nil }

    /// The source reported a failure (it will retry): what to log, if anything.
    mutating func failed(reason: String, at now: ContinuousClock.Instant) -> Report? {
        attempts += 1
        guard let since = failingSince, let last = lastWarning else {
            failingSince = now
            lastWarning = now
            return .failing(reason: reason)
        }
        guard last.duration(to: now) >= repeatEvery else { return nil }
        lastWarning = now
        return .stillFailing(reason: reason, attempts: attempts, duration: since.duration(to: now))
    }

    /// The source delivered (a fix, a heading, streaming again): a notice if it was failing.
    mutating func working(at now: ContinuousClock.Instant) -> Report? {
        guard let since = failingSince else { return nil }
        defer { failingSince = nil; lastWarning = nil; attempts = 0 }
        return .recovered(attempts: attempts, duration: since.duration(to: now))
    }
}
