/// The client's whole state as a closed value: every event (a libmosquitto callback, an API
/// call, the loop thread's progress) is a named `mutating` transition that decides under the
/// lock and returns what must be done; ``MQTTCallbackContext`` keeps it in a
/// `SanitizerVisibleMutex` and performs the returned ``Actions`` after releasing the lock, so
/// no continuation is resumed and no stream yielded to under it. Its storage is private: the
/// phase-specific data (the connect wait, the reconnect attempt, the shutdown's waiters) lives
/// in the ``Phase`` cases, so impossible combinations such as a connect wait outside
/// `.connecting` cannot be represented.
///
/// Generic, as `HubState` is, over what it hands back: `Ack` (a wait for a CONNACK, PUBACK or
/// SUBACK; in the client a `CheckedContinuation<Void, any Error>`), `Sink` (a subscription's
/// stream), `Observer` (a connection-state stream) and `Waiter` (a `shutdown()` step), so its
/// tests drive it with plain values, without libmosquitto and without tasks.
///
/// Message ids (`mid`) are libmosquitto's 16-bit packet identifiers, reused once acknowledged.
struct MQTTClientState<Ack, Sink, Observer, Waiter> {
    // MARK: phases

    /// Where the connection is. The loop thread runs in every phase but `.idle` and `.closed`.
    fileprivate enum Phase {
        /// Made, `connect()` not called yet.
        case idle
        /// The first connect: `connect()` awaits the CONNACK with this wait.
        case connecting(Ack)
        case connected
        /// The connection was lost and the loop reconnects. `attempt`: backoff waits so far;
        /// `refused`: this attempt's CONNACK was a refusal, already reported, so the socket's
        /// close that follows is not reported again.
        case reconnecting(attempt: Int, refused: Bool)
        /// New work is refused; the loop still runs (for the awaited publishes, then the
        /// DISCONNECT).
        case shuttingDown(Shutdown)
        /// The loop has ended, or never ran. Final.
        case closed
    }

    /// A shutdown under way: whether the loop must stop (no reconnect, DISCONNECT at its next
    /// turn) and the `shutdown()` steps waiting, by waiter id.
    fileprivate struct Shutdown {
        var stopRequested = false
        /// Waiting for every awaited publish to be acknowledged.
        var drainWaiters: [UInt64: Waiter] = [:]
        /// Waiting for every UNSUBSCRIBE sent to be acknowledged.
        var unsubackWaiters: [UInt64: Waiter] = [:]
        /// Waiting for the loop thread to end.
        var exitWaiters: [UInt64: Waiter] = [:]
    }

    fileprivate struct PendingPublish {
        var ack: Ack
        var topic: String
        var qos: MQTTQoS
        /// Tells this publish's wait apart from a later one that libmosquitto gave the same mid.
        var token: UInt64
    }

    fileprivate struct Subscription {
        var filters: [String]
        var qos: MQTTQoS
        var sink: Sink
        /// Its stream was finished by the client (a refusal, a cancelled `subscribe`): it gets
        /// no message and is not restored; its `onTermination` removes it.
        var ended = false
        /// Why it ended, when a refusal or an error ended it.
        var endError: MQTTError?
    }

    /// A SUBSCRIBE on the wire: its filters, and the `subscribe()` call awaiting it, if any
    /// (none for a restore after a reconnect).
    fileprivate struct SentSubscribe {
        var filters: [String]
        var awaitedBy: UInt64?
    }

    /// A `subscribe()` call awaiting the SUBACKs of all its SUBSCRIBEs.
    fileprivate struct SubscribeWait {
        var ack: Ack
        var outstanding: Int
    }

    // MARK: storage

    /// The protocol spoken now: `.v5` or `.v311`, never `.auto` (which speaks 5 until a broker
    /// refuses it, then 3.1.1 for the client's life).
    private(set) var protocolVersion: MQTTProtocolVersion
    /// The client was configured `.auto`: a refusal of MQTT 5 for its version falls back.
    private let fallsBack: Bool
    /// A CONNACK just refused MQTT 5 for its version: the close that follows is not a loss,
    /// and the next attempt, at once, speaks 3.1.1.
    private var fallingBack = false
    private let sentCredentials: Bool
    /// How many broker addresses the client has (the nodes of one broker service).
    private let brokerCount: Int
    /// The broker (an index into ``MQTTConfiguration/brokers``) of the current or next attempt.
    private(set) var brokerIndex: Int
    /// Brokers the first connect may still go on to when an attempt fails (it tries each once).
    private var firstConnectTriesLeft: Int
    /// The next attempt goes at once, without a backoff wait: 3.1.1 after a refusal of 5, or
    /// the next broker of the first connect.
    private var retryAtOnce = false
    private var phase: Phase = .idle
    /// The state observers see; it follows `phase`, with the detail they need.
    private(set) var connectionState: MQTTConnectionState = .idle
    /// Messages received from the broker (``received(topic:identifiers:)``), counted so that
    /// a shutdown handing over can wait until they stop coming (wraps around; only its
    /// changes matter).
    private(set) var messagesReceived: UInt64 = 0
    /// Bumped at every connection loss: a QoS 0 publish taken before a loss is never reported,
    /// and an UNSUBSCRIBE sent on an earlier connection is never answered.
    private var epoch: UInt64 = 0
    private var nextID: UInt64 = 0

