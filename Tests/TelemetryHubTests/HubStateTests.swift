import DequeModule
import TelemetryHub
import Testing

/// The state machine driven directly, without any task: waiters and source handles are strings.
@Suite("HubState transitions")
struct HubStateTests {
    typealias State = HubState<Int, String, String>

    @Test("first subscriber starts the source, last one leaving stops it, next one restarts it")
    func sourceLifecycle() {
        var state = State(hasSource: true)
        let (a, startA) = state.subscribe(bufferingPolicy: .unbounded)
        guard case .startSource(let run, let after) = startA else {
            Issue.record("first subscriber did not start the source: \(startA)")
            return
        }
        #expect(run == 1)
        #expect(after == nil)
        guard case .none = state.sourceStarted("task-1", run: 1) else {
            Issue.record("registering the running task asked for an action")
            return
        }
        let (b, startB) = state.subscribe(bufferingPolicy: .newest(1))
        guard case .none = startB else {
            Issue.record("second subscriber started the source again: \(startB)")
            return
        }
        guard case .none = state.cancel(a) else {
            Issue.record("a subscriber leaving while another stays stopped something")
            return
        }
        #expect(state.isSourceRunning)
        guard case .finish(let waiter, let stop) = state.cancel(b) else {
            Issue.record("last subscriber leaving did not stop the source")
            return
        }
        #expect(waiter == nil)
        #expect(stop == "task-1")
        #expect(!state.isSourceRunning)

        let (_, startC) = state.subscribe(bufferingPolicy: .unbounded)
        guard case .startSource(let run2, let after2) = startC else {
            Issue.record("the next subscriber did not restart the source: \(startC)")
            return
        }
        #expect(run2 == 2)
        #expect(after2 == "task-1", "the new run must wait for the previous task to end")
        #expect(state.statistics.sourceStarts == 2)
    }

    @Test("a hub fed by hand never asks to start a source")
    func manualHubHasNoSource() {
        var state = State(hasSource: false)
        let (a, action) = state.subscribe(bufferingPolicy: .unbounded)
        guard case .none = action else {
            Issue.record("hand-fed hub asked to start a source")
            return
        }
        guard case .none = state.cancel(a) else {
            Issue.record("hand-fed hub asked to stop a source")
            return
        }
        #expect(state.statistics.sourceStarts == 0)
    }

    @Test("yield resumes a waiting subscriber and buffers for one that is not waiting")
    func yieldResumesOrBuffers() {
        var state = State(hasSource: false)
        let (waiting, _) = state.subscribe(bufferingPolicy: .unbounded)
        let (reading, _) = state.subscribe(bufferingPolicy: .unbounded)
        guard case .wait = state.poll(waiting) else {
            Issue.record("empty subscriber did not have to wait")
            return
        }
        guard case .suspended = state.suspend(waiting, waiter: "w") else {
            Issue.record("waiter was not stored")
            return
        }
        guard case .resume(var waiters, let element) = state.yield(10) else {
            Issue.record("yield did not resume the waiting subscriber")
            return
        }
        #expect(waiters == ["w"])
        #expect(element == 10)
        state.recycle(&waiters)
        #expect(waiters.isEmpty)

        // Nobody waits now: values are only buffered.
        guard case .none = state.yield(11) else {
            Issue.record("yield without waiters returned an action")
            return
        }
        #expect(takeAll(&state, reading) == [10, 11])
        #expect(takeAll(&state, waiting) == [11])
        #expect(state.statistics(of: waiting)?.delivered == 2)
        #expect(state.statistics(of: reading)?.delivered == 2)
        #expect(state.latest == 11)
        #expect(state.yielded == 2)
    }

    @Test("newest(n) keeps the last n, oldest(n) keeps the first n, both count the dropped")
    func boundedPolicies() {
        var state = State(hasSource: false)
        let (newest, _) = state.subscribe(bufferingPolicy: .newest(2))
        let (oldest, _) = state.subscribe(bufferingPolicy: .oldest(2))
        let (nothing, _) = state.subscribe(bufferingPolicy: .newest(0))
        for value in 1...5 {
            _ = state.yield(value)
        }
        #expect(state.statistics(of: newest)?.dropped == 3)
        #expect(state.statistics(of: oldest)?.dropped == 3)
        #expect(state.statistics(of: nothing)?.dropped == 5)
        #expect(takeAll(&state, newest) == [4, 5])
        #expect(takeAll(&state, oldest) == [1, 2])
        #expect(takeAll(&state, nothing) == [])
    }

