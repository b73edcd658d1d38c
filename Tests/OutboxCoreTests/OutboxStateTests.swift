import OutboxCore
import Testing

/// The outbox's state machine, driven with plain values: no tasks, no storage.
@Suite("Outbox state")
struct OutboxStateTests {
    typealias State = OutboxState<String>

    private func makeState(lossless: Bool = false, window: Int = 4, next: UInt64 = 1, memoryOnly: Bool = false) -> State {
        State(
            settings: .init(
                liveWindow: window, lossless: lossless, memoryLimit: 100, maximumAgeMilliseconds: 1000,
                maximumBytes: 1 << 20, minimumReserve: 64),
            opening: OutboxOpening(count: 0, bytes: 0, nextSeq: next, uncleanSkipped: 0, reservedSeq: next + 64),
            memoryOnly: memoryOnly)
    }

    /// Numbers and accepts a record of `kind`; returns its seq.
    @discardableResult
    private func add(_ state: inout State, _ kind: OutboundMessage.Kind = .fix) -> UInt64 {
        let seq = state.takeSeq()!.seq
        _ = state.accept(OutboxRecord(seq: seq, kind: kind, storedAtMilliseconds: 0, payload: Array("{}".utf8)))
        return seq
    }

    private func liveSeq(_ state: inout State) -> UInt64? {
        guard case .record(let r)?? = state.nextLive() else { return nil }
        return r.seq
    }

    @Test("only the newest fix and heading wait to go live; the older ones become backlog")
    func newestGoesLive() {
        var state = makeState()
        for _ in 0..<3 { add(&state, .fix) }
        add(&state, .heading)
        add(&state, .fix)  // seq 5
        #expect(liveSeq(&state) == 4, "the heading, then")
        #expect(liveSeq(&state) == 5, "the newest fix")
        #expect(liveSeq(&state) == nil)
        #expect(state.backlogCount == 3, "fixes 1-3 are backlog")
        let request = state.backlogRequest()
        #expect(request?.excluding == [4, 5], "what is live is not read as backlog")
    }

    @Test("numbers skipped after an unclean stop are no loss: nothing is counted dropped")
    func uncleanSkipIsNoLoss() {
        let state = State(
            settings: .init(liveWindow: 4, lossless: false, memoryLimit: 100, maximumAgeMilliseconds: 1000, maximumBytes: 1 << 20),
            opening: OutboxOpening(count: 3, bytes: 300, nextSeq: 200, uncleanSkipped: 128, reservedSeq: 328), memoryOnly: false)
        #expect(state.drops.total == 0 && state.drops.unclean == 0)
    }

