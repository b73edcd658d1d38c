import EdgeCore
import FleetProtocol
import FleetcastTestSupport
import GNSS
import Logging
import Testing

/// The publisher's decisions, driven with plain values: no tasks, no clocks, no broker.
/// Instants are chosen by the test. (The waits on them are the edge state's: `EdgeStateTests`.)
@Suite("Publisher state")
struct PublisherStateTests {
    typealias State = PublisherState

    static let start = ContinuousClock.now

    private func makeState(
        statusInterval: Duration = .seconds(10), policy: ReportingPolicy = ReportingPolicy(),
        maximumFixClockOffset: Duration? = nil, degradedAtOpen: Bool = false
    ) -> State {
        State(
            settings: .init(
                statusInterval: statusInterval, initialRetryDelay: .milliseconds(250), maxRetryDelay: .seconds(10),
                retryJitter: 0, maximumFixClockOffset: maximumFixClockOffset, degradedAtOpen: degradedAtOpen),
            policy: policy, now: Self.start)
    }

    private func at(_ seconds: Int) -> ContinuousClock.Instant { Self.start + .seconds(seconds) }

    private static let heading = Heading(trueHeading: 90, source: .hdt)

    // MARK: Intake

    @Test("a fix with a position is published and the GNSS state becomes fixing, once")
    func fixPublished() {
        var state = makeState()
        let fix = Fixes.fix(at: 0)
        let first = state.receive(.fix(fix), clocks: nil, at: at(0))
        #expect(first.publish.isEmpty, "the run's first waits for a heading of its instant: nothing is known yet")
        #expect(first.gnssChange == .fixing)
        let second = state.receive(.fix(Fixes.fix(at: 1)), clocks: nil, at: at(1))
        #expect(second.publish == [.fix(fix), .fix(Fixes.fix(at: 1))], "none came: it goes, and no fix waits again")
        #expect(second.gnssChange == nil, "no change, no status")
        #expect(state.counters.fixesReceived == 2)
        #expect(state.gnss == .fixing)
    }

    @Test("the run's first instant is one message: a heading that comes first waits for its fix, across the source's streaming state")
    func firstInstantJoined() {
        var state = makeState()
        let heading = Heading(time: Fixes.time(0), trueHeading: 90, source: .hdt)
        #expect(state.receive(.heading(heading), clocks: nil, at: at(0)).publish.isEmpty, "nothing known yet: it waits")
        // A source says `streaming` before its first fix (after a heading that came first).
        #expect(state.receive(.state(.streaming), clocks: nil, at: at(0)).publish.isEmpty, "still waiting")
        var joined = Fixes.fix(at: 0)
        joined.heading = heading
        #expect(state.receive(.fix(Fixes.fix(at: 0)), clocks: nil, at: at(0)).publish == [.fix(joined)], "one message, seq 1 on …/fix")
    }

    @Test("a fix without a position is counted, not published, and the GNSS state says no-fix")
    func noFix() {
        var state = makeState()
        let intake = state.receive(.fix(Fixes.fix(at: 0, mode: .noFix)), clocks: nil, at: at(0))
        #expect(intake.publish.isEmpty)
        #expect(intake.gnssChange == .noFix)
        #expect(state.counters.fixesWithoutPosition == 1)
    }

