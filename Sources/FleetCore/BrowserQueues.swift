import OrderedCollections

/// The per-browser queues of the live map: which vehicles changed since each browser's last
/// batch, coalesced, bounded, and flushed at most once per flush interval.
///
/// A plain state value in the house style of `HubState`: every transition returns what the
/// caller must do (resume a waiter with a batch, or with `nil` to end its stream; log a drop),
/// and the caller does it after releasing the lock. Generic over the vehicle key and the
/// waiter, so the tests drive it with plain strings and integers, no tasks.
///
/// Coalescing: a browser's queue is an ordered set of keys. A vehicle that changes ten times
/// between two flushes is sent once, with its state at the time of the flush.
///
/// Bound and slow readers: at each ``flush()`` a browser whose writer is ready (waiting in
/// ``next(_:waiter:)``) receives its whole queue. A browser still busy writing its previous
/// batch keeps its queue, which marks it *due* (its next call to ``next(_:waiter:)`` receives
/// the queue at once). A busy browser is dropped when, at a flush, its queue holds more than
/// ``BrowserQueueLimits/maximumPending`` keys, or when it has missed more than
/// ``BrowserQueueLimits/maximumStalledFlushes`` flushes in a row. Between two flushes a queue grows by at
/// most the distinct vehicles heard from in that interval, so nothing is buffered for ever.
package struct BrowserQueues<Key: Hashable, Waiter> {
    package typealias Limits = BrowserQueueLimits

    /// Why a browser was dropped.
    package enum DropReason: String, Sendable, Equatable {
        /// Its queue was over ``BrowserQueueLimits/maximumPending`` at a flush it could not take.
        case overBound = "queue over its bound"
        /// It missed more than ``BrowserQueueLimits/maximumStalledFlushes`` flushes in a row.
        case stalled = "stalled"
    }

    /// A dropped browser: its id, why, and how many keys it left queued. (A dropped browser was
    /// busy writing, so no waiter is left to resume: its next ``next(_:waiter:)`` ends it.)
    package struct Drop: Equatable {
        package var id: Int
        package var reason: DropReason
        package var pending: Int

        package init(id: Int, reason: DropReason, pending: Int) { (self.id, self.reason, self.pending) = (id, reason, pending) }
    }

    /// What ``next(_:waiter:)`` tells the caller.
    package enum NextAction {
        /// Keep the waiter suspended: a flush will resume it.
        case wait
        /// Resume the waiter at once with this batch.
        case deliver([Key])
        /// Resume the waiter at once with `nil`: the browser is gone (dropped, disconnected,
        /// or the queues finished).
        case end
    }

    /// What ``flush()`` tells the caller.
    package struct FlushActions {
        /// Waiters to resume with their batch.
        package var deliveries: [(waiter: Waiter, batch: [Key])] = []
        /// Browsers dropped as slow readers.
        package var drops: [Drop] = []
    }

    private struct Browser {
        /// The vehicles changed since the last batch, each once, in the order first changed.
        var order: OrderedSet<Key> = []
        var waiter: Waiter?
        var stalledFlushes = 0
        /// A flush found the queue non-empty and the writer busy: deliver on the next `next`.
        var due = false

        mutating func insert(_ key: Key) {
            order.append(key)
        }

        mutating func take() -> [Key] {
            defer {
                order = []
                stalledFlushes = 0
                due = false
            }
            return order.elements
        }
    }

    package let limits: Limits
    private var browsers: [Int: Browser] = [:]
    private var nextID = 0
    private(set) var isFinished = false
    /// Browsers dropped as slow readers, in total.
    package private(set) var droppedCount: UInt64 = 0

    package init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// The browsers connected.
    package var count: Int { browsers.count }

    /// The keys queued for browser `id`, oldest first (empty if unknown).
    package func pending(_ id: Int) -> [Key] { browsers[id]?.order.elements ?? [] }

    /// Adds a browser with an empty queue; `nil` once finished.
    package mutating func add() -> Int? {
        guard !isFinished, browsers.count < limits.maximumBrowsers else { return nil }
        nextID += 1
        browsers[nextID] = Browser()
        return nextID
    }

    /// Queues `key` for every browser (once: a key already queued keeps its place).
    package mutating func enqueue(_ key: Key) {
        // In place, through the values view: no copy of the dictionary per event.
        var index = browsers.values.startIndex
        while index != browsers.values.endIndex {
            browsers.values[index].insert(key)
            browsers.values.formIndex(after: &index)
        }
    }

    /// The writer of browser `id` is ready for its next batch.
    package mutating func next(_ id: Int, waiter: Waiter) -> NextAction {
        guard var browser = browsers[id] else { return .end }
        if browser.due && !browser.order.isEmpty {
            let batch = browser.take()
            browsers[id] = browser
            return .deliver(batch)
        }
        browser.waiter = waiter
        browsers[id] = browser
        return .wait
    }

    /// Removes browser `id` (its connection ended, or its task was cancelled); returns its
    /// waiter, if one was waiting, to resume with `nil`.
    package mutating func remove(_ id: Int) -> Waiter? {
        browsers.removeValue(forKey: id)?.waiter
    }

    /// One flush tick: hands each ready browser its queue, marks the busy ones due, and drops
    /// the slow ones.
    package mutating func flush() -> FlushActions {
        var actions = FlushActions()
        for (id, var browser) in browsers {
            guard !browser.order.isEmpty else {
                browser.stalledFlushes = 0
                browsers[id] = browser
                continue
            }
            if let waiter = browser.waiter {
                browser.waiter = nil
                actions.deliveries.append((waiter, browser.take()))
                browsers[id] = browser
                continue
            }
            browser.stalledFlushes += 1
            browser.due = true
            let reason: DropReason? =
                browser.order.count > limits.maximumPending
                ? .overBound : browser.stalledFlushes > limits.maximumStalledFlushes ? .stalled : nil
            if let reason {
                browsers[id] = nil
                droppedCount &+= 1
                actions.drops.append(Drop(id: id, reason: reason, pending: browser.order.count))
            } else {
                browsers[id] = browser
            }
        }
        return actions
    }

    /// Ends every browser's stream: returns the waiters to resume with `nil`; later browsers
    /// are refused.
    package mutating func finish() -> [Waiter] {
        isFinished = true
        defer { browsers = [:] }
        return browsers.values.compactMap(\.waiter)
    }
}

/// When a slow browser is dropped.
package struct BrowserQueueLimits: Sendable, Equatable {
    /// The most distinct vehicles queued for a browser that is not ready at a flush.
    package var maximumPending: Int
    /// How many flushes in a row a browser with a non-empty queue may miss.
    package var maximumStalledFlushes: Int
    /// The most browsers connected at once; one more is refused (each holds a snapshot of
    /// the fleet while it is written, and its own queue).
    package var maximumBrowsers: Int

    package init(maximumPending: Int = 10_000, maximumStalledFlushes: Int = 40, maximumBrowsers: Int = 1_000) {
        self.maximumPending = max(1, maximumPending)
        self.maximumStalledFlushes = max(1, maximumStalledFlushes)
        self.maximumBrowsers = max(1, maximumBrowsers)
    }
}
