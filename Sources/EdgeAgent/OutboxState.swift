/// The outbox's state machine: the queue, the message in flight, the drop counters and the
/// waiting consumers. A plain value: each event is a `mutating func` that decides under the
/// outbox's lock and returns what to do (continuations to resume), which the ``Outbox`` performs
/// after releasing the lock.
struct OutboxState {
    /// A queued message with the id the consumer acknowledges it by.
    struct Entry {
        let id: UInt64
        var message: OutboundMessage
    }

    typealias EnqueueResult = Outbox.EnqueueResult
    typealias Waiter = CheckedContinuation<OutboxEntry?, any Error>

    let capacity: Int
    private(set) var entries: [Entry] = []
    private(set) var inFlight: UInt64?
    private var nextID: UInt64 = 0
    private(set) var droppedFixes: UInt64 = 0
    private(set) var droppedHeadings: UInt64 = 0
    private(set) var closed = false
    private var waiters: [UInt64: Waiter] = [:]
    private var drainWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiterID: UInt64 = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Adds a message, dropping the oldest droppable one when full (headings first, then
    /// fixes; never a status, never the message in flight). Returns what happened and the
    /// consumers to hand the head to.
    mutating func enqueue(_ message: OutboundMessage) -> (EnqueueResult, [(Waiter, OutboxEntry)]) {
        guard !closed else { return (.refusedClosed, []) }
        var result = EnqueueResult.queued
        if message.kind == .status,
           let index = entries.lastIndex(where: { $0.message.kind == .status && $0.id != inFlight }) {
            entries[index].message = message
            return (.superseded, [])
        }
        if message.kind != .status, entries.count(where: { $0.message.kind != .status }) >= capacity {
            if let index = oldestDroppable(.heading) {
                result = .queuedDroppingOldest(droppedKind: .heading, droppedSeq: entries[index].message.seq)
                entries.remove(at: index)
                droppedHeadings += 1
            } else if message.kind == .fix, let index = oldestDroppable(.fix) {
                result = .queuedDroppingOldest(droppedKind: .fix, droppedSeq: entries[index].message.seq)
                entries.remove(at: index)
                droppedFixes += 1
            } else {
                if message.kind == .fix { droppedFixes += 1 } else { droppedHeadings += 1 }
                return (.droppedIncoming, [])
            }
        }
        let entry = Entry(id: nextID, message: message)
        nextID &+= 1
        if message.kind == .status {
            // Statuses go first (after the message in flight): small and what watchers need.
            entries.insert(entry, at: entries.first.map { $0.id == inFlight ? 1 : 0 } ?? 0)
        } else {
            entries.append(entry)
        }
        return (result, handOutHead())
    }

    /// The consumer asks for the head. Returns it at once (marking it in flight), `nil` when
    /// closed and empty, or no value: the caller must wait with ``addWaiter(_:)``.
    mutating func next() -> OutboxEntry?? {
        if let head = entries.first {
            inFlight = head.id
            return .some(OutboxEntry(id: head.id, message: head.message))
        }
        return closed ? .some(nil) : .none
    }

    /// Registers a waiting consumer; returns its id (for cancellation).
    mutating func addWaiter(_ waiter: Waiter) -> UInt64 {
        let id = nextWaiterID
        nextWaiterID &+= 1
        waiters[id] = waiter
        return id
    }

    /// Removes a waiting consumer (cancelled); returns it to be resumed, if still waiting.
    mutating func removeWaiter(_ id: UInt64) -> Waiter? {
        waiters.removeValue(forKey: id)
    }

    /// The message `id` was sent: remove it. Returns drain waiters to resume when now empty.
    mutating func acknowledge(_ id: UInt64) -> [CheckedContinuation<Void, Never>] {
        if inFlight == id { inFlight = nil }
        if let index = entries.firstIndex(where: { $0.id == id }) { entries.remove(at: index) }
        return takeDrainWaitersIfEmpty()
    }

    /// Sending `id` failed: it stays queued (at its place, the head) and may be dropped again —
    /// unless it is a status and a newer status was queued meanwhile: then it is obsolete and
    /// removed, so only the newest status is retried.
    mutating func release(_ id: UInt64) {
        if inFlight == id { inFlight = nil }
        guard let index = entries.firstIndex(where: { $0.id == id }), entries[index].message.kind == .status,
              entries[(index + 1)...].contains(where: { $0.message.kind == .status })
        else { return }
        entries.remove(at: index)
    }

    /// No more messages are accepted; waiting consumers of an empty outbox get `nil`.
    mutating func close() -> [Waiter] {
        closed = true
        guard entries.isEmpty else { return [] }
        defer { waiters.removeAll() }
        return Array(waiters.values)
    }

    /// Registers someone waiting for the outbox to become empty; `false` if already empty.
    mutating func addDrainWaiter(_ waiter: CheckedContinuation<Void, Never>) -> UInt64? {
        guard !entries.isEmpty else { return nil }
        let id = nextWaiterID
        nextWaiterID &+= 1
        drainWaiters[id] = waiter
        return id
    }

    /// Removes a drain waiter (cancelled); returns it to be resumed, if still waiting.
    mutating func removeDrainWaiter(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
        drainWaiters.removeValue(forKey: id)
    }

    private func oldestDroppable(_ kind: OutboundMessage.Kind) -> Int? {
        entries.firstIndex { $0.message.kind == kind && $0.id != inFlight }
    }

    private mutating func handOutHead() -> [(Waiter, OutboxEntry)] {
        guard !waiters.isEmpty, let head = entries.first else { return [] }
        inFlight = head.id
        let entry = OutboxEntry(id: head.id, message: head.message)
        defer { waiters.removeAll() }
        return waiters.values.map { ($0, entry) }
    }

    private mutating func takeDrainWaitersIfEmpty() -> [CheckedContinuation<Void, Never>] {
        guard entries.isEmpty, !drainWaiters.isEmpty else { return [] }
        defer { drainWaiters.removeAll() }
        return Array(drainWaiters.values)
    }
}
