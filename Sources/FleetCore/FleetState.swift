import FleetProtocol
import GNSS

/// The fleet as the events so far describe it: one ``VehicleSnapshot`` per vehicle.
///
/// A plain value: fold events in with ``apply(_:at:)``. The shown fix and heading of a vehicle
/// (its live row) never move back: a fix replaces the shown one only if its number is higher
/// (its `seq` in the same numbering run, or a later run; see ``MessageNumber``), or, from a
/// publisher that sends no `seq`, if its time is not older; a ``FleetEvent/backlog(_:)`` entry
/// never replaces it, and only fills the vehicle's `seq` gaps (``VehicleSnapshot/gaps`` counts
/// what is still missing in the current run). Memory stays bounded: at most
/// ``maximumVehicles`` vehicles are kept (a new vehicle beyond that evicts the one heard from
/// least recently, in O(1)), and bad messages are only counted, their payloads never kept.
public struct FleetState: Sendable {
    /// The default cap on vehicles kept.
    public static let defaultMaximumVehicles = 100_000

    /// The most vehicles kept at once.
    public let maximumVehicles: Int
    /// The topic layout, to attribute malformed messages to a vehicle.
    public let topics: FleetTopics
    /// Malformed messages received in total (those on unknown topics included).
    public private(set) var malformedCount: UInt64 = 0
    /// The reason of the last malformed message (at most 200 bytes).
    public private(set) var lastMalformedReason: String?
    /// Vehicles dropped to stay within ``maximumVehicles``.
    public private(set) var evictedCount: UInt64 = 0
    /// Events applied in total.
    public private(set) var eventCount: UInt64 = 0

    private struct Slot {
        var snapshot: VehicleSnapshot
        var older = -1
        var newer = -1
    }

    private var slots: [Slot] = []
    private var index: [VehicleID: Int] = [:]
    private var oldest = -1
    private var newest = -1

    /// An empty fleet.
    ///
    /// - Parameters:
    ///   - topics: the layout of the subscribed topics (default prefix `fleet`).
    ///   - maximumVehicles: the cap on vehicles kept (at least 1).
    public init(topics: FleetTopics = .default, maximumVehicles: Int = Self.defaultMaximumVehicles) {
        self.topics = topics
        self.maximumVehicles = max(1, maximumVehicles)
    }

    /// The number of vehicles kept.
    public var count: Int { index.count }

    /// The snapshot of `vehicle`, if kept.
    public subscript(vehicle: VehicleID) -> VehicleSnapshot? {
        index[vehicle].map { slots[$0].snapshot }
    }

    /// All snapshots, ordered by vehicle id.
    public var vehicles: [VehicleSnapshot] {
        index.values.map { slots[$0].snapshot }.sorted { $0.vehicle < $1.vehicle }
    }

    /// Folds one event in, received at `now` (local wall clock, UTC); `retained`: it came in a
    /// retained message (sent before the subscription), so the numbers it skips are not gaps.
    public mutating func apply(_ event: FleetEvent, at now: UTCTimestamp, retained: Bool = false) {
        eventCount &+= 1
        switch event {
        case .fix(let vehicle, let seq, let fix):
            update(vehicle, now: now) { s in
                s.messages &+= 1
                guard
                    Self.isNewer(seq, time: fix.time, than: s.lastFixSeq, shownTime: s.fix?.time, history: retained, snapshot: &s)
                else { return false }
                s.fix = fix
                s.lastFixSeq = seq ?? s.lastFixSeq
                // The heading of the fix's instant, carried in its message, unless a heading
                // numbered after it is shown already.
                let olderThanShown = seq.flatMap { new in s.lastHeadingSeq.map { new < $0 } } ?? false
                if let heading = fix.heading, !olderThanShown {
                    s.heading = heading
                    s.lastHeadingSeq = seq ?? s.lastHeadingSeq
                }
                return true
            }
        case .heading(let vehicle, let seq, let heading):
            update(vehicle, now: now) { s in
                s.messages &+= 1
                guard
                    Self.isNewer(
                        seq, time: heading.time, than: s.lastHeadingSeq, shownTime: s.heading?.time, history: retained, snapshot: &s)
                else { return false }
                s.heading = heading
                s.lastHeadingSeq = seq ?? s.lastHeadingSeq
                return true
            }
        case .backlog(let entry):
            guard let vehicle = event.vehicle else { return }
            update(vehicle, now: now) { s in
                // History only: closes seq gaps, never touches the shown fix or heading, and,
                // like any late message, does not refresh lastSeen.
                s.messages &+= 1
                s.backlog &+= 1
                if let number = entry.number { s.record(number, history: retained) }
                return false
            }
        case .status(let status):
            update(status.vehicle, now: now) { s in
                s.messages &+= 1
                guard s.status != status else { return false }
                // A new start of a publisher of run 0 (an agent from before numbering runs, or
                // another v1 publisher): its numbering may start lower after a run without a
                // working store, and it says nothing else of it. Judge its messages afresh.
                if status.state == .online, let since = status.since, let old = s.status?.since, since != old,
                    (s.lastFixSeq?.run ?? 0) == 0, (s.lastHeadingSeq?.run ?? 0) == 0, (s.run ?? 0) == 0
                {
                    s.lastFixSeq = nil
                    s.lastHeadingSeq = nil
                    s.sequence = SequenceTracker()
                    s.run = nil
                }
                s.status = status
                return true
            }
        case .malformed(let topic, let reason):
            malformedCount &+= 1
            lastMalformedReason = reason.utf8.count <= 200 ? reason : String(decoding: reason.utf8.prefix(200), as: UTF8.self)
            if let vehicle = topics.parse(topic)?.vehicle, let i = index[vehicle] {
                slots[i].snapshot.malformed &+= 1
            }
        }
    }

