import DequeModule

/// The hub's whole state as a plain value: every event is a `mutating` transition that returns
/// what must be done (resume waiters, start or cancel the source task). ``Hub`` keeps it in a
/// `Mutex` and performs the returned actions after releasing the lock; tests drive it directly.
///
/// Generic over `Waiter` (a suspended consumer; in the hub an `UnsafeContinuation`) and
/// `SourceHandle` (the task iterating the source) so it can be exercised without any task.
///
/// Runs: a hub with a source starts a *run* for the first subscriber (`startSource`). The run
/// ends when the last subscriber leaves (`stopSource`) or when the source finishes or fails on
/// its own, which terminates every subscriber of that run. The next subscriber starts a new run.
/// A new run's task is told to await the previous run's task first, so two iterations of the
/// source never overlap (a serial port or gpsd socket is opened once at a time).
@usableFromInline package struct HubState<Element, Waiter, SourceHandle> {
    /// How a subscriber's stream ends.
    @usableFromInline package enum Terminal: Sendable {
        case finished
        case failed(any Error)
    }

    @usableFromInline package struct Subscriber {
        @usableFromInline let id: HubSubscriberID
        @usableFromInline let policy: HubBufferingPolicy
        @usableFromInline package var buffer = Deque<Element>()
        /// The buffer has held more than ``retainedCapacity`` values since it was last empty:
        /// its storage is given back once it drains (`Deque` never shrinks by itself).
        @usableFromInline var holdsBurst = false
        @usableFromInline var waiter: Waiter?
        @usableFromInline var delivered: UInt64 = 0
        @usableFromInline var dropped: UInt64 = 0
        /// Set when the run ended; delivered once the buffer is drained.
        @usableFromInline var terminal: Terminal?

        @inlinable package init(id: HubSubscriberID, policy: HubBufferingPolicy) {
            self.id = id
            self.policy = policy
        }

        /// Buffer storage above this many values is given back once the buffer is drained
        /// (after a burst), as ``HubBufferingPolicy/unbounded`` promises.
        @inlinable static var retainedCapacity: Int { 1024 }

        /// Stores `element` according to the policy (the subscriber is not waiting).
        @inlinable package mutating func enqueue(_ element: Element) {
            switch policy {
            case .unbounded:
                append(element)
            case .newest(let limit):
                if buffer.count < limit {
                    append(element)
                } else if limit > 0 {
                    _ = buffer.popFirst()
                    buffer.append(element)
                    dropped &+= 1
                } else {
                    dropped &+= 1
                }
            case .oldest(let limit):
                if buffer.count < limit {
                    append(element)
                } else {
                    dropped &+= 1
                }
            }
        }

        @inlinable package mutating func append(_ element: Element) {
            buffer.append(element)
            if buffer.count > Self.retainedCapacity { holdsBurst = true }
        }

        /// The oldest buffered value; releases a burst's storage once the buffer is empty.
        @inlinable package mutating func popFirst() -> Element? {
            guard let element = buffer.popFirst() else { return nil }
            if holdsBurst && buffer.isEmpty {
                buffer = Deque()
                holdsBurst = false
            }
            return element
        }

        @inlinable package var statistics: HubSubscriberStatistics {
            HubSubscriberStatistics(
                id: id, bufferingPolicy: policy, delivered: delivered, dropped: dropped,
                buffered: buffer.count, isTerminated: terminal != nil
            )
        }
    }

    // MARK: Actions

    @usableFromInline package enum SubscribeAction {
        case none
        /// Start a task iterating the source for `run`; it must first await `after` (the
        /// previous run's task) if there is one, then report itself with `sourceStarted`.
        case startSource(run: UInt64, after: SourceHandle?)
    }

    @usableFromInline package enum SourceStartedAction {
        case none
        /// The run ended before its task was registered: cancel the task.
        case cancelSource(SourceHandle)
        /// The run ended before its task was registered and a newer run is waiting: cancel the
        /// task, then start the newer run after it.
        case cancelSourceAndStart(SourceHandle, run: UInt64)
    }

    @usableFromInline package enum YieldAction {
        case none
        /// Resume these waiters with the element (outside the lock), then hand the array back
        /// with `recycle(_:)` so its storage is reused.
        case resume([Waiter], Element)
    }

    @usableFromInline package enum NextAction {
        case element(Element)
        /// The stream is over: return nil.
        case end
        /// The stream failed: throw, once.
        case fail(any Error)
        /// Only from `poll`: nothing available, suspend and call `suspend(_:waiter:)`.
        case wait
        /// Only from `suspend`: the waiter was stored and is resumed by a later transition.
        case suspended
    }

    @usableFromInline package enum CancelAction {
        case none
        /// Resume the waiter (if any) with the end of the stream, and cancel the source task
        /// (if any) because the last subscriber left.
        case finish(waiter: Waiter?, stopSource: SourceHandle?)
    }

    @usableFromInline package enum FinishAction {
        case none
        /// Resume each waiter with the terminal event; cancel the source task if given.
        case terminate([Waiter], Terminal, stopSource: SourceHandle?)
    }

    // MARK: State

    /// Whether the hub has a source to start and stop (false: fed by hand).
    @usableFromInline let hasSource: Bool
    /// Subscribers that receive new values, in an array for fast in-place broadcast.
    @usableFromInline package var active: [Subscriber] = []
    /// Position of each active subscriber in `active`.
    @usableFromInline package var activeIndex: [HubSubscriberID: Int] = [:]
    /// Subscribers whose run ended and that still owe their consumer buffered values or the end.
    @usableFromInline var draining: [HubSubscriberID: Subscriber] = [:]
    @usableFromInline var nextID: UInt64 = 0
    /// The last value broadcast.
    @usableFromInline package var latest: Element?
    /// Values broadcast so far.
    @usableFromInline package var yielded: UInt64 = 0
    /// Number of the current (or last) run; 0 before the first.
    @usableFromInline var run: UInt64 = 0
    /// A run is active: the source should be running.
    @usableFromInline package var isSourceRunning = false
    /// The task of the current or last run, once registered.
    @usableFromInline var sourceHandle: SourceHandle?
    /// A `startSource` was returned whose handle is not registered yet.
    @usableFromInline var isStartPending = false
    /// Reused storage for the waiter list of `yield` (no allocation per value).
    @usableFromInline var spareWaiters: [Waiter] = []

    @inlinable package init(hasSource: Bool) {
        self.hasSource = hasSource
    }

    // MARK: Subscribing and leaving

    /// Registers a subscriber. The first subscriber of a hub with a source starts a run.
    @inlinable package mutating func subscribe(bufferingPolicy: HubBufferingPolicy) -> (HubSubscriberID, SubscribeAction) {
        let id = HubSubscriberID(rawValue: nextID)
        nextID &+= 1
        activeIndex[id] = active.count
        active.append(Subscriber(id: id, policy: bufferingPolicy))
        guard hasSource, !isSourceRunning else { return (id, .none) }
        isSourceRunning = true
        run &+= 1
        guard !isStartPending else {
            // The previous run's task is still being registered; `sourceStarted` starts this run.
            return (id, .none)
        }
        isStartPending = true
        return (id, .startSource(run: run, after: sourceHandle))
    }

    /// Registers the task that iterates the source for `run`.
    @inlinable package mutating func sourceStarted(_ handle: SourceHandle, run startedRun: UInt64) -> SourceStartedAction {
        isStartPending = false
        sourceHandle = handle
        if startedRun == run && isSourceRunning {
            return .none
        }
        if isSourceRunning {
            // A newer run began while this one's handle was pending.
            isStartPending = true
            return .cancelSourceAndStart(handle, run: run)
        }
        return .cancelSource(handle)
    }

    /// Removes a subscriber (cancelled, finished iterating, or dropped). Idempotent.
    @inlinable package mutating func cancel(_ id: HubSubscriberID) -> CancelAction {
        if let subscriber = draining.removeValue(forKey: id) {
            return .finish(waiter: subscriber.waiter, stopSource: nil)
        }
        guard let index = activeIndex.removeValue(forKey: id) else { return .none }
        let last = active.count - 1
        if index != last {
            active.swapAt(index, last)
            activeIndex[active[index].id] = index
        }
        let subscriber = active.removeLast()
        var stop: SourceHandle?
        if active.isEmpty && isSourceRunning {
            isSourceRunning = false
            // With a start pending, `sourceStarted` cancels the task when it is registered.
            stop = isStartPending ? nil : sourceHandle
        }
        if subscriber.waiter == nil && stop == nil {
            return .none
        }
        return .finish(waiter: subscriber.waiter, stopSource: stop)
    }

    // MARK: Values in

    /// Broadcasts a value to every active subscriber, from the hand-fed side.
    @inlinable package mutating func yield(_ element: Element) -> YieldAction {
        latest = element
        yielded &+= 1
        guard !active.isEmpty else { return .none }
        var waiters: [Waiter] = []
        swap(&waiters, &spareWaiters)
        for index in active.indices {
            if let waiter = active[index].waiter {
                active[index].waiter = nil
                active[index].delivered &+= 1
                waiters.append(waiter)
            } else {
                active[index].enqueue(element)
            }
        }
        if waiters.isEmpty {
            swap(&waiters, &spareWaiters)
            return .none
        }
        return .resume(waiters, element)
    }

    /// Broadcasts a value from the source task of `run`; ignored if that run is over.
    @inlinable package mutating func sourceYield(_ element: Element, run sourceRun: UInt64) -> YieldAction {
        guard isSourceRunning && sourceRun == run else { return .none }
        return yield(element)
    }

    /// Gives back the waiter array of a `.resume` action after the waiters were resumed.
    @inlinable package mutating func recycle(_ waiters: inout [Waiter]) {
        waiters.removeAll(keepingCapacity: true)
        if waiters.capacity > spareWaiters.capacity {
            swap(&waiters, &spareWaiters)
        }
    }

    /// Ends the stream of every active subscriber (hand-fed `finish`): each drains its buffer
    /// and then sees the end or the error once. A running source is stopped. Later subscribers
    /// join a new run.
    @inlinable package mutating func finish(_ terminal: Terminal) -> FinishAction {
        var stop: SourceHandle?
        if isSourceRunning {
            isSourceRunning = false
            stop = isStartPending ? nil : sourceHandle
        }
        return terminateAll(terminal, stopSource: stop)
    }

    /// The source task of `run` ended by itself (finished or threw); ignored if the run is over
    /// (it was stopped because the last subscriber left).
    @inlinable package mutating func sourceTerminated(run sourceRun: UInt64, _ terminal: Terminal) -> FinishAction {
        guard isSourceRunning && sourceRun == run else { return .none }
        isSourceRunning = false
        return terminateAll(terminal, stopSource: nil)
    }

    @inlinable package mutating func terminateAll(_ terminal: Terminal, stopSource: SourceHandle?) -> FinishAction {
        var waiters: [Waiter] = []
        for var subscriber in active {
            if let waiter = subscriber.waiter {
                // A waiting subscriber has an empty buffer: it gets the terminal event now.
                waiters.append(waiter)
            } else {
                subscriber.terminal = terminal
                draining[subscriber.id] = subscriber
            }
        }
        active.removeAll()
        activeIndex.removeAll()
        if waiters.isEmpty && stopSource == nil {
            return .none
        }
        return .terminate(waiters, terminal, stopSource: stopSource)
    }

    // MARK: Values out

    /// A consumer asks for its next value without suspending.
    @inlinable package mutating func poll(_ id: HubSubscriberID) -> NextAction {
        next(id, suspending: nil)
    }

    /// A consumer that found nothing in `poll` suspends with `waiter`. Values may have arrived
    /// in between, in which case they are returned and the waiter is not stored.
    @inlinable package mutating func suspend(_ id: HubSubscriberID, waiter: Waiter) -> NextAction {
        next(id, suspending: waiter)
    }

    /// The next value, or else `.wait` (no waiter given) or `.suspended` (the waiter stored).
    @inlinable package mutating func next(_ id: HubSubscriberID, suspending waiter: Waiter?) -> NextAction {
        if let index = activeIndex[id] {
            if let element = active[index].popFirst() {
                active[index].delivered &+= 1
                return .element(element)
            }
            if active[index].waiter != nil {
                return .fail(HubError.concurrentNext(id))
            }
            guard let waiter else { return .wait }
            active[index].waiter = waiter
            return .suspended
        }
        return pollDraining(id)
    }

    @inlinable package mutating func pollDraining(_ id: HubSubscriberID) -> NextAction {
        // Mutate in place (a copy of the subscriber would copy its whole buffer on write).
        if let element = draining[id]?.popFirst() {
            draining[id]?.delivered &+= 1
            return .element(element)
        }
        guard let subscriber = draining.removeValue(forKey: id) else {
            // Cancelled, or its end was already delivered.
            return .end
        }
        switch subscriber.terminal {
        case .failed(let error):
            return .fail(error)
        case .finished, nil:
            return .end
        }
    }

    // MARK: Reading

    /// Counters of one subscriber, or nil once it is gone.
    @inlinable package func statistics(of id: HubSubscriberID) -> HubSubscriberStatistics? {
        if let index = activeIndex[id] {
            return active[index].statistics
        }
        return draining[id]?.statistics
    }

    /// Counters of the whole hub.
    @inlinable package var statistics: HubStatistics {
        var subscribers = active.map(\.statistics)
        subscribers.append(contentsOf: draining.values.map(\.statistics))
        subscribers.sort { $0.id < $1.id }
        return HubStatistics(
            subscribers: subscribers, yielded: yielded, sourceStarts: hasSource ? run : 0,
            isSourceRunning: isSourceRunning
        )
    }
}

extension HubState: Sendable where Element: Sendable, Waiter: Sendable, SourceHandle: Sendable {}
extension HubState.Subscriber: Sendable where Element: Sendable, Waiter: Sendable {}
extension HubState.SubscribeAction: Sendable where SourceHandle: Sendable {}
extension HubState.SourceStartedAction: Sendable where SourceHandle: Sendable {}
extension HubState.YieldAction: Sendable where Element: Sendable, Waiter: Sendable {}
extension HubState.NextAction: Sendable where Element: Sendable {}
extension HubState.CancelAction: Sendable where Waiter: Sendable, SourceHandle: Sendable {}
extension HubState.FinishAction: Sendable where Waiter: Sendable, SourceHandle: Sendable {}