    @Test("the reporting policy holds fixes and headings back, and counts them")
    func policySkips() {
        var state = makeState(policy: ReportingPolicy(minInterval: 10))
        #expect(state.receive(.fix(Fixes.fix(at: 0)), clocks: nil, at: at(0)).publish.isEmpty, "the first waits for a partner")
        #expect(
            state.receive(.fix(Fixes.fix(at: 1)), clocks: nil, at: at(1)).publish == [.fix(Fixes.fix(at: 0))], "then goes; fix 1 is skipped"
        )
        #expect(state.counters.fixesSkippedByPolicy == 1)
        #expect(state.receive(.heading(Self.heading), clocks: nil, at: at(1)).publish == [.heading(Self.heading)])
        #expect(state.counters.headingsReceived == 1)
    }

    @Test("source states move the GNSS state; a failing source is warned about once, its recovery noticed")
    func sourceStates() {
        var state = makeState()
        #expect(state.receive(.state(.connecting), clocks: nil, at: at(0)).gnssChange == nil, "still starting")
        let lost = state.receive(.state(.reconnecting(reason: "gone", delay: .seconds(1))), clocks: nil, at: at(0))
        #expect(lost.gnssChange == .sourceLost)
        #expect(lost.sourceReport == .failing(reason: "gone"))
        let again = state.receive(.state(.reconnecting(reason: "gone", delay: .seconds(1))), clocks: nil, at: at(1))
        #expect(again.sourceReport == nil, "not one warning per retry")
        let back = state.receive(.state(.streaming), clocks: nil, at: at(2))
        #expect(back.gnssChange == .fixing)
        #expect(back.sourceReport == .recovered(attempts: 2, duration: .seconds(2)))
        #expect(state.receive(.state(.noFix), clocks: nil, at: at(3)).gnssChange == .noFix)
        #expect(state.receive(.state(.ended), clocks: nil, at: at(4)).gnssChange == nil)
    }

    @Test("a fix far from a synchronized clock is refused, counted and logged once; the status carries the count")
    func implausibleFix() {
        var state = makeState(maximumFixClockOffset: .seconds(900))
        let fix = Fixes.fix(at: 0)
        let tomorrow = UTCTimestamp(millisecondsSince1970: fix.time.millisecondsSince1970 - 86_400_000)
        let refused = state.receive(.fix(fix), clocks: (tomorrow, true), at: at(0))
        #expect(refused.publish.isEmpty)
        #expect(refused.fixTimeLog != nil)
        #expect(state.counters.fixesImplausible == 1)
        let quiet = state.receive(.fix(Fixes.fix(at: 1)), clocks: (tomorrow, true), at: at(1))
        #expect(quiet.publish.isEmpty && quiet.fixTimeLog == nil, "said once per run")
        let unsynchronized = state.receive(.fix(Fixes.fix(at: 2)), clocks: (tomorrow, false), at: at(2))
        #expect(unsynchronized.fixTimeLog == .accepting(refused: 2))
        #expect(
            state.releaseOverdue(at: at(3)).publish == [.fix(Fixes.fix(at: 2))],
            "an unsynchronized clock does not judge: it goes (the run's first, after its wait for a partner)")
        let status = state.status(force: true, backlog: 0, drops: .init(), storage: nil, at: at(2))
        #expect(status?.implausible == 2)
    }

    @Test("after finish events are ignored and no status is due")
    func finishedIgnores() {
        var state = makeState()
        _ = state.finish(at: at(0))
        let intake = state.receive(.fix(Fixes.fix(at: 0)), clocks: nil, at: at(0))
        #expect(intake.publish.isEmpty && intake.gnssChange == nil)
        #expect(state.counters.fixesReceived == 0)
        #expect(state.status(force: true, backlog: 0, drops: .init(), storage: nil, at: at(0)) == nil)
    }

    // MARK: Sends and retries

    @Test("an outage is logged once at its first failure's level, and its end at the same level")
    func outageLoggedOnce() {
        var state = makeState()
        #expect(state.sendFailed(level: .debug) == .debug)
        #expect(state.sendFailed(level: .info) == nil, "once per outage")
        #expect(state.counters.sendFailures == 2)
        #expect(state.sendSucceeded(count: 1, statuses: 0) == .debug, "the end, at the start's level")
        #expect(state.sendSucceeded(count: 3, statuses: 1, backlog: 3) == nil)
        #expect(state.counters.published == 4)
        #expect(state.counters.backlogPublished == 3)
        #expect(state.counters.statusesPublished == 1)
        #expect(state.sendFailed(level: .info) == .info, "a new outage is said again")
    }

    @Test("a refusal is said once per topic until a new connection (a retry, or sending resumed after an outage)")
    func refusalsOncePerConnection() {
        var state = makeState()
        #expect(state.refused(topic: "fleet/v/fix") == true)
        #expect(state.refused(topic: "fleet/v/fix") == false)
        #expect(state.refused(topic: "fleet/v/heading") == true)
        _ = state.retryNow()
        #expect(state.refused(topic: "fleet/v/fix") == true)
        _ = state.sendSucceeded(count: 1, statuses: 0)
        #expect(state.refused(topic: "fleet/v/fix") == false, "a success without an outage is the same connection")
        _ = state.sendFailed(level: .info)
        _ = state.sendSucceeded(count: 1, statuses: 0)
        #expect(state.refused(topic: "fleet/v/fix") == true)
    }

    @Test("a back-off grows while sends fail and starts over after a success, per loop")
    func backoffGrowsAndResets() {
        var state = makeState()
        #expect(state.retryWait(.backlog).delay == .milliseconds(250))
        #expect(state.retryWait(.backlog).delay == .milliseconds(500))
        #expect(state.retryWait(.backlog).delay == .seconds(1))
        #expect(state.retryWait(.live).delay == .milliseconds(250), "each loop has its own")
        _ = state.sendSucceeded(count: 1, statuses: 0)
        #expect(state.retryWait(.backlog).delay == .milliseconds(250), "a success since: from the start")
        for _ in 0..<10 { _ = state.retryWait(.backlog) }
        #expect(state.retryWait(.backlog).delay == .seconds(10), "capped")
    }

    @Test("the live loop backs off only after a live send failed, once per failure")
    func liveBackOff() {
        var state = makeState()
        #expect(state.liveRetryWait() == nil)
        state.liveSendFailed()
        #expect(state.liveRetryWait() == .init(delay: .milliseconds(250), since: 0))
        state.liveRetried()
        #expect(state.liveRetryWait() == nil)
    }

    @Test("a retryNow between a live failure and the live loop's back-off ends that back-off at once")
    func retryNowBeforeTheBackOffBegins() {
        var state = makeState()
        state.liveSendFailed()
        _ = state.retryNow()  // the link is back before the live loop decides to back off
        let wait = state.liveRetryWait()
        #expect(wait?.since == 0, "the generation of the failure, not of the decision")
        #expect(state.retryGeneration != wait?.since, "a back-off waiting for a retry since then ends at once")
    }

    @Test("a refused backlog waits five minutes or until a new connection")
    func refusedBacklogWait() {
        var state = makeState()
        #expect(state.refusedBacklogRetryWait() == .init(delay: .seconds(300), since: 0))
        _ = state.retryNow()
        #expect(state.refusedBacklogRetryWait().since == 1)
    }

    // MARK: Lifecycle

    @Test("finish stops the intake, once; an intake started after it is stopped by its starter")
    func finishStopsTheIntake() {
        var state = makeState()
        #expect(state.intakeStarted(stop: {}) == false)
        let actions = state.finish(at: at(0))
        #expect(actions.stopIntake != nil)
        #expect(state.finishing)
        let again = state.finish(at: at(0))
        #expect(again.stopIntake == nil, "idempotent")
        #expect(state.intakeStarted(stop: {}) == true)
    }

    // MARK: Store

    @Test("a failing store is announced once per five minutes, its recovery once after an announcement")
    func storageAnnouncements() {
        var state = makeState()
        #expect(state.commitFailed(newProblem: true, at: at(0)) == true)
        #expect(state.commitFailed(newProblem: false, at: at(1)) == false, "the same problem")
        #expect(state.committed(recovered: true) == true, "writable again, said")
        #expect(state.commitFailed(newProblem: true, at: at(60)) == false, "flapping: not again within 5 minutes")
        #expect(state.committed(recovered: true) == false, "its recovery not said either")
        #expect(state.commitFailed(newProblem: true, at: at(301)) == true)
        #expect(state.counters.commits == 2)
        #expect(state.committed(recovered: false) == false)
    }

    @Test("a store degraded from the start is not announced again")
    func degradedAtOpen() {
        var state = makeState(degradedAtOpen: true)
        #expect(state.commitFailed(newProblem: true, at: at(0)) == false)
    }

    @Test("the sync loop's activity is what the watchdog reads")
    func syncActivity() {
        var state = makeState()
        #expect(state.syncLoopActivity == Self.start)
        state.syncLoopRan(at: at(5))
        #expect(state.syncLoopActivity == at(5))
    }

    // MARK: Status

    @Test("a forced status goes at once; counts that moved go at most once per status interval")
    func statusCadence() {
        var state = makeState(statusInterval: .seconds(10))
        #expect(state.status(force: false, backlog: 5, drops: .init(), storage: nil, at: at(0)) == nil, "nothing said yet to differ from")
        let first = state.status(force: true, backlog: 5, drops: .init(), storage: nil, at: at(0))
        #expect(first == .init(gnss: .starting, backlog: 5, drops: .init(), storage: nil, implausible: 0))
        #expect(state.status(force: false, backlog: 5, drops: .init(), storage: nil, at: at(20)) == nil, "nothing moved")
        #expect(state.status(force: false, backlog: 7, drops: .init(), storage: nil, at: at(5)) == nil, "too soon")
        #expect(state.status(force: false, backlog: 7, drops: .init(), storage: nil, at: at(10))?.backlog == 7)
        #expect(state.status(force: false, backlog: 8, drops: .init(), storage: nil, at: at(11)) == nil)
        #expect(state.status(force: true, backlog: 8, drops: .init(), storage: "disk full", at: at(12))?.storage == "disk full")
        var drops = VehicleStatus.Drops()
        drops.full = 3
        #expect(state.status(force: false, backlog: 8, drops: drops, storage: "disk full", at: at(22))?.drops == drops)
    }
}
