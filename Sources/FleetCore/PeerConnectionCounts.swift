/// How many connections each client (``PeerAddress``) has open, and whether it may open another:
/// at most ``limit`` at once, so one client cannot take every place that
/// ``FleetMapServer/Options/maximumConnections`` leaves. Pure; ``ConnectionGuard`` keeps it under
/// a lock.
///
/// Only clients with an open connection are remembered, so the table is never bigger than the
/// server's connection limit.
package struct PeerConnectionCounts: Sendable {
    /// The most connections one client may have open at once (at least 1).
    package let limit: Int
    private var counts: [String: Int] = [:]

    package init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// How many clients have a connection open.
    package var clients: Int { counts.count }

    /// How many connections `client` has open.
    package func connections(of client: String) -> Int { counts[client, default: 0] }

    /// A connection from `client` opened: whether it may stay (counted then), or is one too many
    /// (not counted: close it).
    package mutating func open(_ client: String) -> Bool {
        let open = counts[client, default: 0]
        guard open < limit else { return false }
        counts[client] = open + 1
        return true
    }

    /// A connection counted by ``open(_:)`` closed.
    package mutating func close(_ client: String) {
        guard let open = counts[client] else { return }
        counts[client] = open > 1 ? open - 1 : nil
    }
}
