import FleetProtocol
import GNSS
import MQTTCore

/// One message a ``FleetBridgeTranslator`` makes of an event, with what ``FleetBridge`` needs
/// to coalesce it: the vehicle it is about and, for a position, which fix it carries.
///
/// The bridge keeps at most one unpublished message per vehicle and topic (retained or not):
/// a newer output for the same topic replaces one not yet published, and an output whose
/// ``position`` is older than one already accepted for that topic is never published.
public struct FleetBridgeOutput: Sendable, Hashable {
    /// Where a position message stands among the vehicle's positions: the fix's time, then its
    /// message number. ``isOlder(than:)`` compares two.
    public struct Position: Sendable, Hashable, CustomStringConvertible {
        /// The fix's time (UTC, millisecond resolution).
        public var time: UTCTimestamp
        /// The message number of the event that produced the output (a fix's own, or that of
        /// the heading that gave the fix its course); `nil` when the publisher sent none.
        public var seq: MessageNumber?

        /// A position.
        public init(time: UTCTimestamp, seq: MessageNumber?) {
            self.time = time
            self.seq = seq
        }

        /// Whether `self` is known to be older than `other`: an earlier fix time, or the same
        /// time and a lower message number. The same time with a number missing on either side
        /// is not older (a republished position of the same fix, a course from a heading).
        public func isOlder(than other: Position) -> Bool {
            if time != other.time { return time < other.time }
            guard let seq, let otherSeq = other.seq else { return false }
            return seq < otherSeq
        }

        public var description: String { "\(time) seq \(seq.map { "\($0)" } ?? "-")" }
    }

    /// The vehicle the message is about.
    public var vehicle: VehicleID
    /// The message to publish.
    public var message: MQTTMessage
    /// The fix the message carries, for a position message (OwnTracks' location, Home
    /// Assistant's attributes); `nil` for the others (a discovery config, a last will), which
    /// a newer one for the same topic simply replaces.
    public var position: Position?
    /// Whether a newer message for the same topic may replace this one before it is published
    /// (a retained position: only the newest matters); `false` for an event that must go out
    /// whatever follows it (a zone transition).
    public var coalesces: Bool

    /// An output.
    public init(vehicle: VehicleID, message: MQTTMessage, position: Position? = nil, coalesces: Bool = true) {
        self.vehicle = vehicle
        self.message = message
        self.position = position
        self.coalesces = coalesces
    }
}