    @Test("a failure reaches a waiting subscriber now, and a buffering one after its buffer, once")
    func failureReachesEverySubscriberOnce() {
        var state = State(hasSource: false)
        let (waiting, _) = state.subscribe(bufferingPolicy: .unbounded)
        let (behind, _) = state.subscribe(bufferingPolicy: .unbounded)
        _ = state.poll(waiting)
        _ = state.suspend(waiting, waiter: "w")
        guard case .resume(_, 1) = state.yield(1) else {
            Issue.record("value did not go to the waiter")
            return
        }
        _ = state.poll(waiting)
        _ = state.suspend(waiting, waiter: "w2")
        guard case .terminate(let waiters, .failed(let error), let stop) = state.finish(.failed(SourceTestFailure(code: 1))) else {
            Issue.record("finish(throwing:) did not terminate")
            return
        }
        #expect(waiters == ["w2"])
        #expect(error as? SourceTestFailure == SourceTestFailure(code: 1))
        #expect(stop == nil)
        // The waiter got its terminal event; it is gone.
        guard case .end = state.poll(waiting) else {
            Issue.record("a subscriber that got the error got something else afterwards")
            return
        }
        // The one behind drains its value, then the error once, then the end.
        guard case .element(1) = state.poll(behind) else {
            Issue.record("buffered value lost at failure")
            return
        }
        guard case .fail(let second) = state.poll(behind) else {
            Issue.record("buffering subscriber did not receive the error")
            return
        }
        #expect(second as? SourceTestFailure == SourceTestFailure(code: 1))
        guard case .end = state.poll(behind) else {
            Issue.record("error delivered twice")
            return
        }
        #expect(state.statistics.subscribers.isEmpty)
    }

    @Test("the source's end terminates its run; a stale run's values and end are ignored")
    func staleRunIgnored() {
        var state = State(hasSource: true)
        let (a, _) = state.subscribe(bufferingPolicy: .unbounded)
        _ = state.sourceStarted("t1", run: 1)
        guard case .none = state.sourceYield(5, run: 0) else {
            Issue.record("stale run yielded")
            return
        }
        _ = state.sourceYield(6, run: 1)
        guard case .none = state.sourceTerminated(run: 1, .finished) else {
            Issue.record("source ending with nobody waiting returned an action")
            return
        }
        #expect(!state.isSourceRunning)
        #expect(state.statistics(of: a)?.isTerminated == true)
        #expect(takeAll(&state, a) == [6])

        // A later subscriber starts run 2; run 1's late events change nothing.
        let (b, restart) = state.subscribe(bufferingPolicy: .unbounded)
        guard case .startSource(2, "t1") = restart else {
            Issue.record("no restart after the source ended: \(restart)")
            return
        }
        _ = state.sourceStarted("t2", run: 2)
        guard case .none = state.sourceTerminated(run: 1, .failed(SourceTestFailure(code: 2))) else {
            Issue.record("stale failure terminated the new run")
            return
        }
        guard case .none = state.sourceYield(7, run: 1) else {
            Issue.record("stale value delivered")
            return
        }
        #expect(state.statistics(of: b)?.isTerminated == false)
        guard case .wait = state.poll(b) else {
            Issue.record("stale value reached the new subscriber")
            return
        }
    }

    @Test("a run that ends before its task is registered cancels that task; a newer run starts after it")
    func startPendingRaces() {
        var state = State(hasSource: true)
        let (a, _) = state.subscribe(bufferingPolicy: .unbounded)
        // The last subscriber leaves before the task of run 1 is registered.
        guard case .none = state.cancel(a) else {
            Issue.record("stop asked while no task was registered yet")
            return
        }
        guard case .cancelSource("t1") = state.sourceStarted("t1", run: 1) else {
            Issue.record("task of a run that already ended was not cancelled")
            return
        }
        // Again, but a new subscriber arrives before the registration.
        let (b, _) = state.subscribe(bufferingPolicy: .unbounded)
        _ = state.sourceStarted("t2", run: 2)
        guard case .finish(nil, "t2") = state.cancel(b) else {
            Issue.record("leaving did not stop the registered task")
            return
        }
        let (c, _) = state.subscribe(bufferingPolicy: .unbounded)
        _ = state.cancel(c)
        let (_, pending) = state.subscribe(bufferingPolicy: .unbounded)
        guard case .none = pending else {
            Issue.record("a second start was issued while one was pending")
            return
        }
        guard case .cancelSourceAndStart("t3", let newer) = state.sourceStarted("t3", run: 3) else {
            Issue.record("pending newer run was not started after the stale task")
            return
        }
        #expect(newer == 4)
        guard case .none = state.sourceStarted("t4", run: 4) else {
            Issue.record("current run's task was refused")
            return
        }
        #expect(state.isSourceRunning)
    }

