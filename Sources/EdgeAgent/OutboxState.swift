import DequeModule

/// The outbox's state machine: the queue, which entries are leased (in flight), the drop
/// counters and the waiting tasks. A plain value: each event is a `mutating func` that decides
/// under the outbox's lock and returns what to do (continuations to resume, as
/// ``Resumptions``), which the ``Outbox`` performs after releasing the lock.
struct OutboxState {
    /// A queued message with the id the consumer acknowledges it by, and whether it is leased.
    struct Entry {
        let id: UInt64
        var message: OutboundMessage
        var leased = false
    }

    /// What a task waiting with ``addSignalWaiter(_:_:)`` waits for.
    enum Condition {
        /// The queue is empty (everything acknowledged).
        case empty
        /// Fewer than `capacity` fixes and headings are queued, or the outbox is closed.
        case room
        /// No entry is leased (every handed-out message was acknowledged or released).
        case idle
    }

    /// Continuations to resume once the lock is released.
    struct Resumptions {
        var consumers: [(Waiter, OutboxEntry?)] = []
        var signals: [Signal] = []

        /// Resumes them; call it outside the lock.
        func run() {
            for (waiter, entry) in consumers { waiter.resume(returning: entry) }
            for signal in signals { signal.resume() }
        }
    }

    typealias EnqueueResult = Outbox.EnqueueResult
    typealias Waiter = CheckedContinuation<OutboxEntry?, any Error>
    typealias Signal = CheckedContinuation<Void, Never>

    let capacity: Int
    /// The most entries leased at once.
    let window: Int
    /// Queue order, oldest first. A deque: acknowledgements remove from the front, which an
    /// array pays for by moving every other entry (a full outbox during a batch upload).
    private(set) var entries: Deque<Entry> = []
    private(set) var leasedCount = 0
    private var nextID: UInt64 = 0
    private(set) var droppedFixes: UInt64 = 0
    private(set) var droppedHeadings: UInt64 = 0
    private(set) var closed = false
    /// Waiting consumers, served first come, first served.
    private var consumers: [(id: UInt64, waiter: Waiter)] = []
    private var signalWaiters: [UInt64: (condition: Condition, signal: Signal)] = [:]
    private var nextWaiterID: UInt64 = 0
    /// Per topic, the id of the newest acknowledged message (ids rise in creation order, so a
    /// larger id on the same topic is a newer message).
    private var newestAcknowledged: [String: UInt64] = [:]

    init(capacity: Int, window: Int) {
        self.capacity = max(1, capacity)
        self.window = max(1, window)
    }

    /// Fixes and headings queued, leased ones included (statuses are not counted). Kept as a
    /// count updated wherever a fix or heading enters or leaves `entries`, because it is read on
    /// every enqueue and every room check: recounting a full outbox each time (copying each
    /// entry) made a batch replay spend most of its time here.
    private(set) var queuedCount = 0

    /// Adds a message, dropping the oldest droppable one when full (headings first, then
    /// fixes; never a status, never a leased message). Returns what happened and the consumers
    /// to hand entries to.
    mutating func enqueue(_ message: OutboundMessage) -> (EnqueueResult, Resumptions) {
        guard !closed else { return (.refusedClosed, Resumptions()) }
        var result = EnqueueResult.queued
        if message.kind == .status,
           let index = entries.lastIndex(where: { $0.message.kind == .status && !$0.leased }) {
            entries[index].message = message
            return (.superseded, Resumptions())
        }
        if message.kind != .status, queuedCount >= capacity {
            if let index = oldestDroppable(.heading) {
                result = .queuedDroppingOldest(droppedKind: .heading, droppedSeq: entries[index].message.seq)
                entries.remove(at: index)
                queuedCount -= 1
                droppedHeadings += 1
            } else if message.kind == .fix, let index = oldestDroppable(.fix) {
                result = .queuedDroppingOldest(droppedKind: .fix, droppedSeq: entries[index].message.seq)
                entries.remove(at: index)
                queuedCount -= 1
                droppedFixes += 1
            } else {
                if message.kind == .fix { droppedFixes += 1 } else { droppedHeadings += 1 }
                return (.droppedIncoming, Resumptions())
            }
        }
        let entry = Entry(id: nextID, message: message)
        nextID &+= 1
        if message.kind == .status {
            // Statuses go first (right after the leased messages): small and what watchers need.
            entries.insert(entry, at: entries.firstIndex(where: { !$0.leased }) ?? entries.endIndex)
        } else {
            entries.append(entry)
            queuedCount += 1
        }
        return (result, serve())
    }

