import Synchronization

/// The bounded in-memory queue between the publisher's intake and its sender loop.
///
/// Adding never blocks and never waits for the broker: a slow or absent broker fills the
/// outbox instead of stalling the GNSS source. When it holds ``capacity`` messages, room is
/// made by dropping the **oldest heading** (a heading is only worth its newest value, which the
/// retained topic keeps), and when no heading is queued, the **oldest fix**; both are counted
/// (``droppedFixes``, ``droppedHeadings``). A status is never dropped and jumps the queue (it
/// goes right after the message in flight: it is small and it is what watchers need first); a
/// newer status replaces a queued one that has not been sent yet, so at most two are ever
/// queued (one in flight), and they may exceed the capacity by that much. The message being
/// sent is never dropped. Fixes and headings keep their order.
///
/// One consumer takes messages with ``next()``: it gets the head without removing it, sends
/// it, then calls ``acknowledge(_:)`` on success — only then is it removed — or
/// ``release(_:)`` on failure, and calls ``next()`` again to retry the same head: messages are
/// delivered in order, and a failed send is retried, not lost.
///
/// Thread safety: all state is a ``OutboxState`` in a `Mutex`; continuations are resumed after
/// the lock is released.
public final class Outbox: Sendable {
    private let state: SanitizerVisibleMutex<OutboxState>

    /// The most fixes and headings held before the oldest are dropped (statuses not counted).
    public let capacity: Int

    /// An empty outbox holding at most `capacity` messages (at least 1).
    public init(capacity: Int) {
        self.capacity = max(1, capacity)
        state = SanitizerVisibleMutex(OutboxState(capacity: capacity))
    }

    /// What ``enqueue(_:)`` did with a message.
    public enum EnqueueResult: Sendable, Equatable {
        /// Appended at the end of the queue.
        case queued
        /// Appended; the oldest queued message of `droppedKind` (with `droppedSeq`) was dropped.
        case queuedDroppingOldest(droppedKind: OutboundMessage.Kind, droppedSeq: UInt64?)
        /// Full of messages that cannot be dropped: the new message itself was dropped.
        case droppedIncoming
        /// A status replaced the queued status that had not been sent yet.
        case superseded
        /// The outbox was closed; nothing more is accepted.
        case refusedClosed
    }

    /// Adds a message without waiting; see the type's drop rules.
    @discardableResult
    public func enqueue(_ message: OutboundMessage) -> EnqueueResult {
        let (result, resumptions) = state.withLock { $0.enqueue(message) }
        for (waiter, entry) in resumptions { waiter.resume(returning: entry) }
        return result
    }

    /// Waits for the head of the queue and returns it without removing it; `nil` once the
    /// outbox is closed and empty. Throws `CancellationError` when the task is cancelled.
    public func next() async throws -> OutboxEntry? {
        if let ready = state.withLock({ $0.next() }) { return ready }
        let waiterID = SanitizerVisibleMutex<UInt64?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: OutboxState.Waiter) in
                let immediate: Result<OutboxEntry?, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if let ready = state.next() { return .success(ready) }
                    waiterID.withLock { $0 = state.addWaiter(continuation) }
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                waiterID.withLock { id in id.flatMap { state.removeWaiter($0) } }
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// The message `id` was sent successfully: removes it from the queue.
    public func acknowledge(_ id: UInt64) {
        let drained = state.withLock { $0.acknowledge(id) }
        for waiter in drained { waiter.resume() }
    }

    /// Sending `id` failed: it stays at the head, to be retried by the next ``next()`` (a status
    /// that a newer one has superseded meanwhile is removed instead).
    public func release(_ id: UInt64) {
        state.withLock { $0.release(id) }
    }

    /// Accepts no more messages; ``next()`` returns `nil` once the queue is empty.
    public func close() {
        let waiters = state.withLock { $0.close() }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// Returns when the queue is empty (at once if it is), or when the task is cancelled.
    public func waitUntilEmpty() async {
        let waiterID = SanitizerVisibleMutex<UInt64?>(nil)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let registered = state.withLock { state -> Bool in
                    guard !Task.isCancelled, let id = state.addDrainWaiter(continuation) else { return false }
                    waiterID.withLock { $0 = id }
                    return true
                }
                if !registered { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                waiterID.withLock { id in id.flatMap { state.removeDrainWaiter($0) } }
            }
            waiter?.resume()
        }
    }

    /// Messages queued now, including the one in flight.
    public var count: Int { state.withLock { $0.entries.count } }

    /// Fixes dropped because the outbox was full, since it was created.
    public var droppedFixes: UInt64 { state.withLock { $0.droppedFixes } }

    /// Headings dropped because the outbox was full, since it was created.
    public var droppedHeadings: UInt64 { state.withLock { $0.droppedHeadings } }

    /// The queued messages in order, oldest first (for status and tests).
    public var queuedMessages: [OutboundMessage] { state.withLock { $0.entries.map(\.message) } }
}
