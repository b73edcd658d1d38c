import FleetcastCore
import Logging
import MQTTCore

extension MQTTClient {
    /// Connects a new client to `configuration`'s broker, retrying while the broker cannot be
    /// reached: the one connect-with-retry of the agent and fleet-watch.
    ///
    /// libmosquitto reconnects by itself once a connection has been made, but a first connection
    /// that fails ends its client; so each attempt makes a new client (and shuts the failed one
    /// down). A failure ``MQTTError/isWorthRetrying`` says retrying may mend (the broker down,
    /// unreachable, busy, not yet resolvable) is retried after the next delay of `backoff`; any
    /// other (TLS trust, credentials, authorisation) is thrown at once, as is cancellation.
    ///
    /// The log names the broker (`mqtt.broker`) and the error (`mqtt.error`), once per outage
    /// rather than once per attempt: a line at `outageLevel` when the broker first proves
    /// unreachable, at most one more every `warningInterval` while it stays so (the attempts
    /// between are logged at debug), and one at `recoveryLevel` when it is reachable again.
    /// Both default to info, as a library's should; an application whose user must see the
    /// outage at its default level (the agent) raises them. The client logs the connection.
    ///
    /// - Parameters:
    ///   - configuration: the broker, credentials, TLS and will of every attempt.
    ///   - backoff: the delays between attempts; `nil` uses `configuration.reconnect`.
    ///   - deadline: when set, the last error is thrown instead of retrying past it.
    ///   - warningInterval: the shortest time between two reports of one outage.
    ///   - outageLevel: the level of the outage's reports.
    ///   - recoveryLevel: the level of the line saying the broker is reachable again.
    ///   - logger: where the outage is reported.
    /// - Returns: the connected client; the caller shuts it down.
    public static func connectRetrying(
        configuration: MQTTConfiguration,
        backoff: Backoff? = nil,
        deadline: ContinuousClock.Instant? = nil,
        warningInterval: Duration = .seconds(300),
        outageLevel: Logger.Level = .info,
        recoveryLevel: Logger.Level = .info,
        logger: Logger
    ) async throws -> MQTTClient {
        let policy = configuration.reconnect
        var backoff =
            backoff
            ?? Backoff(
                initial: policy.initialDelay, maximum: policy.maximumDelay, multiplier: policy.multiplier, jitter: policy.jitter)
        let broker: Logger.MetadataValue = "\(configuration.brokerList)"
        var warnedAt: ContinuousClock.Instant?
        while true {
            try Task.checkCancellation()
            let client = try MQTTClient(configuration: configuration, logger: logger)
            do {
                try await client.connect()
                if warnedAt != nil {
                    logger.log(
                        level: recoveryLevel, "MQTT broker reachable again",
                        metadata: [
                            "mqtt.broker": broker, "retry.attempt": "\(backoff.attempt + 1)",
                        ])
                }
                return client
            } catch let error as MQTTError where error.isWorthRetrying {
                await client.shutdown(flushTimeout: .zero)
                let delay = backoff.next()
                let now = ContinuousClock.now
                if let deadline, now + delay > deadline { throw error }
                let metadata: Logger.Metadata = [
                    "mqtt.broker": broker, "mqtt.error": "\(error)",
                    "retry.attempt": "\(backoff.attempt)", "retry.delay": "\(delay)",
                ]
                // Reported when the outage starts, again at most every `warningInterval`.
                if warnedAt.map({ $0.duration(to: now) >= warningInterval }) ?? true {
                    warnedAt = now
                    logger.log(level: outageLevel, "MQTT broker unreachable, retrying", metadata: metadata)
                } else {
                    logger.debug("MQTT broker unreachable, retrying", metadata: metadata)
                }
                try await Task.sleep(for: delay)
            } catch {
                await client.shutdown(flushTimeout: .zero)
                throw error
            }
        }
    }
}
