/// The client's shared state: a plain struct kept inside a `Mutex` in
/// ``MQTTCallbackContext``. Each event (a libmosquitto callback or an API call) is a
/// `mutating func` that decides under the lock and returns what to do; the caller resumes
/// continuations and yields to streams after releasing the lock.
struct MQTTClientState: Sendable {
    enum Phase: Sendable, Equatable {
        case idle, connecting, connected, reconnecting, shuttingDown, closed
    }

    typealias Completion = (continuation: CheckedContinuation<Void, any Error>, result: Result<Void, MQTTError>)
    typealias MessageContinuation = AsyncThrowingStream<MQTTMessage, any Error>.Continuation

    struct PendingPublish: Sendable {
        var continuation: CheckedContinuation<Void, any Error>
        var topic: String
        var qos: MQTTQoS
        /// Tells this publish's wait apart from a later one that libmosquitto gave the same
        /// (16-bit, reused) message id.
        var token: UInt64
    }

    struct PendingSubscribe: Sendable {
        var continuation: CheckedContinuation<Void, any Error>
        var subscriptionID: UInt64
        var filters: [String]
    }

    struct Subscription: Sendable {
        var filters: [String]
        var qos: MQTTQoS
        var continuation: MessageContinuation
    }

    /// What the caller must do after an event, outside the lock.
    struct Actions: Sendable {
        var completions: [Completion] = []
        var stateUpdates: [(AsyncStream<MQTTConnectionState>.Continuation, MQTTConnectionState)] = []
        var finishObservers: [AsyncStream<MQTTConnectionState>.Continuation] = []
        var finishSubscriptions: [(MessageContinuation, MQTTError?)] = []
        var resumeDrain: [CheckedContinuation<Void, Never>] = []
        var resumeExit: [CheckedContinuation<Void, Never>] = []
        /// Waits ended by their task's cancellation: resumed with `CancellationError`.
        var cancellations: [CheckedContinuation<Void, any Error>] = []

        func run() {
            for (continuation, result) in completions { continuation.resume(with: result.mapError { $0 }) }
            for continuation in cancellations { continuation.resume(throwing: CancellationError()) }
            for (observer, state) in stateUpdates { observer.yield(state) }
            for observer in finishObservers { observer.finish() }
            for (continuation, error) in finishSubscriptions {
                if let error { continuation.finish(throwing: error) } else { continuation.finish() }
            }
            for waiter in resumeDrain { waiter.resume() }
            for waiter in resumeExit { waiter.resume() }
        }
    }

    let protocolVersion: MQTTProtocolVersion
    let sentCredentials: Bool

    var phase: Phase = .idle
    var connectionState: MQTTConnectionState = .idle
    var connectContinuation: CheckedContinuation<Void, any Error>?
    /// Set when the connect attempt under way has already been answered (a refused CONNACK).
    var connectAnswered = false
    var pendingPublishes: [Int32: PendingPublish] = [:]
    var pendingSubscribes: [Int32: PendingSubscribe] = [:]
    /// Acknowledgements that arrived before the API call that sent the packet had registered
    /// its message id: libmosquitto's thread can answer before `mosquitto_publish` returns.
    var earlyAcks: [Int32: [Int32]] = [:]
    /// Message ids of publishes whose caller stopped waiting (its task was cancelled) while
    /// libmosquitto still holds the message: their acknowledgement, if it ever comes, is
    /// dropped, not kept in `earlyAcks` where a later publish reusing the id would take it.
    /// An id leaves the set when its acknowledgement arrives, when libmosquitto hands it to a
    /// new publish, or when the loop ends — so it holds at most 65535 ids.
    var abandonedPublishes: Set<Int32> = []
    /// Bumped at every connection loss: a QoS 0 publish taken before a loss is never reported.
    var epoch: UInt64 = 0
    /// How many publishes libmosquitto has accepted so far.
    var publishesHandedOver = 0
    var subscriptions: [UInt64: Subscription] = [:]
    /// MQTT 5 subscription identifier of each subscribed filter. The broker sends one copy of
    /// a message per matching subscription, tagged with its identifier; routing by it gives
    /// each stream exactly one copy even when filters overlap.
    var filterIdentifiers: [String: UInt32] = [:]
    var nextFilterIdentifier: UInt32 = 0
    var observers: [UInt64: AsyncStream<MQTTConnectionState>.Continuation] = [:]
    var nextID: UInt64 = 0
    var stopRequested = false
    var reconnectAttempt = 0
    /// Tasks in `shutdown()` waiting for the awaited publishes to complete, by waiter id.
    var drainWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    /// Tasks in `shutdown()` waiting for the loop thread to end, by waiter id.
    var exitWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    /// Message ids of UNSUBSCRIBEs sent on the current connection and not yet acknowledged.
    var pendingUnsubscribes: Set<Int32> = []
    /// UNSUBACKs that arrived before the call that sent the UNSUBSCRIBE registered its id.
    var earlyUnsubacks: Set<Int32> = []
    /// Tasks in `shutdown()` waiting for `pendingUnsubscribes` to empty, by waiter id.
    var unsubackWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    var loopRunning = false
    /// Recent error lines from libmosquitto's log, to explain TLS failures.
    var errorLog: [String] = []