    private var pendingPublishes: [Int32: PendingPublish] = [:]
    /// Acknowledgements (reason codes) that arrived before the call that sent the packet had
    /// registered its mid: libmosquitto's thread can answer before `mosquitto_publish` or
    /// `mosquitto_subscribe` returns.
    private var earlyAcks: [Int32: [Int32]] = [:]
    /// Mids of publishes whose caller stopped waiting while libmosquitto still holds the
    /// message: a late acknowledgement is dropped, not kept in `earlyAcks` where a later
    /// publish reusing the mid would take it. At most 65535 mids.
    private var abandonedPublishes: Set<Int32> = []

    private var subscriptions: [UInt64: Subscription] = [:]
    /// Publishes handed to libmosquitto since the loop's last turn.
    private var publishesSinceTurn = 0
    /// MQTT 5 subscription identifier of each subscribed filter. The broker sends one copy of
    /// a message per matching subscription, tagged with its identifier; routing by it gives
    /// each stream exactly one copy even when filters overlap.
    private var filterIdentifiers: [String: UInt32] = [:]
    private var nextFilterIdentifier: UInt32 = 0
    private var sentSubscribes: [Int32: SentSubscribe] = [:]
    private var subscribeWaits: [UInt64: SubscribeWait] = [:]

    /// Mids of UNSUBSCRIBEs sent on the current connection and not yet acknowledged.
    private var pendingUnsubscribes: Set<Int32> = []
    /// UNSUBACKs that arrived before the call that sent the UNSUBSCRIBE registered its mid.
    private var earlyUnsubacks: Set<Int32> = []

    private var observers: [UInt64: Observer] = [:]
    /// Recent error lines from libmosquitto's log, to explain TLS failures.
    private(set) var errorLog: [String] = []

    /// A client speaking `protocolVersion` (`.auto`: 5, then 3.1.1 if refused), with
    /// `brokerCount` broker addresses of which the first connect tries `firstBroker` first.
    init(protocolVersion: MQTTProtocolVersion, sentCredentials: Bool, brokerCount: Int = 1, firstBroker: Int = 0) {
        self.protocolVersion = protocolVersion == .v311 ? .v311 : .v5
        self.fallsBack = protocolVersion == .auto
        self.sentCredentials = sentCredentials
        self.brokerCount = max(1, brokerCount)
        self.brokerIndex = min(max(0, firstBroker), max(1, brokerCount) - 1)
        self.firstConnectTriesLeft = max(1, brokerCount) - 1
    }

    /// A new id for a subscription, an observer, a waiter or a publish's token.
    mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Whether a client that acknowledges after handling may read from the broker: before
    /// the CONNACK, and after it only while a stream is open to take what arrives (a
    /// persistent session's messages come right after the CONNACK, before `subscribe()`).
    var readsForHandling: Bool {
        guard case .connected = phase else { return true }
        return hasOpenSubscription
    }

    /// Whether a subscription stream is open.
    var hasOpenSubscription: Bool { subscriptions.values.contains { !$0.ended } }

    /// Whether a SUBSCRIBE sent on this connection still awaits its SUBACK.
    var awaitsSubscribeReply: Bool { !sentSubscribes.isEmpty }

    /// Whether the loop waits for a CONNACK: a connection attempt is under way (the first
    /// connect or a reconnect), not yet answered.
    var awaitsConnack: Bool {
        switch phase {
        case .connecting, .reconnecting: true
        case .idle, .connected, .shuttingDown, .closed: false
        }
    }

    /// Whether the loop thread must stop: no reconnect, and a DISCONNECT at its next turn.
    var mustStop: Bool {
        switch phase {
        case .shuttingDown(let shutdown): shutdown.stopRequested
        case .closed: true
        case .idle, .connecting, .connected, .reconnecting: false
        }
    }

    /// Why a publish or a subscription is refused now; `nil` while connected or reconnecting.
    private var refusal: MQTTError? {
        switch phase {
        case .connected, .reconnecting: nil
        case .idle, .connecting: .notConnected
        case .shuttingDown, .closed: .shutdown
        }
    }

    private var loopRunning: Bool {
        switch phase {
        case .idle, .closed: false
        case .connecting, .connected, .reconnecting, .shuttingDown: true
        }
    }

    private mutating func transition(to newState: MQTTConnectionState, _ actions: inout Actions) {
        connectionState = newState
        for observer in observers.values { actions.notify.append((observer, newState)) }
    }

