import FleetcastCore
import MQTTCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A non-blocking pipe that wakes a network loop blocked in `poll(2)`: one byte written per
/// wake-up, all of them read back (drained) by the loop. Owned by the callback context; both
/// ends are closed when it goes.
///
/// Once a client that acknowledges on receipt is connected, it replaces libmosquitto's own
/// wake-up (a socket pair it writes one byte to for every packet queued, and `mosquitto_loop`
/// reads one byte of per turn: one turn of the loop, one `pselect` and one `read` per packet,
/// however many are waiting). A loop that says it is about to sleep (``sleeps(_:)``) is woken
/// once by the first packet queued after that (``packetQueued()``); packets queued while it is
/// awake cost no system call here, and it writes all of them in its next turn.
final class LoopWakeup: Sendable {
    /// The end the loop polls.
    let readEnd: Int32
    private let writeEnd: Int32
    /// Whether the loop is asleep (or about to be) and must be woken for a queued packet.
    private let sleeping = SanitizerVisibleMutex(false)

    init() throws(MQTTError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            throw .invalidConfiguration("cannot create the network loop's wake-up pipe: \(String(cString: strerror(errno)))")
        }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Wakes the loop (a full pipe already will).
    func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// The loop says it is about to sleep (`true`: it must then look once more for queued
    /// packets before it polls, as one queued before this call does not wake it) or is awake.
    func sleeps(_ asleep: Bool) {
        sleeping.withLock { $0 = asleep }
    }

    /// Called after a packet was queued with libmosquitto: wakes the loop if it sleeps, once
    /// (the next packets find it awake). On the loop's own thread (a callback) it finds the
    /// loop awake and does nothing.
    func packetQueued() {
        let asleep = sleeping.withLock { asleep in
            defer { asleep = false }
            return asleep
        }
        if asleep { wake() }
    }

    /// Reads every pending wake-up: one `read` unless more than its buffer's worth wait.
    func drain() {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer in
            while read(readEnd, buffer.baseAddress, buffer.count) == buffer.count {}
        }
    }
}