    /// Records `number` (when present) and says whether the message is newer than the last one
    /// shown on its channel, by the contract's numbering (``MessageNumber``):
    /// - in the shown message's run, by `seq` alone (a receiver clock that jumps ahead cannot
    ///   freeze the vehicle); a duplicate is never newer;
    /// - a later run is newer;
    /// - an earlier run only when its time is later than the shown one's: a run that began
    ///   while the vehicle's clock was wrong, not a redelivery of the past;
    /// - without a number (not a Fleetcast publisher), by time alone.
    private static func isNewer(
        _ number: MessageNumber?, time: UTCTimestamp?, than last: MessageNumber?, shownTime: UTCTimestamp?, history: Bool,
        snapshot: inout VehicleSnapshot
    ) -> Bool {
        let laterInTime: Bool = {
            guard let time, let shownTime else { return true }
            return time >= shownTime
        }()
        guard let number else { return laterInTime }
        if case .duplicate = snapshot.record(number, history: history) { return false }
        guard let last else { return true }
        if number.run == last.run { return number.seq > last.seq }
        return number.run > last.run || laterInTime
    }

    /// Applies `change` to the vehicle's snapshot, creating it (and evicting the least recently
    /// heard-from vehicle when full) if needed; `change` returns whether the message was new,
    /// which refreshes ``VehicleSnapshot/lastSeen`` and the eviction order.
    private mutating func update(_ vehicle: VehicleID, now: UTCTimestamp, _ change: (inout VehicleSnapshot) -> Bool) {
        let i: Int
        if let existing = index[vehicle] {
            i = existing
        } else {
            i = insert(VehicleSnapshot(vehicle: vehicle, lastSeen: now))
        }
        if change(&slots[i].snapshot) {
            slots[i].snapshot.lastSeen = now
            moveToNewest(i)
        }
    }

    private mutating func insert(_ snapshot: VehicleSnapshot) -> Int {
        let i: Int
        if index.count >= maximumVehicles, oldest >= 0 {
            i = oldest
            unlink(i)
            index[slots[i].snapshot.vehicle] = nil
            evictedCount &+= 1
            slots[i] = Slot(snapshot: snapshot)
        } else {
            i = slots.count
            slots.append(Slot(snapshot: snapshot))
        }
        index[snapshot.vehicle] = i
        link(asNewest: i)
        return i
    }

    private mutating func moveToNewest(_ i: Int) {
        guard newest != i else { return }
        unlink(i)
        link(asNewest: i)
    }

    private mutating func unlink(_ i: Int) {
        let older = slots[i].older, newer = slots[i].newer
        if older >= 0 { slots[older].newer = newer } else { oldest = newer }
        if newer >= 0 { slots[newer].older = older } else { newest = older }
        slots[i].older = -1
        slots[i].newer = -1
    }

    private mutating func link(asNewest i: Int) {
        slots[i].older = newest
        slots[i].newer = -1
        if newest >= 0 { slots[newest].newer = i } else { oldest = i }
        newest = i
    }
}
