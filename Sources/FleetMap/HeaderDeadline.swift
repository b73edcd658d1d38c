import FleetCore

/// When a connection must have sent a request's headers: within the header timeout of opening,
/// and again of each response's end once no request is left in progress (a keep-alive connection
/// waiting for its next request). While a request is being answered (an event stream for hours,
/// say) nothing runs. Pure: each event returns what to do with the timer, which
/// ``ConnectionGuardHandler`` does.
///
/// Without it a client that opens connections and sends its headers a byte at a time, or never
/// finishes them, holds every place of ``FleetMapServer/Options/maximumConnections`` until the idle
/// timeout: the parser hands nothing on, so nothing else sees the connection as busy.
package struct HeaderDeadline: Sendable, Equatable {
    /// What to do with the connection's timer.
    package enum Action: Equatable, Sendable {
        /// Start it (for the header timeout).
        case start
        /// Cancel it.
        case stop
        /// Leave it.
        case none
    }

    /// Whether the timer runs.
    private(set) var running = false
    /// Requests whose headers came and whose response has not ended.
    private(set) var requestsInProgress = 0

    /// A connection that has not opened yet.
    package init() {}

    /// The connection opened.
    package mutating func opened() -> Action {
        guard !running else { return .none }
        running = true
        return .start
    }

    /// A request's headers arrived, complete.
    package mutating func receivedHeaders() -> Action {
        requestsInProgress += 1
        guard running else { return .none }
        running = false
        return .stop
    }

    /// A response ended.
    package mutating func sentResponseEnd() -> Action {
        requestsInProgress = max(0, requestsInProgress - 1)
        guard requestsInProgress == 0, !running else { return .none }
        running = true
        return .start
    }

    /// The timer fired: whether to close the connection.
    package mutating func expired() -> Bool {
        defer { running = false }
        return running
    }
}