    init(protocolVersion: MQTTProtocolVersion, sentCredentials: Bool) {
        self.protocolVersion = protocolVersion
        self.sentCredentials = sentCredentials
    }

    mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    // MARK: connection state

    private mutating func transition(to newState: MQTTConnectionState, _ actions: inout Actions) {
        connectionState = newState
        for observer in observers.values { actions.stateUpdates.append((observer, newState)) }
    }

    mutating func addObserver(_ id: UInt64, _ continuation: AsyncStream<MQTTConnectionState>.Continuation) -> Bool {
        continuation.yield(connectionState)
        if phase == .closed { return false }
        observers[id] = continuation
        return true
    }

    /// `connect()` was called. Returns an error when the client is not idle, and whether to
    /// start the loop thread. `cancelled` is the calling task's cancellation read under the
    /// lock: a cancelled connect starts nothing, fails with `CancellationError` and closes the
    /// client (it connects once).
    mutating func startConnect(
        _ continuation: CheckedContinuation<Void, any Error>, cancelled: Bool = false
    ) -> (error: MQTTError?, startLoop: Bool, actions: Actions) {
        var actions = Actions()
        switch phase {
        case .idle where cancelled:
            phase = .closed
            stopRequested = true
            actions.cancellations.append(continuation)
            transition(to: .closed, &actions)
            return (nil, false, actions)
        case .idle:
            phase = .connecting
            connectContinuation = continuation
            loopRunning = true
            transition(to: .connecting, &actions)
            return (nil, true, actions)
        case .closed, .shuttingDown:
            return (.shutdown, false, actions)
        case .connecting, .connected, .reconnecting:
            return (.invalidConfiguration("connect() called twice"), false, actions)
        }
    }

    /// The task awaiting `connect()` was cancelled before the CONNACK: the wait ends with
    /// `CancellationError` and the client shuts down (the loop thread ends by itself, after a
    /// blocking TCP connect under way returns). A no-op once the connect was answered.
    mutating func cancelConnect() -> Actions {
        var actions = Actions()
        guard phase == .connecting, let continuation = connectContinuation else { return actions }
        connectContinuation = nil
        phase = .shuttingDown
        stopRequested = true
        actions.cancellations.append(continuation)
        return actions
    }

