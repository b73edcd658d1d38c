/// Tells when another MQTT client takes this client's session over: two consumers with one
/// client id (two recorders of one share group on one host under the same default id) connect
/// in turn and each throws the other out, about once a second, for ever.
///
/// An MQTT 5 broker says so (DISCONNECT reason 0x8E, "Session taken over"); an MQTT 3.1.1 one
/// only closes the connection, so repeated losses soon after connecting say it too:
/// ``repeatedLosses`` losses each within ``quickLoss`` of their connection, in a row. Said once
/// (``observe(_:at:)`` returns `true` the first time only). A plain value over milliseconds of
/// a monotonic clock the caller passes in.
public struct SessionTakeover: Sendable {
    /// What the client saw.
    public enum Observation: Sendable, Equatable {
        /// Connected (or reconnected).
        case connected
        /// Lost its connection, for `reason` (the client's description of it).
        case disconnected(reason: String)
    }

    /// A loss this soon after its connection counts as quick: 5 s.
    public static let quickLoss: Int64 = 5_000
    /// Quick losses in a row that say a takeover without a reason code: 3.
    public static let repeatedLosses = 3

    private var connectedAt: Int64?
    private var quickLosses = 0
    private var said = false

    /// Nothing seen yet.
    public init() {}

    /// Takes what the client saw at `now` (ms); returns whether to say, now and only now, that
    /// the session is being taken over.
    public mutating func observe(_ observation: Observation, at now: Int64) -> Bool {
        switch observation {
        case .connected:
            connectedAt = now
            return false
        case .disconnected(let reason):
            defer { connectedAt = nil }
            let quick = connectedAt.map { now &- $0 <= Self.quickLoss } ?? false
            quickLosses = quick ? quickLosses + 1 : 0
            guard !said, reason.contains("Session taken over") || quickLosses >= Self.repeatedLosses else { return false }
            said = true
            return true
        }
    }
}