    /// Runs `body` on the shutdown's data; nothing when not shutting down.
    private mutating func withShutdown(_ body: (inout Shutdown) -> Void) {
        guard case .shuttingDown(var shutdown) = phase else { return }
        body(&shutdown)
        phase = .shuttingDown(shutdown)
    }

    // MARK: observers

    /// Adds a connection-state observer that has already been given `seen` (the state read
    /// before, yielded outside the lock). It is stored only while `seen` is still the current
    /// state, so the states it gets stay in order.
    mutating func addObserver(_ id: UInt64, _ observer: Observer, seen: MQTTConnectionState) -> ObserverAction {
        if case .closed = phase { return .finish(yield: seen == .closed ? nil : .closed) }
        guard seen == connectionState else { return .changed(connectionState) }
        observers[id] = observer
        return .stored
    }

    /// An observer's stream ended.
    mutating func observerRemoved(_ id: UInt64) {
        observers[id] = nil
    }

    // MARK: connect and the loop

    /// `connect()` was called with `ack`. `cancelled` is the calling task's cancellation, read
    /// under the lock: a cancelled connect starts nothing and closes the client (it connects
    /// once).
    mutating func startConnect(_ ack: Ack, cancelled: Bool) -> (ConnectAction, Actions) {
        var actions = Actions()
        switch phase {
        case .idle where cancelled:
            phase = .closed
            actions.cancel.append(ack)
            transition(to: .closed, &actions)
            return (.cancelled, actions)
        case .idle:
            phase = .connecting(ack)
            transition(to: .connecting, &actions)
            return (.startLoop, actions)
        case .closed, .shuttingDown:
            return (.refuse(.shutdown), actions)
        case .connecting, .connected, .reconnecting:
            return (.refuse(.invalidConfiguration("connect() called twice")), actions)
        }
    }

    /// The task awaiting `connect()` was cancelled before the CONNACK: the wait ends with
    /// `CancellationError` and the client shuts down (the loop ends by itself, after a blocking
    /// TCP connect under way returns). A no-op once the connect was answered.
    mutating func cancelConnect() -> Actions {
        var actions = Actions()
        guard case .connecting(let ack) = phase else { return actions }
        phase = .shuttingDown(Shutdown(stopRequested: true))
        actions.cancel.append(ack)
        return actions
    }

    /// The loop starts a connection attempt: libmosquitto's error lines from before are stale.
    mutating func connectAttemptStarts() {
        errorLog.removeAll()
    }

    /// A CONNACK arrived. On success, returns the filters to subscribe again (with their QoS
    /// and MQTT 5 identifier); send them, then report with ``restoreSent(_:failed:)``.
    ///
    /// Under `.auto`, a refusal of MQTT 5 for its version (0x84, or 1 from a broker answering
    /// in 3.1.1's format) changes nothing but the protocol: `fellBack` is true, the close that
    /// follows is not reported, and the next attempt goes at once with 3.1.1.
    mutating func connack(
        reasonCode: Int32
    ) -> (restore: [(filter: String, qos: MQTTQoS, identifier: UInt32)], actions: Actions, fellBack: Bool) {
        var actions = Actions()
        if reasonCode == 0x84 || reasonCode == 1, refusedVersion5() {
            return ([], actions, true)
        }
        if reasonCode == 0 {
            switch phase {
            case .connecting(let ack):
                actions.succeed.append(ack)
            case .reconnecting:
                break
            case .idle, .connected, .shuttingDown, .closed:
                return ([], actions, false)
            }
            phase = .connected
            firstConnectTriesLeft = 0
            transition(to: .connected, &actions)
            var qosByFilter: [String: MQTTQoS] = [:]
            for subscription in subscriptions.values where !subscription.ended {
                for filter in subscription.filters { qosByFilter[filter] = max(qosByFilter[filter] ?? .atMostOnce, subscription.qos) }
            }
            let restore = qosByFilter.sorted { $0.key < $1.key }.map {
                (filter: $0.key, qos: $0.value, identifier: identifier(for: $0.key))
            }
            return (restore, actions, false)
        }
        let error = MQTTError.connack(reasonCode: reasonCode, version: protocolVersion, sentCredentials: sentCredentials)
        switch phase {
        case .connecting where firstConnectTriesLeft > 0 && error.isWorthRetrying:
            // A node that is busy or unavailable: the close that follows moves the first
            // connect on to the next node (every retry of a new client would start here again).
            break
        case .connecting(let ack):
            failConnect(ack, error, &actions)
        case .reconnecting(let attempt, _):
            phase = .reconnecting(attempt: attempt, refused: true)
            transition(to: .disconnected(reason: error.description), &actions)
        case .connected:
            phase = .reconnecting(attempt: 0, refused: true)
            transition(to: .disconnected(reason: error.description), &actions)
        case .idle, .shuttingDown, .closed:
            break
        }
        return ([], actions, false)
    }

