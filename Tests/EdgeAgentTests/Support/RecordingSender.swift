import EdgePublisher
import FleetcastCore
import FleetcastTestSupport
import MQTT

/// A `MessageSending` that records what was sent, and can be made to fail (an absent broker)
/// or to hold sends until released (a slow broker).
final class RecordingSender: MessageSending {
    struct Sent: Sendable, Equatable {
        let topic: String
        let payload: [UInt8]
        let qos: MQTTQoS
        let retain: Bool
        var text: String { String(decoding: payload, as: UTF8.self) }
    }

    struct Unreachable: Error {}

    private struct State {
        var sent: [Sent] = []
        var attempts = 0
        var failing = false
        /// A broker's answer for (topic, payload bytes): an MQTT 5 reason code to refuse with.
        var refusal: (@Sendable (String, Int) -> Int?)?
        var watchers: [Watcher] = []
        var attemptWatchers: [Watcher] = []
        var nextWatcher = 0
    }

    private typealias Watcher = (id: Int, count: Int, continuation: CheckedContinuation<Void, Never>)

    private let state = SanitizerVisibleMutex(State())

    init(failing: Bool = false) {
        state.withLock { $0.failing = failing }
    }

    var sent: [Sent] { state.withLock { $0.sent } }
    var attempts: Int { state.withLock { $0.attempts } }

    /// Makes the broker refuse what `rule` returns a reason code for (its ACL, its packet size).
    func setRefusal(_ rule: (@Sendable (_ topic: String, _ bytes: Int) -> Int?)?) { state.withLock { $0.refusal = rule } }

    /// Makes the broker absent (`true`) or back (`false`).
    func setFailing(_ failing: Bool) { state.withLock { $0.failing = failing } }

    func send(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) async throws {
        try Task.checkCancellation()
        let (ready, failed, refused) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool, Int?) in
            state.attempts += 1
            var ready = Self.take(&state.attemptWatchers, upTo: state.attempts)
            if state.failing { return (ready, true, nil) }
            if let code = state.refusal?(topic, payload.count) { return (ready, false, code) }
            state.sent.append(Sent(topic: topic, payload: payload, qos: qos, retain: retain))
            ready += Self.take(&state.watchers, upTo: state.sent.count)
            return (ready, false, nil)
        }
        for continuation in ready { continuation.resume() }
        if failed { throw Unreachable() }
        if let refused { throw MQTTError.publishRejected(topic: topic, reasonCode: refused, reason: "refused by the test broker") }
    }

    /// Returns once at least `count` messages were sent, or when cancelled (by the caller's timeout).
    func waitForSent(_ count: Int) async {
        await wait(attempts: false, count)
    }

    /// Returns once at least `count` send attempts were made, or when cancelled.
    func waitForAttempts(_ count: Int) async {
        await wait(attempts: true, count)
    }

    private func wait(attempts: Bool, _ count: Int) async {
        let id = state.withLock { state -> Int in
            state.nextWatcher += 1
            return state.nextWatcher
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    let reached = attempts ? state.attempts >= count : state.sent.count >= count
                    if reached || Task.isCancelled { return true }
                    if attempts {
                        state.attemptWatchers.append((id, count, continuation))
                    } else {
                        state.watchers.append((id, count, continuation))
                    }
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                let found = (state.watchers + state.attemptWatchers).filter { $0.id == id }.map(\.continuation)
                state.watchers.removeAll { $0.id == id }
                state.attemptWatchers.removeAll { $0.id == id }
                return found
            }
            for continuation in waiting { continuation.resume() }
        }
    }

    private static func take(_ list: inout [Watcher], upTo value: Int) -> [CheckedContinuation<Void, Never>] {
        let ready = list.filter { $0.count <= value }.map(\.continuation)
        list.removeAll { $0.count <= value }
        return ready
    }
}

/// FleetcastTestSupport's ``withTimeout(_:_:_:)`` with these tests' default bound, in seconds:
/// a bound on a hang, not a speed target, so long enough for two cores that also run the rest
/// of the suite (agents, brokers, PostgreSQL) at the same moment.
func withTimeout<T: Sendable>(
    _ seconds: Double = 30, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withTimeout(.seconds(seconds), "an operation", body)
}
