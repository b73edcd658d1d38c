import EdgePublisher
import FleetcastCore
import FleetcastTestSupport
import MQTT

/// A `MessageSending` that records what was sent, and can be made to fail (an absent broker)
/// or to hold sends until released (a slow broker).
package final class RecordingSender: MessageSending {
    /// A message the publisher tried to send.
    package typealias Sent = SentMessage

    package struct Unreachable: Error {}

    /// What the broker has seen so far.
    package struct Snapshot: Sendable {
        /// Every message the publisher tried to send, delivered or not, in order.
        package var attempted: [Sent] = []
        /// The messages delivered, in order.
        package var sent: [Sent] = []
        package var attempts: Int { attempted.count }
    }

    private struct State {
        var snapshot = Snapshot()
        var failing = false
        /// A broker's answer for (topic, payload bytes): an MQTT 5 reason code to refuse with.
        var refusal: (@Sendable (String, Int) -> Int?)?
        /// Send attempts so far: a waiter that read the snapshot at one count waits for the next.
        var generation = 0
        var watchers = Waiters<Waiter<Void>>()

        /// Counts an attempt and takes every watcher, to resume once the lock is released (each
        /// checks its condition again, outside the lock).
        mutating func readyWatchers() -> [Waiter<Void>] {
            generation += 1
            return watchers.removeAll()
        }
    }

    private let state = SanitizerVisibleMutex(State())

    package init(failing: Bool = false) {
        state.withLock { $0.failing = failing }
    }

    package var snapshot: Snapshot { state.withLock { $0.snapshot } }
    package var sent: [Sent] { state.withLock { $0.snapshot.sent } }
    package var attempts: Int { state.withLock { $0.snapshot.attempts } }

    /// Makes the broker refuse what `rule` returns a reason code for (its ACL, its packet size).
    package func setRefusal(_ rule: (@Sendable (_ topic: String, _ bytes: Int) -> Int?)?) { state.withLock { $0.refusal = rule } }

    /// Makes the broker absent (`true`) or back (`false`).
    package func setFailing(_ failing: Bool) { state.withLock { $0.failing = failing } }

    package func send(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) async throws {
        try Task.checkCancellation()
        let message = Sent(topic: topic, payload: payload, qos: qos, retain: retain)
        let (ready, failed, refused) = state.withLock { state -> ([Waiter<Void>], Bool, Int?) in
            state.snapshot.attempted.append(message)
            if state.failing { return (state.readyWatchers(), true, nil) }
            if let code = state.refusal?(topic, payload.count) { return (state.readyWatchers(), false, code) }
            state.snapshot.sent.append(message)
            return (state.readyWatchers(), false, nil)
        }
        for waiter in ready { waiter.resume() }
        if failed { throw Unreachable() }
        if let refused { throw MQTTError.publishRejected(topic: topic, reasonCode: refused, reason: "refused by the test broker") }
    }

    /// Returns once at least `count` messages were sent, or when cancelled (by the caller's timeout).
    package func waitForSent(_ count: Int) async {
        await waitUntil { $0.sent.count >= count }
    }

    /// Returns once at least `count` send attempts were made, or when cancelled.
    package func waitForAttempts(_ count: Int) async {
        await waitUntil { $0.attempts >= count }
    }

    /// Returns once `predicate` holds for what the broker has seen, checked now and after send
    /// attempts, or when cancelled (by the caller's timeout). The predicate runs outside the
    /// lock, on the newest snapshot: one that decodes every payload must not slow each send
    /// (under the lock that was quadratic, and a ThreadSanitizer build took 30 s for 300 fixes).
    package func waitUntil(_ predicate: @escaping @Sendable (Snapshot) -> Bool) async {
        while !Task.isCancelled {
            let (holds, generation) = check(predicate)
            if holds { return }
            await nextAttempt(after: generation)
        }
    }

    /// `predicate` on the newest snapshot, and the attempts it had seen. The snapshot is let go
    /// on return: held across the wait, it would make every send copy its arrays.
    private func check(_ predicate: (Snapshot) -> Bool) -> (holds: Bool, generation: Int) {
        let (snapshot, generation) = state.withLock { ($0.snapshot, $0.generation) }
        return (predicate(snapshot), generation)
    }

    /// Returns once a send attempt after the `generation`th was made, or when cancelled.
    private func nextAttempt(after generation: Int) async {
        await suspend(
            register: { waiter in
                state.withLock { state in
                    if state.generation != generation || Task.isCancelled { return false }
                    state.watchers.insert(waiter, id: waiter.id)
                    return true
                }
            },
            cancel: { id in state.withLock { $0.watchers.remove(id: id) } })
    }
}

/// FleetcastTestSupport's ``withTimeout(_:_:_:)`` with these tests' default bound, in seconds:
/// a bound on a hang, not a speed target, so long enough for two cores that also run the rest
/// of the suite (agents, brokers, PostgreSQL) at the same moment — under ThreadSanitizer too,
/// where a 300-fix backlog drain beside the other suites took 28 s.
package func withTimeout<T: Sendable>(
    _ seconds: Double = 60, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withTimeout(.seconds(seconds), "an operation", body)
}
