#ifndef FLEETCAST_CTIMEX_SHIM_H
#define FLEETCAST_CTIMEX_SHIM_H

// The kernel's clock discipline state, read with adjtimex(2) (modes 0: read only, no privilege
// needed): what NTP daemons (chrony, ntpd, systemd-timesyncd) tell the kernel about the system
// clock. Glibc's Swift module does not export <sys/timex.h>, hence this wrapper.

#include <errno.h>
#include <sys/timex.h>

/// What adjtimex(2) says of the system clock.
typedef struct {
    /// adjtimex's return value: the clock state (TIME_OK…, TIME_ERROR = 5), or -1 on failure.
    int state;
    /// The status bits (STA_UNSYNC = 0x40: not synchronized).
    int status;
    /// The maximum error, microseconds (the kernel lets it grow to 16 s when nothing updates it).
    long maxErrorMicroseconds;
    /// errno when state is -1 (EPERM: a seccomp filter such as systemd's ProtectClock=yes).
    int error;
} fleetcast_clock_sync;

/// Reads the kernel's clock state without changing it.
static inline fleetcast_clock_sync fleetcast_read_clock_sync(void) {
    struct timex timex = {0};
    timex.modes = 0;
    int state = adjtimex(&timex);
    fleetcast_clock_sync result = {state, timex.status, timex.maxerror, state == -1 ? errno : 0};
    return result;
}

/// STA_UNSYNC, as a value Swift can read.
static inline int fleetcast_sta_unsync(void) { return STA_UNSYNC; }

/// TIME_ERROR, as a value Swift can read.
static inline int fleetcast_time_error(void) { return TIME_ERROR; }

#endif
