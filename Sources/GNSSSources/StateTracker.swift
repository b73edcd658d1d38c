import FleetcastCore
import GNSS
import Synchronization

/// The last state a source reported, so that each change is reported exactly once.
final class StateTracker: Sendable {
    private let current = SanitizerVisibleMutex<SourceState?>(nil)

    /// Records `state`; `true` when it differs from the previous one (and must be reported).
    func change(to state: SourceState) -> Bool {
        current.withLock { current in
            if current == state { return false }
            current = state
            return true
        }
    }
}
