import GNSS

/// A fix received on a vehicle's `fix` topic: the position, the vehicle it belongs to, and the
/// message's per-vehicle sequence number (`nil` when the publisher sent none).
public typealias DecodedFix = DecodedReading<Fix>

/// A heading received on a vehicle's `heading` topic: the reading, the vehicle it belongs to,
/// and the message's per-vehicle sequence number (`nil` when the publisher sent none).
public typealias DecodedHeading = DecodedReading<Heading>

/// A reading received on one of a vehicle's topics (a ``GNSS/Fix`` or a ``GNSS/Heading``), with
/// the vehicle it belongs to and the message's number.
public struct DecodedReading<Reading: Sendable & Equatable>: Sendable, Equatable {
    /// The vehicle of the topic (and of the payload's `"vehicle"` key, which must agree).
    public let vehicle: VehicleID
    /// The per-vehicle message sequence number, for gap and duplicate detection.
    public let seq: UInt64?
    /// The numbering run `seq` belongs to (``MessageNumber/run``); 0 when the payload had no
    /// `"run"`.
    public let run: UInt64
    /// The fix or heading.
    public let reading: Reading

    /// Wraps a decoded reading.
    public init(vehicle: VehicleID, seq: UInt64?, run: UInt64 = 0, reading: Reading) {
        self.vehicle = vehicle
        self.seq = seq
        self.run = run
        self.reading = reading
    }

    /// The message's number (run and `seq`), `nil` when it carried no `seq`.
    public var number: MessageNumber? { seq.map { MessageNumber(run: run, seq: $0) } }
}

extension DecodedReading where Reading == Fix {
    /// The position solution.
    public var fix: Fix { reading }

    /// Wraps a decoded fix.
    public init(vehicle: VehicleID, seq: UInt64?, run: UInt64 = 0, fix: Fix) {
        self.init(vehicle: vehicle, seq: seq, run: run, reading: fix)
    }
}

extension DecodedReading where Reading == Heading {
    /// The heading reading (degrees).
    public var heading: Heading { reading }

    /// Wraps a decoded heading.
    public init(vehicle: VehicleID, seq: UInt64?, run: UInt64 = 0, heading: Heading) {
        self.init(vehicle: vehicle, seq: seq, run: run, reading: heading)
    }
}