    /// A CONNACK arrived. Returns the filters to subscribe again (with their QoS and MQTT 5
    /// identifier) on success.
    mutating func connack(reasonCode: Int32) -> (restore: [(filter: String, qos: MQTTQoS, identifier: UInt32)], actions: Actions) {
        var actions = Actions()
        if reasonCode == 0 {
            guard phase == .connecting || phase == .reconnecting else { return ([], actions) }
            phase = .connected
            reconnectAttempt = 0
            if let continuation = connectContinuation {
                connectContinuation = nil
                actions.completions.append((continuation, .success(())))
            }
            transition(to: .connected, &actions)
            var qosByFilter: [String: MQTTQoS] = [:]
            for subscription in subscriptions.values {
                for filter in subscription.filters { qosByFilter[filter] = max(qosByFilter[filter] ?? .atMostOnce, subscription.qos) }
            }
            var restore: [(filter: String, qos: MQTTQoS, identifier: UInt32)] = []
            for (filter, qos) in qosByFilter.sorted(by: { $0.key < $1.key }) {
                restore.append((filter, qos, identifier(for: filter)))
            }
            return (restore, actions)
        }
        let error = MQTTError.connack(reasonCode: reasonCode, version: protocolVersion, sentCredentials: sentCredentials)
        connectAnswered = true
        if let continuation = connectContinuation {
            connectContinuation = nil
            phase = .closed
            stopRequested = true
            actions.completions.append((continuation, .failure(error)))
            transition(to: .closed, &actions)
        }
        if phase == .reconnecting || phase == .connected {
            phase = .reconnecting
            transition(to: .disconnected(reason: error.description), &actions)
        }
        return ([], actions)
    }

    /// The connection went away (or a connection attempt failed) with `error`.
    /// Returns whether the loop should try to reconnect.
    mutating func connectionLost(_ error: MQTTError) -> (reconnect: Bool, actions: Actions) {
        var actions = Actions()
        epoch &+= 1
        for (mid, pending) in pendingPublishes where pending.qos == .atMostOnce {
            pendingPublishes[mid] = nil
            actions.completions.append((pending.continuation, .failure(.connectionLost(reason: error.description))))
        }
        // An UNSUBSCRIBE lost with the connection is never answered; nobody waits for it.
        pendingUnsubscribes.removeAll()
        earlyUnsubacks.removeAll()
        actions.resumeExit += unsubackWaiters.values
        unsubackWaiters.removeAll()
        // A SUBSCRIBE lost with the connection is sent again (with every other filter) after
        // the next CONNACK; the caller's subscription is registered, so report success.
        for (mid, pending) in pendingSubscribes {
            pendingSubscribes[mid] = nil
            actions.completions.append((pending.continuation, .success(())))
        }
        let alreadyAnswered = connectAnswered
        connectAnswered = false
        switch phase {
        case .connecting:
            phase = .closed
            stopRequested = true
            if let continuation = connectContinuation {
                connectContinuation = nil
                actions.completions.append((continuation, .failure(error)))
            }
            transition(to: .closed, &actions)
            return (false, actions)
        case .connected:
            phase = .reconnecting
            transition(to: .disconnected(reason: error.description), &actions)
            return (!stopRequested, actions)
        case .reconnecting:
            if !alreadyAnswered { transition(to: .disconnected(reason: error.description), &actions) }
            return (!stopRequested, actions)
        case .idle, .shuttingDown, .closed:
            return (false, actions)
        }
    }

    /// The loop is about to wait `delay` before reconnecting.
    mutating func willReconnect(after delay: Duration) -> (attempt: Int, actions: Actions) {
        var actions = Actions()
        reconnectAttempt += 1
        transition(to: .reconnecting(attempt: reconnectAttempt, delay: delay), &actions)
        return (reconnectAttempt, actions)
    }

    /// The loop thread has ended: fail what is left, finish every stream.
    mutating func loopEnded() -> Actions {
        var actions = Actions()
        phase = .closed
        loopRunning = false
        if let continuation = connectContinuation {
            connectContinuation = nil
            actions.completions.append((continuation, .failure(.shutdown)))
        }
        for pending in pendingPublishes.values { actions.completions.append((pending.continuation, .failure(.shutdown))) }
        pendingPublishes.removeAll()
        for pending in pendingSubscribes.values { actions.completions.append((pending.continuation, .failure(.shutdown))) }
        pendingSubscribes.removeAll()
        earlyAcks.removeAll()
        abandonedPublishes.removeAll()
        for subscription in subscriptions.values { actions.finishSubscriptions.append((subscription.continuation, nil)) }
        subscriptions.removeAll()
        if connectionState != .closed { transition(to: .closed, &actions) }
        actions.finishObservers = Array(observers.values)
        observers.removeAll()
        actions.resumeDrain = Array(drainWaiters.values)
        drainWaiters.removeAll()
        actions.resumeExit = Array(exitWaiters.values) + unsubackWaiters.values
        exitWaiters.removeAll()
        unsubackWaiters.removeAll()
        pendingUnsubscribes.removeAll()
        earlyUnsubacks.removeAll()
        return actions
    }

