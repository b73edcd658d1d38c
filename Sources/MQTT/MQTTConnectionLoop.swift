import CMosquitto
import Logging
import MQTTCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The network loop: one dedicated thread per client, the only one that touches its socket,
/// turns libmosquitto's loop and, after a loss, reconnects with the configured backoff and
/// jitter. A client that acknowledges on receipt turns with `mosquitto_loop` until a connection
/// is up, then with ``turnOnReceipt(_:)``; one that acknowledges after handling always with
/// ``turnAfterHandling(_:stopDeadline:)``. Each waits at most
/// ``MQTTConfiguration/turnTimeoutMilliseconds`` in a turn; a request from another thread
/// (publish, subscribe, unsubscribe, disconnect) ends the wait earlier: through ``LoopWakeup``
/// in ``turnOnReceipt(_:)``, through libmosquitto's socket pair in `mosquitto_loop`.
/// (libmosquitto's own
/// `mosquitto_loop_start` thread reconnects without jitter, in whole seconds, and exits for
/// good on a DNS or TLS error during a reconnect; this loop keeps trying until shut down.)
enum MQTTConnectionLoop {
    /// How often the connection's TCP counters are read (``MQTTTraffic``).
    static let trafficSampleInterval: Duration = .seconds(1)
    /// The slice of a backoff wait after which a shutdown request is noticed.
    static let stopCheckInterval: Duration = .milliseconds(20)

    /// Starts the loop thread; it holds `handle` until it ends.
    static func start(_ handle: MosquittoHandle) {
        DetachedThread.start { run(handle) }
    }

