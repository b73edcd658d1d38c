import GNSS
import Logging

/// A GNSS receiver seen as a restartable stream of ``GNSS/GNSSEvent`` values.
///
/// Every iteration (`makeAsyncIterator()`) is a fresh start: it opens the device or
/// connection, reports its state as `.state(...)` events (connecting, streaming, noFix,
/// reconnecting, ended) and yields fixes and headings. Cancelling the iterating task, or
/// dropping the iterator, stops the source and releases its file descriptor or socket.
/// Errors that are retried never end the stream; only a finite source (a replay without
/// looping) finishes, after `.state(.ended)`.
public protocol GNSSSource: AsyncSequence, Sendable
where Element == GNSSEvent, Failure == Never, AsyncIterator == GNSSEventIterator {
    /// The source URI this source was made from (`serial:/dev/ttyUSB0?baud=9600`, …), for logs.
    var uri: String { get }

    /// Starts the source and returns the stream of its events (one fresh run per call).
    func makeEventStream() -> AsyncStream<GNSSEvent>

    /// Starts the source and returns its events a batch at a time (in order, no batch empty),
    /// or `nil` (the default) for a source that has no batches to give. A source that decodes
    /// faster than real time (a replay at full speed) hands over a chunk's events at once: its
    /// consumer then waits once per chunk, not once per event. Iterating the source
    /// (`makeAsyncIterator()`) uses it when there is one.
    func makeBatchStream() -> AsyncStream<[GNSSEvent]>?
}

extension GNSSSource {
    /// No batches: events one at a time (``makeEventStream()``).
    public func makeBatchStream() -> AsyncStream<[GNSSEvent]>? { nil }

    /// Starts a fresh run of the source; see ``GNSSSource``.
    public func makeAsyncIterator() -> GNSSEventIterator {
        if let batches = makeBatchStream() { return GNSSEventIterator(batches: batches) }
        return GNSSEventIterator(makeEventStream())
    }
}

/// The iterator of every ``GNSSSource``: one run of the source, stopped when the iterator is
/// dropped or its task is cancelled.
public struct GNSSEventIterator: AsyncIteratorProtocol {
    /// Iteration never throws: failures are reported as `.state(.reconnecting…)` events.
    public typealias Failure = Never

    private enum Base {
        case events(AsyncStream<GNSSEvent>.Iterator)
        case batches(AsyncStream<[GNSSEvent]>.Iterator)
    }

    private var base: Base
    /// What is left of the last batch, handed out before the next one is awaited.
    private var batch: [GNSSEvent] = []
    private var index = 0

    init(_ stream: AsyncStream<GNSSEvent>) {
        self.base = .events(stream.makeAsyncIterator())
    }

    init(batches: AsyncStream<[GNSSEvent]>) {
        self.base = .batches(batches.makeAsyncIterator())
    }

    /// The next event, or `nil` when the source ended or the iterating task was cancelled.
    public mutating func next() async -> GNSSEvent? {
        await next(isolation: nil)
    }

    /// The next event (isolation-preserving form used by `for await`).
    public mutating func next(isolation actor: isolated (any Actor)?) async -> GNSSEvent? {
        switch base {
        case .events(var events):
            defer { base = .events(events) }
            return await events.next(isolation: actor)
        case .batches(var batches):
            if index < batch.count {
                // What a batch still holds is dropped on cancellation, as a stream's buffer is.
                guard !Task.isCancelled else { return nil }
                index += 1
                return batch[index - 1]
            }
            defer { base = .batches(batches) }
            batch = []  // not kept while the next one is awaited
            repeat {
                guard let next = await batches.next(isolation: actor) else { return nil }
                (batch, index) = (next, 0)
            } while batch.isEmpty
            index = 1
            return batch[0]
        }
    }
}

/// A type-erased ``GNSSSource``, as returned by ``GNSSSourceDescriptor/makeSource(logger:backoff:)``.
public struct AnyGNSSSource: GNSSSource {
    public typealias Element = GNSSEvent
    public typealias Failure = Never

    /// The URI of the wrapped source.
    public let uri: String
    private let make: @Sendable () -> AsyncStream<GNSSEvent>
    private let makeBatches: @Sendable () -> AsyncStream<[GNSSEvent]>?

    /// Wraps a concrete source.
    public init<Source: GNSSSource>(_ source: Source) {
        self.uri = source.uri
        self.make = { source.makeEventStream() }
        self.makeBatches = { source.makeBatchStream() }
    }

    /// Starts the wrapped source.
    public func makeEventStream() -> AsyncStream<GNSSEvent> {
        make()
    }

    /// Starts the wrapped source, a batch at a time if it gives batches.
    public func makeBatchStream() -> AsyncStream<[GNSSEvent]>? {
        makeBatches()
    }
}

extension Logger {
    /// This logger with a source's URI as `gnss.source` metadata, for the source's own lines.
    func forSource(_ uri: String) -> Logger {
        var logger = self
        logger[metadataKey: "gnss.source"] = "\(uri)"
        return logger
    }
}