    // MARK: publish

    /// Whether a publish may be handed to libmosquitto now.
    func publishAllowed() -> MQTTError? {
        switch phase {
        case .connected, .reconnecting: nil
        case .idle, .connecting: .notConnected
        case .shuttingDown, .closed: .shutdown
        }
    }

    /// Registers the wait of a publish libmosquitto accepted with `mid`, unless its
    /// acknowledgement has already arrived (then it is completed at once with that outcome).
    ///
    /// `cancelled` is whether the waiting task was already cancelled, read under the lock: a
    /// cancellation handler that ran before this registration found nothing to cancel
    /// (``cancelPublish(mid:token:)`` is then a no-op), so the registration itself must fail
    /// the wait with `CancellationError` and abandon `mid`.
    mutating func registerPublish(
        mid: Int32, topic: String, qos: MQTTQoS, epochAtSend: UInt64, token: UInt64 = 0, cancelled: Bool = false,
        continuation: CheckedContinuation<Void, any Error>
    ) -> Actions {
        var actions = Actions()
        publishesHandedOver += 1
        // libmosquitto handed `mid` out again: whatever used it before is settled.
        abandonedPublishes.remove(mid)
        if let codes = earlyAcks.removeValue(forKey: mid) {
            actions.completions.append((continuation, Self.publishResult(topic: topic, codes: codes)))
            completeDrainIfIdle(&actions)
        } else if qos == .atMostOnce && epochAtSend != epoch {
            actions.completions.append((continuation, .failure(.connectionLost(reason: "lost before the message was sent"))))
        } else if phase == .closed {
            actions.completions.append((continuation, .failure(.shutdown)))
        } else if cancelled {
            abandonedPublishes.insert(mid)
            actions.cancellations.append(continuation)
        } else {
            pendingPublishes[mid] = PendingPublish(continuation: continuation, topic: topic, qos: qos, token: token)
        }
        return actions
    }

    /// The task waiting for publish `mid` (registered with `token`) was cancelled: its wait
    /// ends with `CancellationError` and `mid` is abandoned (libmosquitto may still deliver the
    /// message; a late acknowledgement is dropped). A no-op when that wait is not registered
    /// (yet, or any more: already completed, or `mid` now belongs to another publish).
    mutating func cancelPublish(mid: Int32, token: UInt64) -> Actions {
        var actions = Actions()
        guard let pending = pendingPublishes[mid], pending.token == token else { return actions }
        pendingPublishes[mid] = nil
        abandonedPublishes.insert(mid)
        actions.cancellations.append(pending.continuation)
        completeDrainIfIdle(&actions)
        return actions
    }

    /// libmosquitto reported a publish complete (QoS 0 written, PUBACK, PUBCOMP or a failing PUBREC).
    mutating func publishAcknowledged(mid: Int32, reasonCode: Int32) -> Actions {
        var actions = Actions()
        if let pending = pendingPublishes.removeValue(forKey: mid) {
            actions.completions.append((pending.continuation, Self.publishResult(topic: pending.topic, codes: [reasonCode])))
            completeDrainIfIdle(&actions)
        } else if abandonedPublishes.remove(mid) != nil {
            // Nobody waits for it any more (the caller was cancelled); not an early ack.
        } else {
            earlyAcks[mid] = [reasonCode]
        }
        return actions
    }

    private static func publishResult(topic: String, codes: [Int32]) -> Result<Void, MQTTError> {
        guard let code = codes.first, code >= 0x80 else { return .success(()) }
        return .failure(.publishRejected(topic: topic, reasonCode: Int(code), reason: MQTTError.reasonString(code)))
    }

    /// `shutdown()` starts: refuse new work; returns true when publishes are still awaiting acks.
    mutating func beginShutdown() -> (mustDrain: Bool, loopRunning: Bool) {
        if phase != .closed { phase = .shuttingDown }
        return (!pendingPublishes.isEmpty && loopRunning, loopRunning)
    }

