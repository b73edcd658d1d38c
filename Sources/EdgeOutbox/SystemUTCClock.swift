import EdgeCore
import GNSS

/// The system's wall clock as a ``GNSS/UTCTimestamp`` (millisecond resolution), for the
/// `since` of status messages. Fix times never come from it: they are the receiver's own.
public enum SystemUTCClock {
    /// The current UTC time from `CLOCK_REALTIME`.
    @Sendable public static func now() -> UTCTimestamp { .wallClockNow }
}
