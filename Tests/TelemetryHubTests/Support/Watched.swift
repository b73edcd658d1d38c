import FleetcastTestSupport
import Synchronization

/// A value under a lock that tasks can await a condition on (event-driven, no polling), with a
/// bounded wait so a broken hub fails the test instead of hanging it.
final class Watched<Value: Sendable>: Sendable {
    private struct Waiter {
        let id: Int
        let condition: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var value: Value
        var waiters: [Waiter] = []
        var nextID = 0
        var abandoned: Set<Int> = []
    }

    private let mutex: Mutex<State>
    /// Acquire/release around each critical section so ThreadSanitizer sees the ordering that
    /// `Mutex`'s kernel hand-off under contention hides from it (see `Hub.lockOrder`).
    private let lockOrder = Atomic<UInt8>(0)

    private func withState<Result>(_ body: (inout sending State) -> sending Result) -> sending Result {
        mutex.withLock { state in
            _ = lockOrder.load(ordering: .acquiring)
            defer { lockOrder.store(0, ordering: .releasing) }
            return body(&state)
        }
    }

    init(_ value: Value) {
        mutex = Mutex(State(value: value))
    }

    var value: Value {
        withState { $0.value }
    }

    func update(_ body: @Sendable (inout Value) -> Void) {
        let ready = withState { state -> [Waiter] in
            body(&state.value)
            let value = state.value
            let ready = state.waiters.filter { $0.condition(value) }
            state.waiters.removeAll { $0.condition(value) }
            return ready
        }
        for waiter in ready {
            waiter.continuation.resume(returning: true)
        }
    }

    /// Waits until `condition` holds; false if it did not within `timeout`.
    func wait(
        timeout: Duration = .seconds(20), until condition: @escaping @Sendable (Value) -> Bool
    ) async -> Bool {
        let id = withState { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        // The one timeout of the tests: on expiry it cancels the wait, which then ends with false.
        let met = try? await withTimeout(timeout, "a watched condition") {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let resumeNow: Bool? = self.withState { state in
                        if state.abandoned.remove(id) != nil { return false }
                        if condition(state.value) { return true }
                        state.waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
                        return nil
                    }
                    if let resumeNow {
                        continuation.resume(returning: resumeNow)
                    }
                }
            } onCancel: {
                let waiter = self.withState { state -> Waiter? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                        state.abandoned.insert(id)
                        return nil
                    }
                    return state.waiters.remove(at: index)
                }
                waiter?.continuation.resume(returning: false)
            }
        }
        return met ?? false
    }
}