    /// A `shutdown()` waits (as `id`) until no publish awaits its acknowledgement. Resumed at
    /// once when none does, when the loop has ended, or when `cancelled` (its task's
    /// cancellation, read under the lock, so a handler that ran first is not missed).
    mutating func setDrainWaiter(id: UInt64, cancelled: Bool = false, _ continuation: CheckedContinuation<Void, Never>) -> Actions {
        var actions = Actions()
        if pendingPublishes.isEmpty || !loopRunning || cancelled {
            actions.resumeDrain = [continuation]
        } else {
            drainWaiters[id] = continuation
        }
        return actions
    }

    /// The drain wait `id` ends early (timeout or cancellation).
    mutating func cancelDrainWaiter(id: UInt64) -> Actions {
        var actions = Actions()
        if let waiter = drainWaiters.removeValue(forKey: id) { actions.resumeDrain = [waiter] }
        return actions
    }

    private mutating func completeDrainIfIdle(_ actions: inout Actions) {
        if pendingPublishes.isEmpty, !drainWaiters.isEmpty {
            actions.resumeDrain = Array(drainWaiters.values)
            drainWaiters.removeAll()
        }
    }

    /// A `shutdown()` waits (as `id`) for the loop thread to end. Returns false, storing
    /// nothing, when it has already ended.
    mutating func addExitWaiter(id: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard loopRunning else { return false }
        exitWaiters[id] = continuation
        return true
    }

    /// A `shutdown()` waits (as `id`) until every UNSUBSCRIBE sent is acknowledged. Returns
    /// false, storing nothing, when none is outstanding.
    mutating func addUnsubackWaiter(id: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard loopRunning, !pendingUnsubscribes.isEmpty else { return false }
        unsubackWaiters[id] = continuation
        return true
    }

    /// The wait `id` (for the loop's end or for UNSUBACKs) ends early: its time is up.
    mutating func removeShutdownWaiter(id: UInt64) -> CheckedContinuation<Void, Never>? {
        exitWaiters.removeValue(forKey: id) ?? unsubackWaiters.removeValue(forKey: id)
    }

    /// Shutdown when the loop never ran: close at once.
    mutating func closeWithoutLoop() -> Actions {
        loopEnded()
    }

    // MARK: subscriptions

    /// The subscription identifier for `filter`, assigned on first use (1...268435455).
    mutating func identifier(for filter: String) -> UInt32 {
        if let existing = filterIdentifiers[filter] { return existing }
        nextFilterIdentifier = nextFilterIdentifier % 268_435_455 + 1
        filterIdentifiers[filter] = nextFilterIdentifier
        return nextFilterIdentifier
    }

    /// Adds a subscription stream. Returns an error when the client cannot subscribe.
    mutating func addSubscription(
        id: UInt64, filters: [String], qos: MQTTQoS, continuation: MessageContinuation
    ) -> MQTTError? {
        switch phase {
        case .connected, .reconnecting:
            subscriptions[id] = Subscription(filters: filters, qos: qos, continuation: continuation)
            return nil
        case .idle, .connecting: return .notConnected
        case .shuttingDown, .closed: return .shutdown
        }
    }

    /// Registers the SUBSCRIBE sent with `mid` for subscription `id`.
    mutating func registerSubscribe(
        mid: Int32, id: UInt64, filters: [String], continuation: CheckedContinuation<Void, any Error>
    ) -> Actions {
        var actions = Actions()
        if let codes = earlyAcks.removeValue(forKey: mid) {
            actions = subscribeAnswered(id: id, filters: filters, codes: codes, continuation: continuation)
        } else if subscriptions[id] == nil {
            actions.completions.append((continuation, .failure(.shutdown)))
        } else {
            pendingSubscribes[mid] = PendingSubscribe(continuation: continuation, subscriptionID: id, filters: filters)
        }
        return actions
    }

