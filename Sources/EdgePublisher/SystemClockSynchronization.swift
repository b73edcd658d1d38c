import CTimex
import EdgeCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
