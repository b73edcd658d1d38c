import EdgeCore
import FleetProtocol
import FleetcastTestSupport
import GNSS
import MQTTCore
import OutboxCore
import Testing

/// The edge's scenarios on a virtual clock: an outage and its back-offs, a backlog drained at its
/// rate, the status cadence, a batched uplink's window. No task, no timer, no broker: the test
/// carries out the state's actions itself, chooses every instant, and fires the timer at the
/// instant the state asked for (``EdgeActions/schedule``), so minutes of an agent's life take
/// microseconds.
@Suite("Edge state on a virtual clock")
struct EdgeStateTests {
    struct Signal: EdgeWaiter, Equatable {
        let id: UInt64
    }

    typealias Edge = EdgeState<String, Signal>

    static let start = ContinuousClock.now
    /// The wall clock at `start` (the records' storage time).
    static let wallStart = Fixes.time(0).millisecondsSince1970

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { Self.start + .milliseconds(milliseconds) }

    /// The wall clock at `instant`.
    private func wall(_ instant: ContinuousClock.Instant) -> Int64 {
        let elapsed = Self.start.duration(to: instant).components
        return Self.wallStart + elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
    }

    private func makeEdge(_ configure: (inout PublisherSettings) -> Void = { _ in }) -> Edge {
        var settings = PublisherSettings(vehicle: VehicleID("van-1")!)
        configure(&settings)
        return Edge(
            settings: settings, opening: OutboxOpening(count: 0, bytes: 0, nextSeq: 1, uncleanSkipped: 0, reservedSeq: 10_000),
            run: 1, degraded: nil, now: Self.start)
    }

    /// A fix of the drive `seconds` in, received at that instant. The run's first fix waits for
    /// a heading of its instant (nothing is known yet; these drives have none): the source's
    /// next event that is not its partner, here a state, lets it go at once.
    private func receive(_ edge: inout Edge, second: Int) -> Edge.Actions {
        let first = edge.decisions.counters.fixesReceived == 0
        var actions = edge.receive(
            .fix(Fixes.fix(at: Double(second), east: Double(second) * 12.5)), clocks: nil,
            wallMilliseconds: Self.wallStart + Int64(second) * 1000, at: at(second * 1000))
        if first {
            let released = edge.receive(
                .state(.ended), clocks: nil, wallMilliseconds: Self.wallStart + Int64(second) * 1000, at: at(second * 1000))
            actions.live += released.live
            actions.signals += released.signals
        }
        return actions
    }

    /// The store in memory: what commits wrote, what the drain reads.
    struct Store {
        var records: [UInt64: OutboxRecord] = [:]

        mutating func write(_ commit: OutboxCommit) -> OutboxCommitResult {
            for record in commit.inserts { records[record.seq] = record }
            for seq in commit.deletes { records[seq] = nil }
            return OutboxCommitResult(count: records.count, bytes: records.values.reduce(0) { $0 + $1.payload.count })
        }

        func read(_ read: Edge.DrainRead) -> [OutboxRecord] {
            let request = read.request
            let wanted = records.values.filter { $0.seq > request.after && !request.excluding.contains($0.seq) }
            return Array(wanted.sorted { $0.seq < $1.seq }.prefix(read.limit))
        }
    }

    /// The sync loop's tick, its commit written.
    @discardableResult
    private func sync(_ edge: inout Edge, _ store: inout Store, at instant: ContinuousClock.Instant) -> Edge.Actions {
        var (actions, step) = edge.tick(wallMilliseconds: Self.wallStart, at: instant)
        if case .commit(let commit) = step {
            let committed = edge.committed(commit, store.write(commit), at: instant)
            actions.status = actions.status ?? committed.status
        }
        return actions
    }

