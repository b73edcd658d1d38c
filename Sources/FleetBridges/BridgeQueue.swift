import FleetCore
import FleetProtocol
import FleetcastCore
import Logging
import MQTT

/// The bridge's pending output, shared by its reading task (which translates every event at
/// once, so the subscription's buffer never fills behind a slow broker) and its publishing
/// task: a ``BridgeQueueState`` under a lock. Each call decides under the lock and then acts
/// (resumes the publisher, logs) after releasing it.
package final class BridgeQueue: Sendable {
    /// A slot: a topic, retained or not (OwnTracks' last will shares the location's topic, and
    /// must not replace the retained location).
    package struct Slot: Hashable, Sendable {
        var topic: String
        var retain: Bool
        /// A number of its own for an output that does not coalesce: no other takes its slot.
        var distinct: UInt64? = nil
    }

    package typealias State = BridgeQueueState<VehicleID, Slot, FleetBridgeOutput, Waiter<FleetBridgeOutput?>>

    private let state: SanitizerVisibleMutex<State>
    private let logger: Logger
    package let limits: BridgeQueueLimits

    package init(limits: BridgeQueueLimits, logger: Logger) {
        state = SanitizerVisibleMutex(State(limits: limits))
        self.logger = logger
        self.limits = limits
    }

    /// Whether `vehicle`'s events are taken (see ``BridgeQueueState/admit(_:at:)``).
    package func admit(_ vehicle: VehicleID, at now: Duration) -> Bool {
        let action = state.withLock { $0.admit(vehicle, at: now) }
        if let ended = action.endedEpisode { logEpisodeEnd(ended) }
        if let warning = action.warning { log(warning) }
        return action.admitted
    }

    /// Queues `output` for the publisher, coalesced with what is pending for its vehicle.
    package func enqueue(_ output: FleetBridgeOutput, at now: Duration) {
        let action = state.withLock {
            var slot = Slot(topic: output.message.topic, retain: output.message.retain)
            if !output.coalesces {
                $0.distinctSlots &+= 1
                slot.distinct = $0.distinctSlots
            }
            return $0.enqueue(output, vehicle: output.vehicle, slot: slot, position: output.position, at: now)
        }
        switch action {
        case .none:
            break
        case .resume(let waiter, let output):
            waiter.resume(returning: output)
        case .stale:
            logger.debug(
                "Bridge output older than one already taken; not published",
                metadata: ["vehicle": "\(output.vehicle)", "mqtt.topic": "\(output.message.topic)"])
        case .dropped(let warning):
            if let warning { log(warning) }
        }
    }

    /// The next output to publish, in round-robin order over the vehicles, waiting while none
    /// is pending; `nil` once ``finish()`` was called and everything was taken, or when the task
    /// is cancelled.
    package func next() async -> FleetBridgeOutput? {
        await suspend(
            returningOnCancel: nil,
            register: { waiter in
                let action = self.state.withLock { $0.next(waiter: waiter, id: waiter.id, cancelled: Task.isCancelled) }
                // `.some(nil)`: go on at once, with the end; `nil`: the waiter is kept.
                switch action {
                case .publish(let output): return .some(output)
                case .end: return .some(nil)
                case .wait: return nil
                }
            },
            cancel: { id in self.state.withLock { $0.cancelWaiting(id: id) } })
    }

    /// No more outputs will come: the publisher takes what is pending, then ends.
    package func finish() {
        let action = state.withLock { $0.finish() }
        action.waiter?.resume(returning: nil)
        if let ended = action.endedEpisode { logEpisodeEnd(ended) }
    }

    /// The totals so far: replaced before publishing, discarded as older, dropped for lack of room.
    package var counts: (coalesced: UInt64, stale: UInt64, dropped: UInt64) {
        state.withLock { ($0.coalescedCount, $0.staleCount, $0.droppedCount) }
    }

    private func log(_ warning: State.DropWarning) {
        logger.warning(
            "Bridge dropping events for lack of room",
            metadata: [
                "vehicle": "\(warning.vehicle)", "bridge.drop.reason": "\(warning.reason.rawValue)",
                "bridge.dropped.total": "\(warning.droppedTotal)",
                // Warned once per episode: the next warning comes after this long without drops.
                "bridge.drop.quiet": "\(limits.dropEpisodeQuietTime)",
            ])
    }

    private func logEpisodeEnd(_ dropped: UInt64) {
        logger.notice("Bridge drops ended", metadata: ["bridge.dropped": "\(dropped)"])
    }
}
