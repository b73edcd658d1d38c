import FleetProtocol
import GNSS

/// One thing fleet-watch learns from the fleet's topics.
///
/// Bad messages are values of the stream (``malformed(topic:reason:)``), counted and shown,
/// never thrown: only a transport failure ends a ``FleetSubscriber`` stream.
public enum FleetEvent: Sendable, Equatable {
    /// A position from `{prefix}/{vehicle}/fix`, with its per-vehicle sequence number.
    case fix(VehicleID, seq: UInt64?, Fix)
    /// A heading from `{prefix}/{vehicle}/heading`, with its per-vehicle sequence number.
    case heading(VehicleID, seq: UInt64?, Heading)
    /// A vehicle's `status`: online or offline (the last will).
    case status(VehicleStatus)
    /// A message that is not a contract message: its topic (at most
    /// ``FleetMessageDecoder/maximumTopicBytesKept`` bytes of it) and a short reason.
    /// The payload itself is never kept.
    case malformed(topic: String, reason: String)

    /// The vehicle the event is about; `nil` for a malformed message.
    public var vehicle: VehicleID? {
        switch self {
        case .fix(let v, _, _), .heading(let v, _, _): v
        case .status(let s): s.vehicle
        case .malformed: nil
        }
    }

    /// The kind, as in the `"kind"` key of fleet-watch's JSON lines.
    public var kind: FleetPayload.Kind {
        switch self {
        case .fix: .fix
        case .heading: .heading
        case .status: .status
        case .malformed: .malformed
        }
    }
}