    /// A broker refused MQTT 5 for its version: under `.auto`, while a CONNACK is awaited on
    /// MQTT 5, the client speaks 3.1.1 from now on, the close that follows is not a loss, and the
    /// next attempt goes at once; returns whether it fell back. The loop calls it too when
    /// libmosquitto (2.0.12 and later) cannot read a 3.1.1-only broker's two-byte CONNACK as
    /// MQTT 5's and reports a malformed packet instead of reason 0x84.
    mutating func refusedVersion5() -> Bool {
        guard fallsBack, protocolVersion == .v5, awaitsConnack || isConnectedPhase else { return false }
        protocolVersion = .v311
        fallingBack = true
        return true
    }

    private var isConnectedPhase: Bool {
        if case .connected = phase { true } else { false }
    }

    /// The connection went away, or a connection attempt failed, with `error`. Returns
    /// whether the loop should reconnect, and whether this loss is news (not the close that
    /// follows a refused CONNACK, which was reported already).
    mutating func connectionLost(_ error: MQTTError) -> (reconnect: Bool, isNews: Bool, actions: Actions) {
        var actions = Actions()
        epoch &+= 1
        for (mid, pending) in pendingPublishes where pending.qos == .atMostOnce {
            pendingPublishes[mid] = nil
            actions.fail.append((pending.ack, .connectionLost(reason: error.description)))
        }
        // An UNSUBSCRIBE lost with the connection is never answered; nobody waits for it.
        pendingUnsubscribes.removeAll()
        earlyUnsubacks.removeAll()
        // A SUBSCRIBE lost with the connection is sent again (with every other filter) after
        // the next CONNACK; the caller's subscription is registered, so its wait succeeds.
        sentSubscribes.removeAll()
        for wait in subscribeWaits.values { actions.succeed.append(wait.ack) }
        subscribeWaits.removeAll()
        resumeAll(\.unsubackWaiters, &actions)
        if fallingBack {
            // The close after a refusal of MQTT 5: the same broker, at once, with 3.1.1.
            fallingBack = false
            switch phase {
            case .connecting, .reconnecting:
                retryAtOnce = true
                return (true, false, actions)
            case .connected:
                retryAtOnce = true
                phase = .reconnecting(attempt: 0, refused: false)
                return (true, false, actions)
            case .idle, .shuttingDown, .closed:
                break
            }
        }
        switch phase {
        case .connecting(let ack):
            if firstConnectTriesLeft > 0 {
                // The first connect goes on to the next broker of the list before it fails.
                firstConnectTriesLeft -= 1
                brokerIndex = (brokerIndex + 1) % brokerCount
                retryAtOnce = true
                return (true, true, actions)
            }
            failConnect(ack, error, &actions)
            return (false, true, actions)
        case .connected:
            phase = .reconnecting(attempt: 0, refused: false)
            transition(to: .disconnected(reason: error.description), &actions)
            return (true, true, actions)
        case .reconnecting(let attempt, let refused):
            if !refused { transition(to: .disconnected(reason: error.description), &actions) }
            phase = .reconnecting(attempt: attempt, refused: false)
            return (true, !refused, actions)
        case .idle, .shuttingDown, .closed:
            return (false, true, actions)
        }
    }

    /// The first connect failed with `error`: its wait fails and the client closes (it connects once).
    private mutating func failConnect(_ ack: Ack, _ error: MQTTError, _ actions: inout Actions) {
        phase = .shuttingDown(Shutdown(stopRequested: true))
        actions.fail.append((ack, error))
        transition(to: .closed, &actions)
    }

    /// The loop is about to wait before its next reconnect attempt; `delay` gives the wait
    /// for an attempt number (1, 2, …). Returns the attempt and its wait.
    ///
    /// An attempt after a refusal of MQTT 5, and the first connect's next broker, go at once
    /// (delay zero). Otherwise, with several brokers, each attempt goes to the next one in
    /// turn: a node that died is left for the others after one try.
    mutating func willReconnect(delay: (Int) -> Duration) -> (attempt: Int, delay: Duration, actions: Actions) {
        var actions = Actions()
        if retryAtOnce {
            retryAtOnce = false
            return (1, .zero, actions)
        }
        if brokerCount > 1 { brokerIndex = (brokerIndex + 1) % brokerCount }
        // Shutting down while reconnecting (the drain): one more try after the first delay.
        guard case .reconnecting(let attempt, let refused) = phase else { return (1, delay(1), actions) }
        let next = attempt + 1
        let wait = delay(next)
        phase = .reconnecting(attempt: next, refused: refused)
        transition(to: .reconnecting(attempt: next, delay: wait), &actions)
        return (next, wait, actions)
    }

