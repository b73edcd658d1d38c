import Synchronization

/// A task suspended by ``suspend(returningOnCancel:register:cancel:)`` until what it waits for
/// happens: a continuation with an id, kept under a lock (in a state machine, or in a
/// ``Waiters`` collection) and resumed exactly once, after that lock is released.
///
/// A class, not a struct: state machines generic over their waiter copy and drop it in code
/// that another module's specialization does not reach, and a generic struct's copy there
/// looks its type up at run time (a measured 3 % of the agent's CPU at full speed); a class
/// reference is retained and released.
public final class Waiter<Value: Sendable>: Sendable {
    /// Identifies the wait, so a cancelled task can take its waiter back; unique in the process.
    public let id: UInt64
    private let continuation: CheckedContinuation<Value, Never>

    init(id: UInt64, continuation: CheckedContinuation<Value, Never>) {
        self.id = id
        self.continuation = continuation
    }

    /// Ends the wait with `value`. Call it exactly once, never under a lock.
    public func resume(returning value: Value) {
        continuation.resume(returning: value)
    }
}

extension Waiter where Value == Void {
    /// Ends the wait. Call it exactly once, never under a lock.
    public func resume() {
        continuation.resume()
    }
}

/// Waiter ids: unique in the process, so none has to be handed out under a lock first.
private let nextWaiterID = Atomic<UInt64>(0)

/// Suspends the task until its ``Waiter`` is resumed: the project's one way of waiting on a
/// condition that another task or a C callback makes true.
///
/// - Parameters:
///   - cancelled: the value a cancelled wait returns.
///   - register: runs once, with the new waiter. Under the caller's lock it either keeps the
///     waiter (returns `nil`; whoever makes the condition true takes it out under the lock and
///     resumes it after), or returns the value to go on with at once (the condition holds
///     already). It must read `Task.isCancelled` under that same lock and not keep the waiter
///     of a cancelled task: a cancellation after the check finds the waiter through `cancel`.
///   - cancel: runs when the task is cancelled: under the lock, takes the waiter with this id
///     back if it is still kept. It is then resumed with `cancelled`.
public func suspend<Value: Sendable>(
    returningOnCancel cancelled: Value,
    register: (Waiter<Value>) -> Value?,
    cancel: @Sendable (UInt64) -> Waiter<Value>?
) async -> Value {
    let id = nextWaiterID.wrappingAdd(1, ordering: .relaxed).oldValue
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
            if let now = register(Waiter(id: id, continuation: continuation)) {
                continuation.resume(returning: now)
            }
        }
    } onCancel: {
        cancel(id)?.resume(returning: cancelled)
    }
}

/// Suspends the task until its waiter is resumed (see ``suspend(returningOnCancel:register:cancel:)``);
/// `register` returns whether it kept the waiter.
public func suspend(register: (Waiter<Void>) -> Bool, cancel: @Sendable (UInt64) -> Waiter<Void>?) async {
    await suspend(returningOnCancel: (), register: { register($0) ? nil : () }, cancel: cancel)
}

/// Waiters kept by id, for a state machine that resumes all of them on one event (a stop, a
/// close, a retry) and lets a cancelled one go. A plain value, generic over the waiter so tests
/// use plain values.
public struct Waiters<Element> {
    private var waiting: [UInt64: Element] = [:]

    /// None.
    public init() {}

    /// Whether none is waiting.
    public var isEmpty: Bool { waiting.isEmpty }

    /// Keeps `waiter` under `id`.
    public mutating func insert(_ waiter: Element, id: UInt64) {
        waiting[id] = waiter
    }

    /// Takes the waiter with `id` back (a cancelled wait), if still kept.
    public mutating func remove(id: UInt64) -> Element? {
        waiting.removeValue(forKey: id)
    }

    /// Takes every waiter out, to be resumed after the lock is released.
    public mutating func removeAll() -> [Element] {
        defer { waiting.removeAll() }
        return Array(waiting.values)
    }
}

extension Waiters: Sendable where Element: Sendable {}