    @Test("a full memory while the store fails drops what is not on its way: a record in a backlog batch in flight is kept")
    func memoryLimitKeepsTheBatchInFlight() throws {
        var state = State(
            settings: .init(liveWindow: 4, lossless: false, memoryLimit: 3, maximumAgeMilliseconds: 1000, maximumBytes: 1 << 20),
            opening: OutboxOpening(count: 0, bytes: 0, nextSeq: 1, uncleanSkipped: 0, reservedSeq: 65), memoryOnly: false)
        for _ in 0..<3 { add(&state, .fix) }  // 1, 2 backlog; 3 live
        let commit = state.takeCommit(nowMilliseconds: 0)
        #expect(commit != nil)
        _ = state.commitFailed(reason: "disk full")
        let requested = state.backlogRequest()
        let request = try #require(requested)
        let batch = state.unwrittenBacklog(after: request.after, limit: 10, maximumBytes: 1 << 20, excluding: request.excluding)
        #expect(batch.map(\.seq) == [1, 2])
        state.backlogSending(batch.map(\.seq))
        add(&state, .fix)  // 4 is live, 3 backlog: four in memory, one too many
        #expect(state.drops.full == 1)
        _ = state.backlogAcknowledged()
        #expect(
            state.unwrittenBacklog(after: 0, limit: 10, maximumBytes: 1 << 20, excluding: []).map(\.seq) == [4],
            "1 and 2 delivered, 3 dropped, 4 left (live)")
        #expect(liveSeq(&state) == 4)
    }

    @Test("the backlog is idle again once the batch in flight is acknowledged, refused or failed")
    func backlogIdle() {
        var state = makeState()
        for _ in 0..<3 { add(&state, .fix) }
        #expect(state.holds(.backlogIdle), "nothing in flight: idle at once")
        for (round, end) in [("acknowledged", 0), ("refused", 1), ("failed", 2)].enumerated() {
            _ = state.backlogRequest()
            state.backlogSending([UInt64(round + 1)])
            #expect(!state.holds(.backlogIdle), "\(end.0): a wait goes on while in flight")
            switch end.1 {
            case 0: _ = state.backlogAcknowledged()
            case 1: _ = state.backlogRejected()
            default: _ = state.backlogFailed()
            }
            #expect(state.holds(.backlogIdle, waking: true), "\(end.0)")
        }
    }

    private func makeBatchedState() -> State {
        State(
            settings: .init(
                liveWindow: 4, lossless: false, memoryLimit: 100, maximumAgeMilliseconds: 1000, maximumBytes: 1 << 20,
                minimumReserve: 64, batched: true),
            opening: OutboxOpening(count: 0, bytes: 0, nextSeq: 1, uncleanSkipped: 0, reservedSeq: 65), memoryOnly: false)
    }

    @Test(
        "batched: nothing goes live; a flush wakes the sync loop, and once its commit is done (or failed: then it is in memory) the batch is ready below the numbers it covers"
    )
    func batchedFlush() {
        var state = makeBatchedState()
        add(&state)
        add(&state, .heading)
        #expect(liveSeq(&state) == nil && state.liveCount == 0, "nothing live")
        let drain = OutboxCondition.batchReady(flushAfter: 0, stored: 100)
        #expect(!state.holds(drain) && !state.holds(.commitDue), "nothing ready, no commit due")
        _ = state.requestFlush()
        #expect(state.holds(.commitDue, waking: true), "the flush wakes the sync loop")
        #expect(!state.holds(drain, waking: true), "not yet the drain")
        let commit = state.takeCommit(nowMilliseconds: 0)!
        #expect(!state.holds(.commitDue), "the commit took the flush")
        add(&state)  // seq 3, accepted while that commit runs: not covered by it
        _ = state.requestFlush()  // a second request rides on the next commit
        #expect(state.holds(.commitDue), "the next commit is due at once")
        _ = state.committed(commit, OutboxCommitResult(count: 2, bytes: 100))
        #expect(state.holds(drain, waking: true))
        #expect(state.flushBelow == 3 && state.flushGeneration == 1 && state.storedPending == 2)
        // The second request rides on the next commit, which fails (a full disk): the flush
        // completes all the same, the records wait in memory, and batches are not held.
        let next = state.takeCommit(nowMilliseconds: 0)!
        _ = state.commitFailed(reason: "disk full")
        #expect(next.inserts.map(\.seq) == [3])
        #expect(state.flushBelow == 4 && state.flushGeneration == 2)
        #expect(state.holds(.batchReady(flushAfter: 2, stored: 100)), "a failing store holds nothing")
    }

    @Test("batched: a full batch in the store is ready without a flush; closing makes every batch ready")
    func batchedFull() {
        var state = makeBatchedState()
        for _ in 0..<3 { add(&state) }
        #expect(!state.holds(.batchReady(flushAfter: 0, stored: 3)))
        _ = state.committed(state.takeCommit(nowMilliseconds: 0)!, OutboxCommitResult(count: 3, bytes: 150))
        #expect(state.holds(.batchReady(flushAfter: 0, stored: 3), waking: true), "three stored: a batch of three is full")
        #expect(!state.holds(.batchReady(flushAfter: 0, stored: 10)))
        _ = state.close()
        #expect(state.holds(.batchReady(flushAfter: 0, stored: 10), waking: true))
    }

    @Test("in lossless mode every record goes live, in order, within the window")
    func losslessKeepsEverything() {
        var state = makeState(lossless: true, window: 2)
        for _ in 0..<5 { add(&state) }
        #expect(liveSeq(&state) == 1)
        #expect(liveSeq(&state) == 2)
        #expect(liveSeq(&state) == nil, "the window is full")
        _ = state.liveAcknowledged(1)
        #expect(liveSeq(&state) == 3)
    }

    @Test("a full live window refills once half of it is acknowledged, and a full queue lets its intake go at one window")
    func fullWindowRefillsByHalves() {
        var state = makeState(lossless: true, window: 4)
        for _ in 0..<12 { add(&state) }
        #expect((1...4).map { _ in liveSeq(&state) } == [1, 2, 3, 4])
        #expect(liveSeq(&state) == nil, "the window is full")
        _ = state.liveAcknowledged(1)
        #expect(liveSeq(&state) == nil, "one free place: not yet")
        _ = state.liveAcknowledged(2)
        #expect((1...3).map { _ in liveSeq(&state) } == [5, 6, nil], "half free: refilled together")
        // 12 records: 8 waiting and 4 in flight, a full queue (two windows).
        #expect(!state.holds(.liveRoom), "the intake waits")
        for seq: UInt64 in [3, 4] {
            _ = state.liveAcknowledged(seq)
            #expect(!state.holds(.liveRoom, waking: true))
        }
        _ = (1...2).map { _ in liveSeq(&state) }  // 7, 8: 4 waiting, 4 in flight
        for seq: UInt64 in [5, 6, 7] {
            _ = state.liveAcknowledged(seq)
            #expect(!state.holds(.liveRoom, waking: true))
        }
        _ = state.liveAcknowledged(8)
        #expect(state.holds(.liveRoom, waking: true), "down to one window (4 waiting): room for a window")
    }

    @Test("a failed live record is retried live while newest, else it joins the backlog and the cursor goes back")
    func liveFailure() {
        var state = makeState()
        add(&state)  // 1
        #expect(liveSeq(&state) == 1)
        _ = state.liveFailed(1)
        #expect(liveSeq(&state) == 1, "still the newest fix: retried live")
        add(&state)  // 2 arrives while 1 is in flight
        _ = state.liveFailed(1)
        #expect(liveSeq(&state) == 2)
        #expect(state.backlogRequest()?.excluding.contains(1) == false, "1 is backlog now")
    }

    @Test("a record acknowledged before its commit is never written; one acknowledged after is deleted by the next")
    func commitCycle() {
        var state = makeState()
        add(&state)  // 1
        add(&state, .heading)  // 2
        #expect(liveSeq(&state) == 1)
        _ = state.liveAcknowledged(1)
        let first = state.takeCommit(nowMilliseconds: 5000)!
        #expect(first.inserts.map(\.seq) == [2], "1 was acknowledged before the commit")
        #expect(first.deletes.isEmpty)
        #expect(first.expiresBeforeMilliseconds == 4000)
        #expect(state.takeCommit(nowMilliseconds: 5000) == nil, "one commit at a time")
        #expect(liveSeq(&state) == 2)
        _ = state.liveAcknowledged(2)  // acknowledged while its insert is being committed
        _ = state.committed(first, OutboxCommitResult(count: 1, bytes: 50))
        let second = state.takeCommit(nowMilliseconds: 6000)!
        #expect(second.inserts.isEmpty)
        #expect(second.deletes == [2])
        _ = state.committed(second, OutboxCommitResult(count: 0, bytes: 0))
        #expect(state.backlogCount == 0)
    }

    @Test("no record numbered at or above the stored reservation goes out before the commit that covers it")
    func reservation() {
        var state = makeState()
        // The sync loop waits for commitDue: it is woken by the number that leaves fewer than
        // half of the 64 reserved (1..<65), the 32nd, not one later.
        #expect(!state.holds(.commitDue), "not due yet")
        var wokenAt: UInt64?
        for _ in 0..<40 {
            let seq = state.takeSeq()!.seq
            if wokenAt == nil, state.holds(.commitDue, waking: true) { wokenAt = seq }
        }
        #expect(wokenAt == 32)
        #expect(state.holds(.commitDue), "commit due at once")
        var blocked = makeState()
        for _ in 0..<64 { _ = blocked.takeSeq() }
        let seq = blocked.takeSeq()!.seq
        _ = blocked.accept(OutboxRecord(seq: seq, kind: .fix, storedAtMilliseconds: 0, payload: Array("{}".utf8)))
        #expect(liveSeq(&blocked) == nil, "seq 65 is beyond the reservation 1+64")
        let commit = blocked.takeCommit(nowMilliseconds: 0)!
        #expect(commit.reservedSeq >= 66 + 64)
        _ = blocked.committed(commit, OutboxCommitResult(count: 1, bytes: 50))
        #expect(liveSeq(&blocked) == 65)
    }

    @Test("a failed commit keeps its records for the next one and lets live sending go on")
    func commitFailure() {
        var state = makeState()
        for _ in 0..<70 { add(&state) }
        let commit = state.takeCommit(nowMilliseconds: 0)!
        #expect(commit.inserts.count == 70)
        let (newProblem, _) = state.commitFailed(reason: "disk full")
        #expect(newProblem)
        #expect(state.storageProblem == "disk full")
        #expect(liveSeq(&state) == 70, "live goes on although numbers are not durable now")
        let retry = state.takeCommit(nowMilliseconds: 0)!
        #expect(retry.inserts.count == 70, "nothing lost from memory")
        let (recovered, _) = state.committed(retry, OutboxCommitResult(count: 70, bytes: 7000))
        #expect(recovered)
        #expect(state.storageProblem == nil)
    }

    @Test("the drain reads after its cursor; a failed batch is read again")
    func backlogBatches() {
        var state = makeState()
        for _ in 0..<10 { add(&state) }
        let commit = state.takeCommit(nowMilliseconds: 0)!
        _ = state.committed(commit, OutboxCommitResult(count: 10, bytes: 500))
        let request = state.backlogRequest()!
        #expect(request.after == 0)
        state.backlogSending([1, 2, 3])
        #expect(state.backlogRequest() == nil, "one batch at a time")
        _ = state.backlogFailed()
        #expect(state.backlogRequest()?.after == 0, "sent again from its first record")
        state.backlogSending([1, 2, 3])
        _ = state.backlogAcknowledged()
        let next = state.backlogRequest()!
        #expect(next.after == 3)
        #expect(next.excluding.isSuperset(of: [1, 2, 3]), "acknowledged, deleted by the next commit")
        #expect(state.backlogCount == 6, "7-9 stored, 10 live")
    }

    @Test("the newest status is sent first and an undelivered one is retried unless superseded")
    func statuses() {
        var state = makeState()
        add(&state)
        let online = OutboundMessage(kind: .status, topic: "s", payload: [1], qos: .atLeastOnce, retain: true)
        let newer = OutboundMessage(kind: .status, topic: "s", payload: [2], qos: .atLeastOnce, retain: true)
        _ = state.setStatus(online)
        #expect(state.nextLive() == .some(.status(online)))
        _ = state.setStatus(newer)
        _ = state.statusSent(false)
        #expect(state.nextLive() == .some(.status(newer)), "the newer one, not the failed one")
    }

    @Test("batched: after a connection no backlog is read before its status is handed out; a stop still finds the backlog idle")
    func backlogWaitsForTheConnectionsStatus() throws {
        var state = State(
            settings: .init(
                liveWindow: 4, lossless: false, memoryLimit: 100, maximumAgeMilliseconds: 1000, maximumBytes: 1 << 20,
                minimumReserve: 64, batched: true),
            opening: OutboxOpening(count: 0, bytes: 0, nextSeq: 1, uncleanSkipped: 0, reservedSeq: 65), memoryOnly: false,
            linkDown: true)
        for _ in 0..<3 { add(&state, .fix) }
        let taken = state.takeCommit(nowMilliseconds: 0)
        let commit = try #require(taken)
        _ = state.committed(commit, OutboxCommitResult(count: 3, bytes: 6))
        _ = state.linkConnected(statusFirst: true)
        let early = state.backlogRequest()
        #expect(early == nil, "the connection's online goes first")
        #expect(!state.holds(.backlogReadable) && state.holds(.backlogIdle))
        let online = OutboundMessage(kind: .status, topic: "s", payload: [1], qos: .atLeastOnce, retain: true)
        _ = state.setStatus(online)
        let item = state.nextLive()
        #expect(item == .some(.status(online)))
        #expect(state.holds(.backlogReadable), "the drain's wait ends")
        let request = state.backlogRequest()
        #expect(request?.after == 0, "and it reads from the start")
        _ = state.linkLost()
        #expect(state.holds(.backlogReadable), "a link lost after its status owes none")
    }

    @Test(
        "a record that joins the backlog while the drain reads (it was live, so the read skipped it) is read next, not left behind the cursor"
    )
    func demotedDuringRead() {
        var state = makeState()
        add(&state, .fix)  // 1: live (waiting to go out)
        for _ in 0..<3 { add(&state, .heading) }  // 2, 3: backlog; 4: live
        _ = state.committed(state.takeCommit(nowMilliseconds: 0)!, OutboxCommitResult(count: 4, bytes: 200))
        let request = state.backlogRequest()!
        #expect(request.excluding == [1, 4], "1 and 4 are live when the read starts")
        // While the drain reads 2 and 3, fix 5 arrives: fix 1 becomes backlog.
        add(&state, .fix)
        state.backlogSending([2, 3])
        _ = state.backlogAcknowledged()
        let next = state.backlogRequest()!
        #expect(next.after < 1 && !next.excluding.contains(1), "1 is read next (after \(next.after))")
        // And the cursor still moves on when nothing joined meanwhile.
        state.backlogSending([1])
        _ = state.backlogAcknowledged()
        let last = state.backlogRequest()!
        #expect(last.after == 1 && last.excluding.isSuperset(of: [2, 3]), "2 and 3 sent, to be deleted")
    }

    @Test("the first commit after a failure holds live sending at the numbers it reserves until it is known to have worked")
    func trialCommitHoldsReservation() {
        var state = makeState()
        _ = state.commitFailed(reason: "disk full")  // nothing to write yet: the store is simply failing
        for _ in 0..<200 { add(&state) }
        #expect(liveSeq(&state) == 200, "while the store fails, live goes on without a reservation")
        _ = state.liveAcknowledged(200)
        let trial = state.takeCommit(nowMilliseconds: 0)!
        #expect(trial.reservedSeq > 200, "it reserves past every number handed out")
        var seqs: [UInt64] = []
        while Int(state.nextSeq) < Int(trial.reservedSeq) + 5 { seqs.append(add(&state)) }
        #expect(liveSeq(&state) == nil, "the newest, \(seqs.last!), is at or above the trial reservation \(trial.reservedSeq)")
        let fromMemory = state.unwrittenBacklog(after: 0, limit: 10_000, maximumBytes: 1 << 30, excluding: [])
        #expect(
            !fromMemory.isEmpty && fromMemory.allSatisfy { $0.seq < trial.reservedSeq },
            "the backlog drain does not send them either")
        _ = state.commitFailed(reason: "disk full")
        #expect(liveSeq(&state) == seqs.last, "the trial failed: unbounded again")
    }

    @Test("a full memory while every unwritten record is in flight drops nothing and does not spin")
    func memoryLimitWithEverythingInFlight() {
        var state = State(
            settings: .init(
                liveWindow: 200, lossless: true, memoryLimit: 5, maximumAgeMilliseconds: 1000,
                maximumBytes: 1 << 20, minimumReserve: 400),
            opening: OutboxOpening(count: 0, bytes: 0, nextSeq: 1, uncleanSkipped: 0, reservedSeq: 401),
            memoryOnly: false)
        for _ in 0..<10 { add(&state) }
        while liveSeq(&state) != nil {}
        _ = state.takeCommit(nowMilliseconds: 0)
        let (newProblem, _) = state.commitFailed(reason: "disk full")  // returns: no endless loop
        #expect(newProblem)
        #expect(state.drops.full == 0, "records in flight are not dropped")
    }
}