    /// The loop thread has ended (or `shutdown()` found it never started): fail what is left,
    /// finish every stream, resume every `shutdown()` step. The client is closed.
    mutating func loopEnded() -> Actions {
        var actions = Actions()
        switch phase {
        case .connecting(let ack):
            actions.fail.append((ack, .shutdown))
        case .shuttingDown(let shutdown):
            actions.resume += shutdown.drainWaiters.values
            actions.resume += shutdown.unsubackWaiters.values
            actions.resume += shutdown.exitWaiters.values
        case .idle, .connected, .reconnecting, .closed:
            break
        }
        phase = .closed
        for pending in pendingPublishes.values { actions.fail.append((pending.ack, .shutdown)) }
        pendingPublishes.removeAll()
        for wait in subscribeWaits.values { actions.fail.append((wait.ack, .shutdown)) }
        subscribeWaits.removeAll()
        sentSubscribes.removeAll()
        earlyAcks.removeAll()
        abandonedPublishes.removeAll()
        for subscription in subscriptions.values where !subscription.ended { actions.finishStreams.append((subscription.sink, nil)) }
        subscriptions.removeAll()
        pendingUnsubscribes.removeAll()
        earlyUnsubacks.removeAll()
        if connectionState != .closed { transition(to: .closed, &actions) }
        actions.finishObservers = Array(observers.values)
        observers.removeAll()
        return actions
    }

    /// A libmosquitto error or warning line, kept (the last 16) to explain a TLS failure.
    mutating func recordError(_ line: String) {
        errorLog.append(line)
        if errorLog.count > 16 { errorLog.removeFirst(errorLog.count - 16) }
    }

    // MARK: shutdown

    /// Asks the loop to stop as soon as it can, without waiting for anything (the client
    /// object is going away). Returns whether the loop runs and must be woken.
    mutating func requestStop() -> (wakeLoop: Bool, actions: Actions) {
        var actions = Actions()
        switch phase {
        case .idle:
            return (false, loopEnded())
        case .connecting(let ack):
            actions.fail.append((ack, .shutdown))
            phase = .shuttingDown(Shutdown(stopRequested: true))
            return (true, actions)
        case .connected, .reconnecting:
            phase = .shuttingDown(Shutdown(stopRequested: true))
            return (true, actions)
        case .shuttingDown:
            withShutdown { $0.stopRequested = true }
            return (true, actions)
        case .closed:
            return (false, actions)
        }
    }

    /// `shutdown()` starts: new work is refused from now on. Returns whether publishes await
    /// their acknowledgement (so there is something to drain) and whether the loop runs; when
    /// it does not, the client is closed at once and `actions` finish everything.
    mutating func beginShutdown() -> (mustDrain: Bool, loopRunning: Bool, actions: Actions) {
        switch phase {
        case .idle:
            return (false, false, loopEnded())
        case .closed:
            return (false, false, Actions())
        case .connecting, .connected, .reconnecting:
            var actions = Actions()
            if case .connecting(let ack) = phase { actions.fail.append((ack, .shutdown)) }
            phase = .shuttingDown(Shutdown())
            return (!pendingPublishes.isEmpty, true, actions)
        case .shuttingDown:
            return (!pendingPublishes.isEmpty, true, Actions())
        }
    }

    /// A `shutdown()` waits (as `id`) until no publish awaits its acknowledgement. Resumed at
    /// once when none does, when the loop has ended, or when `cancelled` (its task's
    /// cancellation, read under the lock, so a handler that ran first is not missed).
    mutating func awaitDrain(id: UInt64, cancelled: Bool, _ waiter: Waiter) -> Actions {
        var actions = Actions()
        guard case .shuttingDown = phase, !pendingPublishes.isEmpty, !cancelled else {
            actions.resume.append(waiter)
            return actions
        }
        withShutdown { $0.drainWaiters[id] = waiter }
        return actions
    }

    /// A `shutdown()` waits (as `id`) until every UNSUBSCRIBE sent is acknowledged. Returns
    /// false, storing nothing, when none is outstanding.
    mutating func awaitUnsubacks(id: UInt64, _ waiter: Waiter) -> Bool {
        guard case .shuttingDown = phase, !pendingUnsubscribes.isEmpty else { return false }
        withShutdown { $0.unsubackWaiters[id] = waiter }
        return true
    }

    /// The awaited steps are done: the loop must stop and send DISCONNECT. Returns whether it
    /// runs (then wake it, and wait for its end).
    mutating func stopAfterDrain() -> Bool {
        withShutdown { $0.stopRequested = true }
        return loopRunning
    }

    /// A `shutdown()` waits (as `id`) for the loop thread to end. Returns false, storing
    /// nothing, when it has already ended.
    mutating func awaitLoopEnd(id: UInt64, _ waiter: Waiter) -> Bool {
        guard case .shuttingDown = phase else { return false }
        withShutdown { $0.exitWaiters[id] = waiter }
        return true
    }

    /// The `shutdown()` step waiting as `id` ends early (its time is up, or it was cancelled):
    /// returns its waiter to resume, if it still waits.
    mutating func stopWaiting(id: UInt64) -> Waiter? {
        var waiter: Waiter?
        withShutdown { shutdown in
            waiter =
                shutdown.drainWaiters.removeValue(forKey: id) ?? shutdown.unsubackWaiters.removeValue(forKey: id)
                ?? shutdown.exitWaiters.removeValue(forKey: id)
        }
        return waiter
    }

