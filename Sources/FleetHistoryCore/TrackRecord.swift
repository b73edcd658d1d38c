import FleetProtocol
import GNSS

/// One message for the track history: a fix or heading of a vehicle with its `seq`, live or
/// from a backlog batch.
public struct TrackRecord: Sendable, Equatable {
    /// What the message carried.
    public enum Payload: Sendable, Equatable {
        /// A position.
        case fix(Fix)
        /// A heading.
        case heading(Heading)
    }

    /// The vehicle.
    public var vehicle: VehicleID
    /// The per-vehicle sequence number, the row's key with the vehicle and the run.
    public var seq: UInt64
    /// The numbering run `seq` belongs to (0: the publisher sent none).
    public var run: UInt64
    /// The fix or heading.
    public var payload: Payload
    /// Whether it came in a `backlog` batch.
    public var backlog: Bool

    /// A record.
    public init(vehicle: VehicleID, seq: UInt64, run: UInt64 = 0, payload: Payload, backlog: Bool = false) {
        self.vehicle = vehicle
        self.seq = seq
        self.run = run
        self.payload = payload
        self.backlog = backlog
    }

    /// Why an event is not recorded.
    public enum Skip: Error, Sendable, Equatable {
        /// A status or malformed message: nothing for the history.
        case notAPosition
        /// A fix or heading without `seq` (not from a Fleetcast agent): it has no key, so a
        /// redelivery could not be told from a new message.
        case noSequenceNumber
        /// A `seq` or `run` above 2⁶³−1, which PostgreSQL's `bigint` cannot hold.
        case sequenceNumberTooLarge
    }
}
