import EdgePublisher
import FleetcastCore
import MQTT

/// A `MessageSending` that records each send synchronously when it starts (as the protocol
/// requires of a transport) and then holds it until the test completes it — successfully or
/// failing, in any order — or, in automatic mode, completes it itself after `latency` (a slow
/// broker). It tracks how many sends are outstanding at once.
package final class HoldingSender: MessageSending {
    /// A send as it started.
    package typealias Started = SentMessage

    package struct Refused: Error {}

    package struct Snapshot: Sendable {
        package var started: [Started] = []
        /// Start indices of sends not completed yet.
        package var outstanding: Set<Int> = []
        /// The most sends outstanding at once.
        package var mostOutstanding = 0
        /// Start indices of sends that completed successfully, in completion order.
        package var succeeded: [Int] = []
    }

    private struct State {
        var snapshot = Snapshot()
        var held: [Int: CheckedContinuation<Void, any Error>] = [:]
        var results: [Int: Bool] = [:]  // completion decided before the send registered: ok?
        var automatic: Duration?
        var watchers: [(predicate: @Sendable (Snapshot) -> Bool, waiter: Waiter<Void>)] = []

        /// Takes the watchers whose condition now holds, to resume once the lock is released.
        /// (Checked here, under the lock, at every change: some are equalities a later change
        /// would pass by.)
        mutating func readyWatchers() -> [Waiter<Void>] {
            let snapshot = self.snapshot
            let ready = watchers.filter { $0.predicate(snapshot) }
            watchers.removeAll { $0.predicate(snapshot) }
            return ready.map(\.waiter)
        }
    }

    private let state = SanitizerVisibleMutex(State())

    /// A sender holding every send (`latency` nil) or completing each after `latency`.
    package init(latency: Duration? = nil) {
        state.withLock { $0.automatic = latency }
    }

    package var snapshot: Snapshot { state.withLock { $0.snapshot } }

    package func send(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool) async throws {
        // Everything up to the first suspension is synchronous: the "transport" has the message.
        let (index, automatic, ready) = state.withLock { state -> (Int, Duration?, [Waiter<Void>]) in
            let index = state.snapshot.started.count
            state.snapshot.started.append(Started(topic: topic, payload: payload, qos: qos, retain: retain))
            state.snapshot.outstanding.insert(index)
            state.snapshot.mostOutstanding = max(state.snapshot.mostOutstanding, state.snapshot.outstanding.count)
            return (index, state.automatic, state.readyWatchers())
        }
        for waiter in ready { waiter.resume() }
        if let automatic {
            try? await Task.sleep(for: automatic)
            finish(index, ok: true)
            return
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let decided = state.withLock { state -> Bool? in
                    if let ok = state.results.removeValue(forKey: index) { return ok }
                    state.held[index] = continuation
                    return nil
                }
                if let decided { continuation.resume(with: decided ? .success(()) : .failure(Refused())) }
            }
        } onCancel: {
            complete(index, ok: false)
        }
    }

    /// Completes the send started `index`-th (0-based): successfully, or failing.
    package func complete(_ index: Int, ok: Bool = true) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard let held = state.held.removeValue(forKey: index) else {
                if state.snapshot.outstanding.contains(index) { state.results[index] = ok }
                return nil
            }
            return held
        }
        finish(index, ok: ok)
        continuation?.resume(with: ok ? .success(()) : .failure(Refused()))
    }

    /// Completes every held send successfully, and every later one after `latency`.
    package func completeAll(thenEvery latency: Duration = .zero) {
        let indices = state.withLock { state -> [Int] in
            state.automatic = latency
            return Array(state.held.keys) + Array(state.results.keys)
        }
        for index in indices.sorted() { complete(index) }
    }

    /// Returns once `predicate` holds for the sender's state (bounded by the caller's timeout).
    package func waitUntil(_ predicate: @escaping @Sendable (Snapshot) -> Bool) async {
        await suspend(
            register: { waiter in
                state.withLock { state in
                    if predicate(state.snapshot) || Task.isCancelled { return false }
                    state.watchers.append((predicate, waiter))
                    return true
                }
            },
            cancel: { id in
                state.withLock { state in state.watchers.firstIndex { $0.waiter.id == id }.map { state.watchers.remove(at: $0).waiter } }
            })
    }

    private func finish(_ index: Int, ok: Bool) {
        let ready = state.withLock { state -> [Waiter<Void>] in
            guard state.snapshot.outstanding.remove(index) != nil else { return [] }
            if ok { state.snapshot.succeeded.append(index) }
            return state.readyWatchers()
        }
        for waiter in ready { waiter.resume() }
    }
}