    private mutating func completeDrainIfIdle(_ actions: inout Actions) {
        if pendingPublishes.isEmpty { resumeAll(\.drainWaiters, &actions) }
    }

    /// Resumes (through `actions`) and forgets every `shutdown()` step waiting in `waiters`.
    private mutating func resumeAll(_ waiters: WritableKeyPath<Shutdown, [UInt64: Waiter]>, _ actions: inout Actions) {
        withShutdown { shutdown in
            actions.resume += shutdown[keyPath: waiters].values
            shutdown[keyPath: waiters].removeAll()
        }
    }

    // MARK: publish

    /// A publish is about to be handed to libmosquitto: refused unless connected or
    /// reconnecting; otherwise the connection epoch it is sent on and the token of its wait.
    mutating func beginPublish() -> Result<(epoch: UInt64, token: UInt64), MQTTError> {
        if let refusal { return .failure(refusal) }
        publishesSinceTurn &+= 1
        return .success((epoch, makeID()))
    }

    /// Whether the loop's next turn is worth corking the socket for (see
    /// `MQTTConnectionLoop.corked`): more than one publish handed over since the last turn; more
    /// than one awaiting its acknowledgement (each PUBACK read lets libmosquitto write the next
    /// queued message in the same turn: a resend after a reconnect, a replay's window; measured
    /// on a replay at full speed, corking these turns too costs less CPU than it saves); or a
    /// subscriber, whose turn writes the acknowledgements of what it reads. A lone publish, a
    /// live fix at 1 Hz, gains nothing from it and would pay two system calls. Starts the count
    /// of the next turn.
    mutating func takeTurnCork() -> Bool {
        defer { publishesSinceTurn = 0 }
        return publishesSinceTurn >= 2 || pendingPublishes.count >= 2 || !subscriptions.isEmpty
    }

    /// Registers the wait of a publish libmosquitto accepted with `mid`, unless its
    /// acknowledgement has already arrived (then it completes at once with that outcome).
    ///
    /// `cancelled` is whether the waiting task was already cancelled, read under the lock: a
    /// cancellation handler that ran before this registration found nothing to cancel, so the
    /// registration itself ends the wait with `CancellationError` and abandons `mid`.
    mutating func publishSent(
        mid: Int32, topic: String, qos: MQTTQoS, epoch sentOn: UInt64, token: UInt64, cancelled: Bool, ack: Ack
    ) -> Actions {
        var actions = Actions()
        // libmosquitto handed `mid` out again: whatever used it before is settled.
        abandonedPublishes.remove(mid)
        if let codes = earlyAcks.removeValue(forKey: mid) {
            Self.complete(ack, topic: topic, codes: codes, &actions)
        } else if qos == .atMostOnce && sentOn != epoch {
            actions.fail.append((ack, .connectionLost(reason: "lost before the message was sent")))
        } else if case .closed = phase {
            actions.fail.append((ack, .shutdown))
        } else if cancelled {
            abandonedPublishes.insert(mid)
            actions.cancel.append(ack)
        } else {
            pendingPublishes[mid] = PendingPublish(ack: ack, topic: topic, qos: qos, token: token)
        }
        return actions
    }

    /// The task waiting for publish `mid` (registered with `token`) was cancelled: its wait
    /// ends with `CancellationError` and `mid` is abandoned (libmosquitto may still deliver the
    /// message; a late acknowledgement is dropped). A no-op when that wait is not registered
    /// (yet, or any more: completed, or `mid` now belongs to another publish).
    mutating func cancelPublish(mid: Int32, token: UInt64) -> Actions {
        var actions = Actions()
        guard let pending = pendingPublishes[mid], pending.token == token else { return actions }
        pendingPublishes[mid] = nil
        abandonedPublishes.insert(mid)
        actions.cancel.append(pending.ack)
        completeDrainIfIdle(&actions)
        return actions
    }

    /// libmosquitto reported a publish complete (QoS 0 written, PUBACK, PUBCOMP or a failing PUBREC).
    mutating func publishAcknowledged(mid: Int32, reasonCode: Int32) -> Actions {
        var actions = Actions()
        if let pending = pendingPublishes.removeValue(forKey: mid) {
            Self.complete(pending.ack, topic: pending.topic, codes: [reasonCode], &actions)
            completeDrainIfIdle(&actions)
        } else if abandonedPublishes.remove(mid) == nil {
            earlyAcks[mid] = [reasonCode]
        }
        return actions
    }

    private static func complete(_ ack: Ack, topic: String, codes: [Int32], _ actions: inout Actions) {
        if let code = codes.first, code >= 0x80 {
            actions.fail.append((ack, .publishRejected(topic: topic, reasonCode: Int(code), reason: MQTTError.reasonString(code))))
        } else {
            actions.succeed.append(ack)
        }
    }

    // MARK: subscriptions

