import FleetProtocol
import FleetWatch
import FleetcastCore
import GNSS
import Synchronization

/// The terminal view: folds events into a ``FleetState`` and redraws the table in place once
/// a second, and soon after a change (at most five times a second).
struct LiveTable: Sendable {
    let table: FleetTable
    let topics: FleetTopics
    let output: StandardOutput

    private final class Shared: Sendable {
        struct Value {
            var state: FleetState
            var changed = true
        }
        let value: SanitizerVisibleMutex<Value>
        init(topics: FleetTopics) { value = SanitizerVisibleMutex(Value(state: FleetState(topics: topics))) }
    }

    func run(_ events: AsyncThrowingStream<FleetSubscriber.ReceivedEvent, any Error>) async throws {
        let shared = Shared(topics: topics)
        output.write("\u{1B}[2J")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await received in events {
                    let now = UTCTimestamp.wallClockNow
                    shared.value.withLock {
                        $0.state.apply(received.event, at: now, retained: received.retained)
                        $0.changed = true
                    }
                }
            }
            group.addTask {
                var lastDraw = ContinuousClock.now - .seconds(1)
                while !Task.isCancelled {
                    let now = ContinuousClock.now
                    let rows = max(3, (output.terminalRows ?? 24) - 3)
                    // Rendered under the lock: copying a large state out would cost more than
                    // the few rows drawn.
                    let frame: String? = shared.value.withLock { v in
                        guard v.changed || now - lastDraw >= .seconds(1) else { return nil }
                        v.changed = false
                        return table.renderANSI(v.state, now: .wallClockNow, maxRows: rows)
                    }
                    if let frame {
                        output.write(frame)
                        lastDraw = now
                    }
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
            // The event stream ending (or failing) ends the view.
            try await group.next()
            group.cancelAll()
        }
    }
}
