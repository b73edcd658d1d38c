import FleetProtocol
import GNSS

/// One thing fleet-watch learns from the fleet's topics.
///
/// Bad messages are values of the stream (``malformed(topic:reason:)``), counted and shown,
/// never thrown: only a transport failure ends a ``FleetSubscriber`` stream.
public enum FleetEvent: Sendable, Equatable {
    /// A position from `{prefix}/{vehicle}/fix`, with its message number (numbering run and
    /// `seq`; `nil` when the publisher sent no `seq`).
    case fix(VehicleID, seq: MessageNumber?, Fix)
    /// A heading from `{prefix}/{vehicle}/heading`, with its message number.
    case heading(VehicleID, seq: MessageNumber?, Heading)
    /// A vehicle's `status`: online or offline (the last will).
    case status(VehicleStatus)
    /// A fix or heading from a `{prefix}/{vehicle}/backlog` batch: history the vehicle could not
    /// deliver live, sent later with its original `seq` and time. One event per entry of the
    /// batch, oldest first; never the vehicle's current position or heading (a live `fix` or
    /// `heading` is), so a consumer that only follows `.fix` never moves a marker back.
    case backlog(FleetPayload.BacklogEvent)
    /// A message that is not a contract message: its topic (at most
    /// ``FleetMessageDecoder/maximumTopicBytesKept`` bytes of it) and a short reason.
    /// The payload itself is never kept.
    case malformed(topic: String, reason: String)

    /// The message number (numbering run and `seq`) of a fix or heading (live or backlog), if
    /// it carried a `seq`.
    public var seq: MessageNumber? {
        switch self {
        case .fix(_, let seq, _), .heading(_, let seq, _): seq
        case .backlog(let event): event.number
        case .status, .malformed: nil
        }
    }

    /// Whether the event came from a `backlog` batch.
    public var isBacklog: Bool {
        if case .backlog = self { true } else { false }
    }

    /// The vehicle the event is about; `nil` for a malformed message.
    public var vehicle: VehicleID? {
        switch self {
        case .fix(let v, _, _), .heading(let v, _, _): v
        case .status(let s): s.vehicle
        case .backlog(.fix(let f)): f.vehicle
        case .backlog(.heading(let h)): h.vehicle
        case .malformed: nil
        }
    }

    /// The kind, as in the `"kind"` key of fleet-watch's JSON lines: a backlog event is a `fix`
    /// or a `heading` (its lines add `"backlog":true`).
    public var kind: FleetPayload.Kind {
        switch self {
        case .fix, .backlog(.fix): .fix
        case .heading, .backlog(.heading): .heading
        case .status: .status
        case .malformed: .malformed
        }
    }
}