    /// The subscription identifier for `filter`, assigned on first use (1...268435455).
    private mutating func identifier(for filter: String) -> UInt32 {
        if let existing = filterIdentifiers[filter] { return existing }
        nextFilterIdentifier = nextFilterIdentifier % 268_435_455 + 1
        filterIdentifiers[filter] = nextFilterIdentifier
        return nextFilterIdentifier
    }

    /// Adds subscription `id` (its stream is `sink`). Refused unless connected or
    /// reconnecting; otherwise returns the MQTT 5 subscription identifier of each filter and
    /// the connection epoch its SUBSCRIBEs go out on (give it back to ``subscribeSent(id:_:epoch:cancelled:ack:)``).
    mutating func addSubscription(
        id: UInt64, filters: [String], qos: MQTTQoS, sink: Sink
    ) -> Result<(identifiers: [UInt32], epoch: UInt64), MQTTError> {
        if let refusal { return .failure(refusal) }
        subscriptions[id] = Subscription(filters: filters, qos: qos, sink: sink)
        return .success((filters.map { identifier(for: $0) }, epoch))
    }

    /// The SUBSCRIBEs of subscription `id` went out as `sent` (mid and filters of each) on
    /// connection `epoch`. With `ack`, the `subscribe()` call waits until every one is
    /// acknowledged — or one is refused (it fails with `subscribeRejected` and the stream
    /// ends), or its task was `cancelled` (read under the lock; the stream ends). Without,
    /// nobody waits (a subscription deferred to the reconnect), but a refusal still ends the
    /// stream. When the connection was lost since `epoch`, those SUBSCRIBEs died with it: the
    /// wait succeeds (the next CONNACK restores the subscription, as for one lost in flight).
    ///
    /// Whatever happens to the wait, the mids are settled here: a SUBACK that came first is
    /// consumed and one still to come is expected, so no answer to a SUBSCRIBE is ever left
    /// where a later publish given the same mid would take it.
    mutating func subscribeSent(
        id: UInt64, _ sent: [(mid: Int32, filters: [String])], epoch sentOn: UInt64, cancelled: Bool = false, ack: Ack?
    ) -> Actions {
        var actions = Actions()
        let current = sentOn == epoch
        var awaited = false
        if let ack {
            if cancelled {
                actions.cancel.append(ack)
                endSubscription(id, error: nil, &actions)
            } else if let subscription = subscriptions[id], !subscription.ended {
                if current {
                    subscribeWaits[id] = SubscribeWait(ack: ack, outstanding: sent.count)
                    awaited = true
                } else {
                    actions.succeed.append(ack)
                }
            } else {
                actions.fail.append((ack, subscriptions[id]?.endError ?? .shutdown))
            }
        }
        for (mid, filters) in sent {
            if current { sentSubscribes[mid] = SentSubscribe(filters: filters, awaitedBy: awaited ? id : nil) }
            if let codes = earlyAcks.removeValue(forKey: mid), current {
                subscribeAnswered(mid: mid, codes: codes, &actions)
            }
        }
        if awaited, let wait = subscribeWaits[id], wait.outstanding == 0 {
            subscribeWaits[id] = nil
            actions.succeed.append(wait.ack)
        }
        return actions
    }

    /// The task in `subscribe()` for subscription `id` was cancelled: its wait ends with
    /// `CancellationError` and its stream ends (which unsubscribes it). A no-op once answered.
    mutating func cancelSubscribe(id: UInt64) -> Actions {
        var actions = Actions()
        guard let wait = subscribeWaits.removeValue(forKey: id) else { return actions }
        actions.cancel.append(wait.ack)
        endSubscription(id, error: nil, &actions)
        return actions
    }

    /// After a reconnect, the restored filters went out: `sent` were handed to libmosquitto
    /// (their SUBACKs are checked; a refusal ends the streams using the filter), `failed`
    /// could not be sent (the streams using them end with that error, so no subscriber stays
    /// silently deaf).
    mutating func restoreSent(_ sent: [(mid: Int32, filter: String)], failed: [(filter: String, error: MQTTError)]) -> Actions {
        var actions = Actions()
        for (mid, filter) in sent {
            sentSubscribes[mid] = SentSubscribe(filters: [filter], awaitedBy: nil)
            if let codes = earlyAcks.removeValue(forKey: mid) { subscribeAnswered(mid: mid, codes: codes, &actions) }
        }
        for (filter, error) in failed {
            for (id, subscription) in subscriptions where !subscription.ended && subscription.filters.contains(filter) {
                endSubscription(id, error: error, &actions)
            }
        }
        return actions
    }

    /// A SUBACK arrived with the granted QoS (or failure code) of each filter.
    mutating func subscribeAcknowledged(mid: Int32, codes: [Int32]) -> Actions {
        var actions = Actions()
        if sentSubscribes[mid] == nil {
            // It beat the registration of its mid.
            earlyAcks[mid] = codes
        } else {
            subscribeAnswered(mid: mid, codes: codes, &actions)
        }
        return actions
    }

