import CMosquitto
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The network loop: one dedicated thread per client runs `mosquitto_loop` and, after a
/// loss, reconnects with the configured backoff and jitter. (libmosquitto's own
/// `mosquitto_loop_start` thread reconnects without jitter, in whole seconds, and exits for
/// good on a DNS or TLS error during a reconnect; this loop keeps trying until shut down.)
enum MQTTConnectionLoop {
    /// How long one `mosquitto_loop` call may wait in `select`, in milliseconds. Publishes
    /// and `mosquitto_disconnect` wake it earlier through libmosquitto's socket pair.
    static let selectTimeoutMilliseconds: Int32 = 1000
    /// The slice of a backoff wait after which a shutdown request is noticed.
    static let stopCheckInterval: Duration = .milliseconds(20)

    /// Starts the loop thread; it holds `handle` until it ends.
    static func start(_ handle: MosquittoHandle) {
        DetachedThread.start { run(handle) }
    }

    private static func run(_ handle: MosquittoHandle) {
        let context = handle.context
        let mosq = handle.pointer
        let broker = context.configuration.broker
        let keepAlive = Int32(clamping: max(5, Int(context.configuration.keepAlive.components.seconds)))

        context.state.withLock { $0.connectAttemptStarts() }
        var rc = mosquitto_connect_bind_v5(mosq, broker.host, Int32(broker.port), keepAlive, nil, nil)
        var savedErrno = errno
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            let error = context.connectError(code: rc, errnoValue: savedErrno)
            // The caller of connect() gets the error and decides how loudly to report it.
            context.logger.debug("MQTT connect failed", metadata: ["mqtt.error": "\(error)"])
            context.state.withLock { $0.connectionLost(error) }.actions.run()
            context.state.withLock { $0.loopEnded() }.run()
            return
        }
        var disconnectSent = false
        while true {
            rc = mosquitto_loop(mosq, selectTimeoutMilliseconds, 1)
            savedErrno = errno
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                if !disconnectSent && context.state.withLock({ $0.mustStop }) {
                    // A shutdown raced with a (re)connect: send DISCONNECT now.
                    disconnectSent = true
                    _ = mosquitto_disconnect_v5(mosq, 0, nil)
                }
                continue
            }
            let error = context.connectError(code: rc, errnoValue: savedErrno)
            let (reconnect, isNews, actions) = context.state.withLock { $0.connectionLost(error) }
            actions.run()
            guard reconnect else { break }
            // The close that follows a refused CONNACK is the refusal, logged already.
            if isNews { context.logger.info("MQTT connection lost", metadata: ["mqtt.error": "\(error)"]) }
            guard reconnectWithBackoff(handle) else { break }
        }
        context.state.withLock { $0.loopEnded() }.run()
        context.logger.debug("MQTT loop ended")
    }

    /// Waits and reconnects until a TCP/TLS connection is made (true) or a shutdown is
    /// requested (false). The CONNACK then arrives through `mosquitto_loop`.
    private static func reconnectWithBackoff(_ handle: MosquittoHandle) -> Bool {
        let context = handle.context
        let policy = context.configuration.reconnect
        while true {
            let (attempt, delay, actions) = context.state.withLock { $0.willReconnect(delay: { policy.delay(attempt: $0) }) }
            actions.run()
            context.logger.debug("MQTT reconnecting", metadata: ["mqtt.attempt": "\(attempt)", "mqtt.delay": "\(delay)"])
            guard sleep(delay, unlessStopped: context) else { return false }
            context.state.withLock { $0.connectAttemptStarts() }
            let rc = mosquitto_reconnect(handle.pointer)
            let savedErrno = errno
            if rc == MOSQ_ERR_SUCCESS.rawValue { return true }
            let error = context.connectError(code: rc, errnoValue: savedErrno)
            context.logger.debug("MQTT reconnect failed", metadata: ["mqtt.error": "\(error)"])
            let (again, _, lostActions) = context.state.withLock { $0.connectionLost(error) }
            lostActions.run()
            if !again { return false }
        }
    }

    /// Sleeps `delay` in short slices; returns false as soon as a shutdown is requested.
    private static func sleep(_ delay: Duration, unlessStopped context: MQTTCallbackContext) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: delay)
        while clock.now < deadline {
            if context.state.withLock({ $0.mustStop }) { return false }
            let slice = min(stopCheckInterval, clock.now.duration(to: deadline))
            let (seconds, attoseconds) = slice.components
            var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            _ = nanosleep(&request, nil)
        }
        return !context.state.withLock { $0.mustStop }
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
