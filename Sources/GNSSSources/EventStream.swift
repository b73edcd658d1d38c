import FleetcastCore
import GNSS

/// Runs a source's producer loop in its own task and hands its events out as an `AsyncStream`.
///
/// The stream's buffer is unbounded: it loses nothing. Its consumer is the hub's source task,
/// which only moves each event into the subscribers' own buffers and never waits, so the
/// buffer stays near empty for a live receiver; a replay at `speed=max` decodes faster than
/// that, and a bound here would drop fixes silently (it did: blocks of hundreds of epochs in
/// a batch upload) instead of leaving the decision to the subscribers' buffering policies,
/// where drops are counted. Ending the stream (consumer cancelled or iterator dropped)
/// cancels the producer task, which closes its descriptor on the way out.
enum EventStream {
    static func run(
        _ body: @escaping @Sendable (EventSink) async -> Void
    ) -> AsyncStream<GNSSEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: GNSSEvent.self, bufferingPolicy: .unbounded
        )
        let task = Task {
            await body(EventSink(continuation: continuation))
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// The reconnect loop every live source shares: `session` (one connection or one open
    /// device; returns why it ended, and may reset the backoff once data flows) runs again and
    /// again until cancelled, with `.connecting` before each and `.reconnecting(reason:delay:)`
    /// and a ``FleetcastCore/Backoff`` wait after each.
    static func reconnecting(
        backoff initial: Backoff, _ session: @escaping @Sendable (EventSink, inout Backoff) async -> String
    ) -> AsyncStream<GNSSEvent> {
        run { sink in
            var backoff = initial
            while !Task.isCancelled {
                sink.state(.connecting)
                let reason = await session(sink, &backoff)
                if Task.isCancelled { return }
                let delay = backoff.next()
                sink.state(.reconnecting(reason: reason, delay: delay))
                do { try await Task.sleep(for: delay) } catch { return }
            }
        }
    }
}

/// Where a producer loop puts its events; remembers the last state so that a state is
/// reported once per change, and `.streaming` is reported before the first fix.
struct EventSink: Sendable {
    let continuation: AsyncStream<GNSSEvent>.Continuation
    private let tracker = StateTracker()

    init(continuation: AsyncStream<GNSSEvent>.Continuation) {
        self.continuation = continuation
    }

    /// Reports `state` unless it is already the current one.
    func state(_ state: SourceState) {
        if tracker.change(to: state) {
            continuation.yield(.state(state))
        }
    }

    /// Passes a decoded event on, reporting `.streaming` before a fix when the source was
    /// in another state.
    func event(_ event: GNSSEvent) {
        switch event {
        case .state(let s):
            state(s)
        case .fix:
            state(.streaming)
            continuation.yield(event)
        case .heading:
            continuation.yield(event)
        }
    }
}