    private mutating func subscribeAnswered(mid: Int32, codes: [Int32], _ actions: inout Actions) {
        guard let sent = sentSubscribes.removeValue(forKey: mid) else { return }
        let refused = zip(sent.filters, codes).filter { $0.1 >= 0x80 }
        if let (_, code) = refused.first {
            let error = MQTTError.subscribeRejected(
                filters: refused.map(\.0), reasonCode: Int(code), reason: MQTTError.reasonString(code))
            let refusedFilters = Set(refused.map(\.0))
            if let id = sent.awaitedBy { endSubscription(id, error: error, &actions) }
            for (id, subscription) in subscriptions where !subscription.ended && !refusedFilters.isDisjoint(with: subscription.filters) {
                endSubscription(id, error: error, &actions)
            }
        } else if let id = sent.awaitedBy, var wait = subscribeWaits[id] {
            wait.outstanding -= 1
            if wait.outstanding <= 0 {
                subscribeWaits[id] = nil
                actions.succeed.append(wait.ack)
            } else {
                subscribeWaits[id] = wait
            }
        }
    }

    /// Ends subscription `id`'s stream (with `error`); its `onTermination` then removes it
    /// and unsubscribes the filters nobody else uses.
    private mutating func endSubscription(_ id: UInt64, error: MQTTError?, _ actions: inout Actions) {
        guard var subscription = subscriptions[id], !subscription.ended else { return }
        subscription.ended = true
        subscription.endError = error
        subscriptions[id] = subscription
        actions.finishStreams.append((subscription.sink, error))
        // A `subscribe()` still waiting for it learns why (a refusal of a filter it shares).
        if let wait = subscribeWaits.removeValue(forKey: id) { actions.fail.append((wait.ack, error ?? .shutdown)) }
    }

    /// Removes a subscription whose stream ended. Returns the filters no other subscription
    /// uses, to UNSUBSCRIBE (only while connected or reconnecting), and the connection epoch
    /// they are sent on.
    mutating func removeSubscription(id: UInt64) -> (filters: [String], epoch: UInt64) {
        guard let removed = subscriptions.removeValue(forKey: id), refusal == nil else { return ([], epoch) }
        let stillUsed = Set(subscriptions.values.flatMap(\.filters))
        var seen = Set<String>()
        let unused = removed.filters.filter { !stillUsed.contains($0) && seen.insert($0).inserted }
        for filter in unused { filterIdentifiers[filter] = nil }
        return (unused, epoch)
    }

    /// The filters of the streams still open, each once, to UNSUBSCRIBE in a shutdown that
    /// hands over (the streams stay routed until the loop ends), and the connection epoch
    /// they are sent on. Nothing unless shutting down from a live connection.
    mutating func filtersToHandOver() -> (filters: [String], epoch: UInt64) {
        guard case .shuttingDown = phase, connectionState == .connected else { return ([], epoch) }
        var seen = Set<String>()
        let filters = subscriptions.values.filter { !$0.ended }.flatMap(\.filters).filter { seen.insert($0).inserted }
        return (filters, epoch)
    }

    /// libmosquitto took an UNSUBSCRIBE as `mid` on connection `epoch`: it is outstanding
    /// until its UNSUBACK, unless that came first or the connection has since been lost.
    mutating func unsubscribeSent(mid: Int32, epoch sentOn: UInt64) -> Actions {
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
        if pendingUnsubscribes.isEmpty { resumeAll(\.unsubackWaiters, &actions) }
    }

    /// A message arrived on `topic`: counts it and returns the streams it goes to
    /// (``route(topic:identifiers:)``).
    mutating func received(topic: String, identifiers: [UInt32] = []) -> [Sink] {
        messagesReceived &+= 1
        return route(topic: topic, identifiers: identifiers)
    }

    /// The streams a message on `topic` goes to. Without subscription identifiers (MQTT
    /// 3.1.1): every stream with a matching filter. With them (MQTT 5, one copy per matching
    /// subscription): a stream takes the copy tagged with the identifier of its first
    /// matching filter, so it receives each publication once.
    func route(topic: String, identifiers: [UInt32] = []) -> [Sink] {
        subscriptions.values.compactMap { subscription in
            guard !subscription.ended,
                let first = subscription.filters.first(where: { MQTTTopicFilter.matches($0, topic: topic) })
            else { return nil }
            if identifiers.isEmpty { return subscription.sink }
            guard let identifier = filterIdentifiers[first], identifiers.contains(identifier) else { return nil }
            return subscription.sink
        }
    }
}

extension MQTTClientState: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
extension MQTTClientState.Phase: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
extension MQTTClientState.Shutdown: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
extension MQTTClientState.PendingPublish: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
extension MQTTClientState.Subscription: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
extension MQTTClientState.SentSubscribe: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
extension MQTTClientState.SubscribeWait: Sendable where Ack: Sendable, Sink: Sendable, Observer: Sendable, Waiter: Sendable {}
