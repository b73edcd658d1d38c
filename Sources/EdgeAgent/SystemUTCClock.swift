import GNSS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's wall clock as a ``GNSS/UTCTimestamp`` (millisecond resolution), for the
/// `since` of status messages. Fix times never come from it: they are the receiver's own.
public enum SystemUTCClock {
    /// The current UTC time from `CLOCK_REALTIME`.
    @Sendable public static func now() -> UTCTimestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UTCTimestamp(millisecondsSince1970: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }
}
