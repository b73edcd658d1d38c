import GNSS

/// A heading received on a vehicle's `heading` topic: the reading, the vehicle it belongs to,
/// and the message's per-vehicle sequence number (`nil` when the publisher sent none).
public struct DecodedHeading: Sendable, Equatable {
    /// The vehicle of the topic (and of the payload's `"vehicle"` key, which must agree).
    public let vehicle: VehicleID
    /// The per-vehicle message sequence number, for gap and duplicate detection.
    public let seq: UInt64?
    /// The heading reading (degrees).
    public let heading: Heading

    /// Wraps a decoded heading.
    public init(vehicle: VehicleID, seq: UInt64?, heading: Heading) {
        self.vehicle = vehicle
        self.seq = seq
        self.heading = heading
    }
}
