import EdgePublisher
import FleetcastCore
import GNSS
import MQTT
import ServiceLifecycle

// The agent's run as a ServiceGroup of three services, in this order: the broker link, the
// publisher, systemd's watchdog. A graceful shutdown stops them in reverse order, each after the
// one before has ended: the watchdog says STOPPING=1 first, the publisher then sends what is
// live and `offline` over a link still up (or still connecting), and a connection not made by
// then is given up last.

/// Connects the agent to its broker (retrying while it cannot be reached, with the `offline`
/// status as the last will), then tells the publisher of every connection and loss (libmosquitto
/// reconnects by itself: each new connection, to any broker of the list, gets its `online`
/// status first) until its turn in a graceful shutdown (a service that ended on its own while
/// another is being shut down would cancel the group). Throws what retrying cannot fix (TLS
/// trust, credentials, authorisation), which shuts the group down.
struct BrokerLinkService: Service {
    let link: MQTTLink
    let will: MQTTWill
    let publisher: Publisher

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await link.connect(will: will)
                // The first state is the current one: the first connection.
                for await state in link.connectionStates() {
                    switch state {
                    case .connected: publisher.link(connected: true)
                    case .disconnected: publisher.link(connected: false)
                    case .idle, .connecting, .reconnecting, .closed: break
                    }
                }
            }
            try await gracefulShutdown()
        } catch is CancellationError {
            // The run is over before a connection was made: nothing to say.
        }
    }
}

/// Runs the publisher over the agent's events until they end (a replay) or a graceful shutdown,
/// which finishes it: the subscription leaves the hub, so the events end (a pending `next()`
/// returns nil), and a lossless intake waiting for room in the outbox (a replay while the broker
/// is gone) stops waiting. (Not `cancelOnGracefulShutdown()`: its merge costs a task hop and two
/// locks per event.)
struct PublishingService<Events: AsyncSequence & Sendable>: Service where Events.Element == GNSSEvent {
    let publisher: Publisher
    let events: Events
    /// Ends the events at a graceful shutdown.
    let endEvents: @Sendable () -> Void
    /// Said at a graceful shutdown, before the publisher finishes (STOPPING=1 when no watchdog
    /// task says it).
    let onShutdown: @Sendable () -> Void

    func run() async throws {
        try await withGracefulShutdownHandler {
            try await publisher.run(events: events)
        } onGracefulShutdown: {
            onShutdown()
            publisher.finish()
            endEvents()
        }
    }
}

/// Answers systemd's watchdog while the pipeline moves (``AgentService``'s `petWatchdog`),
/// until a graceful shutdown or the publisher's finish, then says STOPPING=1: its task is the
/// only one that notifies while running, so STOPPING=1 always comes after the last WATCHDOG=1.
struct WatchdogService: Service {
    let pet: @Sendable (StopSignal) async -> Void

    func run() async throws {
        let stop = StopSignal()
        await withGracefulShutdownHandler {
            await pet(stop)
            // Done (the publisher finished): it stays until its turn, as the link does.
            try? await gracefulShutdown()
        } onGracefulShutdown: {
            stop.stop()
        }
    }
}
