import FleetCore
import FleetProtocol
import FleetWatch
import FleetcastCore
import GNSS
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The live map's shared state: the fleet folded from the subscription, the vehicles' trails,
/// and one coalescing queue per connected browser (``BrowserQueues``), all under one
/// ``SanitizerVisibleMutex``. Decisions are taken under the lock; waiters are resumed and drops
/// logged after it.
///
/// A browser ``connect()``s and gets the current fleet at once (its snapshot) together with
/// its queue, in one critical section, so no change falls between the snapshot and the
/// updates. Its writer then loops on ``next(_:)``, which returns the vehicles changed since
/// its last batch, at most once per ``flush()``, until `nil` (dropped as a slow reader,
/// disconnected, or the feed finished).
package final class MapFeed: Sendable {
    /// A batch for one browser: the vehicles' states at the flush, and the server's clock.
    package struct Batch: Sendable {
        package var vehicles: [VehicleSnapshot]
        package var now: UTCTimestamp
    }

    /// What a browser receives when it connects.
    package struct Snapshot: Sendable {
        package var id: Int
        package var fleet: FleetState
        package var trails: VehicleTrails
        package var now: UTCTimestamp
    }

    private typealias Waiter = CheckedContinuation<Batch?, Never>

    private struct State {
        var fleet: FleetState
        var trails: VehicleTrails
        var queues: BrowserQueues<VehicleID, Waiter>
        /// Each browser's connection: its address, for the log, and how to close it.
        var connections: [Int: Connection] = [:]
    }

    /// A browser's connection, as the feed knows it.
    private struct Connection {
        var peer: String
        /// Closes the connection: a dropped browser's response is blocked in a write to a peer
        /// that does not read, which only closing the connection ends.
        var close: @Sendable () -> Void
    }

    private let state: SanitizerVisibleMutex<State>
    private let logger: Logger

    /// A feed with no vehicle and no browser yet.
    ///
    /// - Parameters:
    ///   - topics: the fleet's topic layout.
    ///   - maximumVehicles: the most vehicles kept (the oldest heard-from is forgotten).
    ///   - trailWindow: how far back (by fix time) each vehicle's trail reaches.
    ///   - limits: when a slow browser is dropped.
    package init(
        topics: FleetTopics = .default, maximumVehicles: Int = FleetState.defaultMaximumVehicles, trailWindow: Duration = .seconds(300),
        limits: BrowserQueueLimits = .init(), logger: Logger
    ) {
        state = SanitizerVisibleMutex(
            State(
                fleet: FleetState(topics: topics, maximumVehicles: maximumVehicles), trails: VehicleTrails(window: trailWindow),
                queues: BrowserQueues(limits: limits)))
        self.logger = logger
    }

    /// Folds one event from the subscription in, received at `now`, and queues its vehicle for
    /// every browser.
    package func apply(_ event: FleetEvent, at now: UTCTimestamp) {
        state.withLock { s in
            let evicted = s.fleet.evictedCount
            s.fleet.apply(event, at: now)
            if case .fix(let vehicle, _, let fix) = event, s.fleet[vehicle]?.fix == fix {
                s.trails.record(fix, of: vehicle)
            }
            if s.fleet.evictedCount != evicted || s.trails.count > s.fleet.count {
                let fleet = s.fleet
                s.trails.prune { fleet[$0] != nil }
            }
            if let vehicle = event.vehicle, s.fleet[vehicle] != nil { s.queues.enqueue(vehicle) }
        }
    }

    /// The fleet now, for `/api/vehicles`.
    package func fleet() -> (FleetState, VehicleTrails) {
        state.withLock { ($0.fleet, $0.trails) }
    }

    /// Registers a browser (from `peer`, its address, for the log; `close` closes its
    /// connection, called when it is dropped) and returns its snapshot; `nil` once the feed has
    /// finished or it has its most browsers.
    package func connect(now: UTCTimestamp, peer: String = "-", close: @escaping @Sendable () -> Void = {}) -> Snapshot? {
        state.withLock { s in
            guard let id = s.queues.add() else { return nil }
            s.connections[id] = Connection(peer: peer, close: close)
            return Snapshot(id: id, fleet: s.fleet, trails: s.trails, now: now)
        }
    }

    /// The next batch of browser `id`: the vehicles changed since its last one, as they are at
    /// the flush; `nil` when the browser is gone. Cancellation ends the browser.
    package func next(_ id: Int) async -> Batch? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: Waiter) in
                let ready: Batch?? = state.withLock { s in
                    if Task.isCancelled {
                        _ = s.queues.remove(id)
                        s.connections[id] = nil
                        return .some(nil)
                    }
                    switch s.queues.next(id, waiter: waiter) {
                    case .wait: return nil
                    case .end: return .some(nil)
                    case .deliver(let keys): return .some(Self.batch(keys, in: s.fleet))
                    }
                }
                if let ready { waiter.resume(returning: ready) }
            }
        } onCancel: {
            disconnect(id)
        }
    }

    /// Forgets browser `id` (its connection ended).
    package func disconnect(_ id: Int) {
        state.withLock { s in
            s.connections[id] = nil
            return s.queues.remove(id)
        }?.resume(returning: nil)
    }

    /// One flush tick: every ready browser gets its batch; slow browsers are dropped, their
    /// connections closed, and logged (at info, the level a user sees by default; a library logs
    /// no higher).
    package func flush(now: UTCTimestamp) {
        let (deliveries, drops) = state.withLock { s in
            let actions = s.queues.flush()
            let deliveries = actions.deliveries.map { delivery in
                (delivery.waiter, Batch(vehicles: delivery.batch.compactMap { s.fleet[$0] }, now: now))
            }
            let drops = actions.drops.map { drop in
                (drop, s.connections.removeValue(forKey: drop.id) ?? Connection(peer: "-", close: {}))
            }
            return (deliveries, drops)
        }
        for (waiter, batch) in deliveries { waiter.resume(returning: batch) }
        for (drop, connection) in drops {
            connection.close()
            logger.info(
                "Dropped a slow browser",
                metadata: [
                    "http.peer": "\(connection.peer)", "map.browser": "\(drop.id)", "map.reason": "\(drop.reason.rawValue)",
                    "map.pending": "\(drop.pending)",
                ])
        }
    }

    /// Ends every browser's stream; browsers connecting later are refused.
    package func finish() {
        let waiters = state.withLock { $0.queues.finish() }
        for waiter in waiters { waiter.resume(returning: nil) }
    }

    /// The browsers connected.
    package var browserCount: Int { state.withLock { $0.queues.count } }

    private static func batch(_ keys: [VehicleID], in fleet: FleetState) -> Batch {
        Batch(vehicles: keys.compactMap { fleet[$0] }, now: .wallClockNow)
    }
}
