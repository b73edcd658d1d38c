import FleetcastCore
import Synchronization

/// A multi-subscriber broadcaster: every value yielded reaches every current subscriber, each
/// through its own buffer with its own ``HubBufferingPolicy``, so a slow subscriber never stalls
/// the source or the others, and the source never waits on a subscriber.
///
/// A hub is fed either by a restartable upstream `AsyncSequence` (``init(source:)``) or by hand
/// (``init()`` with ``yield(_:)`` and ``finish(throwing:)``).
///
/// ## Source lifecycle
/// With a source, the hub starts iterating it (a fresh `makeAsyncIterator()` in a new task) when
/// the first subscriber arrives, and cancels that task once the last subscriber has left, like
/// CoreLocation's start/stopUpdatingLocation. The next subscriber starts it again, after the
/// previous iteration's task has ended, so two iterations never overlap; a source must therefore
/// honour task cancellation.
///
/// ## Termination and errors
/// When the source finishes or throws, every subscriber of that run first drains its buffer and
/// then sees the end of its sequence, or the error thrown exactly once (later `next()` calls
/// return nil). Terminated subscribers no longer count: a subscriber arriving later starts a new
/// run of the source (for a hand-fed hub, it receives values yielded after it subscribed).
/// Errors are never swallowed: the hub has no place where a source error is dropped.
///
/// ## Cost
/// `yield` takes one lock and does O(subscribers) work under it (append to each buffer or take
/// each waiting consumer); waiting consumers are resumed after the lock is released. No
/// allocation happens per value beyond buffer growth.
public final class Hub<Element: Sendable>: Sendable {
    @usableFromInline typealias Waiter = UnsafeContinuation<Element?, any Error>
    @usableFromInline typealias State = HubState<Element, Waiter, Task<Void, Never>>

    /// The hub's state: a `Mutex` whose ordering ThreadSanitizer can see (see
    /// `SanitizerVisibleMutex`).
    @usableFromInline let state: SanitizerVisibleMutex<State>
    /// Iterates the source once, feeding `hub` for the given run; nil for a hand-fed hub.
    @usableFromInline let runSource: (@Sendable (_ hub: Hub<Element>, _ run: UInt64) async -> Void)?

    /// Creates a hub fed by hand with ``yield(_:)`` and ``finish(throwing:)``.
    @inlinable public init() {
        state = SanitizerVisibleMutex(State(hasSource: false))
        runSource = nil
    }

    /// Creates a hub that iterates `source` while it has subscribers.
    ///
    /// - Parameter source: an async sequence that can be iterated again to restart: each
    ///   `makeAsyncIterator()` must begin a fresh stream (open the port, connect to gpsd…), and
    ///   cancelling the iterating task must stop it.
    @inlinable public init<Source: AsyncSequence & Sendable>(source: Source) where Source.Element == Element {
        state = SanitizerVisibleMutex(State(hasSource: true))
        runSource = { hub, run in
            do {
                for try await element in source {
                    hub.sourceYield(element, run: run)
                }
                hub.sourceTerminated(run: run, .finished)
            } catch {
                hub.sourceTerminated(run: run, .failed(error))
            }
        }
    }

    // MARK: Subscribing

    /// Subscribes to every value yielded from now on.
    ///
    /// The subscription is registered immediately (values yielded after this call are buffered
    /// for it even before iteration begins). It ends when its iterating task is cancelled, when
    /// ``HubSubscription/cancel()`` is called, when the source ends, or when the subscription
    /// object is released. With a source, the first subscriber starts it.
    ///
    /// - Parameter bufferingPolicy: what this subscriber keeps while it does not keep up.
    ///   `.unbounded` is lossless (memory grows with the backlog); `.newest(1)` suits a UI.
    @inlinable public func subscribe(bufferingPolicy: HubBufferingPolicy = .unbounded) -> HubSubscription<Element> {
        let (id, action) = withState { $0.subscribe(bufferingPolicy: bufferingPolicy) }
        if case .startSource(let run, let previous) = action {
            startSource(run: run, after: previous)
        }
        return HubSubscription(hub: self, id: id)
    }

