import EdgeCore
import FleetcastCore
import Logging
import OutboxCore

/// The ``EdgeCore/EdgeState`` under its one lock, and what carries out its actions once the lock
/// is released: it resumes the tasks the state lets go, wakes the state at the instants it asks
/// for (``EdgeClock``), and writes its logs and statuses. The publisher's tasks act on the state,
/// and wait on it, only through this.
final class EdgeShell: Sendable {
    typealias Edge = EdgeState<Waiter<OutboxLiveItem?>, Waiter<Void>>

    private let state: SanitizerVisibleMutex<Edge>
    private let clock = EdgeClock()
    private let logger: Logger
    private let settings: PublisherSettings
    private let outboxPath: String
    /// Writes an `online` status saying what the state decided (with the link's traffic).
    private let writeStatus: @Sendable (PublisherState.StatusContent) -> OutboundMessage

    init(
        _ edge: Edge, logger: Logger, outboxPath: String,
        writeStatus: @escaping @Sendable (PublisherState.StatusContent) -> OutboundMessage
    ) {
        self.state = SanitizerVisibleMutex(edge)
        self.logger = logger
        self.settings = edge.settings
        self.outboxPath = outboxPath
        self.writeStatus = writeStatus
    }

    /// Reads the state (nothing decided, nothing carried out).
    func read<T: Sendable>(_ body: (borrowing Edge) -> T) -> T {
        state.withLock { body($0) }
    }

    /// A change that by its nature lets no task go (it takes: a drain request, a commit, the
    /// intake's stop), so there is nothing to carry out.
    func update<T: Sendable>(_ change: (inout Edge) -> T) -> T {
        state.withLock { change(&$0) }
    }

    /// Runs one event of the state, then carries out its actions.
    func act(_ event: (inout Edge) -> Edge.Actions) {
        perform(state.withLock { event(&$0) })
    }

    /// Runs one event of the state that also answers, carries out its actions, and returns the
    /// answer.
    func act<T: Sendable>(_ event: (inout Edge) -> (Edge.Actions, T)) -> T {
        let (actions, answer) = state.withLock { event(&$0) }
        perform(actions)
        return answer
    }

    /// Carries out what the state decided, with no lock held.
    private func perform(_ actions: Edge.Actions) {
        for (waiter, item) in actions.live { waiter.resume(returning: item) }
        for signal in actions.signals { signal.resume() }
        if let instant = actions.schedule {
            clock.schedule(at: instant) { [weak self] in
                let now = ContinuousClock.now
                self?.act { $0.timerFired(at: now) }
            }
        }
        for entry in actions.logs { logger.edge(entry, settings: settings, outboxPath: outboxPath) }
        if let content = actions.status {
            let message = writeStatus(content)
            act { $0.setStatus(message) }
        }
        actions.stopIntake?()
    }

    /// Returns once `condition` holds or `deadline` has passed (or the task is cancelled).
    func wait(for condition: EdgeCondition, until deadline: ContinuousClock.Instant? = nil) async {
        if read({ $0.holds(condition) }) { return }
        await suspend { waiter in
            // Registered under the lock only if not cancelled yet; a cancellation after that
            // finds it by its id under the same lock.
            let instant = ContinuousClock.now
            return act { state -> (Edge.Actions, Bool) in
                if Task.isCancelled { return (.init(), false) }
                let (waits, actions) = state.wait(waiter, for: condition, until: deadline, now: instant)
                return (actions, waits)
            }
        } cancel: { id in
            state.withLock { $0.cancelWait(id) }
        }
    }

    /// The live sender's next item; `nil` once the outbox is closed and its live queue done, or
    /// when the task is cancelled. Nothing while a live back-off holds.
    func nextLive() async -> OutboxLiveItem? {
        if let ready = state.withLock({ $0.nextLive() }) { return ready }
        return await suspend(returningOnCancel: nil) { (waiter: Waiter<OutboxLiveItem?>) -> OutboxLiveItem?? in
            act { state -> (Edge.Actions, OutboxLiveItem??) in
                if Task.isCancelled { return (.init(), .some(nil)) }
                if let ready = state.nextLive() { return (.init(), ready) }
                return (state.setLiveWaiter(waiter), nil)
            }
        } cancel: { _ in
            state.withLock { $0.removeLiveWaiter() }
        }
    }

    /// Cancels the timer (the publisher has stopped).
    func stop() {
        clock.stop()
    }
}
