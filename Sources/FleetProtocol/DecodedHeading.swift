import GNSS

/// A heading received on a vehicle's `heading` topic: the reading, the vehicle it belongs to,
/// and the message's per-vehicle sequence number (`nil` when the publisher sent none).
public struct DecodedHeading: Sendable, Equatable {
    /// The vehicle of the topic (and of the payload's `"vehicle"` key, which must agree).
    public let vehicle: VehicleID
    /// The per-vehicle message sequence number, for gap and duplicate detection.
    public let seq: UInt64?
    /// The numbering run `seq` belongs to (``MessageNumber/run``); 0 when the payload had no
    /// `"run"`.
    public let run: UInt64
    /// The heading reading (degrees).
    public let heading: Heading

    /// Wraps a decoded heading.
    public init(vehicle: VehicleID, seq: UInt64?, run: UInt64 = 0, heading: Heading) {
        self.vehicle = vehicle
        self.seq = seq
        self.run = run
        self.heading = heading
    }

    /// The message's number (run and `seq`), `nil` when it carried no `seq`.
    public var number: MessageNumber? { seq.map { MessageNumber(run: run, seq: $0) } }
}