    // MARK: Feeding by hand

    /// Broadcasts `element` to every current subscriber and makes it ``latest``. Never waits.
    @inlinable public func yield(_ element: Element) {
        perform(withState { $0.yield(element) })
    }

    /// Ends the stream of every current subscriber: each drains its buffer, then its iteration
    /// ends (`error == nil`) or throws `error`, once. A running source is stopped. The hub stays
    /// usable: later subscribers receive later values (or start the source again).
    @inlinable public func finish(throwing error: (any Error)? = nil) {
        let terminal: State.Terminal = error.map { .failed($0) } ?? .finished
        perform(withState { $0.finish(terminal) })
    }

    // MARK: Reading

    /// The last value broadcast, or nil if none was yet. Kept across source restarts.
    @inlinable public var latest: Element? {
        withState { $0.latest }
    }

    /// Counters of every subscriber and of the hub, taken in one consistent snapshot.
    @inlinable public var statistics: HubStatistics {
        withState { $0.statistics }
    }

    // MARK: Internals used by subscriptions and the source task

    /// Runs `body` on the state under the lock.
    @inlinable func withState<Result>(_ body: (inout sending State) -> sending Result) -> sending Result {
        state.withLock { state in body(&state) }
    }

    @inlinable func statistics(of id: HubSubscriberID) -> HubSubscriberStatistics? {
        withState { $0.statistics(of: id) }
    }

    @inlinable func cancel(_ id: HubSubscriberID) {
        let action = withState { $0.cancel(id) }
        if case .finish(let waiter, let stop) = action {
            stop?.cancel()
            waiter?.resume(returning: nil)
        }
    }

    /// The next value for subscriber `id`, nil at the end; throws the source's error once.
    @inlinable func next(_ id: HubSubscriberID) async throws -> Element? {
        switch withState({ $0.poll(id) }) {
        case .element(let element):
            return element
        case .end:
            return nil
        case .fail(let error):
            throw error
        case .wait, .suspended:
            break
        }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: Waiter) in
                switch withState({ $0.suspend(id, waiter: continuation) }) {
                case .element(let element):
                    continuation.resume(returning: element)
                case .end:
                    continuation.resume(returning: nil)
                case .fail(let error):
                    continuation.resume(throwing: error)
                case .suspended, .wait:
                    break
                }
            }
        } onCancel: {
            self.cancel(id)
        }
    }

    @inlinable func sourceYield(_ element: Element, run: UInt64) {
        perform(withState { $0.sourceYield(element, run: run) })
    }

    @inlinable func sourceTerminated(run: UInt64, _ terminal: State.Terminal) {
        perform(withState { $0.sourceTerminated(run: run, terminal) })
    }

    @inlinable func perform(_ action: State.YieldAction) {
        guard case .resume(var waiters, let element) = action else { return }
        for waiter in waiters {
            waiter.resume(returning: element)
        }
        withState { $0.recycle(&waiters) }
    }

    @inlinable func perform(_ action: State.FinishAction) {
        guard case .terminate(let waiters, let terminal, let stop) = action else { return }
        stop?.cancel()
        for waiter in waiters {
            switch terminal {
            case .finished:
                waiter.resume(returning: nil)
            case .failed(let error):
                waiter.resume(throwing: error)
            }
        }
    }

    @inlinable func startSource(run: UInt64, after previous: Task<Void, Never>?) {
        guard let runSource else { return }
        let task = Task {
            // Never overlap two iterations of the source: wait for the previous one to end.
            await previous?.value
            guard !Task.isCancelled else { return }
            await runSource(self, run)
        }
        switch withState({ $0.sourceStarted(task, run: run) }) {
        case .none:
            break
        case .cancelSource(let task):
            task.cancel()
        case .cancelSourceAndStart(let task, let newerRun):
            task.cancel()
            startSource(run: newerRun, after: task)
        }
    }
}