    /// The drain's steps from `step` on, until it sends or waits: reads are served by `store`.
    private func drain(
        _ edge: inout Edge, _ store: Store, from step: Edge.DrainStep, at instant: ContinuousClock.Instant
    )
        -> Edge.DrainStep
    {
        var step = step
        while true {
            switch step {
            case .read(let read):
                step = edge.drainRead(read, .success(store.read(read)), wallMilliseconds: wall(instant), at: instant).1
            case .pack(let pack):
                let batch = edge.drainBatcher.batch(pack.records, maximumBytes: pack.maximumBytes)
                step = edge.drainPacked(pack, batch, at: instant).1
            default:
                return step
            }
        }
    }

    private func nextItem(_ edge: inout Edge) -> OutboxLiveItem? {
        edge.nextLive() ?? nil
    }

    private func liveSeq(_ edge: inout Edge) -> UInt64? {
        guard case .record(let record)?? = edge.nextLive() else { return nil }
        return record.seq
    }

    // MARK: Outage

    @Test("an outage: live sending holds for the back-off, the timer ends it, the back-off grows and starts over after a success")
    func outageBacksOff() throws {
        var edge = makeEdge {
            $0.initialRetryDelay = .seconds(1)
            $0.maxRetryDelay = .seconds(8)
        }
        #expect(receive(&edge, second: 0).status?.gnss == .fixing, "the first fix changes the GNSS state: a status is due")
        let first = try #require(nextItem(&edge))
        let failed = edge.liveSent(first, topic: "fleet/van-1/fix", .failure(MQTTError.notConnected), at: at(100))
        let retryAt = try #require(failed.schedule, "the back-off is a timer")
        #expect(retryAt >= at(900) && retryAt <= at(1100), "1 s, less up to 20 % jitter")
        guard case .sendFailed(let level, let topic, _)? = failed.logs.first else {
            Issue.record("the failure is logged: \(failed.logs)")
            return
        }
        #expect(level == .debug && topic == "fleet/van-1/fix", "not connected: the MQTT client says so itself")

        _ = receive(&edge, second: 1)
        #expect(liveSeq(&edge) == nil, "held while backing off")
        let early = edge.timerFired(at: at(500))
        #expect(liveSeq(&edge) == nil, "a timer firing before the back-off's end (another wait's) ends nothing")
        #expect(early.schedule == retryAt, "and asks again for the instant still waited for")
        _ = edge.timerFired(at: retryAt)
        #expect(liveSeq(&edge) == 2, "then the newest fix goes; fix 1 is backlog")
        #expect(edge.outbox.backlogCount == 1)

        // A second failure in a row doubles the back-off; a success ends the outage, once.
        let again = edge.liveSent(
            .record(OutboxRecord(seq: 2, kind: .fix, storedAtMilliseconds: 0, payload: [])), topic: "t",
            .failure(MQTTError.connectionLost(reason: "cut")), at: retryAt)
        let second = try #require(again.schedule)
        #expect(second >= retryAt + .milliseconds(1600) && second <= retryAt + .milliseconds(2000))
        #expect(again.logs.isEmpty, "said once per outage")
        _ = edge.timerFired(at: second)
        let retried = try #require(nextItem(&edge))
        let resumed = edge.liveSent(retried, topic: "t", .success(()), at: second)
        guard case .sendingResumed(let resumedLevel, let backlog)? = resumed.logs.first else {
            Issue.record("the recovery is logged: \(resumed.logs)")
            return
        }
        #expect(resumedLevel == .debug && backlog == 1, "at the failure's level, with what waits")
        let later = edge.liveSent(
            .record(OutboxRecord(seq: 3, kind: .fix, storedAtMilliseconds: 0, payload: [])), topic: "t",
            .failure(MQTTError.notConnected), at: second + .seconds(60))
        let fresh = try #require(later.schedule)
        #expect(fresh <= second + .seconds(61), "a success since: the back-off starts over at 1 s")
    }

