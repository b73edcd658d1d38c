import FleetcastCore
import Synchronization

/// The bounded in-memory queue between the publisher's intake and its sender loop.
///
/// **Adding.** ``enqueue(_:)`` never blocks and never waits for the broker: a slow or absent
/// broker fills the outbox instead of stalling a live GNSS source. When it holds ``capacity``
/// fixes and headings, room is made by dropping the **oldest heading** (a heading is only worth
/// its newest value, which the retained topic keeps), and when no heading is queued, the
/// **oldest fix**; both are counted (``droppedFixes``, ``droppedHeadings``). A finite source
/// that must lose nothing (a replay uploaded as a batch) calls ``waitForRoom()`` before each
/// fix or heading instead: it waits until the outbox has room, so nothing is dropped.
///
/// A status is never dropped and jumps the queue (it goes right after the leased messages: it
/// is small and it is what watchers need first); a newer status replaces a queued one that has
/// not been leased yet, so at most one unleased status is ever queued, and statuses may exceed
/// the capacity. A leased message is never dropped. Fixes and headings keep their order.
///
/// **Taking.** One consumer (the sender loop) takes messages with ``next()``: it leases the
/// first unleased message, in queue order, without removing it; up to ``window`` messages may
/// be leased (in flight) at once, and ``next()`` waits while the window is full. For each
/// lease the consumer calls ``acknowledge(_:)`` when the send succeeded — only then is the
/// message removed — or ``release(_:)`` when it failed: the message goes back to its place and
/// the next ``next()`` hands it out again, before anything queued after it. A message retried
/// after a newer message on its topic was acknowledged is handed out with `retain` off, so the
/// broker's retained message stays the newest.
///
/// Thread safety: all state is an ``OutboxState`` behind a lock; continuations are resumed
/// after the lock is released.
public final class Outbox: Sendable {
    private let state: SanitizerVisibleMutex<OutboxState>

    /// The most fixes and headings held before the oldest are dropped (statuses not counted;
    /// leased messages count).
    public let capacity: Int

    /// The most messages leased (handed out and neither acknowledged nor released) at once.
    public let window: Int

    /// An empty outbox holding at most `capacity` messages (at least 1), of which at most
    /// `window` (at least 1; 1 means one message at a time) are handed out at once.
    public init(capacity: Int, window: Int = 1) {
        let state = OutboxState(capacity: capacity, window: window)
        self.capacity = state.capacity
        self.window = state.window
        self.state = SanitizerVisibleMutex(state)
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
        resumptions.run()
        return result
    }

    /// Returns once the outbox has room for a fix or heading without dropping anything (fewer
    /// than ``capacity`` queued, leased ones included), at once if it has; or once it is
    /// closed. Throws `CancellationError` when the task is cancelled.
    ///
    /// Room is not reserved: a single producer that calls this before each ``enqueue(_:)``
    /// loses nothing (only the consumer removes messages meanwhile); concurrent producers may
    /// take each other's room.
    public func waitForRoom() async throws {
        await wait(for: .room)
        try Task.checkCancellation()
    }

    /// Leases the next message in queue order and returns it without removing it; waits while
    /// the queue has no unleased message or ``window`` messages are leased. Returns `nil` once
    /// the outbox is closed and empty. Throws `CancellationError` when the task is cancelled.
    public func next() async throws -> OutboxEntry? {
        if let ready = state.withLock({ $0.next() }) { return ready }
        let waiterID = SanitizerVisibleMutex<UInt64?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: OutboxState.Waiter) in
                let immediate: Result<OutboxEntry?, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if let ready = state.next() { return .success(ready) }
                    waiterID.withLock { $0 = state.addConsumer(continuation) }
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                waiterID.withLock { id in id.flatMap { state.removeConsumer($0) } }
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// The leased message `id` was sent successfully: removes it from the queue and ends its lease.
    public func acknowledge(_ id: UInt64) {
        state.withLock { $0.acknowledge(id) }.run()
    }

    /// Sending the leased message `id` failed: its lease ends and it stays at its place, to be
    /// handed out again by ``next()`` before anything queued after it (a status that a newer
    /// one has superseded meanwhile is removed instead).
    public func release(_ id: UInt64) {
        state.withLock { $0.release(id) }.run()
    }

    /// Accepts no more messages; ``next()`` returns `nil` once the queue is empty.
    public func close() {
        state.withLock { $0.close() }.run()
    }

    /// Returns when the queue is empty (at once if it is), or when the task is cancelled.
    public func waitUntilEmpty() async {
        await wait(for: .empty)
    }

    /// Returns when no message is leased (every handed-out message was acknowledged or
    /// released), at once if none is, or when the task is cancelled.
    public func waitUntilNoneLeased() async {
        await wait(for: .idle)
    }

    /// Messages queued now, leased ones and statuses included.
    public var count: Int { state.withLock { $0.entries.count } }

    /// Messages leased now (handed out, neither acknowledged nor released).
    public var leasedCount: Int { state.withLock { $0.leasedCount } }

    /// Fixes dropped because the outbox was full, since it was created.
    public var droppedFixes: UInt64 { state.withLock { $0.droppedFixes } }

    /// Headings dropped because the outbox was full, since it was created.
    public var droppedHeadings: UInt64 { state.withLock { $0.droppedHeadings } }

    /// The queued messages in order, oldest first (for status and tests).
    public var queuedMessages: [OutboundMessage] { state.withLock { $0.entries.map(\.message) } }

    /// Returns when `condition` holds, or when the task is cancelled.
    private func wait(for condition: OutboxState.Condition) async {
        let waiterID = SanitizerVisibleMutex<UInt64?>(nil)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: OutboxState.Signal) in
                let registered = state.withLock { state -> Bool in
                    guard !Task.isCancelled, let id = state.addSignalWaiter(condition, continuation) else { return false }
                    waiterID.withLock { $0 = id }
                    return true
                }
                if !registered { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                waiterID.withLock { id in id.flatMap { state.removeSignalWaiter($0) } }
            }
            waiter?.resume()
        }
    }
}
