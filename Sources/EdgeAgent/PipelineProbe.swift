import TelemetryHub

/// Decides, at each tick of systemd's watchdog, whether the agent's pipeline is really alive,
/// so that `WATCHDOG=1` is sent only then and a wedged agent is restarted.
///
/// Alive means all of: the publisher's sync loop has run recently (it wakes at least once per
/// sync interval, idle or not, so its tasks and locks answer); events that reached the hub are
/// being taken by the publisher's intake (none waits while the intake's count stands still);
/// and a live source is running. Reading the hub's counters takes the hub's lock, so a hub that
/// no longer answers stops the ticks by itself. A receiver that merely sends nothing (unplugged,
/// no sky) is not a wedge: the source retries and reports it, and a restart would not help.
package struct PipelineProbe: Sendable {
    /// The intake's delivered count at the previous tick.
    private var lastDelivered: UInt64?
    /// Consecutive ticks at which events waited and the intake took none.
    private var stuckTicks = 0

    /// A probe that has seen no tick.
    package init() {}

    /// Returns `nil` when alive, else what is stuck (for the log).
    ///
    /// - Parameters:
    ///   - now: the current instant.
    ///   - publisherActivity: when the publisher's sync loop last ran.
    ///   - syncInterval: how often that loop runs at least.
    ///   - watchdogInterval: systemd's `WatchdogSec`. The sync loop may be held up to half of it
    ///     (a commit on a slow SD card) without being called stuck: one missed ping is not a
    ///     restart, and a write that outlasts the whole interval is a wedge.
    ///   - intake: the publisher's hub subscription's counters (`nil` for a replay, which the
    ///     publisher reads itself, waiting for the broker when it must).
    ///   - sourceRunning: whether a live source is running (`true` for a replay).
    package mutating func check(
        now: ContinuousClock.Instant, publisherActivity: ContinuousClock.Instant, syncInterval: Duration,
        watchdogInterval: Duration = .seconds(10), intake: HubSubscriberStatistics?, sourceRunning: Bool
    ) -> String? {
        let delivered = intake?.delivered
        if let intake, intake.buffered > 0, let lastDelivered, intake.delivered == lastDelivered {
            stuckTicks += 1
        } else {
            stuckTicks = 0
        }
        lastDelivered = delivered
        let silence = publisherActivity.duration(to: now)
        if silence > max(syncInterval * 3, watchdogInterval / 2) {
            return "the publisher's sync loop has not run for \(silence.components.seconds) s"
        }
        // Two ticks in a row: events that arrived just before one tick are not a stall.
        if stuckTicks >= 2, let intake {
            return "\(intake.buffered) GNSS events wait in the hub and the publisher's intake takes none"
        }
        if !sourceRunning { return "the GNSS source is not running" }
        return nil
    }
}