    @Test("a back-off whose delay has passed holds live sending until nothing live is in flight")
    func backOffWaitsForTheInFlight() throws {
        var edge = makeEdge {
            $0.initialRetryDelay = .seconds(1)
            $0.headingQoS = .atMostOnce
        }
        _ = receive(&edge, second: 0)
        _ = edge.receive(
            .heading(Heading(time: Fixes.time(0.5), trueHeading: 90, source: .hdt)), clocks: nil,
            wallMilliseconds: Self.wallStart, at: at(500))
        let fix = try #require(nextItem(&edge))
        let heading = try #require(nextItem(&edge))
        let failed = edge.liveSent(heading, topic: "t", .failure(MQTTError.connectionLost(reason: "cut")), at: at(600))
        let end = try #require(failed.schedule)
        _ = edge.timerFired(at: end)
        _ = receive(&edge, second: 2)
        #expect(liveSeq(&edge) == nil, "the fix sent before the failure is still in flight")
        _ = edge.liveSent(fix, topic: "t", .success(()), at: end + .milliseconds(10))
        #expect(liveSeq(&edge) == 2, "settled: live sending goes on, the failed heading first (still the newest of its kind)")
        #expect(liveSeq(&edge) == 3)
    }

    @Test("the link back (retryNow) ends a live back-off at once, without its timer")
    func retryNowEndsTheBackOff() throws {
        var edge = makeEdge { $0.initialRetryDelay = .seconds(60) }
        _ = receive(&edge, second: 0)
        let item = try #require(nextItem(&edge))
        _ = edge.liveSent(item, topic: "t", .failure(MQTTError.notConnected), at: at(0))
        #expect(liveSeq(&edge) == nil)
        _ = edge.retryNow()
        #expect(liveSeq(&edge) == 1, "retried at once")
    }

    // MARK: The broker link

    /// A status message standing for what the driver writes from `content` (its `since` as
    /// the payload, so a test can tell which connection's it is).
    private func statusMessage(_ content: PublisherState.StatusContent?) -> OutboundMessage {
        OutboundMessage(
            kind: .status, topic: "fleet/van-1/status", payload: Array("\(content?.since?.millisecondsSince1970 ?? 0)".utf8),
            qos: .atLeastOnce, retain: true)
    }

    /// The driver's part of an event: the status it asks for, written and queued.
    private func carryOut(_ actions: Edge.Actions, _ edge: inout Edge) {
        if let content = actions.status { _ = edge.setStatus(statusMessage(content)) }
    }

    @Test(
        "awaiting the link: nothing goes live before the first connection, then that connection's online status (since it) first, then the fix; no backlog"
    )
    func firstConnectionStatusFirst() throws {
        var edge = Edge(
            settings: PublisherSettings(vehicle: VehicleID("van-1")!),
            opening: OutboxOpening(count: 0, bytes: 0, nextSeq: 1, uncleanSkipped: 0, reservedSeq: 10_000), run: 1, degraded: nil,
            now: Self.start, awaitingLink: true)
        _ = edge.setStatus(statusMessage(nil))  // the publisher's first, before any connection
        carryOut(receive(&edge, second: 0), &edge)
        #expect(nextItem(&edge) == nil, "not connected: nothing goes, not even a status")
        let connected = edge.linkConnected(since: Fixes.time(0.05), at: at(50))
        let content = try #require(connected.status, "a status of the connection is due")
        #expect(content.since == Fixes.time(0.05) && content.gnss == .fixing)
        #expect(nextItem(&edge) == nil, "the connection's status goes first: nothing before it is queued")
        carryOut(connected, &edge)
        #expect(nextItem(&edge) == .status(statusMessage(content)), "then it goes, not the one written before the connection")
        #expect(liveSeq(&edge) == 1, "then the fix, live")
        #expect(edge.outbox.backlogCount == 0, "nothing failed to go live")
    }

