import FleetCore
import FleetProtocol
import FleetcastCore
import MQTT
import Synchronization

extension FleetSubscriber {
    /// The fleet as its retained messages describe it: connects (retrying an unreachable
    /// broker until `timeout`), subscribes, and collects messages until no retained message has
    /// arrived for `quietPeriod` (counted from the subscription acknowledgement at first), or
    /// until `timeout` overall; then disconnects.
    ///
    /// The broker sends retained messages right after the subscription acknowledgement, so a
    /// short quiet period (default 500 ms) is enough on a local network. Messages that are not
    /// retained but arrive meanwhile are included too. A shared subscription
    /// (``Options/shareGroup``) receives no retained messages.
    ///
    /// - Returns: the events in arrival order.
    public func retainedSnapshot(quietPeriod: Duration = .milliseconds(500), timeout: Duration = .seconds(10)) async throws -> [FleetEvent]
    {
        try await receivedSnapshot(quietPeriod: quietPeriod, timeout: timeout).map(\.event)
    }

    /// As ``retainedSnapshot(quietPeriod:timeout:)``, each event with whether it came retained.
    public func receivedSnapshot(
        quietPeriod: Duration = .milliseconds(500), timeout: Duration = .seconds(10)
    ) async throws
        -> [ReceivedEvent]
    {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        let client = try await MQTTClient.connectRetrying(configuration: configuration, deadline: deadline, logger: logger)
        let decoder = FleetMessageDecoder(topics: options.topics)
        do {
            let subscription = try await client.subscribe(filters, qos: options.qos, bufferingPolicy: .bufferingNewest(options.bufferLimit))
            let collected = SnapshotCollector(start: clock.now)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await message in subscription {
                        let now = clock.now
                        decoder.decode(topic: message.topic, payload: message.payload) { event in
                            collected.add(event, at: now, retained: message.retain)
                        }
                    }
                }
                // Wait until the retained burst is over: each wake-up sleeps until the quiet
                // period after the latest retained arrival would end, bounded by the deadline.
                // Live (not retained) messages do not extend it: a moving fleet is never quiet.
                while true {
                    let quietUntil = collected.lastArrival + quietPeriod
                    let wake = min(quietUntil, deadline)
                    if clock.now >= wake { break }
                    try await clock.sleep(until: wake)
                }
                group.cancelAll()
            }
            await client.shutdown(flushTimeout: .zero)
            return collected.events
        } catch {
            await client.shutdown(flushTimeout: .zero)
            throw error
        }
    }
}

/// The events of a snapshot so far and when the latest retained one arrived, shared between the
/// task that receives and the one that waits for quiet.
private final class SnapshotCollector: Sendable {
    private struct State {
        var events: [FleetSubscriber.ReceivedEvent] = []
        var lastArrival: ContinuousClock.Instant
    }

    private let state: SanitizerVisibleMutex<State>

    init(start: ContinuousClock.Instant) { state = SanitizerVisibleMutex(State(lastArrival: start)) }

    /// Adds an event; only a retained one moves ``lastArrival``.
    func add(_ event: FleetEvent, at instant: ContinuousClock.Instant, retained: Bool) {
        state.withLock {
            $0.events.append(FleetSubscriber.ReceivedEvent(event: event, retained: retained))
            if retained { $0.lastArrival = instant }
        }
    }

    var lastArrival: ContinuousClock.Instant { state.withLock { $0.lastArrival } }
    var events: [FleetSubscriber.ReceivedEvent] { state.withLock { $0.events } }
}
