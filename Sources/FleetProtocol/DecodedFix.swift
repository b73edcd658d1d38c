import GNSS

/// A fix received on a vehicle's `fix` topic: the position, the vehicle it belongs to, and the
/// message's per-vehicle sequence number (`nil` when the publisher sent none).
public struct DecodedFix: Sendable, Equatable {
    /// The vehicle of the topic (and of the payload's `"vehicle"` key, which must agree).
    public let vehicle: VehicleID
    /// The per-vehicle message sequence number, for gap and duplicate detection.
    public let seq: UInt64?
    /// The numbering run `seq` belongs to (``MessageNumber/run``); 0 when the payload had no
    /// `"run"`.
    public let run: UInt64
    /// The position solution.
    public let fix: Fix

    /// Wraps a decoded fix.
    public init(vehicle: VehicleID, seq: UInt64?, run: UInt64 = 0, fix: Fix) {
        self.vehicle = vehicle
        self.seq = seq
        self.run = run
        self.fix = fix
    }

    /// The message's number (run and `seq`), `nil` when it carried no `seq`.
    public var number: MessageNumber? { seq.map { MessageNumber(run: run, seq: $0) } }
}
