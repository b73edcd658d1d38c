import FleetProtocol
import GNSS

/// Which days the track history takes a vehicle's messages into, and which daily partitions a
/// batch may make: the recorder's bounds per vehicle, not only per fleet, so that one vehicle's
/// forged times cannot make the fleet side do much.
///
/// A day is taken when its partition exists. A missing one is made only
/// - from the first day kept on: retention's horizon (`--retention`), or, when history is kept
///   for ever, ``maximumDaysBehindWithoutRetention`` days before the recorder's clock;
/// - up to ``maximumDaysAhead`` days after the recorder's clock;
/// - while fewer than ``maximumPartitions`` exist (more than the days between those two bounds,
///   so no sender can reach it alone);
/// - and while the vehicle that needs it has not made ``newPartitionsPerVehiclePerDay`` already
///   within the last day (a bucket refilled continuously; the recorder records who made each
///   partition, and a restarted one starts each vehicle with what it had left: ``spent(_:by:at:)``).
///
/// A plain value: the caller passes the recorder's clock in and makes the partitions it names.
public struct HistoryAdmission: Sendable {
    /// The verdict on one vehicle's day.
    public enum Verdict: Sendable, Hashable, CaseIterable {
        /// Its partition exists, or is made now.
        case stored
        /// Before the first day retention keeps.
        case olderThanRetention
        /// More than ``HistoryAdmission/maximumDaysBehindWithoutRetention`` days before the
        /// recorder's clock while history is kept for ever.
        case olderThanHorizon
        /// More than ``HistoryAdmission/maximumDaysAhead`` days after the recorder's clock.
        case aheadOfClock
        /// A day no partition can name (outside years 1–9999), or one past
        /// ``HistoryAdmission/maximumPartitions``.
        case noPartition
        /// The vehicle has made its ``HistoryAdmission/newPartitionsPerVehiclePerDay`` new
        /// partitions within the last day.
        case overVehicleBudget
    }

    /// One vehicle's day.
    public struct VehicleDay: Sendable, Hashable {
        /// The vehicle.
        public var vehicle: VehicleID
        /// The day.
        public var day: HistoryDay

        /// A vehicle's day.
        public init(_ vehicle: VehicleID, _ day: HistoryDay) {
            self.vehicle = vehicle
            self.day = day
        }
    }

    /// The most days after the recorder's clock a message may be timed and still get its day's
    /// partition: today and the next two (a receiver's clock may run ahead of the server's by a
    /// little, never by days).
    public static let maximumDaysAhead: Int64 = 2

    /// How far back a day may lie when history is kept for ever (`--retention forever`): 3,650
    /// days, ten years. An older message is not stored (counted, and named); a recording older
    /// than that is recorded with a retention, or not at all.
    public static let maximumDaysBehindWithoutRetention: Int64 = 3_650

    /// The most daily partitions of each table the recorder creates: more than the days between
    /// the two bounds above, so that no sender can use them up.
    public static let maximumPartitions = 4_000

    /// The most new partitions one vehicle may have made within any day: 32 (a month of
    /// backlog at once; a vehicle away longer has the rest set aside, and replayed later).
    public static let newPartitionsPerVehiclePerDay = 32

    /// The most vehicles whose spent budget is remembered; full buckets are forgotten first.
    static let maximumBudgets = 100_000

    /// Days known to have their partition; `nil` until the caller has read them.
    public var known: Set<HistoryDay>?
    /// The first day kept, if retention applies.
    public var keptFrom: HistoryDay?
    /// Per vehicle that made partitions lately: tokens left, and when counted (ms since 1970).
    private var budgets: [VehicleID: (tokens: Double, at: Int64)] = [:]
    /// The vehicle each partition named by the last ``admit(_:now:force:)`` is charged to.
    public private(set) var charges: [HistoryDay: VehicleID] = [:]

    /// Nothing known yet.
    public init(known: Set<HistoryDay>? = nil, keptFrom: HistoryDay? = nil) {
        self.known = known
        self.keptFrom = keptFrom
    }

