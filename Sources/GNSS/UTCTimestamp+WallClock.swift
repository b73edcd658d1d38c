#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension UTCTimestamp {
    /// This machine's wall clock (`CLOCK_REALTIME`), UTC, to the millisecond: for when a
    /// message was received or a status was sent. A fix's time is never this: it is the
    /// receiver's own.
    public static var wallClockNow: UTCTimestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UTCTimestamp(millisecondsSince1970: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }
}
