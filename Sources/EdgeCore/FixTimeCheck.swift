import GNSS

/// The agent's rule for a live receiver's fix times: a fix stamped implausibly far from a
/// synchronized system clock is refused, not published.
///
/// A receiver after a GPS week rollover (its dates 1024 weeks, 19.6 years, early), or spoofed
/// serial data, stamps fixes far from the true time; published, a future-dated fix would freeze
/// the vehicle in every live view until that date (a later, correct fix looks older). When the
/// kernel says the system clock is synchronized (``SystemClockSynchronization``) it is the
/// better clock, and a fix more than ``maximumOffset`` away from it, later or earlier, is
/// refused and counted. When the clock is not synchronized (no network yet, a Pi without a
/// real-time clock just booted), the receiver is the better clock and every fix passes.
///
/// Only for live receivers (`serial:`, `gpsd:`): a replay publishes a recording's own, old
/// times, the simulator's times are the system clock's; and fixes stored in the outbox earlier
/// are not checked again. A plain value: ``evaluate(fixTime:clock:clockSynchronized:at:)``
/// decides and says what to log; the publisher logs it outside its lock.
public struct FixTimeCheck: Sendable {
    /// The default ``maximumOffset``: 15 minutes. A live fix is seconds old at most (receiver
    /// latency, a serial buffer; a receiver that reports GPS time for UTC is 18 s off); a week
    /// rollover is 19.6 years off and a spoofer moving the clock by hours is caught.
    public static let defaultMaximumOffset: Duration = .seconds(15 * 60)
    /// A new run of refused fixes is logged at most this often (5 minutes); the count goes on.
    public static let logInterval: Duration = .seconds(300)

    /// What to log after a decision.
    public enum LogAction: Sendable, Equatable {
        /// The first refused fix of a run: the fix's time, the system clock's, and the offset
        /// (fix − clock) in milliseconds.
        case refusing(fixTime: UTCTimestamp, clock: UTCTimestamp, offsetMilliseconds: Int64)
        /// Fixes pass again (plausible, or the clock is no longer synchronized) after `refused`
        /// refusals; only when the run's start was logged.
        case accepting(refused: UInt64)
    }

    /// One decision.
    public struct Decision: Sendable, Equatable {
        /// Whether the fix goes on to be published.
        public var accept: Bool
        /// What to log, if anything.
        public var log: LogAction?

        /// A decision to `accept` the fix or not, and what to `log`.
        public init(accept: Bool, log: LogAction?) { (self.accept, self.log) = (accept, log) }
    }

    /// The largest distance in time between a fix and a synchronized system clock.
    public let maximumOffset: Duration
    /// Fixes refused since start.
    public private(set) var refused: UInt64 = 0
    /// The current run of refused fixes: how many, and whether its start was logged.
    private var run: (count: UInt64, logged: Bool)?
    /// When a run's start was last logged.
    private var lastLogged: ContinuousClock.Instant?

    /// A rule with the given tolerance (``defaultMaximumOffset`` by default).
    public init(maximumOffset: Duration = Self.defaultMaximumOffset) {
        self.maximumOffset = maximumOffset
    }

    /// Decides on a fix stamped `fixTime` when the system clock says `clock`.
    ///
    /// - Parameters:
    ///   - clockSynchronized: whether the system clock is synchronized now.
    ///   - instant: now, on a monotonic clock (for ``logInterval``).
    public mutating func evaluate(
        fixTime: UTCTimestamp, clock: UTCTimestamp, clockSynchronized: Bool, at instant: ContinuousClock.Instant
    ) -> Decision {
        let offset = fixTime.millisecondsSince1970 - clock.millisecondsSince1970
        let limit = maximumOffset.components
        let limitMilliseconds = limit.seconds * 1000 + limit.attoseconds / 1_000_000_000_000_000
        guard clockSynchronized, offset.magnitude > limitMilliseconds.magnitude else {
            guard let ended = run else { return Decision(accept: true, log: nil) }
            run = nil
            return Decision(accept: true, log: ended.logged ? .accepting(refused: ended.count) : nil)
        }
        refused += 1
        if var current = run {
            current.count += 1
            run = current
            return Decision(accept: false, log: nil)
        }
        let log = lastLogged.map { $0.duration(to: instant) >= Self.logInterval } ?? true
        if log { lastLogged = instant }
        run = (1, log)
        return Decision(accept: false, log: log ? .refusing(fixTime: fixTime, clock: clock, offsetMilliseconds: offset) : nil)
    }
}
