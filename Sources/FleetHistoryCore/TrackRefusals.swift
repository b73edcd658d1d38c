/// Messages `TrackStore.insert(_:)` (FleetHistory) did not store because of their day, by reason; counted
/// since the store was made (all copies of a store share the count). See ``HistoryAdmission``.
public struct TrackRefusals: Sendable, Equatable {
    /// Timed before the first day retention keeps (their day is dropped, or due to be).
    public var olderThanRetention = 0
    /// Timed more than ``HistoryAdmission/maximumDaysBehindWithoutRetention`` days before the
    /// recorder's clock while history is kept for ever.
    public var olderThanHorizon = 0
    /// Timed more than `TrackStore.maximumDaysAhead` days after the recorder's clock (a
    /// clock set ahead, or a forged time): their day gets no partition.
    public var aheadOfClock = 0
    /// Timed on a day without a partition while `TrackStore.maximumPartitions` already exist,
    /// or outside years 1–9999.
    public var noPartition = 0
    /// Timed on a day without a partition while their vehicle had made its
    /// ``HistoryAdmission/newPartitionsPerVehiclePerDay`` (a sender spreading its times over
    /// thousands of days); the recorder sets their messages aside.
    public var overVehicleBudget = 0

    /// Counts of each.
    public init(
        olderThanRetention: Int = 0, olderThanHorizon: Int = 0, aheadOfClock: Int = 0, noPartition: Int = 0, overVehicleBudget: Int = 0
    ) {
        self.olderThanRetention = olderThanRetention
        self.olderThanHorizon = olderThanHorizon
        self.aheadOfClock = aheadOfClock
        self.noPartition = noPartition
        self.overVehicleBudget = overVehicleBudget
    }

    /// All of them.
    public var total: Int { olderThanRetention + olderThanHorizon + aheadOfClock + noPartition + overVehicleBudget }

    /// Counts `n` more of `verdict` (nothing for `.stored`).
    package mutating func count(_ verdict: HistoryAdmission.Verdict, _ n: Int = 1) {
        switch verdict {
        case .stored: break
        case .olderThanRetention: olderThanRetention += n
        case .olderThanHorizon: olderThanHorizon += n
        case .aheadOfClock: aheadOfClock += n
        case .noPartition: noPartition += n
        case .overVehicleBudget: overVehicleBudget += n
        }
    }

    /// Adds `other`'s counts.
    package mutating func add(_ other: TrackRefusals) {
        olderThanRetention += other.olderThanRetention
        olderThanHorizon += other.olderThanHorizon
        aheadOfClock += other.aheadOfClock
        noPartition += other.noPartition
        overVehicleBudget += other.overVehicleBudget
    }
}
