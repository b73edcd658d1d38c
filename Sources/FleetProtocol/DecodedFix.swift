import GNSS

/// A fix received on a vehicle's `fix` topic: the position, the vehicle it belongs to, and the
/// message's per-vehicle sequence number (`nil` when the publisher sent none).
public struct DecodedFix: Sendable, Equatable {
    /// The vehicle of the topic (and of the payload's `"vehicle"` key, which must agree).
    public let vehicle: VehicleID
    /// The per-vehicle message sequence number, for gap and duplicate detection.
    public let seq: UInt64?
    /// The position solution.
    public let fix: Fix

    /// Wraps a decoded fix.
    public init(vehicle: VehicleID, seq: UInt64?, fix: Fix) {
        self.vehicle = vehicle
        self.seq = seq
        self.fix = fix
    }
}
