import GNSS

/// What a vehicle's retained `status` topic says: online or offline, since when, and how its
/// GNSS receiver is doing. `offline` is also the agent's MQTT last will.
///
/// JSON: `{"v":1,"vehicle":"van-7","state":"online","since":"…Z","agent":"0.1.0",
/// "source":"gpsd://localhost","gnss":"fixing","dropped":0}`; keys whose value is unknown are
/// left out. Status messages carry no `seq` (the will is fixed at connect time).
public struct VehicleStatus: Sendable, Equatable {
    /// Whether the agent is connected.
    public enum State: String, Sendable, CaseIterable {
        case online, offline
    }

    /// The receiver's state as the agent sees it.
    public enum GNSSState: String, Sendable, CaseIterable {
        /// Positions are arriving.
        case fixing
        /// The receiver talks but has no usable position.
        case noFix = "no-fix"
        /// The receiver or gpsd cannot be reached; the agent is retrying.
        case sourceLost = "source-lost"
        /// The agent has started and not yet heard from the receiver.
        case starting
    }

    public let vehicle: VehicleID
    public let state: State
    /// When the vehicle came online (or went offline, for a clean shutdown).
    public let since: UTCTimestamp?
    /// The agent's version.
    public let agentVersion: String?
    /// The GNSS source URI (credentials are never part of it).
    public let source: String?
    /// The receiver's state.
    public let gnss: GNSSState?
    /// Fixes dropped because the outbox was full (a slow or absent broker), since start.
    public let droppedFixes: UInt64?
    /// Why the vehicle went offline (`shutdown`, or absent in the last will: connection lost).
    public let reason: String?

    public init(
        vehicle: VehicleID, state: State, since: UTCTimestamp? = nil, agentVersion: String? = nil,
        source: String? = nil, gnss: GNSSState? = nil, droppedFixes: UInt64? = nil, reason: String? = nil
    ) {
        self.vehicle = vehicle
        self.state = state
        self.since = since
        self.agentVersion = agentVersion
        self.source = source
        self.gnss = gnss
        self.droppedFixes = droppedFixes
        self.reason = reason
    }
}

extension FleetPayload {
    /// Encodes a status as contract JSON.
    public static func encode(_ status: VehicleStatus, includeKind: Bool = false) -> [UInt8] {
        var w = JSONWriter(capacity: 200)
        if includeKind { w.raw("kind", "status") }
        w.int("v", version)
        w.string("vehicle", status.vehicle.rawValue)
        w.string("state", status.state.rawValue)
        w.time("since", status.since)
        w.string("agent", status.agentVersion)
        w.string("source", status.source)
        w.string("gnss", status.gnss?.rawValue)
        w.int("dropped", status.droppedFixes)
        w.string("reason", status.reason)
        return w.finish()
    }
}
