import FleetProtocol
import MQTTCore

/// What the publisher publishes and how: the vehicle, and what differs from the contract's
/// defaults (QoS 1 for fixes and headings, every fix, 32 live sends outstanding, a 1 s
/// sync interval, 64 MiB and 7 days of backlog drained at 200 events/s), set field by field.
public struct PublisherSettings: Sendable {
    /// The vehicle the messages are about.
    public var vehicle: VehicleID
    /// The topic layout (prefix).
    public var topics: FleetTopics = .default
    /// QoS of fix messages (0, 1 or 2).
    public var fixQoS: MQTTQoS = .atLeastOnce
    /// QoS of heading messages (0, 1 or 2).
    public var headingQoS: MQTTQoS = .atLeastOnce
    /// The GNSS source URI shown in the status (without credentials).
    public var sourceURI: String?
    /// The agent's version shown in the status.
    public var agentVersion: String?
    /// Which fixes and headings are worth sending.
    public var policy = ReportingPolicy()
    /// A finite source that must lose nothing (a replay uploaded as a batch): every record
    /// goes out live, in order, and the intake waits for room.
    public var lossless = false
    /// How long a clean finish waits for live sends, and then for the offline status.
    public var drainTimeout: Duration = .seconds(5)
    /// Wait after the first failed send; grows (with jitter) on each further failure.
    public var initialRetryDelay: Duration = .milliseconds(250)
    /// Longest wait between retries.
    public var maxRetryDelay: Duration = .seconds(10)
    /// Most live sends awaiting acknowledgement at once (at least 1): the MQTT client's
    /// maximum in-flight messages (`broker.maxInflight`).
    public var sendWindow = 32 {
        didSet { sendWindow = max(1, sendWindow) }
    }
    /// How often the outbox commits to its store (`outbox.syncInterval`): at most this much
    /// unacknowledged traffic is lost on a power cut.
    public var syncInterval: Duration = .seconds(1)
    /// Most bytes the store holds (`outbox.maxBytes`); beyond, the oldest headings, then
    /// the oldest fixes, are dropped.
    public var maxBytes = 64 << 20
    /// Oldest record the store keeps (`outbox.maxAge`).
    public var maxAge: Duration = .seconds(7 * 86_400)
    /// Backlog events sent per second at most (`outbox.drainRate`; at least 1).
    public var drainRate = 200 {
        didSet { drainRate = max(1, drainRate) }
    }
    /// Records held in memory while the store cannot be written, before the oldest are
    /// dropped (at least 1).
    public var memoryLimit = 20_000 {
        didSet { memoryLimit = max(1, memoryLimit) }
    }
    /// Shortest time between two statuses re-published for backlog or loss counts.
    public var statusInterval: Duration = .seconds(10)
    /// The user name the broker knows the agent by, for errors about its ACL.
    public var brokerUser: String?
    /// Fixes stamped further than this from a synchronized system clock are refused and
    /// counted (``FixTimeCheck``); `nil` (the default): not checked (a replay, the simulator).
    public var maximumFixClockOffset: Duration?
    /// Cellular batching (`uplink.batch`): nothing goes live; fixes and headings wait in the
    /// outbox for up to this long (from the oldest), or until a batch is full, or until the
    /// vehicle starts or stops, and go out as one retained message on
    /// `{prefix}/{vehicle}/batch`. `nil` (the default): each goes live on its own topic.
    public var uplinkBatch: Duration?
    /// How batches are written (`uplink.encoding`): compact (the default) or JSON.
    public var uplinkEncoding: BatchEncoding = .compact
    /// Which values a fix or heading message carries (`payload.fields`): standard (the
    /// default, for a metered link) or full.
    public var fields: FleetPayload.FieldSet = .standard

    /// Settings for `vehicle` with the contract's defaults.
    public init(vehicle: VehicleID) {
        self.vehicle = vehicle
    }
}

/// How a batching vehicle writes its `batch` messages (`uplink.encoding`).
public enum BatchEncoding: String, Sendable, CaseIterable {
    /// ``FleetProtocol/FleetPayload/decodeCompactBatch(_:vehicle:)``'s delta-coded layout: about
    /// 5 to 35 bytes per fix and heading, as steady as the drive is.
    case compact
    /// The backlog's JSON layout: readable at sight, about 400 bytes per fix and heading.
    case json
}
