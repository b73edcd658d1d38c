import GNSS

/// What a vehicle's retained `status` topic says: online or offline, since when, and how its
/// GNSS receiver is doing. `offline` is also the agent's MQTT last will.
///
/// JSON: `{"v":1,"vehicle":"van-7","state":"online","since":"…Z","agent":"0.1.0",
/// "source":"gpsd://localhost","gnss":"fixing","dropped":0,"droppedFull":0,"droppedExpired":0,
/// "droppedUnclean":0,"rejected":0,"implausible":0,"backlog":0,"storage":"ok"}`; keys whose value
/// is unknown are left out.
/// Status messages carry no `seq` (the will is fixed at connect time).
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

    /// Whether the agent's durable outbox works.
    public enum StorageState: String, Sendable, CaseIterable {
        /// Messages are stored on disk until the broker acknowledges them.
        case ok
        /// The store cannot be used (read-only, full, corrupt and not replaceable): messages
        /// are kept in a bounded memory buffer only; `storageReason` says why.
        case degraded
    }

    /// Fixes and headings an agent lost, by cause, since it started (counts of messages).
    public struct Drops: Sendable, Equatable {
        /// Dropped, oldest first (headings before fixes), because the outbox was full.
        public var full: UInt64
        /// Dropped because they were older than the outbox's maximum age.
        public var expired: UInt64
        /// What agents before this version counted after an unclean stop (`droppedUnclean`):
        /// the `seq` numbers it skipped, which were reserved, mostly never used, and are no
        /// loss (a new numbering run begins). Read from such agents' statuses; an agent of this
        /// version leaves it 0 and the key out, since what a crash really loses (what it had
        /// numbered in its last sync interval and neither stored nor delivered) cannot be
        /// counted after it.
        public var unclean: UInt64
        /// Refused by the broker for good (its ACL does not allow the topic, the topic or the
        /// payload is invalid for it): dropped after one try, each refusal logged once as an
        /// error (`rejected`).
        public var rejected: UInt64

        /// All causes together.
        public var total: UInt64 { full + expired + unclean + rejected }

        public init(full: UInt64 = 0, expired: UInt64 = 0, unclean: UInt64 = 0, rejected: UInt64 = 0) {
            self.full = full
            self.expired = expired
            self.unclean = unclean
            self.rejected = rejected
        }
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
    /// Fixes and headings lost since start, all causes together (`dropped`).
    public let droppedFixes: UInt64?
    /// The same losses by cause (`droppedFull`, `droppedExpired`, `droppedUnclean`).
    public let drops: Drops?
    /// Fixes and headings stored and not yet acknowledged by the broker (`backlog`).
    public let backlog: UInt64?
    /// Whether the durable outbox works (`storage`).
    public let storage: StorageState?
    /// Why storage is degraded (`storageReason`), e.g. the path and the system's error.
    public let storageReason: String?
    /// Why the vehicle went offline (`shutdown`, or absent in the last will: connection lost).
    public let reason: String?
    /// Fixes the agent refused since start for a time implausibly far from its synchronized
    /// clock (`implausible`; a count of fixes); absent where fix times are not checked (a
    /// replay, the simulator, an older agent).
    public let implausibleFixes: UInt64?
    /// Bytes the agent's broker link has cost on the network since it started, sent and
    /// received (`bytesSent`, `bytesReceived`: TCP payload, TLS records included, plus IP and TCP
    /// headers, from the kernel's counters); absent where not counted (an older agent).
    public let bytesSent: UInt64?
    /// See ``bytesSent``.
    public let bytesReceived: UInt64?

    public init(
        vehicle: VehicleID, state: State, since: UTCTimestamp? = nil, agentVersion: String? = nil,
        source: String? = nil, gnss: GNSSState? = nil, droppedFixes: UInt64? = nil, reason: String? = nil,
        drops: Drops? = nil, backlog: UInt64? = nil, storage: StorageState? = nil, storageReason: String? = nil,
        implausibleFixes: UInt64? = nil, bytesSent: UInt64? = nil, bytesReceived: UInt64? = nil
    ) {
        self.implausibleFixes = implausibleFixes
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.drops = drops
        self.backlog = backlog
        self.storage = storage
        self.storageReason = storageReason
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
        w.int("droppedFull", status.drops?.full)
        w.int("droppedExpired", status.drops?.expired)
        w.int("droppedUnclean", status.drops.flatMap { $0.unclean == 0 ? nil : $0.unclean })
        w.int("rejected", status.drops?.rejected)
        w.int("implausible", status.implausibleFixes)
        w.int("backlog", status.backlog)
        w.int("bytesSent", status.bytesSent)
        w.int("bytesReceived", status.bytesReceived)
        w.string("storage", status.storage?.rawValue)
        w.string("storageReason", status.storageReason)
        w.string("reason", status.reason)
        return w.finish()
    }
}
