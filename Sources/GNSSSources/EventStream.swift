import GNSS

/// Runs a source's producer loop in its own task and hands its events out as an `AsyncStream`.
///
/// The stream keeps the newest `bufferLimit` events when its consumer is slower than the
/// receiver (a position that is seconds old is worth less than the current one); ending
/// the stream (consumer cancelled or iterator dropped) cancels the producer task, which
/// closes its descriptor on the way out.
enum EventStream {
    /// Events kept for a slow consumer before the oldest are dropped.
    static let bufferLimit = 1024

    static func run(
        _ body: @escaping @Sendable (EventSink) async -> Void
    ) -> AsyncStream<GNSSEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: GNSSEvent.self, bufferingPolicy: .bufferingNewest(bufferLimit)
        )
        let task = Task {
            await body(EventSink(continuation: continuation))
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
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