    private static func run(_ handle: MosquittoHandle) {
        let context = handle.context
        let mosq = handle.pointer
        let keepAlive = Int32(clamping: max(5, Int(context.configuration.keepAlive.components.seconds)))

        var rc = connect(handle, keepAlive: keepAlive)
        var savedErrno = errno
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            let error = context.connectError(code: rc, errnoValue: savedErrno)
            // The caller of connect() gets the error and decides how loudly to report it.
            context.logger.debug("MQTT connect failed", metadata: ["mqtt.error": "\(error)"])
            let (again, _, actions) = context.shared.withLock { $0.client.connectionLost(error) }
            actions.run()
            // With several brokers, the first connect goes on to the next before it fails.
            guard again, reconnectWithBackoff(handle, keepAlive: keepAlive) else {
                context.shared.withLock { $0.client.loopEnded() }.run()
                return
            }
        }
        var disconnectSent = false
        // libmosquitto's log, on for each connection attempt (connect turns it on).
        var libraryLogOn = true
        let keepsLibraryLog = context.logger.logLevel <= .trace
        var stopDeadline: ContinuousClock.Instant?
        var trafficDue = ContinuousClock.now
        var attemptStarted = ContinuousClock.now
        // Whether this connection has been up (its CONNACK accepted): until then the loop turns
        // with `mosquitto_loop`.
        var connectionUp = false
        while true {
            if context.acknowledgesAfterHandling {
                guard let turn = turnAfterHandling(handle, stopDeadline: &stopDeadline) else {
                    // Stopping with messages not handled: no acknowledgement, no DISCONNECT.
                    // The broker keeps them in the session and sends them again next time.
                    context.logger.debug("MQTT loop stopped before the consumer acknowledged everything")
                    context.shared.withLock { $0.client.connectionLost(.shutdown) }.actions.run()
                    break
                }
                rc = turn
            } else if !connectionUp {
                // Connecting (a TLS handshake too): libmosquitto's own turn.
                rc = corked(handle) { mosquitto_loop(mosq, context.configuration.turnTimeoutMilliseconds, 1) }
            } else {
                rc = turnOnReceipt(handle)
            }
            savedErrno = errno
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                // The kernel's counters, once a second (a system call).
                if ContinuousClock.now >= trafficDue {
                    let reading = MQTTTrafficMeter.read(socket: mosquitto_socket(mosq))
                    context.shared.withLock { $0.traffic.update(reading) }
                    trafficDue = ContinuousClock.now.advanced(by: trafficSampleInterval)
                }
                let (mustStop, awaitsConnack, connected) = context.shared.withLock { $0.client.loopPhase() }
                // Only a connection that is up leaves `mosquitto_loop` (a shutdown begun during a
                // connect attempt also ends `awaitsConnack`, with no CONNACK).
                if connected { connectionUp = true }
                if libraryLogOn && !awaitsConnack && !keepsLibraryLog {
                    // Connected: the per-packet lines would only cost (see setLibraryLog).
                    handle.setLibraryLog(false)
                    libraryLogOn = false
                }
                if !disconnectSent && mustStop {
                    // A shutdown raced with a (re)connect: send DISCONNECT now.
                    disconnectSent = true
                    _ = mosquitto_disconnect_v5(mosq, 0, nil)
                } else if awaitsConnack && attemptStarted.duration(to: .now) > context.configuration.connackTimeout {
                    // No CONNACK: drop the connection; the next mosquitto_loop reports it lost.
                    context.logger.debug(
                        "MQTT broker did not answer CONNECT; trying again",
                        metadata: ["mqtt.timeout": "\(context.configuration.connackTimeout)"])
                    _ = shutdown(mosquitto_socket(mosq), Int32(SHUT_RDWR))
                    attemptStarted = .now
                }
                continue
            }
            let error = context.connectError(code: rc, errnoValue: savedErrno)
            context.shared.withLock { $0.traffic.connectionEnded() }
            if rc == MOSQ_ERR_MALFORMED_PACKET.rawValue || rc == MOSQ_ERR_PROTOCOL.rawValue,
                context.shared.withLock({ $0.client.versionUnanswered && $0.client.refusedVersion5() })
            {
                // libmosquitto ≥ 2.0.12 reads a 3.1.1-only broker's CONNACK (code 1, no
                // properties) as a malformed MQTT 5 packet, without calling on_connect.
                context.logger.notice(
                    "MQTT broker does not speak MQTT 5; connecting with MQTT 3.1.1 (set the protocol to 3.1.1 to skip this step)",
                    metadata: ["mqtt.error": "\(error)"])
            } else if !connectionUp, !context.isTLSFailure(code: rc, errnoValue: savedErrno) {
                // Closed (or timed out) after CONNECT and before any CONNACK: how RabbitMQ and
                // amqtt answer MQTT 5. Not a TLS failure, which says nothing of the version.
                let changed = context.shared.withLock { $0.client.closedBeforeConnack() ? $0.client.protocolVersion : nil }
                // At debug: a proxy in front of a broker that is down closes alike, attempt after
                // attempt. A 3.1.1 connection made so is said at notice (``onConnect``).
                if let changed {
                    context.logger.debug(
                        "MQTT broker closed the connection before any CONNACK; trying the other protocol version",
                        metadata: ["mqtt.protocol": "\(changed == .v5 ? "5" : "3.1.1")", "mqtt.error": "\(error)"])
                }
            }
            let (reconnect, isNews, actions) = context.shared.withLock { $0.client.connectionLost(error) }
            actions.run()
            guard reconnect else { break }
            // The close that follows a refused CONNACK is the refusal, logged already.
            if isNews { context.logger.info("MQTT connection lost", metadata: ["mqtt.error": "\(error)"]) }
            // Acknowledging after handling: reconnect once everything received is handled,
            // or the broker's redeliveries would pile up behind a consumer that cannot go on.
            guard waitUntilHandled(context), reconnectWithBackoff(handle, keepAlive: keepAlive) else { break }
            libraryLogOn = true
            connectionUp = false
            attemptStarted = .now
        }
        context.shared.withLock { $0.client.loopEnded() }.run()
        context.logger.debug("MQTT loop ended")
    }

    /// Runs `body` (a libmosquitto call that writes) with the connection's socket corked
    /// (`TCP_CORK`) when the turn has more than one packet to write (``MQTTClientState/takeTurnCork()``):
    /// the packets it writes, each its own `write` (or TLS record), leave as few
    /// full TCP segments instead of one segment each, and go out when it returns. A heading and
    /// its fix handed over together, a backlog batch beside a live fix, a subscriber's
    /// acknowledgements of a burst: one segment's IP and TCP headers (52 bytes on a link with
    /// timestamps), and one TCP acknowledgement back, instead of one per packet. Only this loop
    /// writes to the socket (libmosquitto in threaded mode queues what other threads hand it;
    /// it writes only once `select` has returned), and the kernel sends a corked segment after
    /// 200 ms whatever happens.
    ///
    /// Never while a stop is under way: libmosquitto closes the socket as soon as it has written
    /// DISCONNECT, and closing a socket with input unread resets the connection and throws away
    /// what is still corked, the DISCONNECT with it (the broker would then publish the will).
    /// So the loop does not cork once `mustStop` is set, and ``uncorkForStop(_:)`` uncorks a
    /// turn already corked before the stop queues its DISCONNECT. Keeps `errno` as `body` left it.
    private static func corked(_ handle: MosquittoHandle, _ body: () -> Int32) -> Int32 {
        let mosq = handle.pointer
        guard handle.context.shared.withLock({ $0.client.takeTurnCork() }) else { return body() }
        let socket = mosquitto_socket(mosq)
        setCork(socket, true)
        // Checked after corking: a stop that came before this reading is seen here, and one
        // that comes after it uncorks the socket itself (see uncorkForStop).
        if handle.context.shared.withLock({ $0.client.loopPhase().mustStop }) { setCork(socket, false) }
        let rc = body()
        let savedErrno = errno
        // In one call the socket can only close (libmosquitto reconnects only when asked, outside
        // it); a closed one has nothing corked left.
        if socket >= 0 && mosquitto_socket(mosq) == socket { setCork(socket, false) }
        errno = savedErrno
        return rc
    }

    /// Uncorks the connection's socket for a stop: called by the thread that stops the client
    /// after `mustStop` is set and before it queues DISCONNECT, so that neither a turn of the
    /// loop corked before the stop nor any later one holds the DISCONNECT (see
    /// ``corked(_:_:)``). Another client's socket under the same number, if this one closed
    /// meanwhile, is only flushed early.
    static func uncorkForStop(_ handle: MosquittoHandle) {
        setCork(mosquitto_socket(handle.pointer), false)
    }

    private static func setCork(_ socket: Int32, _ on: Bool) {
        guard socket >= 0 else { return }
        var value: Int32 = on ? 1 : 0
        // Fails only on a socket that is not TCP (nothing to coalesce) or is gone.
        _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// One connection attempt, the first or a later one: a TCP (and TLS) connection to the
    /// broker the state chose, and a CONNECT in the protocol it speaks, with the MQTT 5
    /// properties (the session expiry of a persistent session, the maximum packet size). Always
    /// `mosquitto_connect_bind_v5`, never `mosquitto_reconnect`: the broker may be another node
    /// of the list, and libmosquitto refuses to reconnect with MQTT 5 properties once the
    /// protocol is 3.1.1. Both reset the session's messages the same way (QoS ≥ 1 publishes not
    /// yet acknowledged are sent again).
    private static func connect(_ handle: MosquittoHandle, keepAlive: Int32) -> Int32 {
        let context = handle.context
        let mosq = handle.pointer
        let configuration = context.configuration
        let (index, version) = context.shared.withLock {
            $0.client.connectAttemptStarts()
            return ($0.client.brokerIndex, $0.client.protocolVersion)
        }
        let broker = context.brokerAddress(index)
        let protocolOption = version == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        _ = mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, protocolOption)
        var properties: OpaquePointer?
        defer { mosquitto_property_free_all(&properties) }
        if version == .v5 {
            if let expiry = configuration.session.expirySeconds {
                let rc = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), expiry)
                guard rc == MOSQ_ERR_SUCCESS.rawValue else { return rc }
            }
            if let size = configuration.maximumPacketSize {
                let rc = mosquitto_property_add_int32(
                    &properties, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), UInt32(clamping: max(64, size)))
                guard rc == MOSQ_ERR_SUCCESS.rawValue else { return rc }
            }
        }
        handle.setLibraryLog(true)
        return mosquitto_connect_bind_v5(mosq, broker.host, Int32(broker.port), keepAlive, nil, properties)
    }

    /// One turn of the loop of a connected client that acknowledges on receipt, in
    /// `mosquitto_loop`'s order: polls the socket (for writing too when packets are queued) and
    /// the wake-up pipe that a packet queued from another thread writes to
    /// (``LoopWakeup/packetQueued()``), reads what arrived (``readAll(_:while:)``), writes everything
    /// queued (corked when several, ``corked(_:_:)``), then does libmosquitto's housekeeping
    /// (keep-alive). A DISCONNECT that woke the turn is written before the keep-alive check,
    /// which after `mosquitto_disconnect` would close the socket without it.
    ///
    /// Unlike `mosquitto_loop`, it never reads libmosquitto's socket pair, which gets one byte per
    /// packet queued and wakes `mosquitto_loop` once per byte: a burst of publishes goes out in
    /// one turn, and once the pair is full (it is non-blocking) each packet's byte costs one
    /// failed `write` instead of a wake-up, a `pselect` and a `read`. That failed write leaves
    /// `errno` at `EAGAIN`, which ends `mosquitto_loop_read` after the packet being handled when
    /// the handling queued one (an acknowledgement, a held-back publish released): hence
    /// ``readAll(_:while:)``. The pair lives as long as the client: the `mosquitto_loop` turns of the
    /// next connection attempt find it full and turn at once, one byte each, a few hundred at
    /// most, until it empties or the CONNACK comes. They stay `mosquitto_loop`'s because it
    /// completes a TLS handshake when the socket becomes writable, which
    /// `mosquitto_loop_write` does not.
    private static func turnOnReceipt(_ handle: MosquittoHandle) -> Int32 {
        let context = handle.context
        let mosq = handle.pointer
        let socket = mosquitto_socket(mosq)
        guard socket >= 0 else { return MOSQ_ERR_NO_CONN.rawValue }
        // Bytes the TLS session already holds (the `mosquitto_loop` turn that took the CONNACK
        // may have left the rest of its record there): read them without waiting.
        let buffered = TLSPending.bytes(mosq) > 0
        context.wakeup.sleeps(!buffered)
        // Asked after saying so: a packet queued before `sleeps` is seen here (POLLOUT returns at
        // once); one queued after it wakes the poll through the pipe.
        let writing = mosquitto_want_write(mosq)
        let waited = waitForInput(
            socket, wakeup: context.wakeup, reading: true, writing: writing,
            timeout: buffered ? 0 : context.configuration.turnTimeoutMilliseconds)
        let pollErrno = errno
        context.wakeup.sleeps(false)
        guard let readable = waited else {
            errno = pollErrno  // what the caller reports (a lock may have changed it)
            return MOSQ_ERR_ERRNO.rawValue
        }
        if readable || buffered {
            let rc = readAll(mosq)
            // Closed while reading (a DISCONNECT from the broker): as `mosquitto_loop` returns.
            guard rc == MOSQ_ERR_SUCCESS.rawValue, mosquitto_socket(mosq) >= 0 else { return rc }
        }
        if mosquitto_want_write(mosq) {
            let rc = corked(handle) { mosquitto_loop_write(mosq, 1) }
            // Closed by our DISCONNECT once written: the next turn reports the connection gone.
            guard rc == MOSQ_ERR_SUCCESS.rawValue, mosquitto_socket(mosq) >= 0 else { return rc }
        }
        return mosquitto_loop_misc(mosq)
    }

    /// `mosquitto_loop_read`, called again while the TLS session holds decrypted bytes that
    /// `poll` cannot see (a broker may put several packets in one TLS record) and `more()`
    /// allows. libmosquitto's own loop over them ends early when the loop thread's `errno` is
    /// `EAGAIN` (``turnOnReceipt(_:)``); bytes still in the kernel make the next `poll` return
    /// at once.
    private static func readAll(_ mosq: OpaquePointer?, while more: () -> Bool = { true }) -> Int32 {
        var rc = mosquitto_loop_read(mosq, 1)
        while rc == MOSQ_ERR_SUCCESS.rawValue, mosquitto_socket(mosq) >= 0, TLSPending.bytes(mosq) > 0, more() {
            rc = mosquitto_loop_read(mosq, 1)
        }
        return rc
    }

    /// How long a turn of ``turnAfterHandling(_:)`` waits for input: new API requests
    /// (subscribe, unsubscribe, disconnect) are written within it.
    static let handlingPollMilliseconds: Int32 = 50
    /// The most packets one turn reads before it lets the consumer catch up.
    static let maximumBurst = 65_536

    /// One turn of the loop of a client that acknowledges after handling. libmosquitto
    /// queues the acknowledgement of a message before its callback runs, and writes its
    /// queue all at once; so this loop writes only when the consumer has handled everything
    /// it was given (``MQTTDeliveryLedger/isSettled``). It goes on reading meanwhile (the
    /// broker sends at most the receive maximum ahead, and a SUBACK may be behind what a
    /// persistent session redelivers), then does libmosquitto's housekeeping (keep-alive:
    /// a consumer stuck for longer than it loses the connection, and the loop waits for it
    /// before reconnecting). Returns libmosquitto's code, or `nil` when a shutdown came and
    /// the consumer did not catch up within ``handlingGraceAtStop``.
    private static func turnAfterHandling(_ handle: MosquittoHandle, stopDeadline: inout ContinuousClock.Instant?) -> Int32? {
        let context = handle.context
        let mosq = handle.pointer
        let (settled, mustStop) = context.shared.withLock { ($0.deliveries.isSettled, $0.client.mustStop) }
        if !settled, mustStop {
            let clock = ContinuousClock()
            let deadline = stopDeadline ?? clock.now.advanced(by: handlingGraceAtStop)
            if clock.now >= deadline { return nil }
            stopDeadline = deadline
        }
        if settled && mosquitto_want_write(mosq) {
            let rc = corked(handle) { mosquitto_loop_write(mosq, 1) }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return rc }
        }
        if !mosquitto_want_write(mosq) { context.shared.withLock { $0.deliveries.queueEmptied() } }
        let socket = mosquitto_socket(mosq)
        guard socket >= 0 else { return MOSQ_ERR_NO_CONN.rawValue }
        let reading = mayRead(context)
        let writing = settled && mosquitto_want_write(mosq)
        // Bytes the TLS session already holds are read without waiting (``readAll(_:while:)``).
        let buffered = reading && TLSPending.bytes(mosq) > 0
        let readable =
            waitForInput(
                reading || writing ? socket : -1, wakeup: context.wakeup, reading: reading, writing: writing,
                timeout: buffered ? 0 : handlingPollMilliseconds) ?? false
        if readable || buffered {
            var packets = 0
            repeat {
                let rc = readAll(mosq, while: { mayRead(context) })
                guard rc == MOSQ_ERR_SUCCESS.rawValue else { return rc }
                packets += 1
            } while packets < maximumBurst && mosquitto_socket(mosq) >= 0 && mayRead(context)
                && waitForInput(mosquitto_socket(mosq), wakeup: nil, reading: true, writing: false, timeout: 0) == true
        }
        if context.shared.withLock({ $0.deliveries.takeOrphaned() }) {
            // A message nobody took (TLS had it buffered with the CONNACK; a stream ended):
            // its acknowledgement is queued. Drop the connection unwritten; the broker sends
            // the message again after the reconnect.
            context.logger.debug("MQTT message with no stream to take it; reconnecting so that it is not acknowledged")
            _ = shutdown(socket, Int32(SHUT_RDWR))
            return MOSQ_ERR_CONN_LOST.rawValue
        }
        return mosquitto_loop_misc(mosq)
    }

    /// How long the consumer may stay behind before the loop stops reading until it catches
    /// up: its acknowledgements and the keep-alive then go out within about this long, whatever
    /// the traffic (a loop that always found more to read would never be settled).
    static let readPatience: Duration = .seconds(1)

    /// Whether the loop of a client that acknowledges after handling reads now: only while a
    /// stream is open to take what arrives (else it would be acknowledged unseen), no
    /// SUBSCRIBE waits to be written, and the consumer is not behind for longer than
    /// ``readPatience`` (unless a SUBACK is awaited behind what the broker sends).
    private static func mayRead(_ context: MQTTCallbackContext) -> Bool {
        let budget = context.configuration.receiveBudgetBytes
        let now = ContinuousClock.now
        return context.shared.withLock {
            $0.client.readsForHandling
                && $0.deliveries.mayRead(at: now, patience: readPatience, awaitingReply: $0.client.awaitsSubscribeReply, budget: budget)
        }
    }

    /// Polls `socket` (for reading when `reading`, writing when `writing`) and the wake-up
    /// pipe; returns whether the socket is readable (or closed: the read then says how), or
    /// `nil` when `poll` failed other than by a signal (`errno` says why). A negative `socket`
    /// is not polled (poll(2) ignores it): only the pipe and the time.
    private static func waitForInput(_ socket: Int32, wakeup: LoopWakeup?, reading: Bool, writing: Bool, timeout: Int32) -> Bool? {
        let events = (reading ? Int16(POLLIN) : 0) | (writing ? Int16(POLLOUT) : 0)
        // Two entries on the stack (a turn of the loop allocates nothing here); the second is
        // ignored by poll(2) without a wake-up pipe (a negative descriptor).
        var fds = (pollfd(fd: socket, events: events, revents: 0), pollfd(fd: wakeup?.readEnd ?? -1, events: Int16(POLLIN), revents: 0))
        let count = withUnsafeMutableBytes(of: &fds) { raw in
            poll(raw.baseAddress!.assumingMemoryBound(to: pollfd.self), 2, timeout)
        }
        if count < 0 && errno != EINTR { return nil }
        guard count > 0 else { return false }
        if fds.1.revents != 0 { wakeup?.drain() }
        return reading && fds.0.revents & (Int16(POLLIN) | Int16(POLLERR) | Int16(POLLHUP)) != 0
    }

    /// How long, once a shutdown is requested, the loop still waits for the consumer to
    /// handle what it was given (it writes its last batch), before it closes without
    /// acknowledging the rest.
    static let handlingGraceAtStop: Duration = .seconds(5)

    /// Waits until the consumer has handled everything it was given (true), or a shutdown is
    /// requested and the consumer has not caught up within ``handlingGraceAtStop`` (false).
    /// Returns at once in a client that acknowledges on receipt.
    private static func waitUntilHandled(_ context: MQTTCallbackContext) -> Bool {
        guard context.acknowledgesAfterHandling else { return true }
        let wakeup = context.wakeup
        let clock = ContinuousClock()
        var stopDeadline: ContinuousClock.Instant?
        while case (false, let mustStop) = context.shared.withLock({ ($0.deliveries.isSettled, $0.client.mustStop) }) {
            if mustStop {
                let deadline = stopDeadline ?? clock.now.advanced(by: handlingGraceAtStop)
                if clock.now >= deadline { return false }
                stopDeadline = deadline
            }
            var fd = pollfd(fd: wakeup.readEnd, events: Int16(POLLIN), revents: 0)
            if poll(&fd, 1, 100) > 0 { wakeup.drain() }
        }
        return true
    }

    /// Waits and reconnects until a TCP/TLS connection is made (true) or a shutdown is
    /// requested (false). The CONNACK then arrives through `mosquitto_loop`.
    private static func reconnectWithBackoff(_ handle: MosquittoHandle, keepAlive: Int32) -> Bool {
        let context = handle.context
        let policy = context.configuration.reconnect
        while true {
            let (attempt, delay, actions, index) = context.shared.withLock {
                let next = $0.client.willReconnect(delay: { policy.delay(attempt: $0) })
                return (next.attempt, next.delay, next.actions, $0.client.brokerIndex)
            }
            actions.run()
            context.logger.debug(
                "MQTT reconnecting",
                metadata: [
                    "mqtt.attempt": "\(attempt)", "mqtt.delay": "\(delay)", "mqtt.node": "\(context.brokerAddress(index))",
                ])
            guard sleep(delay, unlessStopped: context) else { return false }
            let rc = connect(handle, keepAlive: keepAlive)
            let savedErrno = errno
            if rc == MOSQ_ERR_SUCCESS.rawValue { return true }
            let error = context.connectError(code: rc, errnoValue: savedErrno)
            context.logger.debug("MQTT reconnect failed", metadata: ["mqtt.error": "\(error)"])
            let (again, _, lostActions) = context.shared.withLock { $0.client.connectionLost(error) }
            lostActions.run()
            if !again { return false }
        }
    }

    /// Sleeps `delay` in short slices; returns false as soon as a shutdown is requested.
    private static func sleep(_ delay: Duration, unlessStopped context: MQTTCallbackContext) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: delay)
        while clock.now < deadline {
            if context.shared.withLock({ $0.client.mustStop }) { return false }
            let slice = min(stopCheckInterval, clock.now.duration(to: deadline))
            let (seconds, attoseconds) = slice.components
            var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            _ = nanosleep(&request, nil)
        }
        return !context.shared.withLock { $0.client.mustStop }
    }
}

/// A detached POSIX thread running a Swift closure (the MQTT target needs no Foundation).
enum DetachedThread {
    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    static func start(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { argument in
                guard let argument else { return nil }
                Unmanaged<Box>.fromOpaque(argument).takeRetainedValue().body()
                return nil
            }, box)
        if rc == 0 {
            pthread_detach(thread)
        } else {
            // No thread: run inline rather than lose the work (only under resource exhaustion).
            Unmanaged<Box>.fromOpaque(box).takeRetainedValue().body()
        }
    }
}
