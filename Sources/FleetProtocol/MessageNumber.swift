/// Where a fix or heading stands in its vehicle's numbering: the numbering run it belongs to
/// and its `seq` within that run.
///
/// A vehicle numbers its messages 1, 2, 3, … and keeps the count across restarts in its
/// outbox. When the outbox is lost (found corrupt and moved aside, the package purged, the SD
/// card replaced, or no working store at all), the numbering starts again in a new **run**: the
/// `"run"` key of every fix and heading, the wall-clock time at which the run began, in
/// milliseconds since 1970. `(vehicle, run, seq)` therefore names one message for ever: a
/// redelivery has the same number, a message of a new run never takes the number of an old
/// one. Run `0` is the numbering of agents that send no `"run"` key (before the key existed);
/// an agent keeps the run of the store it opens, so an upgraded vehicle goes on in run 0 until
/// its store is lost.
///
/// Ordering: within a run by `seq`; a later run (a higher `run`) is newer than every message
/// of an earlier one.
public struct MessageNumber: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// The numbering run: when it began, in milliseconds since 1970 (UTC); `0` when the
    /// publisher sent no `"run"`.
    public var run: UInt64
    /// The sequence number within the run, from 1.
    public var seq: UInt64

    /// A message number.
    public init(run: UInt64 = 0, seq: UInt64) {
        self.run = run
        self.seq = seq
    }

    /// `seq` in run 0 (tests, and numbers of publishers that send no run).
    public init(integerLiteral seq: UInt64) {
        self.init(run: 0, seq: seq)
    }

    public static func < (a: Self, b: Self) -> Bool {
        (a.run, a.seq) < (b.run, b.seq)
    }

    /// `seq` alone in run 0, `run/seq` otherwise.
    public var description: String { run == 0 ? "\(seq)" : "\(run)/\(seq)" }
}
