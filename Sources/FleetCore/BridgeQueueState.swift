/// What the bridge has to publish, as a plain value: at most one message per vehicle and slot
/// (a topic, retained or not), coalesced, handed to the publisher round-robin over the
/// vehicles, with a bounded number of vehicles.
///
/// In the house style of `HubState` and `BrowserQueues`: every transition is a `mutating`
/// function returning what the caller must do (resume the publisher's waiter, log a drop);
/// ``BridgeQueue`` keeps it under a lock and does that after releasing it. Generic over the
/// vehicle, slot, message and waiter types, so the tests drive it with plain strings and
/// integers, no tasks. Times are monotonic durations since a fixed origin.
///
/// - Coalescing: a message for a slot that still holds an unpublished one replaces it (and
///   goes to the end of the vehicle's list: the vehicle's messages leave in the order of their
///   latest update). Only the newest matters to a retained topic.
/// - Order: a message with a position older than the newest accepted for its slot (pending or
///   published: ``FleetBridgeOutput/Position/isOlder(than:)``) is discarded, so a slot never goes back.
/// - Fairness: the vehicles with pending messages form a round-robin; ``next(waiter:id:cancelled:)``
///   takes one message from the first and puts it back at the end if it has more. However fast
///   one vehicle updates, every other vehicle with something pending gets a message out within
///   one round.
/// - Bounds: at most ``BridgeQueueLimits/maximumVehicles`` vehicles (a new one beyond is
///   refused, its events dropped) and ``BridgeQueueLimits/maximumSlotsPerVehicle`` pending
///   messages per vehicle, so memory grows with the vehicles and nothing else.
/// - Drops (an event lost for lack of room; a replaced message is not one) are counted in
///   episodes: the first drop after ``BridgeQueueLimits/dropEpisodeQuietTime`` without any
///   returns a ``DropWarning``, and the episode's end (noticed at the next ``admit(_:at:)``
///   that long after its last drop, or at ``finish()``) returns its count.
package struct BridgeQueueState<Vehicle: Hashable, Slot: Hashable, Message, Waiter> {
    package typealias Limits = BridgeQueueLimits
    package typealias Position = FleetBridgeOutput.Position

    /// Why an event was dropped.
    package enum DropReason: String, Sendable, Equatable {
        /// A new vehicle beyond ``BridgeQueueLimits/maximumVehicles``.
        case vehicleLimit = "too many vehicles"
        /// A vehicle with ``BridgeQueueLimits/maximumSlotsPerVehicle`` messages pending, all for
        /// other slots.
        case slotLimit = "too many pending messages for one vehicle"
    }

    /// The first drop of an episode, to be logged at warning.
    package struct DropWarning {
        package var reason: DropReason
        package var vehicle: Vehicle
        /// Events dropped since the start, this one included.
        package var droppedTotal: UInt64
    }

    /// What ``admit(_:at:)`` tells the caller.
    package struct AdmitAction {
        /// Whether the vehicle's events may be translated and enqueued.
        package var admitted: Bool
        /// The vehicle was refused and this drop starts an episode: log it.
        package var warning: DropWarning?
        /// A drop episode ended before this call: how many events it dropped.
        package var endedEpisode: UInt64?
    }

    /// What ``enqueue(_:vehicle:slot:position:at:)`` tells the caller.
    package enum EnqueueAction {
        /// Nothing to do: the message is pending, or it replaced a pending one.
        case none
        /// The publisher was waiting: resume it with this message (it is no longer pending).
        case resume(Waiter, Message)
        /// The message is older than one already accepted for its slot: discarded.
        case stale
        /// The message was dropped for lack of room; log the warning if there is one.
        case dropped(DropWarning?)
    }

    /// What ``next(waiter:id:cancelled:)`` tells the caller.
    package enum NextAction {
        /// Publish this message.
        case publish(Message)
        /// Nothing pending: the waiter is kept until a message or the end.
        case wait
        /// Nothing pending and nothing will come (finished, or the task is cancelled).
        case end
    }

    /// What ``finish()`` tells the caller.
    package struct FinishAction {
        /// The waiting publisher, to resume with the end.
        package var waiter: Waiter?
        /// The open drop episode's count, if one was open.
        package var endedEpisode: UInt64?
    }

    private struct Pending {
        var slot: Slot
        var message: Message
    }

    private struct Entry {
        /// Unpublished messages, at most one per slot, in the order of their latest update.
        var pending: [Pending] = []
        /// Per slot, the newest position accepted (pending or published).
        var newest: [(slot: Slot, position: Position)] = []
        /// Whether the vehicle is in the round-robin (it is exactly when `pending` is not empty).
        var isQueued = false

        func newestPosition(_ slot: Slot) -> Position? {
            newest.first { $0.slot == slot }?.position
        }

        mutating func setNewest(_ position: Position, for slot: Slot) {
            if let index = newest.firstIndex(where: { $0.slot == slot }) {
                newest[index].position = position
            } else {
                newest.append((slot, position))
            }
        }
    }

    /// The open drop episode.
    private struct Episode {
        var lastDrop: Duration
        var dropped: UInt64
    }

    package let limits: Limits
    private var entries: [Vehicle: Entry] = [:]
    /// The vehicles with pending messages, each once, in round-robin order.
    private var rounds = BridgeFIFO<Vehicle>()
    /// The publisher, waiting: only while nothing is pending.
    private var waiting: (id: UInt64, waiter: Waiter)?
    private var episode: Episode?
    private(set) var isFinished = false
    /// Messages pending, over all vehicles.
    package private(set) var pendingCount = 0
    /// Messages replaced by a newer one before they were published, in total.
    package private(set) var coalescedCount: UInt64 = 0
    /// The last number given to an output's own slot (see `BridgeQueue`: an output that does
    /// not coalesce).
    package var distinctSlots: UInt64 = 0
    /// Messages discarded as older than one accepted for their slot, in total.
    package private(set) var staleCount: UInt64 = 0
    /// Events dropped for lack of room, in total.
    package private(set) var droppedCount: UInt64 = 0

    package init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// The vehicles admitted.
    package var vehicleCount: Int { entries.count }

    /// The messages pending for `vehicle`, oldest first.
    package func pending(_ vehicle: Vehicle) -> [Message] { entries[vehicle]?.pending.map(\.message) ?? [] }

    /// Whether `vehicle`'s events are taken: a known vehicle always, a new one while fewer than
    /// ``BridgeQueueLimits/maximumVehicles`` are known (it is then known). Also ends a drop
    /// episode whose last drop is ``BridgeQueueLimits/dropEpisodeQuietTime`` old.
    package mutating func admit(_ vehicle: Vehicle, at now: Duration) -> AdmitAction {
        let ended = endQuietEpisode(at: now)
        if entries[vehicle] != nil { return AdmitAction(admitted: true, endedEpisode: ended) }
        guard entries.count < limits.maximumVehicles else {
            return AdmitAction(admitted: false, warning: recordDrop(.vehicleLimit, vehicle, at: now), endedEpisode: ended)
        }
        entries[vehicle] = Entry()
        return AdmitAction(admitted: true, endedEpisode: ended)
    }

    /// A message to publish for `vehicle` (admitted first if it is new) in `slot`; `position`
    /// orders it against the slot's other messages when it carries a fix.
    package mutating func enqueue(_ message: Message, vehicle: Vehicle, slot: Slot, position: Position?, at now: Duration) -> EnqueueAction
    {
        if entries[vehicle] == nil {
            let admission = admit(vehicle, at: now)
            guard admission.admitted else { return .dropped(admission.warning) }
        }
        guard var entry = entries[vehicle] else { return .none }
        if let position {
            if let newest = entry.newestPosition(slot), position.isOlder(than: newest) {
                staleCount &+= 1
                return .stale
            }
            entry.setNewest(position, for: slot)
        }
        if let index = entry.pending.firstIndex(where: { $0.slot == slot }) {
            entry.pending.remove(at: index)
            pendingCount -= 1
            coalescedCount &+= 1
        } else if entry.pending.count >= limits.maximumSlotsPerVehicle {
            entries[vehicle] = entry
            return .dropped(recordDrop(.slotLimit, vehicle, at: now))
        }
        // A waiting publisher means nothing is pending anywhere: the message goes straight out.
        if let waiting, entry.pending.isEmpty {
            self.waiting = nil
            entries[vehicle] = entry
            return .resume(waiting.waiter, message)
        }
        entry.pending.append(Pending(slot: slot, message: message))
        pendingCount += 1
        if !entry.isQueued {
            entry.isQueued = true
            rounds.append(vehicle)
        }
        entries[vehicle] = entry
        return .none
    }

    /// The publisher is ready for a message: the next vehicle's oldest pending one; otherwise
    /// it waits (its waiter is kept), or, finished or `cancelled`, ends.
    package mutating func next(waiter: Waiter, id: UInt64, cancelled: Bool) -> NextAction {
        if let message = take() { return .publish(message) }
        if isFinished || cancelled { return .end }
        waiting = (id, waiter)
        return .wait
    }

    /// The next message in round-robin order, without waiting; `nil` when none is pending.
    package mutating func take() -> Message? {
        guard let vehicle = rounds.popFirst(), var entry = entries[vehicle], !entry.pending.isEmpty else { return nil }
        let message = entry.pending.removeFirst().message
        pendingCount -= 1
        if entry.pending.isEmpty {
            entry.isQueued = false
        } else {
            rounds.append(vehicle)
        }
        entries[vehicle] = entry
        return message
    }

    /// The waiting publisher's task was cancelled: its waiter, if still kept, to resume with
    /// the end.
    package mutating func cancelWaiting(id: UInt64) -> Waiter? {
        guard let waiting, waiting.id == id else { return nil }
        self.waiting = nil
        return waiting.waiter
    }

    /// No more messages will come: what is pending is still handed out, then
    /// ``next(waiter:id:cancelled:)`` ends.
    package mutating func finish() -> FinishAction {
        isFinished = true
        defer {
            waiting = nil
            episode = nil
        }
        return FinishAction(waiter: waiting?.waiter, endedEpisode: episode?.dropped)
    }

    /// Counts a drop; the first of an episode returns the warning to log.
    private mutating func recordDrop(_ reason: DropReason, _ vehicle: Vehicle, at now: Duration) -> DropWarning? {
        droppedCount &+= 1
        if var open = episode {
            open.dropped &+= 1
            open.lastDrop = now
            episode = open
            return nil
        }
        episode = Episode(lastDrop: now, dropped: 1)
        return DropWarning(reason: reason, vehicle: vehicle, droppedTotal: droppedCount)
    }

    /// Ends the open episode if its last drop is at least the quiet time old; returns its count.
    private mutating func endQuietEpisode(at now: Duration) -> UInt64? {
        guard let open = episode, now - open.lastDrop >= limits.dropEpisodeQuietTime else { return nil }
        episode = nil
        return open.dropped
    }
}

/// The bounds of ``BridgeQueueState``, and when a drop episode ends.
public struct BridgeQueueLimits: Sendable, Equatable {
    /// The most vehicles a bridge takes (default 100,000); a new one beyond is refused and its
    /// events dropped. Each costs the bridge its pending messages and the translator's memory
    /// of it.
    public var maximumVehicles: Int
    /// The most messages pending for one vehicle, each for its own topic (default 8; the
    /// translators use six topics per vehicle at most: Home Assistant's four discovery configs,
    /// its attributes and its zone events, which a vehicle's first fix, or its return, sends at
    /// once).
    public var maximumSlotsPerVehicle: Int
    /// How long without drops ends a drop episode (default 60 s): the next drop is warned
    /// about again.
    public var dropEpisodeQuietTime: Duration

    /// Limits; each at least 1 (the quiet time at least zero).
    public init(maximumVehicles: Int = 100_000, maximumSlotsPerVehicle: Int = 8, dropEpisodeQuietTime: Duration = .seconds(60)) {
        self.maximumVehicles = max(1, maximumVehicles)
        self.maximumSlotsPerVehicle = max(1, maximumSlotsPerVehicle)
        self.dropEpisodeQuietTime = max(.zero, dropEpisodeQuietTime)
    }
}
