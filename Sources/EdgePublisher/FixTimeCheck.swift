import CTimex
import GNSS
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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

/// Whether the system clock is synchronized, as the kernel's clock discipline says: what
/// chrony, ntpd or systemd-timesyncd told it through adjtimex(2) (read only, `CTimex`).
public enum SystemClockSynchronization {
    /// The largest maximum error (adjtimex's `maxerror`) of a clock taken as synchronized:
    /// 1 s. A daemon that hears its servers keeps it at milliseconds; it grows by 0.5 ms a
    /// second without them, and the kernel gives up at 16 s.
    public static let maximumErrorMicroseconds = 1_000_000

    /// Whether adjtimex(2) answers with a state other than `TIME_ERROR`, `STA_UNSYNC` clear and
    /// a maximum error under ``maximumErrorMicroseconds``. A container or a machine without a
    /// time daemon says no (fixes then pass).
    @Sendable public static func isSynchronized() -> Bool {
        if case .synchronized = read() { return true }
        return false
    }

    /// What adjtimex(2) says.
    public enum Reading: Sendable, Equatable {
        /// Synchronized (see ``isSynchronized()``).
        case synchronized
        /// Not synchronized, or the maximum error too large.
        case unsynchronized
        /// adjtimex(2) failed: the reason (`Operation not permitted` under a seccomp filter that
        /// blocks `@clock`, as systemd's `ProtectClock=yes` does).
        case unreadable(String)
    }

    /// Reads the kernel's clock state now.
    public static func read() -> Reading {
        let sync = fleetcast_read_clock_sync()
        guard sync.state >= 0 else { return .unreadable(String(cString: strerror(sync.error))) }
        let synchronized =
            sync.state != fleetcast_time_error() && sync.status & fleetcast_sta_unsync() == 0
            && sync.maxErrorMicroseconds < maximumErrorMicroseconds
        return synchronized ? .synchronized : .unsynchronized
    }
}

extension FixTimeCheck {
    /// Logs `action`: a refusal run's start as a warning (a user sees it at the default level),
    /// its end as a notice.
    static func log(_ action: LogAction, to logger: Logger, maximumOffset: Duration?) {
        switch action {
        case .refusing(let fixTime, let clock, let offset):
            logger.warning(
                "Refusing fixes stamped implausibly far from the synchronized system clock (GPS week rollover, or spoofed data?); they are counted, not published",
                metadata: [
                    "gnss.fixTime": "\(fixTime)", "gnss.systemTime": "\(clock)", "gnss.offsetSeconds": "\(offset / 1000)",
                    "gnss.maxOffsetSeconds": "\(maximumOffset?.components.seconds ?? 0)",
                ])
        case .accepting(let refused):
            logger.notice("Accepting fixes again", metadata: ["gnss.refusedFixes": "\(refused)"])
        }
    }
}
