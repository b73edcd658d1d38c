import FleetcastCore
import Synchronization

/// Brings the edge its time: wakes it at the one instant its state asked for last
/// (``EdgeCore/EdgeActions/schedule``), as an event loop's scheduled task does. An earlier
/// instant replaces a later one (which the state asks for again when the earlier fires); the
/// state alone decides what the instant means.
final class EdgeClock: Sendable {
    private struct Pending {
        var instant: ContinuousClock.Instant
        var id: UInt64
        var task: Task<Void, Never>?
    }

    /// What is scheduled; `.none` once stopped (nothing is scheduled any more).
    private let pending = SanitizerVisibleMutex<Pending??>(.some(nil))
    private let ids = Atomic<UInt64>(0)

    /// Calls `fire` at `instant`, unless an earlier call is already due by then.
    func schedule(at instant: ContinuousClock.Instant, _ fire: @escaping @Sendable () -> Void) {
        let id = ids.wrappingAdd(1, ordering: .relaxed).newValue
        let (scheduled, replaced) = pending.withLock { pending -> (Bool, Task<Void, Never>?) in
            guard case .some(let current) = pending else { return (false, nil) }  // stopped
            if let current, current.instant <= instant { return (false, nil) }
            defer { pending = .some(Pending(instant: instant, id: id, task: nil)) }
            return (true, current?.task)
        }
        replaced?.cancel()
        guard scheduled else { return }
        let task = Task {
            try? await Task.sleep(until: instant, clock: .continuous)
            guard !Task.isCancelled else { return }
            pending.withLock { if case .some(let current?) = $0, current.id == id { $0 = .some(nil) } }
            fire()
        }
        // Kept to be cancelled when replaced; already replaced (or fired), it is cancelled now.
        let stale = pending.withLock { pending -> Bool in
            guard case .some(var current?) = pending, current.id == id else { return true }
            current.task = task
            pending = .some(current)
            return false
        }
        if stale { task.cancel() }
    }

    /// Cancels what is scheduled, and what would be (the publisher has stopped: a send's late
    /// outcome must not start a timer).
    func stop() {
        pending.withLock { pending -> Task<Void, Never>? in
            defer { pending = .none }
            return pending??.task
        }?.cancel()
    }
}
