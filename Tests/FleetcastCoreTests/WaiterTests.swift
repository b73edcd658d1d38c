import FleetcastCore
import Synchronization
import Testing

/// The one waiter idiom: a wait kept under a lock is resumed exactly once, by its event or by
/// its task's cancellation; a condition that already holds does not suspend.
@Suite("Waiters")
struct WaiterTests {
    /// A latch built on the helper, as the agent's stop signal is.
    final class Latch: Sendable {
        private struct State {
            var open = false
            var waiters = Waiters<Waiter<Bool>>()
        }
        private let state = Mutex(State())

        var waiting: Bool { state.withLock { !$0.waiters.isEmpty } }

        func open() {
            let waiters = state.withLock { state in
                state.open = true
                return state.waiters.removeAll()
            }
            for waiter in waiters { waiter.resume(returning: true) }
        }

        /// Returns whether it was opened (else cancelled).
        func wait() async -> Bool {
            await suspend(returningOnCancel: false) { waiter in
                state.withLock { state -> Bool? in
                    if state.open { return true }
                    if Task.isCancelled { return false }
                    state.waiters.insert(waiter, id: waiter.id)
                    return nil
                }
            } cancel: { id in
                state.withLock { $0.waiters.remove(id: id) }
            }
        }
    }

    @Test("a condition that holds already returns at once")
    func alreadyOpen() async {
        let latch = Latch()
        latch.open()
        #expect(await latch.wait())
    }

    @Test("every waiter is resumed by the event, once")
    func resumedByTheEvent() async {
        let latch = Latch()
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 { group.addTask { await latch.wait() } }
            while true {
                await Task.yield()
                if latch.waiting { break }
            }
            latch.open()
            var results: [Bool] = []
            for await result in group { results.append(result) }
            #expect(results == [true, true, true])
        }
        #expect(!latch.waiting)
    }

    @Test("a cancelled wait returns the cancelled value and leaves nothing kept")
    func cancelled() async {
        let latch = Latch()
        let task = Task { await latch.wait() }
        task.cancel()
        #expect(await task.value == false)
        #expect(!latch.waiting)
    }

    @Test("waiter ids are unique")
    func uniqueIDs() async {
        let ids = Mutex<[UInt64]>([])
        for _ in 0..<3 {
            await suspend { waiter in
                ids.withLock { $0.append(waiter.id) }
                return false
            } cancel: { _ in
                nil
            }
        }
        #expect(Set(ids.withLock { $0 }).count == 3)
    }

    @Test("Waiters: insert, remove by id, remove all")
    func collection() {
        var waiters = Waiters<String>()
        #expect(waiters.isEmpty)
        waiters.insert("a", id: 1)
        waiters.insert("b", id: 2)
        #expect(waiters.remove(id: 1) == "a")
        #expect(waiters.remove(id: 1) == nil)
        #expect(waiters.removeAll() == ["b"])
        #expect(waiters.isEmpty)
    }
}
