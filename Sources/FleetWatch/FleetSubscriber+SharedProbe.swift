import FleetCore
import FleetcastCore
import Logging
import MQTT
import ServiceLifecycle

/// A broker that takes a shared subscription (`$share/{group}/…`) and then delivers nothing
/// on it: NATS grants the SUBSCRIBE and never sends a message to any member. A recorder or
/// bridge in a share group would run silently deaf, so the subscriber proves the broker
/// delivers before it joins the group, and stops with this error when it does not.
public struct SharedSubscriptionsNotDelivered: Error, Sendable, CustomStringConvertible {
    /// The broker addresses, as given.
    public let brokers: String
    /// The share group asked for.
    public let group: String
    /// What happened to the probe: refused, or not delivered within the wait.
    public let detail: String

    public var description: String {
        "shared subscriptions do not work on \(brokers): \(detail). The broker does not support MQTT shared subscriptions ($share/\(group)/…; NATS grants them and never delivers), or its ACL refuses this user the probe topic \(FleetSubscriber.sharedProbePrefix)/# (deploy/mosquitto/fleetcast.acl grants it). Without --share-group, split the fleet between processes with --vehicle lists instead"
    }
}

extension FleetSubscriber {
    /// The topic root of the shared-subscription probe: a topic outside the fleet's tree that a
    /// subscriber in a share group must be allowed to read and write.
    public static let sharedProbePrefix = "fleetcast/probe"
    /// How long the probe waits for its own message to come back through the shared
    /// subscription.
    public static let sharedProbeWait: Duration = .seconds(10)

    /// Proves that the broker delivers on shared subscriptions, before the subscriber joins
    /// its group: a client of its own (clean session, this configuration's client id with
    /// `-probe`, connected and gone before the subscriber's own connects, so a broker that
    /// binds the client id to the user name closes nothing) subscribes to
    /// `$share/{group}-probe-{token}/fleetcast/probe/{token}`, a group of its own, so no other
    /// member can take the message, publishes one QoS 1 message there and waits
    /// ``sharedProbeWait`` for it. Throws ``SharedSubscriptionsNotDelivered`` when the broker
    /// refuses the subscription or never delivers.
    func probeSharedSubscriptions(group: String) async throws {
        var random = SystemRandomNumberGenerator()
        let token = String(random.next() as UInt64, radix: 16)
        let topic = "\(Self.sharedProbePrefix)/\(token)"
        let filter = "$share/\(group.prefix(40))-probe-\(token)/\(topic)"
        var probe = configuration
        probe.clientID = String(configuration.clientID.prefix(60)) + "-probe"
        probe.session = .clean
        probe.acknowledgement = .onReceipt
        probe.receiveMaximum = nil
        probe.will = nil
        let client = try await cancelWhenGracefulShutdown { [logger, probe] in
            try await MQTTClient.connectRetrying(configuration: probe, logger: logger)
        }
        let fail = { (detail: String) in
            SharedSubscriptionsNotDelivered(brokers: configuration.brokerList, group: group, detail: detail)
        }
        do {
            let subscription: MQTTSubscription
            do {
                subscription = try await client.subscribe([filter], qos: .atLeastOnce, bufferingPolicy: .bufferingNewest(4))
            } catch let error as MQTTError where error.code == .subscribeRejected {
                throw fail("it refused the probe's subscription (\(error))")
            }
            try await client.publish(topic: topic, payload: Array(token.utf8), qos: .atLeastOnce, retain: false)
            let arrived = await withTimeLimit(Self.sharedProbeWait) {
                do {
                    for try await message in subscription where message.payload == Array(token.utf8) { return true }
                } catch {}
                return false
            }
            guard arrived == true else {
                throw fail("the probe's message did not come back through its shared subscription within \(Self.sharedProbeWait)")
            }
            logger.debug("Shared subscriptions deliver", metadata: ["mqtt.filter": "\(filter)"])
        } catch {
            await client.shutdown(flushTimeout: .zero)
            throw error
        }
        await client.shutdown(flushTimeout: .seconds(1))
    }

    /// How long refusals that may pass (0x80 unspecified error, 0x83 implementation specific,
    /// 0x97 quota exceeded) are retried before the subscriber gives up with the error.
    public static let subscribeRetryLimit: Duration = .seconds(60)

    /// Subscribes to the fleet, again with backoff while the broker refuses with a code that
    /// may pass (a NATS cluster whose streams are still choosing their leaders answers 0x80
    /// for 5 to 7 s): the first refusal is said at warning, naming the filters, the later ones
    /// at debug. Never takes a refusal as subscribed: a refusal that will not pass (0x87 not
    /// authorized, 0x9E shared subscriptions not supported…), or one that lasts
    /// ``subscribeRetryLimit``, is thrown. Returns `nil` once the client is shut down.
    func subscribeRetrying(
        _ client: MQTTClient, bufferingPolicy: AsyncThrowingStream<MQTTMessage, any Error>.Continuation.BufferingPolicy
    ) async throws -> MQTTSubscription? {
        var backoff = Backoff(initial: .milliseconds(500), maximum: .seconds(10))
        var warnedAt: ContinuousClock.Instant?
        let started = ContinuousClock.now
        while true {
            do {
                return try await client.subscribe(filters, qos: options.qos, bufferingPolicy: bufferingPolicy)
            } catch let error as MQTTError where error.code == .subscribeRejected {
                let delay = backoff.next()
                let now = ContinuousClock.now
                guard [0x80, 0x83, 0x97].contains(error.reasonCode ?? 0), started.duration(to: now) + delay <= Self.subscribeRetryLimit
                else { throw error }
                let metadata: Logger.Metadata = [
                    "mqtt.broker": "\(configuration.brokerList)", "mqtt.filters": "\(filters)", "mqtt.error": "\(error)",
                    "retry.delay": "\(delay)",
                ]
                if warnedAt.map({ $0.duration(to: now) >= .seconds(300) }) ?? true {
                    warnedAt = now
                    logger.warning(
                        "The broker refused the fleet's subscription; retrying (check its ACL for this user)", metadata: metadata)
                } else {
                    logger.debug("The broker refused the fleet's subscription; retrying", metadata: metadata)
                }
                try await Task.sleep(for: delay)
            } catch let error as MQTTError where error.code == .shutdown {
                return nil
            }
        }
    }
}
