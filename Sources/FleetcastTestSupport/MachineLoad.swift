import FleetcastCore
import Testing

extension Tag {
    /// A suite that loads the whole machine: a broker cluster with killed nodes, a thousand
    /// queued batches, a bridge under a flood, clients running bcrypt, a stalled browser fed
    /// thousands of fixes a second. Such suites carry the ``MachineLoadTrait`` too, which runs
    /// their tests one at a time.
    @Tag public static var loadsTheMachine: Self
}

extension Trait where Self == MachineLoadTrait {
    /// Runs each test of the suite (or the test) while no other test that loads the whole
    /// machine runs, whatever suite or test target it is in; the other tests run beside it.
    public static var oneMachineLoadAtATime: Self { MachineLoadTrait() }
}

/// The one-at-a-time rule of the tests tagged ``Tag/loadsTheMachine``: two of them at once
/// starve each other's timing (and that of the rest), and each alone takes a machine's worth
/// of load in bursts, between which the other tests run. A test waits its turn in order.
public struct MachineLoadTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // The suite's own scope holds nothing: its tests take their turns one by one.
        guard testCase != nil else { return try await function() }
        try await MachineLoadGate.shared.enter()
        defer { MachineLoadGate.shared.leave() }
        try await function()
    }
}

/// A first-come, first-served lock for async tests (the turn of ``MachineLoadTrait``).
final class MachineLoadGate: Sendable {
    static let shared = MachineLoadGate()

    private struct State {
        var held = false
        var queue: [Waiter<Bool>] = []
    }
    private let state = SanitizerVisibleMutex(State())

    /// Waits until no other test holds the gate, then holds it; throws `CancellationError`
    /// (holding nothing) when the task is cancelled first.
    func enter() async throws {
        let held = await suspend(
            returningOnCancel: false,
            register: { waiter in
                state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    guard state.held else {
                        state.held = true
                        return true
                    }
                    state.queue.append(waiter)
                    return nil
                }
            },
            cancel: { id in
                state.withLock { state in
                    state.queue.firstIndex { $0.id == id }.map { state.queue.remove(at: $0) }
                }
            })
        if !held { throw CancellationError() }
    }

    /// Hands the gate to the next test waiting, if any.
    func leave() {
        let next: Waiter<Bool>? = state.withLock { state in
            guard !state.queue.isEmpty else {
                state.held = false
                return nil
            }
            return state.queue.removeFirst()
        }
        next?.resume(returning: true)
    }
}