    @Test(
        "a link lost and back: nothing live meanwhile, then online since the new connection before the newest fix, even with the old status still in flight"
    )
    func reconnectionStatusFirst() throws {
        var edge = makeEdge()
        carryOut(edge.linkConnected(since: Fixes.time(0), at: at(0)), &edge)
        guard case .status = try #require(nextItem(&edge)) else {
            Issue.record("the first connection's status goes first")
            return
        }
        // The status is still in flight (its acknowledgement lost with the link) when the link goes.
        carryOut(receive(&edge, second: 1), &edge)
        #expect(liveSeq(&edge) == 1)
        _ = edge.linkLost()
        for second in 2...4 { carryOut(receive(&edge, second: second), &edge) }
        #expect(nextItem(&edge) == nil, "the link is down: nothing is handed to the MQTT client")
        let back = edge.linkConnected(since: Fixes.time(5), at: at(5000))
        #expect(back.status?.since == Fixes.time(5), "online, since the new connection")
        carryOut(back, &edge)
        #expect(nextItem(&edge) == nil, "the old status settles first: nothing overtakes the new one")
        // The MQTT session sends the old one again on the new connection, and it is acknowledged.
        _ = edge.liveSent(.status(statusMessage(nil)), topic: "fleet/van-1/status", .success(()), at: at(5010))
        #expect(nextItem(&edge) == .status(statusMessage(back.status)), "then the new connection's status")
        #expect(liveSeq(&edge) == 4, "then the newest fix; the outage's others are backlog")
        #expect(edge.outbox.backlogCount == 2)
    }

    @Test(
        "a source's first fixes in one burst while the live sender is busy with a status: both go live, in order, none as backlog"
    )
    func burstWhileBusyGoesLive() throws {
        var edge = makeEdge()
        carryOut(edge.linkConnected(since: Fixes.time(0), at: at(0)), &edge)
        guard case .status = try #require(nextItem(&edge)) else {
            Issue.record("the connection's status goes first")
            return
        }
        // The GNSS state's status, then two fixes at once, before the sender asks again.
        carryOut(receive(&edge, second: 1), &edge)
        carryOut(receive(&edge, second: 2), &edge)
        #expect(edge.outbox.backlogCount == 0, "nothing failed to go live")
        _ = edge.liveSent(.status(statusMessage(nil)), topic: "fleet/van-1/status", .success(()), at: at(2010))
        guard case .status = try #require(nextItem(&edge)) else {
            Issue.record("the GNSS state's status")
            return
        }
        #expect(liveSeq(&edge) == 1)
        #expect(liveSeq(&edge) == 2, "then the newer: the retained fix ends with it")
    }

    @Test("a connection during the stop asks for no status and holds nothing back")
    func connectionDuringTheStop() {
        var edge = makeEdge()
        _ = edge.linkLost()
        _ = receive(&edge, second: 0)
        _ = edge.finish(wallMilliseconds: Self.wallStart, at: at(100))
        #expect(edge.linkConnected(since: Fixes.time(0.2), at: at(200)).status == nil, "offline follows")
        #expect(liveSeq(&edge) == 1, "what is live goes")
    }

    // MARK: Backlog

    @Test("a backlog drains at its rate: a full batch at once, then as the tokens come, oldest first, nothing twice")
    func backlogDrainsAtItsRate() throws {
        var edge = makeEdge { $0.drainRate = 10 }
        var store = Store()
        for second in 0..<25 { _ = receive(&edge, second: second) }
        #expect(edge.outbox.backlogCount == 24, "only the newest fix waits to go live")
        sync(&edge, &store, at: at(25_000))
        var sent: [[UInt64]] = []
        var when: [ContinuousClock.Instant?] = []
        var now = at(25_000)
        var step = drain(&edge, store, from: edge.drainNext(), at: now)
        while case .send(let batch) = step {
            sent.append(batch.seqs)
            when.append(batch.notBefore)
            now = batch.notBefore ?? now
            step = drain(&edge, store, from: edge.drainSent(batch, .success(()), at: now).1, at: now)
        }
        #expect(sent == [Array(1...10), Array(11...20), Array(21...24)])
        #expect(when == [nil, at(26_000), at(26_400)], "10 events a second: a second's burst, then 1 s, then 0.4 s")
        guard case .wait(.outbox(.backlog), nil) = step else {
            Issue.record("then the drain waits for more backlog: \(step)")
            return
        }
        #expect(edge.counters.backlogPublished == 24 && edge.outbox.backlogCount == 0)
    }

    @Test("a batch waiting for the drain rate when the stop begins is not sent then, but in the stop's last pass")
    func pacedBatchGoesInTheLastPass() throws {
        var edge = makeEdge { $0.drainRate = 5 }
        var store = Store()
        for second in 0..<12 { _ = receive(&edge, second: second) }
        sync(&edge, &store, at: at(12_000))
        guard case .send(let first) = drain(&edge, store, from: edge.drainNext(), at: at(12_000)) else {
            Issue.record("a first batch goes at once")
            return
        }
        let next = drain(&edge, store, from: edge.drainSent(first, .success(()), at: at(12_000)).1, at: at(12_000))
        guard case .send(let paced) = next, paced.notBefore != nil else {
            Issue.record("the second waits for its tokens: \(next)")
            return
        }
        _ = edge.finish(wallMilliseconds: Self.wallStart, at: at(12_100))
        guard case .stop = edge.drainSent(paced, .failure(CancellationError()), at: at(12_100)).1 else {
            Issue.record("abandoned at the stop, the drain ends")
            return
        }
        #expect(edge.outbox.holds(.backlogIdle), "nothing in flight: the stop need not wait for it")
        edge.drainFinal()
        guard case .send(let last) = drain(&edge, store, from: edge.drainNext(), at: at(12_200)) else {
            Issue.record("the last pass sends it")
            return
        }
        #expect(last.seqs == paced.seqs + [11] || last.seqs.starts(with: paced.seqs), "\(last.seqs)")
        #expect(last.notBefore == nil, "not paced")
    }

    @Test("a broker that refuses the backlog topic: the drain waits five minutes or for a new connection, and the backlog stays")
    func refusedBacklogWaits() throws {
        var edge = makeEdge()
        var store = Store()
        for second in 0..<3 { _ = receive(&edge, second: second) }
        sync(&edge, &store, at: at(3000))
        guard case .send(let batch) = drain(&edge, store, from: edge.drainNext(), at: at(3000)) else {
            Issue.record("a batch goes")
            return
        }
        let (actions, step) = edge.drainSent(
            batch, .failure(MQTTError.publishRejected(topic: "fleet/van-1/backlog", reasonCode: 0x87, reason: "not authorized")),
            at: at(3000))
        #expect(actions.logs.contains { if case .refused(_, _, true) = $0 { true } else { false } }, "said, with the backlog kept")
        guard case .wait(.retried(let since), let until) = step else {
            Issue.record("waits: \(step)")
            return
        }
        #expect(until == at(303_000))
        #expect(edge.outbox.backlogCount == 2 && edge.outbox.drops.rejected == 0, "nothing deleted or counted as rejected")
        _ = edge.retryNow()
        #expect(edge.holds(.retried(since: since)), "a new connection ends the wait")
    }

    // MARK: Status

    @Test("while a backlog grows, a status goes at most once per status interval")
    func statusCadence() {
        var edge = makeEdge { $0.statusInterval = .seconds(10) }
        var store = Store()
        var statuses: [Int] = []
        for second in 0...30 {
            if receive(&edge, second: second).status != nil { statuses.append(second) }
            if sync(&edge, &store, at: at(second * 1000 + 500)).status != nil { statuses.append(second) }
        }
        #expect(statuses == [0, 10, 20, 30], "the GNSS change at once; then the moving backlog every 10 s")
    }

    // MARK: Batched uplink

    @Test("batched: nothing goes live; the start goes at once, then a batch waits out its window, which a timer ends")
    func batchedWindow() throws {
        var edge = makeEdge {
            $0.uplinkBatch = .seconds(60)
            $0.uplinkEncoding = .compact
        }
        var store = Store()
        _ = receive(&edge, second: 0)
        #expect(liveSeq(&edge) == nil, "nothing live")
        sync(&edge, &store, at: at(0))
        guard case .send(let start) = drain(&edge, store, from: edge.drainNext(), at: at(0)) else {
            Issue.record("the first fix is a start: it goes at once")
            return
        }
        #expect(start.seqs == [1] && start.payload.first == FleetPayload.compactBatchMagic[0])
        var step = edge.drainSent(start, .success(()), at: at(0)).1
        for second in 1...4 { _ = receive(&edge, second: second) }
        sync(&edge, &store, at: at(4000))
        step = drain(&edge, store, from: edge.drainNext(), at: at(4000))
        guard case .wait(let condition, let until?) = step else {
            Issue.record("held for company: \(step)")
            return
        }
        #expect(until == at(61_000), "the window from when the oldest was stored (1 s)")
        let waiting = edge.wait(Signal(id: 1), for: condition, until: until, now: at(4000))
        #expect(waiting.waits && waiting.actions.schedule == until, "time as an action: wake at the window's end")
        #expect(edge.timerFired(at: at(60_999)).signals.isEmpty)
        #expect(edge.timerFired(at: until).signals == [Signal(id: 1)], "time as an event")
        guard case .send(let batch) = drain(&edge, store, from: edge.drainNext(), at: until) else {
            Issue.record("the batch goes")
            return
        }
        #expect(batch.seqs == [2, 3, 4, 5])
    }

    @Test("batched: a commit landing while the store is read makes the drain read again for the full batch, not send the part it saw")
    func batchedReadsAgainForTheFullBatch() throws {
        var edge = makeEdge {
            $0.uplinkBatch = .seconds(60)
            $0.uplinkEncoding = .json
            $0.drainRate = 5  // a full JSON batch: 5 events
        }
        var store = Store()
        _ = receive(&edge, second: 0)
        sync(&edge, &store, at: at(0))
        guard case .send(let start) = drain(&edge, store, from: edge.drainNext(), at: at(0)) else {
            Issue.record("the start goes at once")
            return
        }
        _ = edge.drainSent(start, .success(()), at: at(0))
        for second in 1...3 { _ = receive(&edge, second: second) }
        sync(&edge, &store, at: at(3000))
        guard case .read(let read) = edge.drainNext() else {
            Issue.record("the drain reads")
            return
        }
        let stale = store.read(read)  // what the store held when the read began: 3 records
        for second in 4...6 { _ = receive(&edge, second: second) }
        sync(&edge, &store, at: at(6000))  // 6 stored now: a full batch
        let (_, step) = edge.drainRead(read, .success(stale), wallMilliseconds: wall(at(6000)), at: at(6000))
        guard case .read = step else {
            Issue.record("read again, not \(step)")
            return
        }
        guard case .send(let batch) = drain(&edge, store, from: step, at: at(6000)) else {
            Issue.record("then the full batch goes")
            return
        }
        #expect(batch.seqs == [2, 3, 4, 5, 6])
    }

    // MARK: Waiting

    @Test(
        "waits: a passed deadline does not wait; a retry or the finish ends theirs; a cancelled one is handed back once; only the earliest instant is asked for"
    )
    func waits() {
        var edge = makeEdge()
        #expect(edge.wait(Signal(id: 1), for: .deadline, until: at(0), now: at(0)).waits == false)
        let soon = edge.wait(Signal(id: 2), for: .deadline, until: at(5000), now: at(0))
        #expect(soon.waits && soon.actions.schedule == at(5000))
        let later = edge.wait(Signal(id: 3), for: .retried(since: edge.decisions.retryGeneration), until: at(9000), now: at(0))
        #expect(later.waits && later.actions.schedule == nil, "asked for again when the earlier one fires")
        #expect(edge.wait(Signal(id: 4), for: .finished, until: nil, now: at(0)).waits)
        #expect(edge.retryNow().signals == [Signal(id: 3)])
        #expect(edge.cancelWait(2) == Signal(id: 2))
        #expect(edge.cancelWait(2) == nil, "handed back once")
        let fired = edge.timerFired(at: at(5000))
        #expect(fired.signals.isEmpty && fired.schedule == nil, "nothing left with a deadline")
        #expect(edge.finish(wallMilliseconds: Self.wallStart, at: at(6000)).signals == [Signal(id: 4)])
        #expect(edge.wait(Signal(id: 5), for: .finished, until: nil, now: at(6000)).waits == false)
    }
}