    /// The first day a message may lie on at `now`: retention's horizon, or
    /// ``maximumDaysBehindWithoutRetention`` days back.
    public func firstDay(now: UTCTimestamp) -> HistoryDay {
        keptFrom ?? HistoryDay(now).adding(-Self.maximumDaysBehindWithoutRetention)
    }

    /// Judges `days` at `now`: each vehicle's day gets a verdict, and `missing` names the
    /// partitions to make (sorted), charged to the vehicles that needed them. `force` (the
    /// partitions made ahead, and the move of rows already stored) ignores the clock, the
    /// partition limit and the budgets, never retention.
    public mutating func admit(
        _ days: some Sequence<VehicleDay>, now: UTCTimestamp, force: Bool = false
    ) -> (
        verdicts: [VehicleDay: Verdict], missing: [HistoryDay]
    ) {
        let today = HistoryDay(now)
        charges = [:]
        var verdicts: [VehicleDay: Verdict] = [:]
        var missing: Set<HistoryDay> = []
        let known = self.known ?? []
        let first = firstDay(now: now)
        for key in days where verdicts[key] == nil {
            let day = key.day
            if let kept = keptFrom, day < kept {
                verdicts[key] = .olderThanRetention
            } else if !day.isNameable {
                verdicts[key] = .noPartition
            } else if known.contains(day) || missing.contains(day) {
                verdicts[key] = .stored
            } else if force {
                verdicts[key] = .stored
                missing.insert(day)
            } else if day > today.adding(Self.maximumDaysAhead) {
                verdicts[key] = .aheadOfClock
            } else if day < first {
                verdicts[key] = .olderThanHorizon
            } else if known.count + missing.count >= Self.maximumPartitions {
                verdicts[key] = .noPartition
            } else if take(key.vehicle, now: now.millisecondsSince1970) {
                verdicts[key] = .stored
                missing.insert(day)
                charges[day] = key.vehicle
            } else {
                verdicts[key] = .overVehicleBudget
            }
        }
        return (verdicts, missing.sorted())
    }

    /// Takes into account that `vehicle` made `count` partitions within the last day, the last
    /// at `at` (ms since 1970): what a recorder finds recorded at its start, so that a restart
    /// does not give a vehicle a full budget again (the retained batch that spent it comes back).
    public mutating func spent(_ count: Int, by vehicle: VehicleID, at: Int64) {
        let capacity = Double(Self.newPartitionsPerVehiclePerDay)
        budgets[vehicle] = (max(0, capacity - Double(count)), at)
    }

    /// Records that `days` now have their partitions.
    public mutating func made(_ days: some Sequence<HistoryDay>) {
        known = (known ?? []).union(days)
    }

    /// Takes one token of `vehicle`'s bucket at `now` (ms), refilled at
    /// ``newPartitionsPerVehiclePerDay`` a day; whether there was one.
    private mutating func take(_ vehicle: VehicleID, now: Int64) -> Bool {
        let capacity = Double(Self.newPartitionsPerVehiclePerDay)
        var bucket = budgets[vehicle] ?? (capacity, now)
        let elapsed = Double(max(0, now &- bucket.at))
        bucket.tokens = min(capacity, bucket.tokens + elapsed * capacity / Double(HistoryDay.milliseconds))
        bucket.at = max(bucket.at, now)
        guard bucket.tokens >= 1 else {
            budgets[vehicle] = bucket
            return false
        }
        bucket.tokens -= 1
        if budgets[vehicle] == nil && budgets.count >= Self.maximumBudgets { forgetFullBuckets(now: now) }
        budgets[vehicle] = bucket
        return true
    }

    /// Forgets the vehicles whose buckets have refilled (they would start full anyway).
    private mutating func forgetFullBuckets(now: Int64) {
        let capacity = Double(Self.newPartitionsPerVehiclePerDay)
        budgets = budgets.filter { _, bucket in
            bucket.tokens + Double(max(0, now &- bucket.at)) * capacity / Double(HistoryDay.milliseconds) < capacity
        }
    }
}