    /// The consumer asks for the next entry. Returns it at once (leasing it), `nil` when closed
    /// and empty, or no value: the caller must wait with ``addConsumer(_:)``.
    mutating func next() -> OutboxEntry?? {
        if consumers.isEmpty, let entry = lease() { return .some(entry) }
        return closed && entries.isEmpty ? .some(nil) : .none
    }

    /// Registers a waiting consumer; returns its id (for cancellation).
    mutating func addConsumer(_ waiter: Waiter) -> UInt64 {
        let id = makeWaiterID()
        consumers.append((id, waiter))
        return id
    }

    /// Removes a waiting consumer (cancelled); returns it to be resumed, if still waiting.
    mutating func removeConsumer(_ id: UInt64) -> Waiter? {
        guard let index = consumers.firstIndex(where: { $0.id == id }) else { return nil }
        return consumers.remove(at: index).waiter
    }

    /// The message `id` was sent: remove it, freeing its lease.
    mutating func acknowledge(_ id: UInt64) -> Resumptions {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return Resumptions() }
        let entry = entries.remove(at: index)
        if entry.leased { leasedCount -= 1 }
        if entry.message.kind != .status { queuedCount -= 1 }
        let topic = entry.message.topic
        newestAcknowledged[topic] = max(newestAcknowledged[topic] ?? 0, id)
        return serve()
    }

    /// Sending `id` failed: its lease ends and it stays queued at its place, to be handed out
    /// again in queue order (and it may now be dropped like any unleased message) — unless it
    /// is a status and a newer status is queued or already acknowledged: then it is obsolete
    /// and removed, so only the newest status is retried.
    mutating func release(_ id: UInt64) -> Resumptions {
        guard let index = entries.firstIndex(where: { $0.id == id }), entries[index].leased else { return Resumptions() }
        entries[index].leased = false
        leasedCount -= 1
        let message = entries[index].message
        if message.kind == .status,
           entries.contains(where: { $0.message.kind == .status && $0.id > id })
            || (newestAcknowledged[message.topic] ?? 0) > id {
            entries.remove(at: index)
        }
        return serve()
    }

    /// No more messages are accepted; waiting consumers of an empty outbox get `nil`.
    mutating func close() -> Resumptions {
        closed = true
        return serve()
    }

    /// Registers a task waiting for `condition`; `nil` if it already holds.
    mutating func addSignalWaiter(_ condition: Condition, _ signal: Signal) -> UInt64? {
        guard !holds(condition) else { return nil }
        let id = makeWaiterID()
        signalWaiters[id] = (condition, signal)
        return id
    }

    /// Removes a signal waiter (cancelled); returns it to be resumed, if still waiting.
    mutating func removeSignalWaiter(_ id: UInt64) -> Signal? {
        signalWaiters.removeValue(forKey: id)?.signal
    }

    // MARK: Internals

    private func holds(_ condition: Condition) -> Bool {
        switch condition {
        case .empty: entries.isEmpty
        case .room: closed || queuedCount < capacity
        case .idle: leasedCount == 0
        }
    }

    private mutating func makeWaiterID() -> UInt64 {
        defer { nextWaiterID &+= 1 }
        return nextWaiterID
    }

    private func oldestDroppable(_ kind: OutboundMessage.Kind) -> Int? {
        entries.firstIndex { $0.message.kind == kind && !$0.leased }
    }

    /// Leases the first unleased entry if the window has room. A message retried after a newer
    /// one on its topic was acknowledged goes out unretained, so the broker keeps the newest.
    private mutating func lease() -> OutboxEntry? {
        guard leasedCount < window, let index = entries.firstIndex(where: { !$0.leased }) else { return nil }
        entries[index].leased = true
        leasedCount += 1
        var message = entries[index].message
        if message.retain, (newestAcknowledged[message.topic] ?? 0) > entries[index].id {
            message = OutboundMessage(
                kind: message.kind, topic: message.topic, payload: message.payload, qos: message.qos, retain: false,
                seq: message.seq
            )
        }
        return OutboxEntry(id: entries[index].id, message: message)
    }

    /// Hands entries to waiting consumers, in order, and collects satisfied signal waiters.
    private mutating func serve() -> Resumptions {
        var resumptions = Resumptions()
        while !consumers.isEmpty, let entry = lease() {
            resumptions.consumers.append((consumers.removeFirst().waiter, entry))
        }
        if closed, entries.isEmpty {
            resumptions.consumers += consumers.map { ($0.waiter, nil) }
            consumers.removeAll()
        }
        if !signalWaiters.isEmpty {
            let ready = signalWaiters.filter { holds($0.value.condition) }
            for id in ready.keys { signalWaiters.removeValue(forKey: id) }
            resumptions.signals = ready.values.map(\.signal)
        }
        return resumptions
    }
}
