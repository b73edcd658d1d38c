import FleetcastCore
import HTTPTypes
import Hummingbird

/// The reads of the recorded history that `serve` answers (`/api/track`, `/api/trips`):
/// unauthenticated by default, and each one a PostgreSQL query, so bounded as a whole: at most
/// ``limit`` at once (one more is answered 503 at once, with `Retry-After: 1`, and not queued),
/// each given ``deadline`` (then 503 at once; the read is given up on). Twenty parallel requests
/// for trips once took 12.5 s each, and any number could be made.
///
/// A read keeps its place until it really ends, not until its answer: postgres-nio does not
/// cancel a query in flight, so a PostgreSQL that stopped answering holds it, and the requests
/// given up on at the deadline cannot pile up queries behind the cap.
final class HistoryReadGate: Sendable {
    /// Reads at once: 4 (PostgreSQL's pool has more connections; the recorder needs some).
    static let defaultLimit = 4
    /// The longest one read may take: 10 s.
    static let defaultDeadline: Duration = .seconds(10)

    let limit: Int
    let deadline: Duration
    private let running = SanitizerVisibleMutex(0)

    init(limit: Int = defaultLimit, deadline: Duration = defaultDeadline) {
        self.limit = max(1, limit)
        self.deadline = deadline
    }

    /// Runs `read` within the bounds, or throws the 503 that says which one it met.
    func run<T: Sendable>(_ read: @escaping @Sendable () async throws -> T) async throws -> T {
        let entered = running.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard entered else {
            throw HTTPError(.serviceUnavailable, headers: [.retryAfter: "1"], message: "too many history reads at once; retry")
        }
        let value = try await withTimeLimitLeavingBehind(deadline) { [self] in
            defer { running.withLock { $0 -= 1 } }
            return try await read()
        }
        guard let value else {
            throw HTTPError(.serviceUnavailable, message: "the history did not answer in time")
        }
        return value
    }
}
