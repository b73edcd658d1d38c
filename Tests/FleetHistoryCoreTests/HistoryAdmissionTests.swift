import FleetHistoryCore
import FleetProtocol
import GNSS
import Testing

/// The recorder's bounds per vehicle, as plain values on a virtual clock: what days a vehicle's
/// messages may lie on, and how many partitions it may have made.
@Suite struct HistoryAdmissionTests {
    let now = UTCTimestamp(millisecondsSince1970: 1_795_867_200_000)  // 2026-11-28T12:00:00Z
    var today: HistoryDay { HistoryDay(now) }
    let bomb = VehicleID("bomb")!
    let steady = VehicleID("steady")!

    func days(_ vehicle: VehicleID, _ offsets: some Sequence<Int64>) -> [HistoryAdmission.VehicleDay] {
        offsets.map { HistoryAdmission.VehicleDay(vehicle, today.adding($0)) }
    }

    @Test func aBatchOfThousandsOfDaysMakesAtMostTheVehiclesBudgetAndNeverStopsAnother() {
        var admission = HistoryAdmission(known: Set((-1...3).map { today.adding($0) }))
        // 2,048 fixes one day apart, back from today: within the ten years kept for ever.
        let (verdicts, missing) = admission.admit(days(bomb, (0..<2_048).map { -$0 }), now: now)
        #expect(missing.count == HistoryAdmission.newPartitionsPerVehiclePerDay)
        #expect(verdicts.values.filter { $0 == .overVehicleBudget }.count == 2_048 - 2 - 32)
        #expect(verdicts.values.filter { $0 == .stored }.count == 2 + 32, "today and yesterday exist")
        admission.made(missing)
        // Another vehicle's backlog three days old is not charged to the bomb.
        let (good, made) = admission.admit(days(steady, [0, -3, -4]), now: now)
        #expect(good.values.allSatisfy { $0 == .stored })
        #expect(made == [today.adding(-4), today.adding(-3)].filter { !missing.contains($0) })
        // The bomb's budget refills over a day, continuously.
        let later = UTCTimestamp(millisecondsSince1970: now.millisecondsSince1970 + 6 * 3_600_000)
        let (_, refilled) = admission.admit(days(bomb, (2_000..<2_048).map { -$0 }), now: later)
        #expect(refilled.count == 8, "a quarter of a day: 8 of 32")
    }

    @Test func daysFarBackOrAheadGetNoPartitionWhateverTheBudget() {
        var admission = HistoryAdmission(known: [])
        let back = HistoryAdmission.maximumDaysBehindWithoutRetention
        let (verdicts, missing) = admission.admit(days(bomb, [-back - 1, -back, 2, 3, -1_000_000]), now: now)
        #expect(verdicts[HistoryAdmission.VehicleDay(bomb, today.adding(-back - 1))] == .olderThanHorizon)
        #expect(verdicts[HistoryAdmission.VehicleDay(bomb, today.adding(-back))] == .stored)
        #expect(verdicts[HistoryAdmission.VehicleDay(bomb, today.adding(2))] == .stored)
        #expect(verdicts[HistoryAdmission.VehicleDay(bomb, today.adding(3))] == .aheadOfClock)
        #expect(verdicts[HistoryAdmission.VehicleDay(bomb, today.adding(-1_000_000))] == .noPartition, "before year 1")
        #expect(missing == [today.adding(-back), today.adding(2)])
        // With a retention, its horizon is the bound.
        var retained = HistoryAdmission(known: [], keptFrom: today.adding(-30))
        let (kept, _) = retained.admit(days(steady, [-31, -30]), now: now)
        #expect(kept[HistoryAdmission.VehicleDay(steady, today.adding(-31))] == .olderThanRetention)
        #expect(kept[HistoryAdmission.VehicleDay(steady, today.adding(-30))] == .stored)
        // No sender reaches the fleet-wide limit: the window between the bounds is narrower.
        #expect(Int(back + HistoryAdmission.maximumDaysAhead + 1) < HistoryAdmission.maximumPartitions)
    }

    @Test func forcedDaysIgnoreTheClockAndTheBudgetsButNotRetention() {
        var admission = HistoryAdmission(known: [], keptFrom: today.adding(-30))
        let (verdicts, missing) = admission.admit(days(bomb, [-31, 1, 2, 3, 200]), now: now, force: true)
        #expect(verdicts[HistoryAdmission.VehicleDay(bomb, today.adding(-31))] == .olderThanRetention)
        #expect(missing == [1, 2, 3, 200].map { today.adding($0) })
        // Nothing was charged: the vehicle still has its whole budget.
        let (_, charged) = admission.admit(days(bomb, (-29...0).map { $0 }), now: now)
        #expect(charged.count == 30)
    }

    @Test func aRestartedRecorderStartsAVehicleWithTheBudgetItHadLeft() {
        var admission = HistoryAdmission(known: [])
        // Recorded at the start: the bomb made 30 partitions an hour ago.
        admission.spent(30, by: bomb, at: now.millisecondsSince1970 - 3_600_000)
        let (_, missing) = admission.admit(days(bomb, (10..<60).map { -$0 }), now: now)
        #expect(missing.count == 3, "2 left and about 1.3 refilled in the hour: \(missing.count)")
        #expect(Set(admission.charges.values) == [bomb] && Set(admission.charges.keys) == Set(missing))
    }
}
