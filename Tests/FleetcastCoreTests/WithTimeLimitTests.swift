import FleetcastCore
import FleetcastTestSupport
import Testing

/// The time limits: ``withTimeLimit(_:_:)`` awaits a cancelled body; the one that leaves it
/// behind returns at its limit, or at a cancellation, even when the body ignores both (a query
/// to a server that stopped answering).
@Suite("Time limits")
struct WithTimeLimitTests {
    /// Work that ignores cancellation: it returns only once ``open()`` is called.
    final class Deaf: Sendable {
        private struct State {
            var open = false
            var waiting: [CheckedContinuation<Void, Never>] = []
            var started = 0
            var finished = 0
        }
        private let state = SanitizerVisibleMutex(State())

        var started: Int { state.withLock { $0.started } }
        var finished: Int { state.withLock { $0.finished } }

        func work() async -> Int {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let go = state.withLock { state -> Bool in
                    state.started += 1
                    if state.open { return true }
                    state.waiting.append(continuation)
                    return false
                }
                if go { continuation.resume() }
            }
            state.withLock { $0.finished += 1 }
            return 7
        }

        func open() {
            let waiting = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.open = true
                defer { state.waiting = [] }
                return state.waiting
            }
            for continuation in waiting { continuation.resume() }
        }
    }

    struct Refused: Error, Equatable {}

    @Test("the body's value or error when it finishes first")
    func bodyFirst() async throws {
        #expect(try await withTimeLimitLeavingBehind(.seconds(60)) { 42 } == 42)
        await #expect(throws: Refused()) { try await withTimeLimitLeavingBehind(.seconds(60)) { () throws -> Int in throw Refused() } }
        // A body whose value is nil is not the time running out.
        let nothing: Int?? = try await withTimeLimitLeavingBehind(.seconds(60)) { Int?.none }
        #expect(nothing == .some(.none))
    }

    @Test("a body that ignores cancellation: nil at the limit, the body left to finish on its own")
    func deafBodyLeftBehind() async throws {
        let deaf = Deaf()
        let outcome = try await withTimeout(.seconds(30), "the time limit") {
            try await withTimeLimitLeavingBehind(.milliseconds(200)) { await deaf.work() }
        }
        #expect(outcome == nil, "the limit ran out, the body had not finished")
        #expect(deaf.finished == 0)
        deaf.open()
        try await waitUntil("the abandoned body to finish") { deaf.finished == 1 }
    }

    @Test("a body that ignores cancellation: a cancelled caller gets CancellationError at once")
    func deafBodyCancelled() async throws {
        let deaf = Deaf()
        let caller = Task { try await withTimeLimitLeavingBehind(.seconds(3600)) { await deaf.work() } }
        try await waitUntil("the body to start") { deaf.started == 1 }
        caller.cancel()
        let result = try await withTimeout(.seconds(30), "the cancelled wait") { await caller.result }
        #expect(throws: CancellationError.self) { try result.get() }
        deaf.open()
        try await waitUntil("the abandoned body to finish") { deaf.finished == 1 }
    }
}