    /// A SUBACK arrived with the granted QoS (or failure code) of each filter.
    mutating func subscribeAcknowledged(mid: Int32, codes: [Int32]) -> Actions {
        guard let pending = pendingSubscribes.removeValue(forKey: mid) else {
            // Either a restore after reconnect (nobody waits; a refusal is logged by the
            // caller) or an ack that beat the registration of its mid.
            if subscriptionRestoreMids.remove(mid) == nil { earlyAcks[mid] = codes }
            return Actions()
        }
        return subscribeAnswered(id: pending.subscriptionID, filters: pending.filters, codes: codes, continuation: pending.continuation)
    }

    /// Message ids of the SUBSCRIBEs sent after a reconnect, whose SUBACKs nobody awaits.
    var subscriptionRestoreMids: Set<Int32> = []

    private mutating func subscribeAnswered(
        id: UInt64, filters: [String], codes: [Int32], continuation: CheckedContinuation<Void, any Error>
    ) -> Actions {
        var actions = Actions()
        if let failure = codes.first(where: { $0 >= 0x80 }) {
            let error = MQTTError.subscribeRejected(filters: filters, reasonCode: Int(failure), reason: MQTTError.reasonString(failure))
            if let subscription = subscriptions.removeValue(forKey: id) {
                actions.finishSubscriptions.append((subscription.continuation, error))
            }
            actions.completions.append((continuation, .failure(error)))
        } else {
            actions.completions.append((continuation, .success(())))
        }
        return actions
    }

    /// Removes a subscription whose stream ended. Returns the filters no other subscription
    /// uses, to UNSUBSCRIBE (only while connected), and the connection epoch they are sent on.
    mutating func removeSubscription(id: UInt64) -> (filters: [String], epoch: UInt64) {
        guard let removed = subscriptions.removeValue(forKey: id) else { return ([], epoch) }
        guard phase == .connected || phase == .reconnecting else { return ([], epoch) }
        let stillUsed = Set(subscriptions.values.flatMap(\.filters))
        var seen = Set<String>()
        let unused = removed.filters.filter { !stillUsed.contains($0) && seen.insert($0).inserted }
        for filter in unused { filterIdentifiers[filter] = nil }
        return (unused, epoch)
    }

    /// libmosquitto took an UNSUBSCRIBE as `mid` on connection `epoch`: it is outstanding
    /// until its UNSUBACK — unless that came first, or the connection has since been lost.
    mutating func registerUnsubscribe(mid: Int32, epoch sentOn: UInt64) -> Actions {
        var actions = Actions()
        if earlyUnsubacks.remove(mid) != nil {
            completeUnsubacksIfIdle(&actions)
        } else if sentOn == epoch, loopRunning {
            pendingUnsubscribes.insert(mid)
        }
        return actions
    }

    /// The broker acknowledged the UNSUBSCRIBE `mid`.
    mutating func unsubscribeAcknowledged(mid: Int32) -> Actions {
        var actions = Actions()
        if pendingUnsubscribes.remove(mid) != nil {
            completeUnsubacksIfIdle(&actions)
        } else if earlyUnsubacks.count < 1024 {
            earlyUnsubacks.insert(mid)
        }
        return actions
    }

    private mutating func completeUnsubacksIfIdle(_ actions: inout Actions) {
        if pendingUnsubscribes.isEmpty, !unsubackWaiters.isEmpty {
            actions.resumeExit += unsubackWaiters.values
            unsubackWaiters.removeAll()
        }
    }

    /// The streams a message on `topic` goes to. Without subscription identifiers (MQTT
    /// 3.1.1): every stream with a matching filter. With them (MQTT 5, one copy per matching
    /// subscription): a stream takes the copy tagged with the identifier of its first
    /// matching filter, so it receives each publication once.
    func route(topic: String, identifiers: [UInt32] = []) -> [MessageContinuation] {
        subscriptions.values.compactMap { subscription in
            guard let first = subscription.filters.first(where: { MQTTTopicFilter.matches($0, topic: topic) }) else { return nil }
            if identifiers.isEmpty { return subscription.continuation }
            guard let identifier = filterIdentifiers[first], identifiers.contains(identifier) else { return nil }
            return subscription.continuation
        }
    }

    // MARK: log

    mutating func recordError(_ line: String) {
        errorLog.append(line)
        if errorLog.count > 16 { errorLog.removeFirst(errorLog.count - 16) }
    }
}
