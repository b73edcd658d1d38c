import EdgeCore
import FleetProtocol
import FleetcastCore
import Synchronization

/// The durable store-and-forward queue between the publisher's intake and the broker.
///
/// Every fix and heading gets its `seq` here and is kept until the broker acknowledges it:
/// first in memory, then, within one sync interval, in the ``OutboxStorage`` (SQLite in the
/// state directory; a bounded memory buffer when no store can be used). The newest record of
/// each kind goes out live at once; everything that could not (no connection, superseded while
/// waiting) is backlog, which the publisher's drain reads from the store, oldest first. In
/// batched mode (cellular batching) nothing goes live: every record is backlog, and the drain
/// sends it in batches.
///
/// The state is an ``OutboxState`` behind a lock; continuations are resumed, and storage I/O
/// done, only after the lock is released.
package final class Outbox: Sendable {
    package typealias LiveItem = OutboxLiveItem
    package typealias State = OutboxState<Waiter<OutboxLiveItem?>, Waiter<Void>>

    /// Where records are stored.
    package let storage: any OutboxStorage
    private let state: SanitizerVisibleMutex<State>

    package init(settings: State.Settings, storage: any OutboxStorage, opening: OutboxOpening, memoryOnly: Bool) {
        self.storage = storage
        self.state = SanitizerVisibleMutex(State(settings: settings, opening: opening, memoryOnly: memoryOnly))
    }

    /// Reads the state (no waiting, nothing resumed).
    package func read<T: Sendable>(_ body: @Sendable (borrowing State) -> T) -> T {
        state.withLock { body($0) }
    }

    /// Runs a transition and resumes what it returned, after the lock is released.
    package func transition<T: Sendable>(_ body: @Sendable (inout State) -> (T, State.Resumptions)) -> T {
        let (value, resumptions) = state.withLock { body(&$0) }
        run(resumptions)
        return value
    }

    /// Runs a transition that returns only resumptions.
    package func transition(_ body: @Sendable (inout State) -> State.Resumptions) {
        run(state.withLock { body(&$0) })
    }

    /// The live sender's next item; `nil` once the outbox is closed and its live queue is
    /// empty, or when the task is cancelled.
    package func nextLive() async -> LiveItem? {
        if let ready = state.withLock({ $0.nextLive() }) { return ready }
        return await suspend(returningOnCancel: nil) { (waiter: Waiter<LiveItem?>) -> LiveItem?? in
            let (immediate, resumptions): (LiveItem??, State.Resumptions) = state.withLock { state in
                if Task.isCancelled { return (.some(nil), .init()) }
                if let ready = state.nextLive() { return (ready, .init()) }
                // Registering serves the state: other waiters whose condition holds now
                // (a sync loop waiting for commitDue) must be resumed, not dropped.
                return (nil, state.setLiveWaiter(waiter))
            }
            run(resumptions)
            return immediate
        } cancel: { _ in
            state.withLock { $0.removeLiveWaiter() }
        }
    }

    /// Returns once `condition` holds (at once if it does), or when the task is cancelled.
    package func wait(for condition: OutboxCondition) async {
        // Most waits find the condition true (a lossless intake with room): no continuation.
        if state.withLock({ $0.holds(condition) }) { return }
        await suspend { waiter in
            // Registered under the lock only if not cancelled yet; a cancellation after that
            // finds it by its id under the same lock.
            state.withLock { state in
                !Task.isCancelled && state.addSignalWaiter(waiter.id, condition, waiter)
            }
        } cancel: { id in
            state.withLock { $0.removeSignalWaiter(id) }
        }
    }

    /// Returns once `condition` holds or `timeout` has passed, whichever comes first (or when
    /// the task is cancelled).
    package func wait(for condition: OutboxCondition, upTo timeout: Duration) async {
        _ = await withTimeLimit(timeout) { await self.wait(for: condition) }
    }

    // MARK: The publisher's frequent transitions
    //
    // Each is one per message. Written here, in the module that makes `State` concrete, they
    // run specialized code; the same transition as a closure in another module calls the
    // state's generic code, with a runtime look-up of its type metadata at each call.

    /// The next `seq` and the record made with it, accepted: `false` when no number could be
    /// handed out (the outbox is closed) or the record was not taken. What the transitions
    /// resume is added to `resumptions`, for the caller to run with ``resume(_:)`` once its own
    /// lock is released.
    package func accept(deferring resumptions: inout [State.Resumptions], _ makeRecord: (UInt64) -> OutboxRecord) -> Bool {
        guard
            let seq = state.withLock({ state -> UInt64? in
                guard let (seq, resumed) = state.takeSeq() else { return nil }
                resumptions.append(resumed)
                return seq
            })
        else { return false }
        let record = makeRecord(seq)
        let (accepted, resumed) = state.withLock { $0.accept(record) }
        resumptions.append(resumed)
        return accepted
    }

    /// A transition whose resumptions are added to `resumptions`, for ``resume(_:)`` later.
    package func transition(deferring resumptions: inout [State.Resumptions], _ body: (inout State) -> State.Resumptions) {
        resumptions.append(state.withLock { body(&$0) })
    }

    /// Runs what deferred transitions returned; call it with no lock held.
    package func resume(_ resumptions: [State.Resumptions]) {
        for resumed in resumptions where !resumed.isEmpty { run(resumed) }
    }

    /// A live send's outcome: acknowledged (`true`), refused for good (`nil`: dropped and
    /// counted), or failed (`false`: retried or demoted to the backlog).
    package func liveSent(_ item: LiveItem, acknowledged: Bool?) {
        run(
            state.withLock { state in
                switch (item, acknowledged) {
                case (.status, let acknowledged): state.statusSent(acknowledged != false)
                case (.record(let record), true): state.liveAcknowledged(record.seq)
                case (.record(let record), nil): state.liveRejected(record.seq)
                case (.record(let record), false): state.liveFailed(record.seq)
                }
            })
    }

    private func run(_ resumptions: State.Resumptions) {
        for (waiter, item) in resumptions.live { waiter.resume(returning: item) }
        for signal in resumptions.signals { signal.resume() }
    }
}