    @Test("cancelling a waiting subscriber hands back its waiter; cancelling twice does nothing")
    func cancelIsIdempotent() {
        var state = State(hasSource: false)
        let (a, _) = state.subscribe(bufferingPolicy: .unbounded)
        _ = state.suspend(a, waiter: "w")
        guard case .finish(let waiter, let stop) = state.cancel(a) else {
            Issue.record("waiter not handed back")
            return
        }
        #expect(waiter == "w")
        #expect(stop == nil)
        guard case .none = state.cancel(a) else {
            Issue.record("second cancel acted")
            return
        }
        guard case .end = state.poll(a) else {
            Issue.record("cancelled subscriber still gets values")
            return
        }
    }

    @Test("two consumers waiting on one subscription: the second gets a clear error")
    func concurrentNextRejected() {
        var state = State(hasSource: false)
        let (a, _) = state.subscribe(bufferingPolicy: .unbounded)
        _ = state.suspend(a, waiter: "first")
        guard case .fail(let error) = state.suspend(a, waiter: "second") else {
            Issue.record("second waiter accepted")
            return
        }
        #expect(error as? HubError == .concurrentNext(a))
        guard case .resume(let waiters, _) = state.yield(1) else {
            Issue.record("first waiter lost")
            return
        }
        #expect(waiters == ["first"])
    }

    @Test("an unbounded buffer keeps values in order across wrap-around and growth")
    func unboundedBufferIsFIFO() {
        var state = State(hasSource: false)
        let (id, _) = state.subscribe(bufferingPolicy: .unbounded)
        var model: [Int] = []
        var next = 0
        // A fixed, irregular pattern of yields and reads that wraps the buffer's head many times.
        let pattern = [3, -2, 5, -4, 1, -1, 9, -7, 2, -5, 17, -3, -10, 40, -41]
        for _ in 0..<50 {
            for step in pattern {
                if step > 0 {
                    for _ in 0..<step {
                        _ = state.yield(next)
                        model.append(next)
                        next += 1
                    }
                } else {
                    for _ in 0..<(-step) {
                        let expected = model.isEmpty ? nil : model.removeFirst()
                        if case .element(let value) = state.poll(id) {
                            #expect(value == expected)
                        } else {
                            #expect(expected == nil)
                        }
                    }
                }
                #expect(state.statistics(of: id)?.buffered == model.count)
            }
        }
        #expect(takeAll(&state, id) == model)
    }

    @Test("a drained buffer gives back a burst's storage and keeps a small one's")
    func drainedBurstGivesBackStorage() {
        var state = State(hasSource: false)
        let (burst, _) = state.subscribe(bufferingPolicy: .unbounded)
        for value in 0..<5_000 {
            _ = state.yield(value)
        }
        // A fresh `Deque` has no storage of its own: every empty one shares the same.
        let none = Deque<Int>().withContiguousStorageIfAvailable { $0.baseAddress }
        #expect(none != nil)
        for expected in 0..<4_999 {
            guard case .element(let value) = state.poll(burst), value == expected else {
                Issue.record("value \(expected) did not come next")
                return
            }
        }
        #expect(storage(state, burst) != none, "one value left: the storage is still in use")
        #expect(takeAll(&state, burst) == [4_999])
        #expect(storage(state, burst) == none, "drained after a burst: storage given back")

        let (small, _) = state.subscribe(bufferingPolicy: .unbounded)
        for value in 0..<10 {
            _ = state.yield(value)
        }
        #expect(takeAll(&state, small) == Array(0..<10))
        #expect(storage(state, small) != none, "a small buffer keeps its storage for the next values")
    }

    /// Where the subscriber's buffer keeps its values.
    private func storage(_ state: State, _ id: HubSubscriberID) -> UnsafePointer<Int>?? {
        guard let index = state.activeIndex[id] else { return nil }
        return state.active[index].buffer.withContiguousStorageIfAvailable { $0.baseAddress }
    }

    private func takeAll(_ state: inout State, _ id: HubSubscriberID) -> [Int] {
        var values: [Int] = []
        while case .element(let value) = state.poll(id) {
            values.append(value)
        }
        return values
    }
}
