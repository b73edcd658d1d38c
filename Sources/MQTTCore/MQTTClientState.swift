import FleetcastCore

/// The client's whole state as a closed value: every event (a libmosquitto callback, an API
/// call, the loop thread's progress) is a named `mutating` transition that decides under the
/// lock and returns what must be done; ``MQTTCallbackContext`` keeps it in a
/// `SanitizerVisibleMutex` and performs the returned ``Actions`` after releasing the lock, so
/// no continuation is resumed and no stream yielded to under it. Its storage is internal to this module (the state spans two files:
/// publishes and subscriptions are in `MQTTClientState+Subscriptions.swift`): the
/// phase-specific data (the connect wait, the reconnect attempt, the shutdown's waiters) lives
/// in the ``Phase`` cases, so impossible combinations such as a connect wait outside
/// `.connecting` cannot be represented.
///
/// Generic, as `HubState` is, over what it hands back: `Ack` (a wait for a CONNACK, PUBACK or
/// SUBACK; in the client an ``MQTTCompletion``), `Sink` (a subscription's
/// stream), `Observer` (a connection-state stream) and `Waiter` (a `shutdown()` step), so its
/// tests drive it with plain values, without libmosquitto and without tasks.
///
/// Message ids (`mid`) are libmosquitto's 16-bit packet identifiers, reused once acknowledged.
package struct MQTTClientState<Ack, Sink, Observer, Waiter> {
    // MARK: phases

    /// Where the connection is. The loop thread runs in every phase but `.idle` and `.closed`.
    enum Phase {
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
    struct Shutdown {
        var stopRequested = false
        /// Waiting for every awaited publish to be acknowledged.
        var drainWaiters: [UInt64: Waiter] = [:]
        /// Waiting for every UNSUBSCRIBE sent to be acknowledged.
        var unsubackWaiters: [UInt64: Waiter] = [:]
        /// Waiting for the loop thread to end.
        var exitWaiters: [UInt64: Waiter] = [:]
    }

    struct PendingPublish {
        var ack: Ack
        var topic: String
        var qos: MQTTQoS
        /// Tells this publish's wait apart from a later one that libmosquitto gave the same mid.
        var token: UInt64
    }

    struct Subscription {
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
    struct SentSubscribe {
        var filters: [String]
        var awaitedBy: UInt64?
    }

    /// A `subscribe()` call awaiting the SUBACKs of all its SUBSCRIBEs.
    struct SubscribeWait {
        var ack: Ack
        var outstanding: Int
    }

    // MARK: storage

    /// The protocol spoken now: `.v5` or `.v311`, never `.auto` (which speaks 5 until a broker
    /// refuses it, then 3.1.1 for the client's life; see ``closedBeforeConnack()`` for a close).
    package private(set) var protocolVersion: MQTTProtocolVersion
    /// The client was configured `.auto`: a refusal of MQTT 5 for its version falls back.
    let fallsBack: Bool
    /// A CONNACK just refused MQTT 5 for its version: the close that follows is not a loss,
    /// and the next attempt, at once, speaks 3.1.1.
    var fallingBack = false
    /// 3.1.1 was chosen because an MQTT 5 attempt closed before any CONNACK
    /// (``closedBeforeConnack()``), and no CONNACK has come since: a 3.1.1 attempt closed the
    /// same way says the version was not the cause, and the client speaks 5 again.
    var fellBackOnClose = false
    /// Connected with 3.1.1 after such a close: a close is a weaker sign than a refusal (a TCP
    /// proxy or load balancer in front of a broker that is down closes the same way), so the
    /// next connection tries MQTT 5 again first instead of keeping 3.1.1 for the client's life.
    var probesFiveAgain = false
    /// A CONNACK of any kind arrived on the current attempt: what ends the attempt afterwards
    /// (libmosquitto returns `MOSQ_ERR_PROTOCOL` after an MQTT 5 refusal of 0x80 or more) says
    /// nothing of the protocol version (``versionUnanswered``).
    package private(set) var connackReceived = false
    /// Connections made with 3.1.1 after an MQTT 5 attempt closed before its CONNACK: the first
    /// is said at notice, the rest (one a reconnection to such a broker) at debug.
    package private(set) var connectionsAfterClose = 0
    let sentCredentials: Bool
    /// How many broker addresses the client has (the nodes of one broker service).
    let brokerCount: Int
    /// The broker (an index into ``MQTTConfiguration/brokers``) of the current or next attempt.
    package private(set) var brokerIndex: Int
    /// Brokers the first connect may still go on to when an attempt fails (it tries each once).
    var firstConnectTriesLeft: Int
    /// The next attempt goes at once, without a backoff wait: 3.1.1 after a refusal of 5, or
    /// the next broker of the first connect.
    var retryAtOnce = false
    var phase: Phase = .idle
    /// The state observers see; it follows `phase`, with the detail they need.
    package private(set) var connectionState: MQTTConnectionState = .idle
    /// Messages received from the broker (``received(topic:identifiers:)``), counted so that
    /// a shutdown handing over can wait until they stop coming (wraps around; only its
    /// changes matter).
    package internal(set) var messagesReceived: UInt64 = 0
    /// Bumped at every connection loss: a QoS 0 publish taken before a loss is never reported,
    /// and an UNSUBSCRIBE sent on an earlier connection is never answered.
    var epoch: UInt64 = 0
    var nextID: UInt64 = 0

    var pendingPublishes: [Int32: PendingPublish] = [:]
    /// Acknowledgements (reason codes) that arrived before the call that sent the packet had
    /// registered its mid: libmosquitto's thread can answer before `mosquitto_publish` or
    /// `mosquitto_subscribe` returns.
    var earlyAcks: [Int32: [Int32]] = [:]
    /// Mids of publishes whose caller stopped waiting while libmosquitto still holds the
    /// message: a late acknowledgement is dropped, not kept in `earlyAcks` where a later
    /// publish reusing the mid would take it. At most 65535 mids.
    var abandonedPublishes: Set<Int32> = []

    var subscriptions: [UInt64: Subscription] = [:]
    /// Publishes handed to libmosquitto since the loop's last turn.
    var publishesSinceTurn = 0
    /// MQTT 5 subscription identifier of each subscribed filter. The broker sends one copy of
    /// a message per matching subscription, tagged with its identifier; routing by it gives
    /// each stream exactly one copy even when filters overlap.
    var filterIdentifiers: [String: UInt32] = [:]
    var nextFilterIdentifier: UInt32 = 0
    var sentSubscribes: [Int32: SentSubscribe] = [:]
    var subscribeWaits: [UInt64: SubscribeWait] = [:]

    /// Mids of UNSUBSCRIBEs sent on the current connection and not yet acknowledged.
    var pendingUnsubscribes: Set<Int32> = []
    /// UNSUBACKs that arrived before the call that sent the UNSUBSCRIBE registered its mid.
    var earlyUnsubacks: Set<Int32> = []

    var observers: [UInt64: Observer] = [:]
    /// Recent error lines from libmosquitto's log, to explain TLS failures.
    package private(set) var errorLog: [String] = []

    /// A client speaking `protocolVersion` (`.auto`: 5, then 3.1.1 if refused), with
    /// `brokerCount` broker addresses of which the first connect tries `firstBroker` first.
    package init(protocolVersion: MQTTProtocolVersion, sentCredentials: Bool, brokerCount: Int = 1, firstBroker: Int = 0) {
        self.protocolVersion = protocolVersion == .v311 ? .v311 : .v5
        self.fallsBack = protocolVersion == .auto
        self.sentCredentials = sentCredentials
        self.brokerCount = max(1, brokerCount)
        self.brokerIndex = min(max(0, firstBroker), max(1, brokerCount) - 1)
        self.firstConnectTriesLeft = max(1, brokerCount) - 1
    }

    /// A new id for a subscription, an observer, a waiter or a publish's token.
    package mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Whether a client that acknowledges after handling may read from the broker: before
    /// the CONNACK, and after it only while a stream is open to take what arrives (a
    /// persistent session's messages come right after the CONNACK, before `subscribe()`).
    package var readsForHandling: Bool {
        guard case .connected = phase else { return true }
        return hasOpenSubscription
    }

    /// Whether a subscription stream is open.
    package var hasOpenSubscription: Bool { subscriptions.values.contains { !$0.ended } }

    /// Whether a SUBSCRIBE sent on this connection still awaits its SUBACK.
    package var awaitsSubscribeReply: Bool { !sentSubscribes.isEmpty }

    /// Whether the loop waits for a CONNACK: a connection attempt is under way (the first
    /// connect or a reconnect), not yet answered.
    package var awaitsConnack: Bool {
        switch phase {
        case .connecting, .reconnecting: true
        case .idle, .connected, .shuttingDown, .closed: false
        }
    }

    /// Whether the loop thread must stop: no reconnect, and a DISCONNECT at its next turn.
    package var mustStop: Bool {
        switch phase {
        case .shuttingDown(let shutdown): shutdown.stopRequested
        case .closed: true
        case .idle, .connecting, .connected, .reconnecting: false
        }
    }

    /// ``mustStop`` and ``awaitsConnack`` together, and whether the connection is up (its
    /// CONNACK accepted and no shutdown begun): what the network loop reads on every turn
    /// (specialized for the client, so that the turn looks up no type metadata).
    @_specialize(
        exported:true,where
            Ack == MQTTCompletion, Sink == AsyncThrowingStream<MQTTMessage, any Error>.Continuation,
            Observer == AsyncStream<MQTTConnectionState>.Continuation, Waiter == FleetcastCore.Waiter<Void>
    )
    package func loopPhase() -> (mustStop: Bool, awaitsConnack: Bool, connected: Bool) {
        (mustStop, awaitsConnack, isConnectedPhase)
    }

    /// Why a publish or a subscription is refused now; `nil` while connected or reconnecting.
    var refusal: MQTTError? {
        switch phase {
        case .connected, .reconnecting: nil
        case .idle, .connecting: .notConnected
        case .shuttingDown, .closed: .shutdown
        }
    }

    var loopRunning: Bool {
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
    package mutating func addObserver(_ id: UInt64, _ observer: Observer, seen: MQTTConnectionState) -> ObserverAction {
        if case .closed = phase { return .finish(yield: seen == .closed ? nil : .closed) }
        guard seen == connectionState else { return .changed(connectionState) }
        observers[id] = observer
        return .stored
    }

    /// An observer's stream ended.
    package mutating func observerRemoved(_ id: UInt64) {
        observers[id] = nil
    }

    // MARK: connect and the loop

    /// `connect()` was called with `ack`. `cancelled` is the calling task's cancellation, read
    /// under the lock: a cancelled connect starts nothing and closes the client (it connects
    /// once).
    package mutating func startConnect(_ ack: Ack, cancelled: Bool) -> (ConnectAction, Actions) {
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
    package mutating func cancelConnect() -> Actions {
        var actions = Actions()
        guard case .connecting(let ack) = phase else { return actions }
        phase = .shuttingDown(Shutdown(stopRequested: true))
        actions.cancel.append(ack)
        return actions
    }

    /// The loop starts a connection attempt: libmosquitto's error lines from before are stale.
    package mutating func connectAttemptStarts() {
        errorLog.removeAll()
        connackReceived = false
    }

    /// A CONNACK arrived. On success, returns the filters to subscribe again (with their QoS
    /// and MQTT 5 identifier); send them, then report with ``restoreSent(_:failed:)``.
    ///
    /// Under `.auto`, a refusal of MQTT 5 for its version (0x84, or 1 from a broker answering
    /// in 3.1.1's format) changes nothing but the protocol: `fellBack` is true, the close that
    /// follows is not reported, and the next attempt goes at once with 3.1.1.
    package mutating func connack(
        reasonCode: Int32
    ) -> (restore: [(filter: String, qos: MQTTQoS, identifier: UInt32)], actions: Actions, fellBack: Bool) {
        var actions = Actions()
        defer { connackReceived = true }
        if reasonCode == 0x84 || reasonCode == 1, refusedVersion5() {
            return ([], actions, true)
        }
        // Answered after a fallback on a close: accepted, the broker speaks 3.1.1 (5 is tried
        // first again after the next loss); refused (a broker coming up behind a proxy, a bad
        // password), it says nothing of MQTT 5, and the next attempt speaks 5 again.
        if fellBackOnClose {
            if reasonCode == 0 {
                probesFiveAgain = true
                connectionsAfterClose += 1
            } else {
                protocolVersion = .v5
            }
        }
        fellBackOnClose = false
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
        case .connecting where firstConnectTriesLeft > 0:
            // Any refusal by one node (busy, unavailable, or refusing the login: a node whose
            // authentication is broken): the close that follows moves the first connect on to
            // the next node. Only the last node's refusal ends it. (The first node is chosen by
            // the client id, so a node that refused for good would hold its share of a fleet.)
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
    package mutating func refusedVersion5() -> Bool {
        guard fallsBack, protocolVersion == .v5, awaitsConnack || isConnectedPhase else { return false }
        protocolVersion = .v311
        fallingBack = true
        return true
    }

    /// The connection of an attempt closed before any CONNACK, after the TCP (and TLS)
    /// connection was made: the broker closed it, or did not answer within the CONNACK
    /// timeout. Under `.auto` on MQTT 5 that is how brokers that speak only 3.1.1 answer an
    /// MQTT 5 CONNECT (RabbitMQ 3.10 closes at once, amqtt 0.12 after 10 s), so the client
    /// falls back as for a refusal (``refusedVersion5()``): the next attempt goes at once with
    /// 3.1.1. If that attempt closes the same way, the version was not the cause: the client
    /// speaks 5 again, and waits its backoff. Connected with 3.1.1 so, the client tries 5
    /// first again after the next loss (``probesFiveAgain``). Returns whether the protocol
    /// changed.
    package mutating func closedBeforeConnack() -> Bool {
        guard versionUnanswered else { return false }
        if fellBackOnClose, protocolVersion == .v311 {
            protocolVersion = .v5
            fellBackOnClose = false
            return true
        }
        guard refusedVersion5() else { return false }
        fellBackOnClose = true
        return true
    }

    /// A CONNACK is awaited and none has come on this attempt: only then can the way the
    /// attempt ends (a close, a packet libmosquitto cannot read) be taken for an answer about
    /// the protocol version.
    package var versionUnanswered: Bool { awaitsConnack && !connackReceived }

    private var isConnectedPhase: Bool {
        if case .connected = phase { true } else { false }
    }

    /// The connection went away, or a connection attempt failed, with `error`. Returns
    /// whether the loop should reconnect, and whether this loss is news (not the close that
    /// follows a refused CONNACK, which was reported already).
    package mutating func connectionLost(_ error: MQTTError) -> (reconnect: Bool, isNews: Bool, actions: Actions) {
        var actions = Actions()
        epoch &+= 1
        // The attempt is over: the next one is unanswered until its CONNACK.
        connackReceived = false
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
            if probesFiveAgain {
                probesFiveAgain = false
                protocolVersion = .v5
            }
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
    package mutating func willReconnect(delay: (Int) -> Duration) -> (attempt: Int, delay: Duration, actions: Actions) {
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
    package mutating func loopEnded() -> Actions {
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
    package mutating func recordError(_ line: String) {
        errorLog.append(line)
        if errorLog.count > 16 { errorLog.removeFirst(errorLog.count - 16) }
    }

    // MARK: shutdown

    /// Asks the loop to stop as soon as it can, without waiting for anything (the client
    /// object is going away). Returns whether the loop runs and must be woken.
    package mutating func requestStop() -> (wakeLoop: Bool, actions: Actions) {
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
    package mutating func beginShutdown() -> (mustDrain: Bool, loopRunning: Bool, actions: Actions) {
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
    package mutating func awaitDrain(id: UInt64, cancelled: Bool, _ waiter: Waiter) -> Actions {
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
    package mutating func awaitUnsubacks(id: UInt64, _ waiter: Waiter) -> Bool {
        guard case .shuttingDown = phase, !pendingUnsubscribes.isEmpty else { return false }
        withShutdown { $0.unsubackWaiters[id] = waiter }
        return true
    }

    /// The awaited steps are done: the loop must stop and send DISCONNECT. Returns whether it
    /// runs (then wake it, and wait for its end).
    package mutating func stopAfterDrain() -> Bool {
        withShutdown { $0.stopRequested = true }
        return loopRunning
    }

    /// A `shutdown()` waits (as `id`) for the loop thread to end. Returns false, storing
    /// nothing, when it has already ended.
    package mutating func awaitLoopEnd(id: UInt64, _ waiter: Waiter) -> Bool {
        guard case .shuttingDown = phase else { return false }
        withShutdown { $0.exitWaiters[id] = waiter }
        return true
    }

    /// The `shutdown()` step waiting as `id` ends early (its time is up, or it was cancelled):
    /// returns its waiter to resume, if it still waits.
    package mutating func stopWaiting(id: UInt64) -> Waiter? {
        var waiter: Waiter?
        withShutdown { shutdown in
            waiter =
                shutdown.drainWaiters.removeValue(forKey: id) ?? shutdown.unsubackWaiters.removeValue(forKey: id)
                ?? shutdown.exitWaiters.removeValue(forKey: id)
        }
        return waiter
    }

    mutating func completeDrainIfIdle(_ actions: inout Actions) {
        if pendingPublishes.isEmpty { resumeAll(\.drainWaiters, &actions) }
    }

    /// Resumes (through `actions`) and forgets every `shutdown()` step waiting in `waiters`.
    mutating func resumeAll(_ waiters: WritableKeyPath<Shutdown, [UInt64: Waiter]>, _ actions: inout Actions) {
        withShutdown { shutdown in
            actions.resume += shutdown[keyPath: waiters].values
            shutdown[keyPath: waiters].removeAll()
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
